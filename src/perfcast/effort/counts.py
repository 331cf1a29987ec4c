"""PMNF models of deterministic counts (basic blocks, MPI bytes).

Why not the time modeler: :class:`~perfcast.modeling.PMNFModeler` searches Extra-P's
hypothesis space, where each parameter has *one* shape shared by every term. Counts of real
code are sums over loop nests of different depths: a kernel with an ``n x n`` loop followed
by a ``p x n`` loop executes ``a*n^2 + b*p*n + c``, in which ``n`` has two shapes, and a
kernel with a ``p^3`` loop and a ``p^(3/4) * n^(5/2)`` nest gives ``p`` two shapes. The
one-shape search cannot express either and settles on a compromise whose exponents are
wrong (``p^(9/4) * log2(p)`` for ``p^3``), and wrong exponents in the counts become wrong
exponents in every time model fitted under the prior.

The count search lets every term choose its own shapes:

1. **Candidate shapes per parameter.** Along every line of the design that varies only
   ``x`` (the other parameters fixed), the counts are a combination of the same few
   ``x``-shapes (the union over the terms) plus a constant. Every single shape and every
   pair of shapes is fitted on all those lines at once; the shapes of the best singles and
   pairs are the candidates of ``x`` (as many as keep the product dictionary below
   :data:`MAX_COLUMNS`).
2. **Terms.** A dictionary of product terms, one candidate (or nothing) per parameter, is
   searched for the best model of one term (all of them) and of two terms (every pair
   screened by its in-sample fit, the best :data:`SCREEN_KEEP` validated); models of more
   terms grow from the :data:`BEAM` best of the previous size, up to ``max_terms``. Models
   are ranked by leave-one-out error, as in the time modeler; a model with more terms must
   cut that error by :data:`TERM_GAIN`, and none is grown once it is exact up to the
   rounding of integer trip counts (:data:`ROUNDING_SMAPE`), so rounding is not fitted with
   extra terms (``llround(32 * p^(1/3))`` iterations deviate from ``32 * p^(1/3)`` by up to
   1/64). Term coefficients must be positive: counts are sums of work that happens.

Exact counts get exact models (the selection cost is floored at rounding error, so the
simplest exact model wins). Counts that no model fits closely (data-dependent control
flow, coarse rounding) keep their best model and a warning, so a prior is still derived but
nobody mistakes it for an exact one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, replace
from functools import cache
from itertools import combinations, product

import numpy as np

from perfcast.effort.exact import ExactFit, LeadFit, exact_fit, lead_along_lines
from perfcast.experiment.experiment import CALLPATH, METRIC, VALUE, Experiment
from perfcast.modeling.blas import serial_blas
from perfcast.modeling.fitting import (
    adjusted_r2,
    fit_subsets,
    relative_weights,
    selection_cost,
    smape,
)
from perfcast.modeling.lines import batched_lines, lines_along
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.options import Estimator, document_options, option
from perfcast.modeling.pmnf import Factor, FitStatistics, Model, Term
from perfcast.modeling.search import SHAPE_WEIGHT
from perfcast.modeling.space import SearchSpace, falling_factors, steeper_factors

MAX_TERMS = 3
"""Most product terms of a count model besides the constant: two loop nests of different
shapes plus one lower-order term (loop overhead) that is still visible."""

MAX_COLUMNS = 1000
"""Upper bound on the product-term dictionary (about 30 candidate shapes per parameter for
two parameters): every pair of its terms is screened, half a million small regressions."""

SCREEN_KEEP = 200
"""Pairs of terms with the best in-sample fit that are validated by leave-one-out."""

BEAM = 10
"""Models of each size that are grown by one more term (a greedy search from the single
best model would miss ``a*n*log2(n)*p + b*n^(3/2) + c*n*p`` when its best pair is not part
of it)."""

TERM_GAIN = 10.0
"""A model with one more term is preferred only if its leave-one-out error is this many
times smaller: a real term of the count cuts the error by orders of magnitude, a term that
only bends towards the rounding of trip counts by a small factor (with five points per
parameter, a factor of 4 still let ``p^(2/3) * log2(p)^2 + p^(7/3) * log2(p)^2`` replace
the true ``p^3`` of a rounded message size; 10 recovers more generated kernels' exponents
than 4 or 30)."""

ROUNDING_SMAPE = 0.01
"""Leave-one-out SMAPE (percent) below which a count model is exact up to the rounding of
integer trip counts (0.5 in 5000 iterations); further terms would only fit that rounding."""

INEXACT_SMAPE = 1.0
"""Counts whose best model misses them by more than this SMAPE (percent) get a warning."""

INEXACT_WARNING = "counts are not close to a PMNF function of the parameters"

NO_EXACT_WARNING = "no exact model of these counts"
"""The start of the warning on a count model found by the approximate search: counts are
deterministic, so a model that does not reproduce them is a compromise whose exponents may
be off (:mod:`perfcast.effort.exact` says what was tried)."""

LEAD_ONLY_WARNING = "exact lead term"
"""The start of the warning on a count model whose lead term is exact along every line of
the design while its lower-order terms are fitted approximately
(:func:`perfcast.effort.exact.lead_along_lines`)."""

COUNT_SHAPE_TOLERANCE = 0.5
"""Models of inexact counts whose leave-one-out error exceeds the best one's by less than
this fraction count as alike, and the one with integer exponents and fewer logarithms is
chosen. Counts that no PMNF reproduces (CoMD's link cells: the number of boxes is a cube
of ``floor(n * lattice / cutoff)``) miss every model by a few percent, and within that
misfit a fractional shape follows the rounding a little better than the code's ``n^3 / p``:
LOO SMAPE 5.03 against 5.16 % (zeroReal3), 6.50 against 7.58 % (sortAtomsById), 4.34
against 5.79 % (ljForce, a ratio of 1.34) for ``n^(11/4)`` shapes. With 15 points a SMAPE's
relative standard error is about 0.2, so these are within two or three of it. The count's
shape becomes every time model's lead term. The time modeler's ``shape_tolerance`` makes
the same choice in units of the repetitions' noise, which counts do not have."""

