"""Ground-truth PMNF functions with known complexity.

The synthetic benchmark of ``noise-resilient-priors.txt`` (Sec. IV, Eq. 3) composes kernels
from terms ``x^i * log2(x)^j`` with ``i`` in the PMNF exponent set I and ``j`` in J, arranged
sequentially (a sum of terms) or nested (a product of factors). Here the same functions are
built directly as :class:`~perfcast.modeling.pmnf.Model` objects, so the truth evaluates
itself and can be compared with a fitted model term by term (exact fractions, no float
fuzz). Each parameter appears in exactly one term, which makes "the truth's leading
exponent of parameter x" unambiguous.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction

import numpy as np

from perfcast.errors import InputError
from perfcast.experiment.metrics import TIME_METRIC
from perfcast.modeling.pmnf import Factor, Model, Term, fraction
from perfcast.modeling.space import DEFAULT_EXPONENTS, DEFAULT_LOG_EXPONENTS

MAX_PARAMETERS = 4
"""Functions of 1 to 4 parameters, the range Extra-P's multi-parameter modeler covers."""


class Structure(StrEnum):
    """How the parameters' factors combine into terms."""

    ADDITIVE = "additive"
    """One term per parameter: ``c0 + c1*f(x) + c2*g(y)`` (sequential kernels)."""
    MULTIPLICATIVE = "multiplicative"
    """One product term: ``c0 + c1*f(x)*g(y)`` (nested loops)."""
    MIXED = "mixed"
    """A random partition of the parameters into product terms, e.g. ``f(x)*g(y) + h(z)``;
    includes the two pure structures as special cases."""


@dataclass(frozen=True)
class FunctionSpace:
    """Where random truths are drawn from.

    Each parameter's shape ``(i, j)`` is drawn uniformly from ``shapes``, by default every
    pair of the PMNF sets ``I x J`` except the constant ``(0, 0)``, so every complexity
    class of the search space is equally likely (:meth:`from_sets` builds other sets).

    Coefficients are not drawn directly: with raw random coefficients, ``n^3`` at
    ``n = 40000`` (6e13) buries a ``p^(1/3)`` term next to it by thirteen orders of
    magnitude, and no modeler could recover the buried parameter — the benchmark would
    measure the generator, not the modeler. Instead each term gets a *weight*, its share
    of the function's value at a reference point (the largest measured point), and the
    coefficient follows as ``weight / basis(reference)``. Weights are log-uniform in
    ``term_weight_range``, the constant's in ``constant_weight_range`` (so the growing
    terms dominate, as in a kernel whose fixed overhead is small), and the whole function
    is multiplied by a log-uniform ``scale`` so values span the orders of magnitude of real
    timings (microseconds to kiloseconds).
    """

    shapes: tuple[tuple[Fraction, int], ...] = field(
        default_factory=lambda: _product(DEFAULT_EXPONENTS, DEFAULT_LOG_EXPONENTS)
    )
    term_weight_range: tuple[float, float] = (1.0, 10.0)
    constant_weight_range: tuple[float, float] = (0.1, 1.0)
    scale_range: tuple[float, float] = (1e-3, 1e3)

    def __post_init__(self) -> None:
        for name in ("term_weight_range", "constant_weight_range", "scale_range"):
            low, high = getattr(self, name)
            if not 0 < low <= high:
                raise InputError(f"{name} must satisfy 0 < low <= high, got ({low}, {high})")
        shapes = tuple((fraction(i), int(j)) for i, j in self.shapes)
        if not shapes or (Fraction(0), 0) in shapes:
            raise InputError(
                "the function space needs non-constant shapes only; (0, 0) is the constant"
            )
        object.__setattr__(self, "shapes", shapes)

    @classmethod
    def from_sets(
        cls,
        exponents: Sequence[Fraction | str | int],
        log_exponents: Sequence[int],
        **options: tuple[float, float],
    ) -> FunctionSpace:
        """Every non-constant pair of ``exponents x log_exponents``."""
        return cls(_product(exponents, log_exponents), **options)


