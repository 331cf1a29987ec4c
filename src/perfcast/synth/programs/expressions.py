"""Complexities written as text: ``"n^2*log2(n) + p^(1/2)"``, ``"allreduce:n*p"``.

Grammar (whitespace is ignored)::

    computation   := term ('+' term)*
    communication := OPERATION [':' term]          (barrier takes no term)
    term          := [NUMBER '*'] factor ('*' factor)*
    factor        := NAME ['^' exponent] | 'log2(' NAME ')' ['^' exponent]
    exponent      := NUMBER | '(' NUMBER '/' NUMBER ')' | NUMBER '/' NUMBER

Factors of one parameter in a term multiply (``n^2*log2(n)`` is one factor ``n^2 log2(n)``);
a NUMBER in front is the term's coefficient (leave it out and the generator sizes the term
for the reference point). Errors name the offending token and its column.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from perfcast.errors import InputError
from perfcast.modeling.pmnf import Factor
from perfcast.synth.programs.spec import COMMUNICATION_OPERATIONS, check_exponent

_TOKEN = re.compile(
    r"\s*(?:(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)|(?P<name>[A-Za-z_]\w*)"
    r"|(?P<symbol>[-+*^()/:]))"
)


@dataclass(frozen=True)
class ParsedTerm:
    """A term as written: its coefficient if one was given, and its factors."""

    coefficient: float | None
    factors: tuple[Factor, ...]


@dataclass(frozen=True)
class ParsedCommunication:
    operation: str
    term: ParsedTerm | None


def parse_computation(text: str, parameters: Sequence[str]) -> tuple[ParsedTerm, ...]:
    """The terms of a computational complexity, e.g. ``"n^2*log2(n) + p^(1/2)"``."""
    parser = _Parser(text, parameters)
    terms = [parser.term()]
    while parser.accept("+"):
        terms.append(parser.term())
    parser.end()
    return tuple(terms)


def parse_communication(text: str, parameters: Sequence[str]) -> ParsedCommunication:
    """``OPERATION[:TERM]``, e.g. ``"allreduce:n*p"`` or ``"barrier"``."""
    operation, _, term_text = text.partition(":")
    operation = operation.strip().lower()
    if operation not in COMMUNICATION_OPERATIONS:
        raise InputError(
            f"unknown MPI operation {operation!r} in {text!r}; known operations: "
            + ", ".join(COMMUNICATION_OPERATIONS)
        )
    if operation == "barrier":
        if term_text.strip():
            raise InputError(f"a barrier moves no message; write 'barrier' without ':{term_text}'")
        return ParsedCommunication(operation, None)
    if not term_text.strip():
        raise InputError(
            f"MPI_{operation.capitalize()} needs a message size term in {text!r}, "
            f"e.g. '{operation}:{parameters[-1]}'"
        )
    parser = _Parser(text, parameters, start=len(text) - len(term_text))
    term = parser.term()
    parser.end("a message size is a single term, e.g. 'n*log2(p)'")
    return ParsedCommunication(operation, term)


class _Parser:
    """A recursive-descent parser over the tokens of one expression."""

    def __init__(self, text: str, parameters: Sequence[str], start: int = 0):
        """Tokens of ``text[start:]``; errors quote all of ``text`` and count its columns."""
        self.text = text
        self.parameters = list(parameters)
        self.tokens: list[tuple[str, str, int]] = []
        position = start
        while text[position:].strip():
            match = _TOKEN.match(text, position)
            if match is None:
                column = len(text) - len(text[position:].lstrip())
                raise self._error(text[column], column, "is not allowed here")
            kind = match.lastgroup or ""
            self.tokens.append((kind, match.group(kind), match.start(kind)))
            position = match.end()
        self.index = 0

    def _error(self, token: str, column: int, problem: str) -> InputError:
        return InputError(f"bad token {token!r} at column {column + 1} of {self.text!r}: {problem}")

    def peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def accept(self, symbol: str) -> bool:
        token = self.peek()
        if token is not None and token[0] == "symbol" and token[1] == symbol:
            self.index += 1
            return True
        return False

    def expect(self, kind: str, what: str) -> str:
        token = self.peek()
        if token is None:
            raise InputError(f"{self.text!r} ends where {what} was expected")
        if token[0] != kind or (kind == "symbol" and token[1] != what):
            raise self._error(token[1], token[2], f"expected {what}")
        self.index += 1
        return token[1]

    def end(self, problem: str = "expected '+' or the end of the expression") -> None:
        token = self.peek()
        if token is not None:
            raise self._error(token[1], token[2], problem)

    def term(self) -> ParsedTerm:
        coefficient = None
        token = self.peek()
        if token is not None and token[0] == "number":
            self.index += 1
            coefficient = float(token[1])
            if not coefficient > 0:
                raise self._error(token[1], token[2], "a coefficient must be positive")
            if not self.accept("*"):
                raise self._error(
                    token[1], token[2], "a number must be followed by '*' and a factor"
                )
        exponents: dict[str, tuple[Fraction, int]] = {}
        while True:
            parameter, exponent, log_exponent = self.factor()
            power, log_power = exponents.get(parameter, (Fraction(0), 0))
            exponents[parameter] = (power + exponent, log_power + log_exponent)
            if not self.accept("*"):
                break
        factors = []
        for name in self.parameters:  # parameter order, so equal terms compare equal
            if name in exponents and exponents[name] != (Fraction(0), 0):
                exponent, log_exponent = exponents[name]
                factors.append(check_exponent(Factor(name, exponent, log_exponent), self.text))
        if not factors:
            raise InputError(f"a term of {self.text!r} is constant: it needs a parameter factor")
        return ParsedTerm(coefficient, tuple(factors))

    def factor(self) -> tuple[str, Fraction, int]:
        token = self.peek()
        if token is None:
            raise InputError(f"{self.text!r} ends where a factor was expected")
        kind, value, column = token
        if kind != "name":
            raise self._error(
                value, column, f"expected a parameter ({', '.join(self.parameters)}) or log2(...)"
            )
        self.index += 1
        if value == "log2":
            self.expect("symbol", "(")
            parameter = self.parameter()
            self.expect("symbol", ")")
            power = self.power()
            if power.denominator != 1:
                raise InputError(
                    f"{self.text!r}: the power of log2({parameter}) must be a whole number"
                )
            return parameter, Fraction(0), int(power)
        self.index -= 1
        parameter = self.parameter()
        return parameter, self.power(), 0

    def parameter(self) -> str:
        token = self.peek()
        if token is None:
            raise InputError(f"{self.text!r} ends where a parameter was expected")
        kind, value, column = token
        if kind != "name" or value not in self.parameters:
            raise self._error(
                value, column, f"not a parameter; the parameters are {', '.join(self.parameters)}"
            )
        self.index += 1
        return value

    def power(self) -> Fraction:
        if not self.accept("^"):
            return Fraction(1)
        parenthesised = self.accept("(")
        value = self._number()
        if self.accept("/"):
            token = self.peek()
            divisor = self._number()
            if divisor == 0:
                assert token is not None
                raise self._error(token[1], token[2], "division by zero")
            value = value / divisor
        if parenthesised:
            self.expect("symbol", ")")
        return value

    def _number(self) -> Fraction:
        """An exponent's number; decimals snap to twelfths like PMNF exponents do."""
        token = self.peek()
        if token is None:
            raise InputError(f"{self.text!r} ends where an exponent was expected")
        kind, value, column = token
        if kind != "number":
            raise self._error(value, column, "expected a number")
        self.index += 1
        return Fraction(value).limit_denominator(12)