CRITERION = "smape"

SCREEN_CHUNK = 16384
"""Pairs screened per vectorised step: small enough that the step's temporaries stay in
the CPU cache (a third faster than one step over half a million pairs), large enough that
the Python overhead per step is negligible."""

CONDITION = 1e-12
"""Determinant of a screened (unit-column) normal matrix below which a pair is degenerate
(two shapes that are one column at the measured points), and the relative norm below which
a column is the constant."""


@dataclass(frozen=True)
class _LineGroup:
    """Lines of the design along one parameter that share their x values."""

    x: np.ndarray  # (L,) sorted
    members: np.ndarray  # (lines, L) point indices


@dataclass
class _Choice:
    columns: tuple[int, ...]  # dictionary indices (0 = the constant)
    cost: float
    coefficients: np.ndarray
    prediction: np.ndarray
    loo: np.ndarray


@document_options
@dataclass(eq=False)
class CountModeler(Estimator):
    """Models of noise-free counts with independent shapes per term (module docstring).

    A modeler in the sense of :mod:`perfcast.modeling` (options below, checked when given);
    ``fit(experiment)`` takes no priors: counts are what priors are made from.
    """

    space: SearchSpace = option(  # noqa: RUF009 (option() is a field specifier)
        default_factory=SearchSpace,
        doc="exponent sets the shapes come from (Extra-P's defaults).",
    )
    _: KW_ONLY
    max_terms: int = option(MAX_TERMS, minimum=1, doc="see :data:`MAX_TERMS`.")
    term_gain: float = option(TERM_GAIN, minimum=1, doc="see :data:`TERM_GAIN`.")
    max_columns: int = option(MAX_COLUMNS, minimum=2, doc="see :data:`MAX_COLUMNS`.")
    min_points: int = option(
        3,
        minimum=2,
        doc="fewest values of a parameter on a line for that line to be used, and for the "
        "parameter to be modeled at all.",
    )

    @serial_blas
    def fit(self, experiment: Experiment) -> ModelSet:
        """A model per (call path, metric) of ``experiment`` (repetitions: their median)."""
        experiment.validate()
        parameters = experiment.parameters
        models = ModelSet(parameters)
        table = experiment.aggregate("median")
        for (callpath, metric), rows in table.groupby([CALLPATH, METRIC], sort=False):
            coordinates = rows[parameters].to_numpy(dtype=float)
            values = rows[VALUE].to_numpy(dtype=float)
            models.add(self.model(str(callpath), str(metric), coordinates, values, parameters))
        return models

    # -- one count -------------------------------------------------------------------------

    def model(
        self,
        callpath: str,
        metric: str,
        coordinates: np.ndarray,
        values: np.ndarray,
        parameters: Sequence[str],
    ) -> Model:
        """The model of one count measured at ``coordinates`` (points x parameters)."""
        modeled = [
            name
            for j, name in enumerate(parameters)
            if len(np.unique(coordinates[:, j])) >= self.min_points
            and _varies(coordinates, j, values)
        ]
        if not modeled:
            return self._constant(callpath, metric, values)
        # Points that differ only in parameters the count does not depend on are one point:
        # left as copies, they would let leave-one-out validate a fit on its own data.
        columns = [parameters.index(name) for name in modeled]
        coordinates, inverse = np.unique(coordinates[:, columns], axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        values = np.array([np.median(values[inverse == k]) for k in range(len(coordinates))])
        exact = exact_fit(coordinates, values, modeled, self.space)
        if exact is not None:
            return self._exact_model(callpath, metric, values, exact, parameters)
        lead = lead_along_lines(coordinates, values, modeled, self.space, self.min_points)
        if lead is not None:
            return self._lead_model(callpath, metric, values, lead, parameters)
        per_parameter = max(1, int(self.max_columns ** (1 / len(modeled))) - 1)
        candidates = {
            name: self._candidates(name, modeled.index(name), coordinates, values, per_parameter)
            for name in modeled
        }
        shapes = [
            tuple(f for f in picks if f is not None)
            for picks in product(*([None, *candidates[name]] for name in modeled))
        ]
        shapes = [s for s in shapes if s]
        dictionary = _products(
            [
                [f.evaluate(coordinates[:, j]) for f in candidates[name]]
                for j, name in enumerate(modeled)
            ],
            len(values),
        )
        unusual = np.array([0, *(_unusual(shape) for shape in shapes)])
        best = self._search(dictionary, values, unusual)
        if best is None:
            return self._constant(callpath, metric, values)
        terms = tuple(
            Term(float(c), tuple(sorted(shapes[k - 1])))
            for c, k in sorted(
                zip(best.coefficients[1:], best.columns[1:], strict=True),
                key=lambda pair: _order(shapes[pair[1] - 1], parameters),
            )
        )
        model = self._model(callpath, metric, values, float(best.coefficients[0]), terms, best)
        worst = float(np.max(np.abs(values - best.prediction) / np.maximum(np.abs(values), 1e-300)))
        return replace(
            model,
            warnings=(
                *model.warnings,
                f"{NO_EXACT_WARNING}: no sum of terms with integer, logarithmic or the search "
                f"space's exponents reproduces every value (the closest misses one by "
                f"{worst:.2g} of it; data-dependent control flow or rounded trip counts); "
                + (
                    f"{INEXACT_WARNING}: the best model misses them by "
                    f"{model.statistics.smape:.2g} % (SMAPE); its exponents may be off"
                    if model.statistics.smape > INEXACT_SMAPE
                    else "the approximate model is close"
                ),
            ),
        )

    def _exact_model(
        self,
        callpath: str,
        metric: str,
        values: np.ndarray,
        exact: ExactFit | LeadFit,
        parameters: Sequence[str],
    ) -> Model:
        """The model of an exact fit: its constant and its terms in the modeler's order."""
        constant = 0.0
        terms: list[Term] = []
        for shape, coefficient in zip(exact.shapes, exact.coefficients, strict=True):
            if shape:
                terms.append(Term(float(coefficient), tuple(sorted(shape))))
            else:
                constant = float(coefficient)
        terms.sort(key=lambda term: _order(term.factors, parameters))
        choice = _Choice((), 0.0, exact.coefficients, exact.prediction, exact.prediction)
        return self._model(callpath, metric, values, constant, tuple(terms), choice)

    def _lead_model(
        self,
        callpath: str,
        metric: str,
        values: np.ndarray,
        lead: LeadFit,
        parameters: Sequence[str],
    ) -> Model:
        """An exact lead term with approximate lower-order terms, and a warning that says
        which part is exact."""
        model = self._exact_model(callpath, metric, values, lead, parameters)
        shown = " + ".join(
            f"{c:.6g} * {' * '.join(f.text() for f in sorted(shape))}"
            for shape, c in zip(lead.shapes[: lead.leads], lead.coefficients, strict=False)
        )
        return replace(
            model,
            warnings=(
                f"{LEAD_ONLY_WARNING}: along {lead.parameter} every one of the {lead.lines} "
                f"lines is exact with the lead term {shown} (the same on every line, or an "
                "exact function of the other parameters), but the lower-order coefficients "
                "change between the lines in no form the search expresses (boundary terms, "
                "such as a grid's faces that shrink as ranks gain neighbours); they are "
                "fitted approximately (SMAPE "
                f"{model.statistics.smape:.2g} %)",
            ),
        )

    def _search(
        self, dictionary: np.ndarray, values: np.ndarray, unusual: np.ndarray
    ) -> _Choice | None:
        """Best model of one and two terms (every pair screened, the best validated), then
        models of more terms grown from the best few of the previous size, while each step
        pays (:data:`TERM_GAIN`) and the model is not yet exact up to rounding
        (:data:`ROUNDING_SMAPE`). ``unusual`` (per dictionary column) scores how unusual a
        column's shapes are: among models of one size that miss the counts alike
        (:data:`COUNT_SHAPE_TOLERANCE`), the most usual is chosen."""
        columns = dictionary.shape[1] - 1
        best: _Choice | None = None
        best_cost = np.inf
        beam: list[_Choice] = []
        for size in range(1, min(self.max_terms, columns) + 1):
            if best_cost <= ROUNDING_SMAPE:
                break
            if size == 1:
                subsets = np.array([(0, k) for k in range(1, columns + 1)])
            elif size == 2:
                subsets = _screen_pairs(dictionary, values, SCREEN_KEEP)
            else:
                grown = {
                    tuple(sorted((*choice.columns, k)))
                    for choice in beam
                    for k in range(1, columns + 1)
                    if k not in choice.columns
                }
                subsets = np.array(sorted(grown))
            ranked = self._ranked(dictionary, values, subsets) if len(subsets) else []
            if not ranked or not ranked[0].cost * self.term_gain < best_cost:
                break
            best, best_cost = _most_usual(ranked, unusual), ranked[0].cost
            beam = ranked[:BEAM]
        return best

    def _ranked(
        self, dictionary: np.ndarray, values: np.ndarray, subsets: np.ndarray
    ) -> list[_Choice]:
        """The :data:`BEAM` best valid models among ``subsets``, best first, and any further
        ones within :data:`COUNT_SHAPE_TOLERANCE` of the best (:func:`_most_usual`'s choice)."""
        fit = fit_subsets(dictionary[None], values[None], relative_weights(values)[None], subsets)
        cost = selection_cost(CRITERION, values[None, None, :], fit.loo_predictions)[0]
        bad = ~fit.valid[0] | ~np.isfinite(cost) | (fit.coefficients[0, :, 1:] <= 0).any(axis=1)
        cost = np.where(bad, np.inf, cost)
        return [
            _Choice(
                tuple(int(k) for k in subsets[h]),
                float(cost[h]),
                fit.coefficients[0, h],
                fit.predictions[0, h],
                fit.loo_predictions[0, h],
            )
            for rank, h in enumerate(np.argsort(cost, kind="stable"))
            if np.isfinite(cost[h])
            and (rank < BEAM or cost[h] <= np.min(cost) * (1 + COUNT_SHAPE_TOLERANCE))
        ]

    def _candidates(
        self, name: str, index: int, coordinates: np.ndarray, values: np.ndarray, limit: int
    ) -> list[Factor]:
        """``limit`` shapes of ``name``: half from the best single shapes on every line, the
        rest from the best pairs (a parameter with two shapes in different terms)."""
        factors = self.space.factors(name)
        if _falls(coordinates, index, values) and not self.space.has_negative_exponents:
            # Counts per rank of strong scaling fall with p: the space's shapes all rise,
            # so without ``p^-1`` the search would drop p or bend n's shape towards it.
            factors = factors + falling_factors(name, self.space)
        groups = _line_groups(coordinates, index, self.min_points)
        if not groups:
            return factors[:limit]
        if self._rises_past_space(factors, groups, values):
            # miniFE's CG: about 3.3 nx iterations, each over nx^3 / p rows
            factors = factors + steeper_factors(name, self.space)
        first = {factor: k for k, factor in reversed(list(enumerate(factors)))}
        same = np.array([first[factor] for factor in factors])  # equal factors: one index
        ranked: list[Factor] = []
        seen: set[int] = set()
        for size, quota in ((1, (limit + 1) // 2), (2, limit)):
            if any(len(g.x) < size + 2 for g in groups):
                quota = limit  # a line must have more points than columns to test a fit
                break
            subsets = np.array(list(combinations(range(len(factors)), size)))
            error = sum(_line_error(factors, g, subsets, values) for g in groups)
            for k in np.argsort(error, kind="stable"):
                for s in same[subsets[k]].tolist():
                    if s not in seen:
                        seen.add(s)
                        ranked.append(factors[s])
                if len(ranked) >= quota:
                    break
        return ranked[:limit]

    def _rises_past_space(
        self, factors: list[Factor], groups: list[_LineGroup], values: np.ndarray
    ) -> bool:
        """Is the space's steepest shape (largest exponent and logarithm) the best single
        shape of the count along every group of lines? Then the count may rise faster
        than the space reaches, and :func:`~perfcast.modeling.space.steeper_factors`
        become candidates too (the time modeler's rule)."""
        top = (max(self.space.exponents), max(self.space.log_exponents))
        singles = np.arange(len(factors))[:, None]
        for group in groups:
            if len(group.x) < 3:
                return False
            best = factors[int(np.argmin(_line_error(factors, group, singles, values)))]
            if (best.exponent, best.log_exponent) != top:
                return False
        return True

    def _constant(self, callpath: str, metric: str, values: np.ndarray) -> Model:
        constant = float(np.median(values)) if len(values) else 0.0
        prediction = np.full_like(values, constant)
        choice = _Choice((0,), 0.0, np.array([constant]), prediction, prediction)
        return self._model(callpath, metric, values, constant, (), choice)

    def _model(
        self,
        callpath: str,
        metric: str,
        values: np.ndarray,
        constant: float,
        terms: tuple[Term, ...],
        choice: _Choice,
    ) -> Model:
        return Model(
            callpath,
            metric,
            constant,
            terms,
            statistics=FitStatistics(
                rss=float(np.square(values - choice.prediction).sum()),
                smape=float(smape(values, choice.prediction)),
                adjusted_r2=adjusted_r2(values, choice.prediction, len(terms) + 1),
                cv_error=float(smape(values, choice.loo)),
                points=len(values),
            ),
        )


def _screen_pairs(dictionary: np.ndarray, values: np.ndarray, keep: int) -> np.ndarray:
    """The ``keep`` pairs of terms (with the constant) with the smallest weighted in-sample
    residual and positive coefficients, as subsets ``(0, i, j)`` of the dictionary.

    With every column made orthogonal to the (weighted) constant, a pair's fit is a 2x2
    system whose entries come from the dictionary's Gram matrix, so all pairs are solved
    in closed form at once; only the best are validated by leave-one-out."""
    weights = relative_weights(values)
    columns = dictionary[:, 1:] * weights[:, None]
    target = values * weights
    unit = weights / np.sqrt(weights @ weights)
    columns = columns - np.outer(unit, unit @ columns)
    target = target - unit * (unit @ target)
    norm = np.sqrt(np.square(columns).sum(axis=0))
    usable = norm > CONDITION * np.sqrt(np.square(dictionary[:, 1:] * weights[:, None]).sum(0))
    columns = columns / np.where(usable, norm, 1.0)
    gram = columns.T @ columns
    rhs = columns.T @ target
    diagonal, flat = np.diagonal(gram), gram.reshape(-1)
    i, j = _pairs(len(rhs))
    kept: list[np.ndarray] = [np.empty(0, dtype=int)]
    explained: list[np.ndarray] = [np.empty(0)]
    # Chunks of pairs keep the temporaries in cache; the coefficients' signs are the
    # numerators' (the determinant of a kept pair is positive), so only kept pairs divide.
    for start in range(0, len(i), SCREEN_CHUNK):
        stop = start + SCREEN_CHUNK
        ci, cj = i[start:stop], j[start:stop]
        gii, gjj, gij = diagonal[ci], diagonal[cj], flat[ci * len(rhs) + cj]
        ri, rj = rhs[ci], rhs[cj]
        with np.errstate(invalid="ignore"):
            det = gii * gjj - gij * gij
            ni = gjj * ri - gij * rj
            nj = gii * rj - gij * ri
        ok = (det > CONDITION) & (ni > 0) & (nj > 0) & usable[ci] & usable[cj]
        ok = np.flatnonzero(ok)
        kept.append(ok + start)
        explained.append(ni[ok] / det[ok] * ri[ok] + nj[ok] / det[ok] * rj[ok])
    pairs = np.concatenate(kept)
    order = pairs[_smallest(-np.concatenate(explained), keep)]
    return np.column_stack([np.zeros(len(order), dtype=int), i[order] + 1, j[order] + 1])


@cache
def _pairs(size: int) -> tuple[np.ndarray, np.ndarray]:
    """Both indices of every pair ``i < j`` of ``size`` columns (row-major), reused across
    call paths: building them costs as much as screening the pairs."""
    i, j = np.triu_indices(size, k=1)
    i.flags.writeable = j.flags.writeable = False
    return i, j


def _smallest(key: np.ndarray, keep: int) -> np.ndarray:
    """Indices of the ``keep`` smallest entries of ``key``, in the order (and with the tie
    breaking) of a stable argsort, without sorting all of them."""
    candidates = np.arange(len(key))
    if len(key) > keep:
        candidates = np.flatnonzero(key <= np.partition(key, keep - 1)[keep - 1])
    return candidates[np.argsort(key[candidates], kind="stable")[:keep]]


def _order(shape: tuple[Factor, ...], parameters: Sequence[str]) -> tuple:
    """The time modeler's term order: single parameters first, in parameter order."""
    return (len(shape), [parameters.index(f.parameter) for f in shape], shape)


def _products(columns: list[list[np.ndarray]], points: int) -> np.ndarray:
    """The dictionary: per combination of one candidate column (or none) per parameter, in
    the order of :func:`itertools.product`, their product; the first (no candidate) is the
    constant. Each candidate is evaluated once, and a missing one multiplies by exactly 1."""
    out = np.ones((1, points))
    for options in columns:
        factors = np.stack([np.ones(points), *options])
        out = (out[:, None, :] * factors[None, :, :]).reshape(-1, points)
    # Row-major like a stack of columns: BLAS sums in another order on other layouts.
    return np.ascontiguousarray(out.T)


def _line_error(
    factors: list[Factor], group: _LineGroup, subsets: np.ndarray, values: np.ndarray
) -> np.ndarray:
    """Per subset of shapes, the summed squared relative residual over the group's lines."""
    basis = np.stack([f.evaluate(group.x) for f in factors])  # (S, L)
    basis = basis / np.abs(basis).max(axis=1, keepdims=True)
    design = np.concatenate(
        [np.ones((len(subsets), len(group.x), 1)), basis[subsets].transpose(0, 2, 1)], axis=2
    )
    q = np.linalg.qr(design)[0]  # (H, L, size + 1)
    y = values[group.members].T  # (L, lines)
    y = y / np.where(np.abs(y).max(axis=0) > 0, np.abs(y).max(axis=0), 1.0)
    residual = y[None] - q @ (q.transpose(0, 2, 1) @ y[None])
    return np.square(residual).sum(axis=(1, 2))


def _varies(coordinates: np.ndarray, index: int, values: np.ndarray) -> bool:
    """Does the count change along parameter ``index`` on any line of the design?"""
    return any(np.ptp(values[members]) > 0 for members in lines_along(coordinates, index))


def _unusual(shape: Sequence[Factor]) -> int:
    """How unusual a product term's shapes are: fractional exponents first, then
    logarithms (the time modeler's ordering, :data:`~perfcast.modeling.search.SHAPE_WEIGHT`)."""
    return sum(
        SHAPE_WEIGHT * (factor.exponent.denominator != 1) + factor.log_exponent for factor in shape
    )


def _most_usual(beam: list[_Choice], unusual: np.ndarray) -> _Choice:
    """The first of ``beam`` (sorted by cost) among those within
    :data:`COUNT_SHAPE_TOLERANCE` of the best whose shapes are the most usual; the best
    itself where it reproduces the counts up to rounding."""
    if beam[0].cost <= ROUNDING_SMAPE:
        return beam[0]
    alike = [c for c in beam if c.cost <= beam[0].cost * (1 + COUNT_SHAPE_TOLERANCE)]
    return min(alike, key=lambda c: int(unusual[list(c.columns)].sum()))


def _falls(coordinates: np.ndarray, index: int, values: np.ndarray) -> bool:
    """Does the count fall along parameter ``index`` on every line of the design that
    varies it (measured at positive values only: falling shapes are negative powers)?"""
    if not np.all(coordinates[:, index] > 0):
        return False
    lines = [m[np.argsort(coordinates[m, index])] for m in lines_along(coordinates, index)]
    lines = [m for m in lines if len(m) > 1]
    return bool(lines) and all(values[m[-1]] < values[m[0]] for m in lines)


def _line_groups(coordinates: np.ndarray, index: int, min_points: int) -> list[_LineGroup]:
    """Lines along parameter ``index`` with at least ``min_points`` distinct values, batched
    by identical x vectors (:func:`~perfcast.modeling.lines.batched_lines`); a line that
    repeats a value is left out."""

    def distinct(x: np.ndarray) -> bool:
        return len(x) >= min_points and len(np.unique(x)) == len(x)

    return [_LineGroup(x, members) for x, members in batched_lines(coordinates, index, distinct)]
