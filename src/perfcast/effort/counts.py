"""Exact PMNF models of deterministic counts (basic blocks, MPI bytes).

Why not the time modeler: :class:`~perfcast.modeling.PMNFModeler` searches Extra-P's
hypothesis space, where each parameter has *one* shape shared by every term (``m + 1``
terms). Counts of real code are sums over loop nests of different depths: a kernel with an
``n x n`` loop followed by an ``n x p`` loop executes ``a*n^2 + b*n*p + c*n + d`` blocks, in
which ``n`` has two shapes. The one-shape search cannot express that and settles on a
compromise (``n^2 + p^(3/4) * log2(p)``) whose exponents are wrong, and wrong exponents in
the counts become wrong exponents in every time model fitted under the prior.

Counts carry no noise, so they can be fitted *exactly*, and exactness is what tells the
right model from a near miss: at five points a wrong shape leaves a relative residual of
1e-4 or more, the right one leaves rounding error.

1. **Shapes per parameter.** Along every line of the design that varies only ``x`` (the
   other parameters fixed) the counts are a linear combination of the same few
   ``x``-shapes (the union over all terms) plus a constant. The smallest set of at most
   ``max_shapes`` shapes that fits every line to within ``tolerance`` is chosen (the
   best-fitting set of that size). Lines must have more points than the set has columns,
   so the fit is a test and not an interpolation.
2. **Terms.** Every product of the chosen shapes (each parameter contributing one of its
   shapes or nothing) is fitted on all points; then terms are removed, the least useful
   first, as long as the fit stays within ``tolerance``.

Counts that no such model fits (counts that differ between runs, loop bounds rounded far
from any PMNF function) fall back to the PMNF modeler's best fit, with a warning on the
model, so a prior is still derived but nobody mistakes it for an exact one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations, product

import numpy as np

from perfcast.errors import InputError
from perfcast.experiment.experiment import CALLPATH, METRIC, VALUE, Experiment
from perfcast.modeling.fitting import LEVERAGE_LIMIT, adjusted_r2, smape
from perfcast.modeling.modeler import PMNFModeler
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.pmnf import Factor, FitStatistics, Model, Term
from perfcast.modeling.space import SearchSpace

EXACT_TOLERANCE = 1e-6
"""Largest relative residual (of a point, relative to its own value) that still counts as an
exact fit. Rounding error of the fits is about 1e-12; a wrong shape leaves at least about
1e-4 on five points spanning a factor of three to five, so anything in between separates
them. Counts with integer-rounded loop bounds (``(long)pow(n, 1.5)``) deviate by about
1/count from a PMNF function: pass a larger tolerance for those."""

MAX_SHAPES = 3
"""Most shapes one parameter may have across all terms (``n^2 + n*log2(n) + n`` has three).
Five values per parameter test at most three shapes plus the constant."""

INEXACT_WARNING = "counts are not an exact PMNF function of the parameters"


@dataclass(frozen=True)
class _LineGroup:
    """Lines of the design along one parameter that share their x values."""

    x: np.ndarray  # (L,) sorted
    members: np.ndarray  # (lines, L) point indices


class CountModeler:
    """Exact sparse PMNF fits of noise-free counts (see the module docstring).

    Args:
        space: exponent sets the shapes come from (Extra-P's defaults).
        tolerance: see :data:`EXACT_TOLERANCE`.
        max_shapes: see :data:`MAX_SHAPES`.
        fallback: modeler for counts that have no exact model (default: a
            :class:`PMNFModeler` without the noise test, which has nothing to test here).
        min_points: fewest values of a parameter on a line for that line to be used.
    """

    def __init__(
        self,
        space: SearchSpace | None = None,
        *,
        tolerance: float = EXACT_TOLERANCE,
        max_shapes: int = MAX_SHAPES,
        fallback: PMNFModeler | None = None,
        min_points: int = 3,
    ):
        if not tolerance > 0:
            raise InputError(f"the exact-fit tolerance must be positive, got {tolerance}")
        if max_shapes < 1 or min_points < 2:
            raise InputError("max_shapes must be >= 1 and min_points >= 2")
        self.space = space or SearchSpace()
        self.tolerance = tolerance
        self.max_shapes = max_shapes
        self.fallback = fallback or PMNFModeler(self.space, significance=None)
        self.min_points = min_points
        self._factors: dict[str, list[Factor]] = {}
        self._bases: dict[tuple[str, int, bytes], np.ndarray] = {}

    def fit(self, experiment: Experiment) -> ModelSet:
        """A model per (call path, metric): exact where one exists, else the fallback's."""
        experiment.validate()
        parameters = experiment.parameters
        models = ModelSet(parameters)
        table = experiment.aggregate("median")
        inexact: list[tuple[str, str]] = []
        for (callpath, metric), rows in table.groupby([CALLPATH, METRIC], sort=False):
            coordinates = rows[parameters].to_numpy(dtype=float)
            values = rows[VALUE].to_numpy(dtype=float)
            model = self.exact(str(callpath), str(metric), coordinates, values, parameters)
            if model is None:
                inexact.append((str(callpath), str(metric)))
            else:
                models.add(model)
        if inexact:
            callpaths = sorted({c for c, _ in inexact})
            metrics = sorted({m for _, m in inexact})
            approximate = self.fallback.fit(experiment.restricted(callpaths, metrics))
            for key in inexact:
                model = approximate[key]
                model.warnings.append(
                    f"{INEXACT_WARNING} (tolerance {self.tolerance:g}): best approximate fit"
                )
                models.add(model)
        return models

    # -- one count -------------------------------------------------------------------------

    def exact(
        self,
        callpath: str,
        metric: str,
        coordinates: np.ndarray,
        values: np.ndarray,
        parameters: Sequence[str],
    ) -> Model | None:
        """The exact model of one count, or ``None`` if there is none within tolerance."""
        scale = np.abs(values).max() if len(values) else 0.0
        if scale == 0 or np.ptp(values) <= self.tolerance * scale:
            constant = float(np.median(values)) if len(values) else 0.0
            return self._model(callpath, metric, values, constant, [], [])
        shapes: dict[str, list[Factor]] = {}
        for index, name in enumerate(parameters):
            chosen = self._shapes_of(name, index, coordinates, values)
            if chosen is None:
                return None
            shapes[name] = chosen
        columns = [
            tuple(f for f in picks if f is not None)
            for picks in product(*([None, *shapes[name]] for name in parameters))
        ]
        # The empty product is the constant. Order as the time modeler does: single
        # parameters first, in parameter order, then products.
        columns = sorted(
            (c for c in columns if c),
            key=lambda c: (len(c), [parameters.index(f.parameter) for f in c], c),
        )
        point = {name: coordinates[:, j] for j, name in enumerate(parameters)}
        basis = {c: _evaluate(c, point) for c in columns}
        kept = list(columns)
        error, _ = self._fit(values, [basis[c] for c in kept])
        if error > self.tolerance:
            return None
        while kept:
            trials = [
                (self._fit(values, [basis[c] for c in kept if c != drop])[0], drop) for drop in kept
            ]
            error, drop = min(trials, key=lambda trial: trial[0])
            if error > self.tolerance:
                break
            kept.remove(drop)
        _, coefficients = self._fit(values, [basis[c] for c in kept])
        terms = [
            Term(float(c), tuple(sorted(shape)))
            for c, shape in zip(coefficients[1:], kept, strict=True)
        ]
        return self._model(
            callpath, metric, values, float(coefficients[0]), terms, [basis[c] for c in kept]
        )

    def _shapes_of(
        self, name: str, index: int, coordinates: np.ndarray, values: np.ndarray
    ) -> list[Factor] | None:
        """The smallest set of ``name``'s shapes that fits every line exactly; ``[]`` if the
        count does not vary along ``name``; ``None`` if no set of ``max_shapes`` does."""
        groups = _line_groups(coordinates, index, self.min_points)
        if not groups:
            return []  # too few values to model this parameter: leave it out
        factors = self._factors.setdefault(name, self.space.factors(name))
        largest = min(self.max_shapes, min(len(g.x) for g in groups) - 2)
        for size in range(largest + 1):
            subsets = np.array(list(combinations(range(len(factors)), size)), dtype=int)
            subsets = subsets.reshape(len(subsets), size)
            error = np.zeros(len(subsets))
            for group in groups:
                error = np.maximum(error, self._line_error(name, group, subsets, values))
            best = int(np.argmin(error))
            if error[best] <= self.tolerance:
                return [factors[k] for k in subsets[best]]
        return None

    def _line_error(
        self, name: str, group: _LineGroup, subsets: np.ndarray, values: np.ndarray
    ) -> np.ndarray:
        """Per subset of shapes, the largest relative residual over the group's lines."""
        y = values[group.members].T  # (L, lines)
        q = self._orthonormal_basis(name, group.x, subsets)  # (H, L, size + 1)
        residual = y[None] - q @ (q.transpose(0, 2, 1) @ y[None])  # (H, L, lines)
        scale = np.where(np.abs(y) > 0, np.abs(y), np.abs(y).max(axis=0, keepdims=True))
        scale = np.where(scale > 0, scale, 1.0)
        return np.abs(residual / scale[None]).max(axis=(1, 2))

    def _orthonormal_basis(self, name: str, x: np.ndarray, subsets: np.ndarray) -> np.ndarray:
        """Q of the QR factorisation of [1, shapes] at ``x``, per subset (cached: every call
        path measured at the same values shares them)."""
        key = (name, subsets.shape[1], x.tobytes())
        if key not in self._bases:
            factors = self._factors[name]
            shapes = np.stack([f.evaluate(x) for f in factors])  # (S, L)
            shapes = shapes / np.abs(shapes).max(axis=1, keepdims=True)
            design = np.concatenate(
                [np.ones((len(subsets), len(x), 1)), shapes[subsets].transpose(0, 2, 1)], axis=2
            )
            self._bases[key] = np.linalg.qr(design)[0]
        return self._bases[key]

    def _fit(self, values: np.ndarray, columns: list[np.ndarray]) -> tuple[float, np.ndarray]:
        """Relative least squares on [1, columns]: largest relative residual, coefficients."""
        design = np.column_stack([np.ones_like(values), *columns])
        weights = _weights(values)
        scale = np.abs(design).max(axis=0)
        scale = np.where(scale > 0, scale, 1.0)
        solution, *_ = np.linalg.lstsq(design * weights[:, None] / scale, values * weights)
        coefficients = solution / scale
        residual = (values - design @ coefficients) * weights
        return float(np.abs(residual).max()), coefficients

    def _model(
        self,
        callpath: str,
        metric: str,
        values: np.ndarray,
        constant: float,
        terms: list[Term],
        columns: list[np.ndarray],
    ) -> Model:
        prediction = constant + sum(
            (t.coefficient * c for t, c in zip(terms, columns, strict=True)),
            np.zeros_like(values),
        )
        residual = values - prediction
        if columns:
            leverage = np.minimum(_leverage(values, columns), LEVERAGE_LIMIT)
            held_out = values - residual / (1.0 - leverage)
        else:
            held_out = prediction
        return Model(
            callpath,
            metric,
            constant,
            tuple(terms),
            statistics=FitStatistics(
                rss=float(np.square(residual).sum()),
                smape=float(smape(values, prediction)),
                adjusted_r2=adjusted_r2(values, prediction, len(terms) + 1),
                cv_error=float(smape(values, held_out)),
                points=len(values),
            ),
        )


def _evaluate(shape: tuple[Factor, ...], point: dict[str, np.ndarray]) -> np.ndarray:
    out = np.ones(len(next(iter(point.values()))))
    for factor in shape:
        out = out * factor.evaluate(point[factor.parameter])
    return out


def _weights(values: np.ndarray) -> np.ndarray:
    """1/|y|, with zero counts weighted like the largest count (they must fit, too)."""
    magnitude = np.abs(values)
    largest = magnitude.max()
    return 1.0 / np.where(magnitude > 0, magnitude, largest if largest > 0 else 1.0)


def _leverage(values: np.ndarray, columns: list[np.ndarray]) -> np.ndarray:
    design = np.column_stack([np.ones_like(values), *columns]) * _weights(values)[:, None]
    q = np.linalg.qr(design / np.abs(design).max(axis=0))[0]
    return np.square(q).sum(axis=1)


def _line_groups(coordinates: np.ndarray, index: int, min_points: int) -> list[_LineGroup]:
    """Lines along parameter ``index`` with at least ``min_points`` distinct values, batched
    by identical x vectors."""
    others = np.delete(coordinates, index, axis=1)
    _, line_of = np.unique(others, axis=0, return_inverse=True)
    line_of = line_of.reshape(-1)
    batches: dict[bytes, tuple[np.ndarray, list[np.ndarray]]] = {}
    for line in np.unique(line_of):
        members = np.flatnonzero(line_of == line)
        members = members[np.argsort(coordinates[members, index], kind="stable")]
        x = coordinates[members, index]
        if len(np.unique(x)) < min_points or len(np.unique(x)) != len(x):
            continue
        batches.setdefault(x.tobytes(), (x, []))[1].append(members)
    return [_LineGroup(x, np.stack(lines)) for x, lines in batches.values()]