def _product(
    exponents: Sequence[Fraction | str | int], log_exponents: Sequence[int]
) -> tuple[tuple[Fraction, int], ...]:
    pairs = ((fraction(i), int(j)) for i in exponents for j in log_exponents)
    return tuple(pair for pair in pairs if pair != (Fraction(0), 0))


def pmnf_function(
    callpath: str,
    constant: float,
    terms: Sequence[tuple[float, Mapping[str, tuple[Fraction | str | int, int]]]],
    *,
    metric: str = TIME_METRIC,
) -> Model:
    """A specified truth, e.g. ``3 + 2*p^(1/2)*log2(p) * n``::

        pmnf_function("main->solve", 3.0, [(2.0, {"p": ("1/2", 1), "n": (1, 0)})])

    Each term is ``(coefficient, {parameter: (exponent, log exponent)})``.
    """
    built = []
    for coefficient, factors in terms:
        if not factors:
            raise InputError(f"a term of {callpath!r} has no factor; add it to the constant")
        built.append(
            Term(
                float(coefficient),
                tuple(
                    Factor(parameter, fraction(exponent), int(log_exponent))
                    for parameter, (exponent, log_exponent) in factors.items()
                ),
            )
        )
    return Model(callpath=callpath, metric=metric, constant=float(constant), terms=tuple(built))


def random_function(
    callpath: str,
    reference: Mapping[str, float],
    rng: np.random.Generator,
    *,
    structure: Structure | str = Structure.MIXED,
    space: FunctionSpace | None = None,
    metric: str = TIME_METRIC,
) -> Model:
    """A random truth over the parameters of ``reference``, every parameter with a
    non-constant shape; term weights hold at ``reference`` (see :class:`FunctionSpace`).

    ``reference`` should be the largest measured point: that is where the terms are
    balanced, so each one is visible in the measurements.
    """
    space = space or FunctionSpace()
    parameters = list(reference)
    _check_parameters(parameters)
    for parameter, value in reference.items():
        if not value > 1:
            raise InputError(
                f"reference value of {parameter!r} must exceed 1 (log2 must be positive "
                f"there), got {value}"
            )
    structure = Structure(structure)
    shapes = space.shapes
    factors = {}
    for parameter in parameters:
        exponent, log_exponent = shapes[rng.integers(len(shapes))]
        factors[parameter] = Factor(parameter, exponent, log_exponent)
    scale = _log_uniform(rng, space.scale_range)
    point = {p: np.asarray(float(v)) for p, v in reference.items()}
    terms = []
    for group in _groups(parameters, structure, rng):
        shape = Term(1.0, tuple(factors[p] for p in group))
        weight = _log_uniform(rng, space.term_weight_range)
        terms.append(Term(scale * weight / float(shape.basis(point)), shape.factors))
    constant = scale * _log_uniform(rng, space.constant_weight_range)
    return Model(callpath=callpath, metric=metric, constant=constant, terms=tuple(terms))


def _groups(
    parameters: list[str], structure: Structure, rng: np.random.Generator
) -> list[list[str]]:
    """Partition the parameters into product terms according to ``structure``."""
    if structure is Structure.ADDITIVE:
        return [[p] for p in parameters]
    if structure is Structure.MULTIPLICATIVE:
        return [list(parameters)]
    # A uniformly random label per parameter gives every partition a chance, the pure
    # additive and multiplicative ones included.
    labels = rng.integers(len(parameters), size=len(parameters))
    groups: dict[int, list[str]] = {}
    for parameter, label in zip(parameters, labels, strict=True):
        groups.setdefault(int(label), []).append(parameter)
    return list(groups.values())


def _log_uniform(rng: np.random.Generator, bounds: tuple[float, float]) -> float:
    low, high = bounds
    return float(np.exp(rng.uniform(np.log(low), np.log(high))))


def _check_parameters(parameters: Sequence[str]) -> None:
    if not 1 <= len(parameters) <= MAX_PARAMETERS:
        raise InputError(
            f"synthetic functions have 1 to {MAX_PARAMETERS} parameters, got {len(parameters)} "
            f"({list(parameters)})"
        )
    if len(set(parameters)) != len(parameters):
        raise InputError(f"parameter names must be distinct, got {list(parameters)}")
