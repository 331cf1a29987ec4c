"""The hypothesis space: which term shapes and which term structures the search tries.

A *shape* is the coefficient-free part of a single-parameter term, ``x^i * log2(x)^j``.
A *structure* (term family) says how parameters combine: a set of parameter subsets, each
subset one product term. ``{x}, {y}`` is ``c0 + c1*f(x) + c2*g(y)``; ``{x, y}`` is
``c0 + c1*f(x)*g(y)``; ``{x, y}, {x}`` is both. Families are enumerated for any number of
parameters instead of being hand-listed, bounded by ``max_terms``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import chain, combinations
from typing import TypeVar

import numpy as np

from perfcast.modeling.options import (
    OPTION,
    Flag,
    OptionError,
    Options,
    document_options,
    option,
)
from perfcast.modeling.pmnf import Factor, fraction

_EXTRAP_EXPONENTS = "0 1/4 1/3 1/2 2/3 3/4 4/5 1 5/4 4/3 3/2 5/3 7/4 2 9/4 7/3 5/2 8/3 11/4 3"
DEFAULT_EXPONENTS: tuple[Fraction, ...] = tuple(map(Fraction, _EXTRAP_EXPONENTS.split(" ")))
"""Extra-P's default polynomial exponent set I."""

DEFAULT_LOG_EXPONENTS: tuple[int, ...] = (0, 1, 2)
"""Extra-P's default logarithm exponent set J."""

FALLING_EXPONENTS: tuple[Fraction, ...] = tuple(
    -Fraction(e) for e in ("1/4", "1/3", "1/2", "2/3", "3/4", "1", "4/3", "3/2", "2")
)
"""Exponents the modeler adds for a parameter along which a metric falls (strong scaling:
work per rank ``n/p``, surfaces ``(n/p)^(2/3)``, 2-D halos ``p^(-1/2)``); beyond ``-2``
a cost per rank rarely falls."""

T = TypeVar("T")

Family = tuple[frozenset[str], ...]
"""A term structure: one parameter subset per product term."""


MAX_SEARCH_EXPONENT = 16
"""The largest exponent (polynomial, in absolute value, or logarithmic) a search space may
hold. Extra-P's largest is 3; ``x^16`` of a parameter at 10^6 is already 10^96, and a few
steps more overflow a double, so larger exponents fit nothing and only fill the fits with
infinities."""


def _beyond_limit(exponents: tuple[Fraction | int, ...]) -> str | None:
    """The problem of exponents beyond :data:`MAX_SEARCH_EXPONENT`, or ``None``."""
    largest = max((abs(Fraction(e)) for e in exponents), default=Fraction(0))
    if largest <= MAX_SEARCH_EXPONENT:
        return None
    digits = len(str(int(largest)))
    shown = str(largest) if digits <= 12 else f"a {digits}-digit number"
    return f"{OPTION}: {shown} is beyond the largest usable exponent {MAX_SEARCH_EXPONENT}"


def parse_exponents(text: str) -> tuple[Fraction, ...]:
    """``"-1,0,1/2,2"`` (the command line's spelling) as exponents."""
    return tuple(_split(text, fraction))


def parse_log_exponents(text: str) -> tuple[int, ...]:
    """``"0,1,2"`` as logarithm exponents."""
    return tuple(_split(text, int))


