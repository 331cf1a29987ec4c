"""Exact models of exact counts: the sum of terms that reproduces every measured value.

Why a search of its own: counts of basic blocks, bytes, visits and static instruction counts
are deterministic, so their model is not a compromise with noise but an identity to be
found. A kernel sweeping the interior of an ``n^3`` grid and treating its boundary apart
executes ``1428 n^3 - 1836 n^2 + 2142`` blocks on one rank (HPCG's SpMV); with neighbours on
more faces the ``n^2`` coefficient shrinks (``- 918 n^2`` at eight ranks). The lower-order
terms are negative and the lead term is ``n^3``: a search that demands positive terms and
scores by relative error settles on ``1e5 + 658 n^(11/4) log2(n)``, 0.8 % off everywhere,
and every time model fitted under that prior inherits its wrong exponent.

The search tries dictionaries of growing strangeness, and the first that reproduces the data
to rounding wins (:data:`TIERS`):

1. integer exponents, no logarithm (``n^3``, ``n^2``, ``n``, their products with ``p``),
   and ``p^-1``, ``p^-2`` for work split over the ranks (``n^3 / p``);
2. integer exponents and one ``log2`` factor (trees, halvings: ``n^2 log2(p)``);
3. the search space's exponents (fractions: ``p^(1/3)`` edges of a cube decomposition).

The search works line by line first: along every line of the design (one parameter
varies, the others are fixed) the count is a sum of a few shapes of that parameter, few
enough that every subset can be tried, fewest first (:data:`MAX_LINE_TERMS`). A line of
``v`` distinct values may use at most ``v - 2`` shapes besides the constant, which leaves a
value to verify the fit, so an interpolation never passes as a law. The model of all points
is then searched among the products of the shapes the lines needed, and pruned one term at
a time, the most complex first, while it stays exact, so ``7 n^3 + 12`` is not reported as
a cubic polynomial with zero coefficients. The lead term (the one that dominates at the
largest measured point) must be positive; lower-order terms may take any sign, as boundary
corrections do. Where every line is exact but the lower-order coefficients change between
lines in no form the tiers express, :func:`lead_along_lines` keeps the exact lead term.

"Exact" is decided per point: the residual must be within :data:`RELATIVE_TOLERANCE` of the
value (rank means of integer counts are exact rationals; floating point leaves about
``1e-15``), plus :data:`ABSOLUTE_TOLERANCE` of the largest value for counts that pass zero.
Counts rounded from non-polynomial trip counts (``llround(32 * p^(1/3))``) are not exact in
any tier; they go to the approximate search of :mod:`perfcast.effort.counts`, which says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from itertools import combinations, product

import numpy as np

from perfcast.modeling.lines import batched_lines, lines_along
from perfcast.modeling.pmnf import Factor
from perfcast.modeling.space import SearchSpace

MAX_DEGREE = 4
"""Largest integer exponent of a parameter in tiers 1 and 2: a loop nest four deep in one
parameter is rare; beyond it the columns of five measured values are nearly dependent."""

RELATIVE_TOLERANCE = 1e-9
"""Largest residual, relative to the measured value, of an exact model. Least squares in
double precision on scaled columns leaves 1e-15 to 1e-12; a model that misses by more is
approximate, and an approximate model at 1e-9 would need values of 10^9 to hide a unit."""

ABSOLUTE_TOLERANCE = 1e-12
"""Residual, relative to the largest value, that counts as rounding for values near zero."""

MAX_LINE_TERMS = 3
"""Most non-constant shapes of one parameter along a line: a cube's volume, faces and
edges (``n^3``, ``n^2``, ``n``). Every subset up to this size is tried (9,177 of the
fractional tier's 38 shapes), in one batched solve per size."""

MAX_EXACT_TERMS = 8
"""Most terms (besides the constant) an exact model may keep after pruning."""


@dataclass(frozen=True)
class ExactFit:
    """An exact model: its shapes (each a product of factors; ``()`` the constant), their
    coefficients and which tier of :data:`TIERS` found it."""

    shapes: tuple[tuple[Factor, ...], ...]
    coefficients: np.ndarray
    prediction: np.ndarray
    tier: str


TIERS = ("integer exponents", "integer exponents with log2", "fractional exponents")


def exact_fit(
    coordinates: np.ndarray,
    values: np.ndarray,
    parameters: Sequence[str],
    space: SearchSpace,
) -> ExactFit | None:
    """The simplest exact model of ``values`` at ``coordinates`` (points x parameters, each
    point once), or ``None`` when no tier has one."""
    if len(values) < 3 or not np.all(np.isfinite(values)):
        return None
    per_parameter: list[list[Factor]] = []
    tier = 0
    for index, name in enumerate(parameters):
        found = _line_factors(coordinates, values, index, name, space)
        if found is None:
            return None
        per_parameter.append(found[0])
        tier = max(tier, found[1])
    shapes = sorted(
        (
            tuple(f for f in combo if f is not None)
            for combo in product(*([None, *factors] for factors in per_parameter))
        ),
        key=_complexity,
    )
    columns = np.stack([_evaluate(shape, coordinates, parameters) for shape in shapes], 1)
    subset = _exact_subset(columns, values)
    if subset is None:
        return None
    kept, coefficients, prediction = subset
    chosen = tuple(shapes[k] for k in kept)
    distinct = [len(np.unique(coordinates[:, j])) for j in range(len(parameters))]
    if not _verified(chosen, parameters, distinct):
        return None
    lead = _lead(chosen, coefficients, columns[:, kept])
    if coefficients[lead] <= 0:
        return None  # work that shrinks at scale is not a count of work
    return ExactFit(chosen, coefficients, prediction, TIERS[tier])


def _line_factors(
    coordinates: np.ndarray, values: np.ndarray, index: int, name: str, space: SearchSpace
) -> tuple[list[Factor], int] | None:
    """The factors of parameter ``index`` in the exact models of the design's lines along it
    (the union over lines), and the highest tier they needed; ``None`` when a line has no
    exact model or the design has no line of three distinct values.

    Along one line the model is a sum of single-parameter shapes, few enough that every
    subset can be tried, simplest first: that is what makes the search exhaustive where a
    pursuit over the multi-parameter dictionary would be greedy. The multi-parameter
    dictionary is then only the products of what the lines need."""
    batches = batched_lines(
        coordinates, index, lambda x: len(x) >= 3 and len(np.unique(x)) == len(x)
    )
    if not batches:
        return None
    union: dict[Factor, None] = {}
    tier = 0
    for x, members in batches:
        found = _simplest_on_lines(x, values[members], name, space)
        if found is None:
            return None
        union.update(dict.fromkeys(found[0]))
        tier = max(tier, found[1])
    return sorted(union, key=lambda f: _complexity((f,))), tier


def _simplest_on_lines(
    x: np.ndarray, lines: np.ndarray, name: str, space: SearchSpace
) -> tuple[list[Factor], int] | None:
    """The fewest factors of ``name`` (with a constant) that reproduce every one of
    ``lines`` (lines x points, all at ``x``) exactly, from the simplest tier up; each subset
    size is tried in one batched QR solve."""
    for tier, label in enumerate(TIERS):
        factors = _tier_factors(label, name, len(x), x, space)
        basis = np.stack([np.ones_like(x), *(f.evaluate(x) for f in factors)])
        basis = basis / np.max(np.abs(basis), axis=1, keepdims=True)
        for size in range(0, min(len(factors), MAX_LINE_TERMS, len(x) - 2) + 1):
            subsets = _with_constant(len(factors), size)
            q = np.linalg.qr(basis[subsets].transpose(0, 2, 1))[0]  # (S, L, size + 1)
            y = lines.T  # (L, lines)
            residual = y[None] - q @ (q.transpose(0, 2, 1) @ y[None])
            exact = np.all(np.abs(residual) <= _tolerance(y)[None], axis=(1, 2))
            if exact.any():
                first = subsets[int(np.argmax(exact))]
                return [factors[k - 1] for k in first[1:]], tier
    return None


@cache
def _with_constant(factors: int, size: int) -> np.ndarray:
    """Every subset of ``size`` of ``factors`` basis rows after the constant (row 0), each
    with the constant first: (subsets, size + 1). Cached: every line of every call path
    asks for the same few (a Python tuple per subset was most of the exact search's time)."""
    combos = list(combinations(range(1, factors + 1), size))
    chosen = np.array(combos, dtype=np.intp).reshape(len(combos), size)
    subsets = np.concatenate([np.zeros((len(chosen), 1), dtype=np.intp), chosen], axis=1)
    subsets.flags.writeable = False
    return subsets


def _tier_factors(
    tier: str, name: str, distinct: int, x: np.ndarray, space: SearchSpace
) -> list[Factor]:
    """The non-constant factors of one parameter in ``tier``: as many as its ``distinct``
    measured values can determine and still verify."""
    degree = min(MAX_DEGREE, distinct - 2)
    if degree < 1:
        return []
    positive = bool(np.all(x > 0))
    integers = [Factor(name, Fraction(k)) for k in range(1, degree + 1)]
    if positive:  # work split over ranks: n^3 / p (strong scaling), a 2-D halo's 1 / p^2
        integers += [Factor(name, Fraction(-k)) for k in range(1, min(degree, 2) + 1)]
    if tier == TIERS[0]:
        return integers
    if not positive:
        return []  # log2 and fractions need positive values; tier 1 said what it could
    logs = [Factor(name, Fraction(k), 1) for k in range(0, degree)]
    if tier == TIERS[1]:
        return [*integers, *logs]
    fractions = [
        Factor(name, e, j)
        for e in space.exponents
        for j in (0, 1)
        if e > 0 and e.denominator != 1 and e <= degree and j in space.log_exponents
    ]
    return [*integers, *logs, *fractions]


def _verified(
    shapes: Sequence[tuple[Factor, ...]], parameters: Sequence[str], distinct: Sequence[int]
) -> bool:
    """Does every line keep a value the model did not need? Along a parameter the model is
    a combination of its distinct factors of that parameter (no factor counts as one); with
    as many factors as measured values any data is reproduced, so exactness would prove
    nothing (``n^(3/2)`` interpolated by ``log2(n)``, ``n log2(n)``, ``n^3`` ...)."""
    for name, count in zip(parameters, distinct, strict=True):
        factors = {next((f for f in shape if f.parameter == name), None) for shape in shapes}
        if len(factors) > count - 1:
            return False
    return True


def _complexity(shape: tuple[Factor, ...]) -> tuple[int, int, Fraction, int]:
    """Simplest first: no fractional exponent, fewer logarithms, lower total degree (in
    absolute value: ``1/p`` is as simple as ``p``), fewer factors. The constant comes first
    and pruning spares the simplest terms longest."""
    return (
        sum(f.exponent.denominator != 1 for f in shape),
        sum(f.log_exponent for f in shape),
        sum((abs(f.exponent) for f in shape), Fraction(0)),
        len(shape),
    )


def _evaluate(
    shape: tuple[Factor, ...], coordinates: np.ndarray, names: Sequence[str]
) -> np.ndarray:
    out = np.ones(len(coordinates))
    for factor in shape:
        out = out * factor.evaluate(coordinates[:, names.index(factor.parameter)])
    return out


def _tolerance(values: np.ndarray) -> np.ndarray:
    """The residual each value may leave and still count as reproduced."""
    scale = float(np.max(np.abs(values))) or 1.0
    return RELATIVE_TOLERANCE * np.abs(values) + ABSOLUTE_TOLERANCE * scale


def _is_exact(values: np.ndarray, prediction: np.ndarray) -> bool:
    return bool(np.all(np.abs(values - prediction) <= _tolerance(values)))


def _solve(columns: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least squares on columns scaled to unit maximum (powers of 48 span ten decades)."""
    scale = np.max(np.abs(columns), axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    solution = np.linalg.lstsq(columns / scale, values, rcond=None)[0]
    coefficients = solution / scale
    return coefficients, columns @ coefficients


def _exact_subset(
    columns: np.ndarray, values: np.ndarray
) -> tuple[list[int], np.ndarray, np.ndarray] | None:
    """Column indices (0, the constant, always kept), coefficients and prediction of a
    pruned exact fit, or ``None``. ``columns`` are ordered from simplest to most complex,
    which is also the order pruning spares them."""
    points, width = columns.shape
    room = points - 1  # at least one point beyond the columns verifies the fit
    if width <= room:
        kept = list(range(width))
    else:
        pursued = _pursuit(columns, values, room)
        if pursued is None:
            return None
        kept = pursued
    kept = _independent(columns, kept)
    coefficients, prediction = _solve(columns[:, kept], values)
    if not _is_exact(values, prediction):
        return None
    for index in sorted(kept[1:], reverse=True):  # most complex first
        trial = [k for k in kept if k != index]
        c, pred = _solve(columns[:, trial], values)
        if _is_exact(values, pred):
            kept, coefficients, prediction = trial, c, pred
    if len(kept) - 1 > MAX_EXACT_TERMS or len(kept) >= points:
        return None
    return kept, coefficients, prediction


def _pursuit(columns: np.ndarray, values: np.ndarray, room: int) -> list[int] | None:
    """Orthogonal matching pursuit from the constant: the column most correlated with the
    residual enters until the fit is exact or ``room`` columns are in."""
    normed = columns / np.maximum(np.linalg.norm(columns, axis=0), 1e-300)
    kept = [0]
    prediction = _solve(columns[:, kept], values)[1]
    while len(kept) < room and not _is_exact(values, prediction):
        score = np.abs(normed.T @ (values - prediction))
        score[kept] = -1.0
        kept.append(int(np.argmax(score)))
        prediction = _solve(columns[:, kept], values)[1]
    return kept if _is_exact(values, prediction) else None


def _independent(columns: np.ndarray, kept: list[int]) -> list[int]:
    """``kept`` without columns that are combinations of simpler kept ones at these points
    (``log2(p) = p - 1`` at ``p = 1, 2``)."""
    out: list[int] = []
    for k in kept:
        trial = [*out, k]
        scale = np.max(np.abs(columns[:, trial]), 0)
        block = columns[:, trial] / np.where(scale > 0, scale, 1.0)
        if np.linalg.matrix_rank(block, tol=1e-10) == len(trial):
            out = trial
    return out


def _lead(
    shapes: Sequence[tuple[Factor, ...]], coefficients: np.ndarray, columns: np.ndarray
) -> int:
    """The term with the largest magnitude at the point where the count is largest."""
    at = int(np.argmax(np.abs(columns @ coefficients)))
    contributions = np.abs(coefficients * columns[at])
    contributions[[k for k, shape in enumerate(shapes) if not shape]] = -1.0
    return int(np.argmax(contributions))


@dataclass(frozen=True)
class LeadFit:
    """A count exact along one parameter on every line of the design, whose lower-order
    coefficients change between lines in no form the tiers express (boundary terms that
    shrink as ranks gain neighbours): the lead term is exact, the rest approximate."""

    parameter: str
    shapes: tuple[tuple[Factor, ...], ...]  # the lead term(s) first, then lower-order terms
    coefficients: np.ndarray
    prediction: np.ndarray
    lines: int
    leads: int = 1
    """How many of ``shapes`` make the lead term (its coefficient's own terms)."""


def lead_along_lines(
    coordinates: np.ndarray,
    values: np.ndarray,
    parameters: Sequence[str],
    space: SearchSpace,
    min_points: int,
) -> LeadFit | None:
    """Per parameter, the exact models of every line along it (the others fixed); where all
    lines are exact and share their lead shape, and the lead coefficient is the same on
    every line or an exact function of the other parameters (``1/p`` where the work is
    split over the ranks), that lead term with the union of the lines' lower-order shapes
    fitted once over all points (least squares). ``None`` where no parameter has such
    lines."""
    for index, name in enumerate(parameters):
        members = [m for m in lines_along(coordinates, index) if len(m) >= min_points]
        if len(members) < 2 or any(
            len(np.unique(coordinates[m, index])) != len(m) for m in members
        ):
            continue
        fits = [exact_fit(coordinates[m][:, [index]], values[m], [name], space) for m in members]
        if any(fit is None for fit in fits):
            continue
        leads = []
        for fit, line in zip(fits, members, strict=True):
            assert fit is not None
            x = coordinates[line][:, [index]]
            line_columns = np.stack([_evaluate(s, x, [name]) for s in fit.shapes], 1)
            k = _lead(fit.shapes, fit.coefficients, line_columns)
            leads.append((fit.shapes[k], float(fit.coefficients[k])))
        shape = leads[0][0]
        if not shape or any(s != shape for s, _ in leads):
            continue
        lead = _lead_terms(
            shape, [c for _, c in leads], coordinates, members, index, parameters, space
        )
        if lead is None:
            continue
        lower = sorted(
            {s for fit in fits if fit for s in fit.shapes if s != shape}, key=_complexity
        )
        lead_shapes, lead_coefficients = lead
        lead_columns = np.stack([_evaluate(s, coordinates, parameters) for s in lead_shapes], 1)
        lead_prediction = lead_columns @ lead_coefficients
        if lower:
            columns = np.stack([_evaluate(s, coordinates, parameters) for s in lower], 1)
            low_coefficients, low_prediction = _solve(columns, values - lead_prediction)
        else:
            low_coefficients, low_prediction = np.empty(0), np.zeros_like(values)
        return LeadFit(
            name,
            (*lead_shapes, *lower),
            np.concatenate([lead_coefficients, low_coefficients]),
            lead_prediction + low_prediction,
            len(members),
            len(lead_shapes),
        )
    return None


def _lead_terms(
    shape: tuple[Factor, ...],
    coefficients: Sequence[float],
    coordinates: np.ndarray,
    members: Sequence[np.ndarray],
    index: int,
    parameters: Sequence[str],
    space: SearchSpace,
) -> tuple[tuple[tuple[Factor, ...], ...], np.ndarray] | None:
    """The lead term(s) of all lines: ``shape`` times the lines' lead coefficient, itself a
    constant or an exact model of the other parameters (each of its terms times ``shape``).
    ``None`` where the coefficient follows no exact model."""
    values = np.asarray(coefficients)
    if np.ptp(values) <= RELATIVE_TOLERANCE * 1e3 * np.max(np.abs(values)):
        return (shape,), np.array([float(values.mean())])
    others = [j for j in range(len(parameters)) if j != index]
    where = np.array([coordinates[line[0], others] for line in members])
    fit = exact_fit(where, values, [parameters[j] for j in others], space)
    if fit is None:
        return None
    # the exact fit keeps its constant; where the coefficient has none (n^3 / p), drop it
    sizes = np.abs(fit.coefficients) * np.max(
        np.abs(
            np.stack([_evaluate(o, where, [parameters[j] for j in others]) for o in fit.shapes])
        ),
        axis=1,
    )
    kept = sizes > RELATIVE_TOLERANCE * np.max(np.abs(values))
    shapes = tuple(
        tuple(sorted((*shape, *other)))
        for other, keep in zip(fit.shapes, kept, strict=True)
        if keep
    )
    return shapes, np.asarray(fit.coefficients, dtype=float)[kept]
