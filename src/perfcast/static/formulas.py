"""Count formulas: exact Python for the generated model, PMNF-like polynomials for people.

barvinok answers with piecewise quasi-polynomials (polynomials in the parameters and in
``floor`` of affine expressions, one per chamber of parameter space). The generated model
evaluates them exactly (Fractions and integer floor division, no isl at evaluation time);
the JSON summary and the modeler prior use :class:`Poly`, the polynomial that holds for
large parameter values with ``floor(x/k)`` read as ``x/k``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from perfcast.static.arithmetic import evaluate_formula

LARGE_VALUE = 840_000
"""Parameters are set near this (distinct per parameter, multiples of 840 = lcm(1..8)) to
pick the asymptotic chamber."""

Monomial = tuple[tuple[str, int], ...]


def _fraction(val) -> Fraction:
    return Fraction(str(val))


def _linear(aff, isl) -> tuple[str, int]:
    """(integer-coefficient numerator, denominator) of an affine expression."""
    denominator = int(str(aff.get_denominator_val()))
    parts = []
    space = aff.get_space()
    for k in range(aff.dim(isl.dim_type.param)):
        coefficient = _fraction(aff.get_coefficient_val(isl.dim_type.param, k)) * denominator
        if coefficient:
            name = space.get_dim_name(isl.dim_type.param, k)
            parts.append(f"{coefficient}*{name}")
    for k in range(aff.dim(isl.dim_type.div)):
        coefficient = _fraction(aff.get_coefficient_val(isl.dim_type.div, k)) * denominator
        if coefficient:
            parts.append(f"{coefficient}*{_floor(aff.get_div(k), isl)}")
    constant = _fraction(aff.get_constant_val()) * denominator
    if constant or not parts:
        parts.append(str(constant))
    return " + ".join(parts), denominator


def _floor(aff, isl) -> str:
    numerator, denominator = _linear(aff, isl)
    return f"(({numerator}) // {denominator})" if denominator != 1 else f"({numerator})"


def _condition(piece_set, isl) -> str:
    disjuncts = []
    for basic in piece_set.get_basic_sets():
        conjuncts = []
        for constraint in basic.get_constraints():
            numerator, _ = _linear(constraint.get_aff(), isl)
            conjuncts.append(f"({numerator}) {'==' if constraint.is_equality() else '>='} 0")
        disjuncts.append(" and ".join(conjuncts) or "True")
    return " or ".join(f"({d})" for d in disjuncts) or "False"


def _term_python(term, names: list[str], isl) -> str:
    coefficient = _fraction(term.get_coefficient_val())
    factors = [
        f"F({coefficient.numerator}, {coefficient.denominator})"
        if coefficient.denominator != 1
        else str(coefficient.numerator)
    ]
    for k in range(term.dim(isl.dim_type.param)):
        exponent = term.get_exp(isl.dim_type.param, k)
        if exponent:
            factors.append(names[k] if exponent == 1 else f"{names[k]}**{exponent}")
    for k in range(term.dim(isl.dim_type.div)):
        exponent = term.get_exp(isl.dim_type.div, k)
        if exponent:
            floor = _floor(term.get_div(k), isl)
            factors.append(floor if exponent == 1 else f"{floor}**{exponent}")
    return " * ".join(factors)


def _qpolynomial_python(qp, isl) -> str:
    terms: list = []
    qp.foreach_term(terms.append)
    space = qp.get_space()
    names = [
        space.get_dim_name(isl.dim_type.param, k) for k in range(space.dim(isl.dim_type.param))
    ]
    return " + ".join(_term_python(t, names, isl) for t in terms) or "0"


@dataclass(frozen=True)
class Piece:
    condition: str
    value: str


def pieces(pwqp) -> list[Piece]:
    import islpy as isl

    return [
        Piece(_condition(domain, isl), _qpolynomial_python(qp, isl))
        for domain, qp in pwqp.get_pieces()
    ]


def python_expression(pwqp) -> str:
    """One Python expression; zero outside every piece (isl's convention)."""
    parts = pieces(pwqp)
    expression = "0"
    for piece in reversed(parts):
        if piece.condition == "(True)":
            expression = f"({piece.value})"
        else:
            expression = f"(({piece.value}) if {piece.condition} else {expression})"
    return expression


def large_point(parameters) -> dict[str, int]:
    return {name: LARGE_VALUE + 840 * 7 * k for k, name in enumerate(sorted(parameters))}


class Poly:
    """A polynomial with Fraction coefficients over named parameters."""

    def __init__(self, terms: Mapping[Monomial, Fraction] | None = None):
        self.terms: dict[Monomial, Fraction] = {m: c for m, c in (terms or {}).items() if c}

    @classmethod
    def constant(cls, value: Fraction | int) -> Poly:
        return cls({(): Fraction(value)})

    @classmethod
    def variable(cls, name: str) -> Poly:
        return cls({((name, 1),): Fraction(1)})

    @staticmethod
    def _coerce(other: Poly | int | Fraction) -> Poly:
        return other if isinstance(other, Poly) else Poly.constant(other)

    def __add__(self, other: Poly | int | Fraction) -> Poly:
        other = self._coerce(other)
        terms = dict(self.terms)
        for monomial, coefficient in other.terms.items():
            terms[monomial] = terms.get(monomial, Fraction(0)) + coefficient
        return Poly(terms)

    __radd__ = __add__

    def __neg__(self) -> Poly:
        return self.scale(Fraction(-1))

    def __sub__(self, other: Poly | int | Fraction) -> Poly:
        return self + -self._coerce(other)

    def __rsub__(self, other: Poly | int | Fraction) -> Poly:
        return self._coerce(other) - self

    def __mul__(self, other: Poly | int | Fraction) -> Poly:
        other = self._coerce(other)
        terms: dict[Monomial, Fraction] = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in other.terms.items():
                powers: dict[str, int] = dict(m1)
                for name, power in m2:
                    powers[name] = powers.get(name, 0) + power
                monomial = tuple(sorted(powers.items()))
                terms[monomial] = terms.get(monomial, Fraction(0)) + c1 * c2
        return Poly(terms)

    __rmul__ = __mul__

    def scale(self, factor: Fraction) -> Poly:
        return Poly({m: c * factor for m, c in self.terms.items()})

    def substitute(self, values: Mapping[str, Poly]) -> Poly:
        total = Poly()
        for monomial, coefficient in self.terms.items():
            product = Poly.constant(coefficient)
            for name, power in monomial:
                base = values.get(name, Poly.variable(name))
                for _ in range(power):
                    product = product * base
            total = total + product
        return total

    @property
    def parameters(self) -> set[str]:
        return {name for monomial in self.terms for name, _ in monomial}

    def evaluate(self, point: Mapping[str, float]) -> float:
        total = 0.0
        for monomial, coefficient in self.terms.items():
            value = float(coefficient)
            for name, power in monomial:
                value *= float(point[name]) ** power
            total += value
        return total

    def text(self, digits: int = 6) -> str:
        """``4*n^2 + 3*n + 12``: highest degree first, like a PMNF model."""
        if not self.terms:
            return "0"
        ordered = sorted(
            self.terms.items(), key=lambda item: (-sum(p for _, p in item[0]), item[0])
        )
        parts = []
        for monomial, coefficient in ordered:
            number = (
                str(coefficient.numerator)
                if coefficient.denominator == 1
                else f"{float(coefficient):.{digits}g}"
            )
            factors = [name if power == 1 else f"{name}^{power}" for name, power in monomial]
            if factors and number in ("1", "-1"):
                parts.append(("-" if number == "-1" else "") + " * ".join(factors))
            else:
                parts.append(" * ".join([number, *factors]) if factors else number)
        return " + ".join(parts).replace("+ -", "- ")

    def to_json(self) -> list[dict]:
        return [
            {"coefficient": str(c), "factors": {name: power for name, power in m}}
            for m, c in self.terms.items()
        ]


def polynomial(pwqp) -> Poly:
    """The polynomial of the chamber that holds for large parameters, floors removed."""
    import islpy as isl

    approximate = pwqp.to_polynomial(0)
    chosen = approximate.get_pieces()
    if not chosen:
        return Poly()
    names = [
        approximate.get_space().get_dim_name(isl.dim_type.param, k)
        for k in range(approximate.dim(isl.dim_type.param))
    ]
    point = large_point(names)
    selected = chosen[-1][1]
    for domain, qp in chosen:
        if evaluate_formula(_condition(domain, isl), point):
            selected = qp
            break
    terms: list = []
    selected.foreach_term(terms.append)
    poly = Poly()
    space = selected.get_space()
    for term in terms:
        monomial = []
        for k in range(term.dim(isl.dim_type.param)):
            exponent = term.get_exp(isl.dim_type.param, k)
            if exponent:
                monomial.append((space.get_dim_name(isl.dim_type.param, k), exponent))
        poly = poly + Poly({tuple(sorted(monomial)): _fraction(term.get_coefficient_val())})
    return poly