@document_options
@dataclass(frozen=True)
class SearchSpace(Options):
    """Exponent sets of the PMNF search.

    Negative exponents (``-1``, ``-1/2``) model strong scaling, where cost per rank falls
    with ``p``; they are allowed as long as the measured values of a parameter are positive.
    The sets are kept sorted and without repeats.
    """

    exponents: tuple[Fraction, ...] = option(
        DEFAULT_EXPONENTS,
        doc="polynomial exponents ``i`` of the shapes ``x^i log2(x)^j`` (Extra-P's set I).",
        check=_beyond_limit,
        parse=parse_exponents,
        flag=Flag(
            "--exponents",
            help="polynomial exponents, e.g. '0,1/2,1,2,3'; negative ones as "
            "--exponents=-1,0,1 or --exponents '-1,0,1'",
        ),
    )
    log_exponents: tuple[int, ...] = option(
        DEFAULT_LOG_EXPONENTS,
        doc="logarithm exponents ``j``, non-negative integers (Extra-P's set J).",
        check=_beyond_limit,
        parse=parse_log_exponents,
        flag=Flag("--log-exponents", help="logarithm exponents, e.g. '0,1,2'"),
    )
    _shapes: tuple[tuple[Fraction, int], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            exps = tuple(sorted({fraction(e) for e in self.exponents}))
        except (TypeError, ValueError, ArithmeticError):
            raise OptionError(
                "exponents", f"{OPTION} must be numbers or fractions, not {self.exponents!r}"
            ) from None
        try:
            logs = tuple(sorted({operator.index(j) for j in self.log_exponents}))
        except TypeError:
            logs = (-1,)  # not integers: refused below
        if any(j < 0 for j in logs):
            raise OptionError(
                "log_exponents",
                f"{OPTION} must be non-negative integers, not {self.log_exponents!r}",
            )
        if not exps or not logs:
            which = "exponents" if not exps else "log_exponents"
            raise OptionError(which, f"{OPTION} is empty: give at least one value")
        object.__setattr__(self, "exponents", exps)
        object.__setattr__(self, "log_exponents", logs)
        super().__post_init__()
        shapes = tuple((i, j) for i in exps for j in self.log_exponents if (i, j) != (0, 0))
        object.__setattr__(self, "_shapes", shapes)

    def _check_together(self) -> None:
        if all(e == 0 for e in self.exponents) and all(j == 0 for j in self.log_exponents):
            raise OptionError(
                "exponents", f"{OPTION}: the search space has no shape but the constant"
            )

    @classmethod
    def from_strings(
        cls, exponents: str | None = None, log_exponents: str | None = None
    ) -> SearchSpace:
        """Parse ``"0,1/2,1,2"`` and ``"0,1"`` (the CLI's spelling)."""
        exps = DEFAULT_EXPONENTS if exponents is None else parse_exponents(exponents)
        logs = (
            DEFAULT_LOG_EXPONENTS if log_exponents is None else parse_log_exponents(log_exponents)
        )
        return cls(exps, logs)

    @property
    def shapes(self) -> tuple[tuple[Fraction, int], ...]:
        """All (exponent, log exponent) pairs except the constant (0, 0)."""
        return self._shapes

    @property
    def needs_positive_values(self) -> bool:
        """Logs, fractional and negative powers are only real for positive parameters."""
        return any(j > 0 for j in self.log_exponents) or any(
            e.denominator != 1 or e < 0 for e in self.exponents
        )

    @property
    def has_negative_exponents(self) -> bool:
        """The user asked for falling shapes explicitly (``--exponents -1,...``)."""
        return any(e < 0 for e in self.exponents)

    def factors(self, parameter: str) -> list[Factor]:
        return [Factor(parameter, i, j) for i, j in self.shapes]

    def basis(self, values: np.ndarray) -> np.ndarray:
        """Every shape evaluated at ``values``: shape (n_shapes, len(values))."""
        values = np.asarray(values, dtype=float)
        exps = np.array([float(i) for i, _ in self.shapes])[:, None]
        logs = np.array([j for _, j in self.shapes])[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            power = np.where(exps == 0, 1.0, np.power(values[None, :], exps))
            log = np.where(logs == 0, 1.0, np.power(np.log2(values)[None, :], logs))
        return np.asarray(power * log)


def falling_factors(parameter: str, space: SearchSpace) -> list[Factor]:
    """``parameter^(-i) * log2(parameter)^j`` for every ``i`` in :data:`FALLING_EXPONENTS` and
    ``j`` in the space's log exponents: the shapes of a metric that decreases along it."""
    return [Factor(parameter, i, j) for i in FALLING_EXPONENTS for j in space.log_exponents]


STEEPER_STEPS: tuple[Fraction, ...] = (Fraction(1, 2), Fraction(1), Fraction(3, 2), Fraction(2))
"""How far beyond the space's largest exponent the modeler looks for a parameter whose best
shape is the space's steepest (miniFE's ``nx^4`` against Extra-P's largest exponent 3)."""


def steeper_factors(parameter: str, space: SearchSpace) -> list[Factor]:
    """Shapes beyond the space's largest exponent: ``parameter^(top + step) *
    log2(parameter)^j`` for the :data:`STEEPER_STEPS` and the space's log exponents."""
    top = max(space.exponents)
    return [Factor(parameter, top + step, j) for step in STEEPER_STEPS for j in space.log_exponents]


def term_families(
    parameters: Sequence[str], max_terms: int, allowed: frozenset[frozenset[str]] | None = None
) -> list[Family]:
    """Every family of distinct, non-empty parameter subsets with at most ``max_terms`` members.

    The empty family (the constant model) comes first. ``allowed``, if given, limits which
    subsets may form a product term (a taint prior's multiplicative groups).
    """
    subsets = [
        frozenset(s)
        for s in chain.from_iterable(
            combinations(parameters, r) for r in range(1, len(parameters) + 1)
        )
        if allowed is None or frozenset(s) in allowed
    ]
    families: list[Family] = [()]
    for size in range(1, max_terms + 1):
        families.extend(combinations(subsets, size))
    return families


def family_parameters(family: Family) -> tuple[str, ...]:
    """The parameters a structure uses, sorted."""
    return tuple(sorted(frozenset().union(*family))) if family else ()


def _split(text: str, convert: Callable[[str], T]) -> list[T]:
    try:
        return [convert(part.strip()) for part in text.split(",") if part.strip()]
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"cannot parse exponent list {text!r}; write e.g. '0,1/2,1,2'") from None
