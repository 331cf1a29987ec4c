"""Evaluating the small arithmetic texts of a static model without ``eval``.

Derived parameters, call arguments and count formulas are Python-syntax texts built from
C identifiers and numbers found in the analysed source. Strings read from a file are data,
never code: instead of ``eval`` they are parsed with :mod:`ast` and walked by a whitelist
that knows numbers, names from a given table, ``+ - * / // % **``, comparisons, ``and``/
``or``/``not``, ``x if c else y`` and ``F(p, q)`` (a Fraction). Anything else (attribute
access, other calls, subscripts, lambdas) is rejected before a value is computed, so the
same check also guards the texts written into a generated model module.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from perfcast.errors import PerfcastError


class UnsafeExpression(PerfcastError):
    """A formula text holding something other than arithmetic on names and numbers."""


_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
FRACTION_NAME = "F"
"""The one callable a formula may use: ``F(p, q)`` for exact rational coefficients."""

_MAX_EXPONENT = 64  # a count formula has small powers; this bounds a hostile ``9**9**9``


def parse_formula(text: str) -> ast.expr:
    """The syntax tree of ``text``, after checking every node is whitelisted."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise UnsafeExpression(f"formula {text!r} is not an expression ({exc.msg})") from exc
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise UnsafeExpression(f"formula {text!r} holds {type(node).__name__}, not arithmetic")
        if isinstance(node, ast.Constant) and not isinstance(node.value, bool | int | float):
            raise UnsafeExpression(f"formula {text!r} holds the constant {node.value!r}")
        if isinstance(node, ast.Call) and (
            not isinstance(node.func, ast.Name)
            or node.func.id != FRACTION_NAME
            or node.keywords
            or len(node.args) not in (1, 2)
        ):
            raise UnsafeExpression(f"formula {text!r} calls something other than F(p, q)")
    return tree.body


def formula_names(text: str) -> set[str]:
    """The parameter names a formula reads (``F`` excluded)."""
    tree = parse_formula(text)
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {
        node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and id(node) not in called
    }


def evaluate_formula(text: str, values: Mapping[str, Any]) -> Any:
    """The value of ``text`` with names taken from ``values``.

    Values may be ints, Fractions, floats or any object with the arithmetic operators
    (the static model's :class:`~perfcast.static.formulas.Poly`); a name that ``values``
    lacks raises :class:`UnsafeExpression` naming it.
    """
    return _Evaluator(text, values).visit(parse_formula(text))


_ALLOWED_NODES = (
    ast.Expression,
    ast.BinOp,
    ast.UnaryOp,
    ast.BoolOp,
    ast.Compare,
    ast.IfExp,
    ast.Call,
    ast.Name,
    ast.Load,
    ast.Constant,
    ast.And,
    ast.Or,
    ast.Not,
    ast.USub,
    ast.UAdd,
    *_BINARY,
    *_COMPARE,
)


class _Evaluator:
    def __init__(self, text: str, values: Mapping[str, Any]):
        self.text = text
        self.values = values

    def visit(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in self.values:
                raise UnsafeExpression(f"formula {self.text!r} needs a value for {node.id}")
            return self.values[node.id]
        if isinstance(node, ast.BinOp):
            left, right = self.visit(node.left), self.visit(node.right)
            if isinstance(node.op, ast.Pow) and not (
                isinstance(right, int) and 0 <= right <= _MAX_EXPONENT
            ):
                raise UnsafeExpression(f"formula {self.text!r} has the power {right!r}")
            return _BINARY[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp):
            operand = self.visit(node.operand)
            if isinstance(node.op, ast.Not):
                return not operand
            return -operand if isinstance(node.op, ast.USub) else operand
        if isinstance(node, ast.BoolOp):
            if isinstance(node.op, ast.And):
                return all(self.visit(value) for value in node.values)
            return any(self.visit(value) for value in node.values)
        if isinstance(node, ast.Compare):
            left = self.visit(node.left)
            for op, comparator in zip(node.ops, node.comparators, strict=True):
                right = self.visit(comparator)
                if not _COMPARE[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            return self.visit(node.body) if self.visit(node.test) else self.visit(node.orelse)
        if isinstance(node, ast.Call):
            return Fraction(*(self.visit(argument) for argument in node.args))
        raise UnsafeExpression(f"formula {self.text!r}: {type(node).__name__} is not arithmetic")
