"""Integer expressions of loop headers and branch conditions, parsed from C/C++ tokens.

libclang's cursors for expressions are shaped by implicit casts and unexposed nodes, and
empty ``for`` header parts vanish from the AST, so the headers are re-parsed from their
tokens into this small AST. Anything a polyhedral domain cannot hold (array elements,
calls, members) becomes an :class:`Opaque` atom that later turns into a named parameter
when it does not depend on a loop index.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from perfcast.errors import PerfcastError


class ExpressionError(PerfcastError):
    """Tokens that do not form an expression this parser understands."""


class NotAffine(PerfcastError):
    """An expression outside the polyhedral model (products of indices, opaque index use)."""


@dataclass(frozen=True)
class Num:
    value: int


@dataclass(frozen=True)
class Var:
    name: str


@dataclass(frozen=True)
class Opaque:
    """A value the analysis cannot see through (``a[i]``, ``f(x)``, ``s.n``)."""

    text: str
    names: frozenset[str]


@dataclass(frozen=True)
class Unary:
    op: str  # "-", "!"
    operand: Expr


@dataclass(frozen=True)
class Binary:
    op: str  # + - * / % < <= > >= == != && ||
    left: Expr
    right: Expr


Expr = Num | Var | Opaque | Unary | Binary

COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")
_PRECEDENCE = {
    "||": 1,
    "&&": 2,
    "==": 3,
    "!=": 3,
    "<": 4,
    "<=": 4,
    ">": 4,
    ">=": 4,
    "+": 5,
    "-": 5,
    "*": 6,
    "/": 6,
    "%": 6,
}
_TYPE_WORDS = frozenset(
    [
        "int",
        "long",
        "short",
        "unsigned",
        "signed",
        "char",
        "size_t",
        "ptrdiff_t",
        "int64_t",
        "int32_t",
        "uint64_t",
        "uint32_t",
        "const",
        "std",
        "::",
        "ssize_t",
    ]
)
_CAST_KEYWORDS = frozenset({"static_cast", "reinterpret_cast", "const_cast"})
_INTEGER = re.compile(r"^(0[xX][0-9a-fA-F]+|\d+)[uUlL]*$")
_IDENTIFIER = re.compile(r"^[A-Za-z_]\w*$")


class _Parser:
    """Precedence climbing over token spellings."""

    def __init__(self, tokens: Sequence[str]):
        self.tokens = list(tokens)
        self.pos = 0

    def peek(self, offset: int = 0) -> str | None:
        index = self.pos + offset
        return self.tokens[index] if index < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise ExpressionError(f"expected {expected or 'a token'} in {' '.join(self.tokens)}")
        self.pos += 1
        return token

    def parse(self) -> Expr:
        expr = self.binary(1)
        if self.peek() is not None:
            raise ExpressionError(f"unexpected {self.peek()!r} in {' '.join(self.tokens)}")
        return expr

    def binary(self, min_precedence: int) -> Expr:
        left = self.unary()
        while True:
            op = self.peek()
            precedence = _PRECEDENCE.get(op or "")
            if precedence is None or precedence < min_precedence:
                return left
            self.take()
            right = self.binary(precedence + 1)
            left = Binary(op or "", left, right)

    def unary(self) -> Expr:
        token = self.peek()
        if token in ("-", "!", "+"):
            self.take()
            operand = self.unary()
            return operand if token == "+" else Unary(token, operand)
        if token == "(" and self._is_cast():
            while self.take() != ")":
                pass
            return self.unary()
        return self.postfix()

    def _is_cast(self) -> bool:
        index = self.pos + 1
        words = []
        while index < len(self.tokens) and self.tokens[index] != ")":
            words.append(self.tokens[index])
            index += 1
        return bool(words) and all(w in _TYPE_WORDS or w == "*" for w in words)

    def postfix(self) -> Expr:
        start = self.pos
        expr = self.primary()
        opaque = False
        while self.peek() in ("[", "(", ".", "->"):
            token = self.take()
            if token in (".", "->"):
                self.take()
            else:
                self._skip_balanced(token)
            opaque = True
        if opaque:
            text = " ".join(self.tokens[start : self.pos])
            names = frozenset(t for t in self.tokens[start : self.pos] if _IDENTIFIER.match(t))
            return Opaque(text, names)
        return expr

    def _skip_balanced(self, opening: str) -> None:
        closing = {"[": "]", "(": ")"}[opening]
        depth = 1
        while depth:
            token = self.take()
            if token == opening:
                depth += 1
            elif token == closing:
                depth -= 1

    def primary(self) -> Expr:
        token = self.take()
        if token == "(":
            expr = self.binary(1)
            self.take(")")
            return expr
        if token in _CAST_KEYWORDS:
            self.take("<")
            while self.take() != ">":
                pass
            self.take("(")
            expr = self.binary(1)
            self.take(")")
            return expr
        if _INTEGER.match(token):
            return Num(int(token.rstrip("uUlL"), 0))
        if token == "sizeof":
            raise ExpressionError("sizeof is not modeled")
        if _IDENTIFIER.match(token):
            while self.peek() == "::":
                self.take()
                token = token + "::" + self.take()
            return Var(token)
        raise ExpressionError(f"unexpected {token!r} in {' '.join(self.tokens)}")


def parse(tokens: Sequence[str]) -> Expr:
    """Parse an expression; anything unparsable is one opaque atom (never an exception)."""
    try:
        return _Parser(tokens).parse()
    except (ExpressionError, IndexError):
        names = frozenset(t for t in tokens if _IDENTIFIER.match(t))
        return Opaque(" ".join(tokens), names)


def names(expr: Expr) -> frozenset[str]:
    """Every identifier the expression mentions (inside opaque atoms too)."""
    if isinstance(expr, Var):
        return frozenset({expr.name})
    if isinstance(expr, Opaque):
        return expr.names
    if isinstance(expr, Unary):
        return names(expr.operand)
    if isinstance(expr, Binary):
        return names(expr.left) | names(expr.right)
    return frozenset()


def atoms(expr: Expr) -> list[Var | Opaque]:
    """The variables and opaque values an expression is built from, left to right."""
    if isinstance(expr, Var | Opaque):
        return [expr]
    if isinstance(expr, Unary):
        return atoms(expr.operand)
    if isinstance(expr, Binary):
        return atoms(expr.left) + atoms(expr.right)
    return []


def substitute(expr: Expr, mapping: dict[str, Expr]) -> Expr:
    """Replace variables; an opaque atom naming a replaced variable stays opaque but is
    re-labelled so it can no longer pass as loop-invariant."""
    if isinstance(expr, Var):
        return mapping.get(expr.name, expr)
    if isinstance(expr, Opaque):
        replaced: set[str] = set()
        for name in expr.names & mapping.keys():
            replaced |= names(mapping[name])
        return Opaque(expr.text, (expr.names - mapping.keys()) | replaced)
    if isinstance(expr, Unary):
        return Unary(expr.op, substitute(expr.operand, mapping))
    if isinstance(expr, Binary):
        return Binary(expr.op, substitute(expr.left, mapping), substitute(expr.right, mapping))
    return expr


def constant_value(expr: Expr) -> int | None:
    """The value of a variable-free integer expression (C semantics for / and %)."""
    if isinstance(expr, Num):
        return expr.value
    if isinstance(expr, Unary) and expr.op == "-":
        inner = constant_value(expr.operand)
        return None if inner is None else -inner
    if isinstance(expr, Binary) and expr.op in "+-*/%":
        left, right = constant_value(expr.left), constant_value(expr.right)
        if left is None or right is None or (expr.op in "/%" and right == 0):
            return None
        if expr.op == "+":
            return left + right
        if expr.op == "-":
            return left - right
        if expr.op == "*":
            return left * right
        quotient = abs(left) // abs(right) * (1 if (left >= 0) == (right >= 0) else -1)
        return quotient if expr.op == "/" else left - quotient * right
    return None


def sanitize(text: str) -> str:
    """A Python/isl identifier naming an opaque value (``s.rows`` -> ``s_rows``)."""
    name = re.sub(r"\W+", "_", text.replace("->", "_").replace("*", "_x_")).strip("_")
    if not name or name[0].isdigit():
        name = "v_" + name
    return name + "_" if name in _RESERVED or keyword.iskeyword(name) else name


_RESERVED = frozenset(
    [
        "and",
        "or",
        "not",
        "mod",
        "floor",
        "ceil",
        "min",
        "max",
        "exists",
        "true",
        "false",
        "infty",
        "nan",
        "rat",
        "div",
        "if",
        "else",
        "for",
        "while",
        "def",
        "return",
        "lambda",
        "in",
        "is",
        "None",
        "True",
        "False",
    ]
)


@dataclass
class ParameterTable:
    """Parameters a domain introduces: plain ones and derived ones computed from others.

    ``free`` maps a parameter to a human description of where its value comes from;
    ``derived`` maps a parameter to a Python expression over other parameters (``n * m``),
    which the generated model computes itself so the user only supplies ``n`` and ``m``.
    """

    free: dict[str, str]
    derived: dict[str, str]

    @classmethod
    def empty(cls) -> ParameterTable:
        return cls({}, {})

    def add_free(self, name: str, description: str) -> str:
        self.free.setdefault(name, description)
        return name


def to_python(expr: Expr, rename: Callable[[str], str] = sanitize) -> str:
    """Python source for an expression over parameters (C ``/`` on ints is floor here,
    exact for the non-negative sizes it is used with)."""
    if isinstance(expr, Num):
        return str(expr.value)
    if isinstance(expr, Var):
        return rename(expr.name)
    if isinstance(expr, Opaque):
        return rename(expr.text)
    if isinstance(expr, Unary):
        op = "not " if expr.op == "!" else expr.op
        return f"({op}{to_python(expr.operand, rename)})"
    op = {"&&": "and", "||": "or", "/": "//"}.get(expr.op, expr.op)
    return f"({to_python(expr.left, rename)} {op} {to_python(expr.right, rename)})"


class IslWriter:
    """Writes affine expressions and conditions in isl syntax.

    Args:
        dims: loop indices that are set dimensions (everything else is a parameter).
        parameters: collects the parameters the text uses (free and derived).
    """

    def __init__(self, dims: dict[str, str], parameters: ParameterTable):
        self.dims = dims
        self.parameters = parameters

    def _involves_dims(self, expr: Expr) -> bool:
        return bool(names(expr) & self.dims.keys())

    def _parameter(self, expr: Expr) -> str:
        """A loop-invariant non-affine value becomes a parameter."""
        if isinstance(expr, Var):
            return self.parameters.add_free(sanitize(expr.name), f"variable {expr.name}")
        if isinstance(expr, Opaque):
            return self.parameters.add_free(sanitize(expr.text), f"value of `{expr.text}`")
        name = sanitize(to_python(expr).replace("//", "_div_").replace("%", "_mod_"))
        self.parameters.derived.setdefault(name, to_python(expr))
        # The derived text names each atom as to_python renders it: an opaque atom by its
        # whole text (``Real_t(4.0)`` -> ``Real_t_4_0``), not by the identifiers inside it.
        for atom in atoms(expr):
            self._parameter(atom)
        return name

    def affine(self, expr: Expr) -> str:
        value = constant_value(expr)
        if value is not None:
            return str(value)
        if isinstance(expr, Var):
            return self.dims.get(expr.name) or self._parameter(expr)
        if isinstance(expr, Opaque):
            if self._involves_dims(expr):
                raise NotAffine(f"`{expr.text}` depends on a loop index")
            return self._parameter(expr)
        if isinstance(expr, Unary) and expr.op == "-":
            return f"-({self.affine(expr.operand)})"
        if isinstance(expr, Binary) and expr.op in ("+", "-"):
            return f"({self.affine(expr.left)} {expr.op} {self.affine(expr.right)})"
        if isinstance(expr, Binary) and expr.op == "*":
            left, right = constant_value(expr.left), constant_value(expr.right)
            if left is not None:
                return f"{left} * ({self.affine(expr.right)})"
            if right is not None:
                return f"{right} * ({self.affine(expr.left)})"
            if self._involves_dims(expr):
                raise NotAffine(f"product `{to_python(expr)}` of loop indices")
            return self._parameter(expr)
        if isinstance(expr, Binary) and expr.op in ("/", "%"):
            divisor = constant_value(expr.right)
            if divisor == 0:
                # Undefined behaviour in C: no count can be right, so the function is
                # left out of the model (with this reason) rather than given a formula.
                raise ExpressionError(f"`{to_python(expr)}` divides by zero")
            if divisor is not None and divisor > 0:
                inner = self.affine(expr.left)
                if expr.op == "/":
                    return f"floor(({inner})/{divisor})"
                return f"(({inner}) mod {divisor})"
            if self._involves_dims(expr):
                raise NotAffine(f"division `{to_python(expr)}` by a non-constant")
            return self._parameter(expr)
        raise NotAffine(f"`{to_python(expr)}` is not an integer expression")

    def condition(self, expr: Expr) -> str:
        if isinstance(expr, Binary) and expr.op in ("&&", "||"):
            joiner = "and" if expr.op == "&&" else "or"
            return f"(({self.condition(expr.left)}) {joiner} ({self.condition(expr.right)}))"
        if isinstance(expr, Unary) and expr.op == "!":
            return f"not ({self.condition(expr.operand)})"
        if isinstance(expr, Binary) and expr.op in COMPARISONS:
            left, right = self.affine(expr.left), self.affine(expr.right)
            if expr.op == "!=":
                return f"({left} < {right} or {left} > {right})"
            op = "=" if expr.op == "==" else expr.op
            return f"{left} {op} {right}"
        # C truthiness: a bare integer condition means "!= 0".
        value = self.affine(expr)
        return f"({value} < 0 or {value} > 0)"
