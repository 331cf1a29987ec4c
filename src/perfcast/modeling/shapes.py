"""Stage 0 of the search of one group of call paths, per parameter: whether it enters each
call path's model (enough distinct values, an effect beyond the noise, not flat), and its
candidate shapes ranked on the lines of the design along it (steps 1 and 2 of
:mod:`perfcast.modeling.modeler`'s docstring).

:class:`ShapeRanking` is the job :class:`~perfcast.modeling.search.GroupSearch` starts with;
the structures it then screens and selects (stages A and B) combine the shapes ranked here.
:func:`fit_weights` and :func:`negative_terms` are the modeler's options as both stages
apply them to a fit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import combinations

import numpy as np

from perfcast.modeling import model_warnings
from perfcast.modeling.fitting import constant_rss, relative_weights, screen_shared_basis
from perfcast.modeling.lines import batched_lines, lines_along
from perfcast.modeling.modeler_options import ModelerOptions
from perfcast.modeling.noise import parameter_p_values
from perfcast.modeling.pmnf import Factor
from perfcast.modeling.repetitions import CallPathGroup
from perfcast.modeling.space import falling_factors, steeper_factors

FLAT_EFFECT = 0.01
"""Least relative change (1 %) of the values along some line of the design for a parameter
to enter the model of a call path measured once per point (:meth:`ShapeRanking._flat`)."""

CLEAR_CHANGE = 0.1
"""Least relative change (10 %) along a line that counts as falling or rising there."""

STEEP_RESIDUAL = 0.05
"""Steeper shapes than the space's are offered only where its steepest shape leaves at most
this share of the lines' variation around their means: a clear steep curve, not noise
that a high power happens to follow."""

LINE_BLOCK = 200_000
"""Elements (rows x shapes x points) of the per-line search processed at once."""


def fit_weights(options: ModelerOptions, y: np.ndarray) -> np.ndarray | None:
    """The weights of the values ``y`` in a fit: relative (``weighting="relative"``) or none."""
    return relative_weights(y) if options.weighting == "relative" else None


def negative_terms(options: ModelerOptions, coefficients: np.ndarray) -> np.ndarray:
    """Fits rejected by ``positive_terms``: a negative term coefficient (not the constant)."""
    if not options.positive_terms:
        return np.zeros(coefficients.shape[:-1], dtype=bool)
    return np.asarray((coefficients[..., 1:] < 0).any(axis=-1))


class ShapeRanking:
    """Stage 0 for one group of call paths: the parameters each call path's model may use
    and, per parameter, its candidate shapes ranked per call path.

    Attributes (filled by :meth:`rows_by_active`; all but the last per parameter name):
        shapes: the candidate shapes, each ``terms`` factors.
        basis: the shapes evaluated at the group's points, (n_shapes, terms, n).
        ranked: per call path the indices of its ``candidates`` best shapes, then the
            (falling, rising) pair of :meth:`_rank_pairs`, (K, candidates + 2).
        kept: how many ranked shapes precede the pair.
        mixed: (K,) call paths that fall along some lines and rise along others.
        dropped_by_noise: per call path (row), the parameters left out as within the noise.
    """

    def __init__(self, options: ModelerOptions, group: CallPathGroup, parameters: Sequence[str]):
        self.options = options
        self.group = group
        self.parameters = list(parameters)
        self.y = group.values
        self.coords = {name: group.coordinates[:, j] for j, name in enumerate(parameters)}
        self.shapes: dict[str, list[tuple[Factor, ...]]] = {}
        self.basis: dict[str, np.ndarray] = {}  # name -> (n_shapes, terms, n)
        self.ranked: dict[str, np.ndarray] = {}  # name -> (K, candidates) shape indices
        self.dropped_by_noise: dict[int, list[str]] = {}  # row -> parameters within the noise
        self.kept: dict[str, int] = {}  # name -> candidate shapes ranked (before the pair)
        self.mixed: dict[str, np.ndarray] = {}  # name -> (K,) falls on some lines, rises on others

    def rows_by_active(self) -> dict[tuple[str, ...], list[int]]:
        """The group's call paths (rows) by the parameters that enter their models, each
        of those parameters' shapes ranked."""
        usable = [name for name in self.parameters if self._usable(name)]
        significant = self._significant(usable)
        significant &= ~self._flat(usable)
        self.dropped_by_noise = {
            k: [p for j, p in enumerate(usable) if not significant[k, j]]
            for k in range(len(self.group.keys))
        }
        self._warn_few_values(usable)
        for name in usable:
            self._rank_shapes(name)
        by_active: dict[tuple[str, ...], list[int]] = {}
        for k in range(len(self.group.keys)):
            active = tuple(p for j, p in enumerate(usable) if significant[k, j])
            by_active.setdefault(active, []).append(k)
        return by_active

    def _warn_few_values(self, usable: list[str]) -> None:
        """One warning per call path for all parameters measured at fewer than
        :data:`~perfcast.modeling.advice.RECOMMENDED_VALUES` values
        (:func:`~perfcast.modeling.model_warnings.few_values`)."""
        note = model_warnings.few_values({name: np.unique(self.coords[name]) for name in usable})
        if note:
            for notes in self.group.warnings:
                notes.append(note)

    def _usable(self, name: str) -> bool:
        prior = self.group.prior
        if prior is not None and not prior.allows_parameter(name):
            return False
        distinct = len(np.unique(self.coords[name]))
        if distinct >= self.options.min_points:
            return True
        for notes in self.group.warnings:
            notes.append(model_warnings.too_few_distinct(name, distinct))
        return False

    def _significant(self, usable: list[str]) -> np.ndarray:
        """(K, len(usable)): parameters whose effect exceeds the noise (untestable = yes)."""
        mask = np.ones((len(self.group.keys), len(usable)), dtype=bool)
        if not self.options.significance or not usable:  # 0 or None: no test
            return mask
        columns = [self.parameters.index(name) for name in usable]
        cells = self.group.grid.along(columns)
        return mask & ~(parameter_p_values(cells) >= self.options.significance)

    def _flat(self, usable: list[str]) -> np.ndarray:
        """(K, len(usable)): for call paths measured once per point, parameters along which
        no line of the design changes the values by :data:`FLAT_EFFECT` of their mean.
        With repetitions the noise test compares an effect with the data's own scatter;
        with one there is no scatter to compare with, and ``p^3`` fitted to values that
        vary by 0.5 % along ``p`` (one repetition of a virtual campaign) grows a
        thousandfold by ``p = 4096``. A term that explains less than that is not a
        dependency: such a parameter is left out, with a warning naming it."""
        flat = np.zeros((len(self.group.keys), len(usable)), dtype=bool)
        once = self.group.grid.counts.max(axis=1) <= 1
        if not once.any():
            return flat
        for j, name in enumerate(usable):
            index = self.parameters.index(name)
            largest = np.zeros(len(self.group.keys))
            for members in lines_along(self.group.coordinates, index):
                if len(members) < 2:
                    continue
                values = self.y[:, members]
                scale = np.abs(values).mean(axis=1)
                change = np.ptp(values, axis=1) / np.where(scale > 0, scale, 1.0)
                largest = np.maximum(largest, change)
            flat[:, j] = once & (largest < FLAT_EFFECT)
        for k in np.flatnonzero(flat.any(axis=1)):
            names = [p for j, p in enumerate(usable) if flat[k, j]]
            self.group.warnings[k].append(model_warnings.not_a_dependency(names, FLAT_EFFECT))
        return flat

    def _rank_shapes(self, name: str) -> None:
        """Keep the ``candidates`` shapes with the lowest weighted in-sample error summed
        over every line of the design along ``name``.

        In-sample error, not cross-validation: every shape has the same two coefficients
        per line, so no shape gains from extra freedom and the smallest (relative) squared
        error is the maximum-likelihood choice; leave-one-out over five points per line
        only adds variance, and costs an n-length pass per shape that the sufficient
        statistics avoid."""
        m = self.options
        x_all = self.coords[name]
        factors = m.space.factors(name)
        beyond = m.beyond_space and bool(np.all(x_all > 0))
        if beyond:
            if not m.space.has_negative_exponents:
                factors += falling_factors(name, m.space)
            factors += steeper_factors(name, m.space)
        shapes = list(combinations(factors, m.terms))
        top = max(m.space.exponents)
        falling = np.array([any(f.exponent < 0 for f in shape) for shape in shapes])
        steeper = np.array([any(f.exponent > top for f in shape) for shape in shapes])
        steepest = np.array(
            [
                any(f.exponent == top and f.log_exponent == max(m.space.log_exponents) for f in s)
                for s in shapes
            ]
        )
        self.shapes[name] = shapes
        self.basis[name] = np.stack(
            [np.stack([factor.evaluate(x_all) for factor in shape]) for shape in shapes]
        )
        cost = np.zeros((len(self.group.keys), len(shapes)))
        flat_cost = np.zeros(len(self.group.keys))
        falling_lines = np.zeros(len(self.group.keys), dtype=int)
        rising_lines = np.zeros(len(self.group.keys), dtype=int)
        clear = self._clear_change()[:, None]
        for x, values in _lines(
            self.group.coordinates, self.parameters.index(name), self.y, m.min_points
        ):
            change = _relative_changes(x, values)
            falling_lines += (change < -clear).sum(axis=1)
            rising_lines += (change > clear).sum(axis=1)
            design = np.concatenate(
                [np.ones((len(shapes), len(x), 1)), _shape_basis(shapes, x).transpose(0, 2, 1)],
                axis=2,
            )
            # Call paths in cache-sized blocks: the (rows, shapes, terms) temporaries of a
            # block stay in cache across the fit and the cost.
            lines = values.shape[1]
            step = max(1, LINE_BLOCK // (lines * len(shapes) * len(x)))
            for start in range(0, len(self.group.keys), step):
                block = values[start : start + step].reshape(-1, len(x))
                weights = fit_weights(self.options, block)
                fit = screen_shared_basis(design, block, weights)
                # A shape that cannot describe a line (singular, or a negative slope on a
                # flat, noisy line) scores like the constant model there, not as infinitely
                # bad: otherwise one flat line vetoes every shape of a parameter and the
                # ranking degenerates to enumeration order.
                usable = fit.valid & ~negative_terms(self.options, fit.coefficients)
                flat = constant_rss(block, weights)
                flat_cost[start : start + step] += flat.reshape(-1, lines).sum(axis=1)
                line_cost = np.where(usable, fit.rss, flat[:, None])
                cost[start : start + step] += line_cost.reshape(-1, lines, len(shapes)).sum(axis=1)
        # Shapes beyond the space only where the data leave it: falling ones where the metric
        # falls, steeper ones where the space's steepest shape ranks first and fits the
        # lines closely. Other call paths rank exactly the space's shapes.
        # (Negative exponents the user asked for with --exponents stay open to every row.)
        added = falling & (beyond and not m.space.has_negative_exponents)
        cost[np.ix_(falling_lines == 0, added)] = np.inf
        own = np.where(added | steeper, np.inf, cost)
        best = np.argmin(own, axis=1)
        close_fit = own[np.arange(len(best)), best] <= STEEP_RESIDUAL * flat_cost
        cost[np.ix_(~(steepest[best] & close_fit), steeper)] = np.inf
        ranked = np.argsort(cost, axis=1, kind="stable")[:, : m.candidates]
        self.kept[name] = ranked.shape[1]
        mixed = (falling_lines > 0) & (rising_lines > 0) & (m.terms == 1)
        rising = ~falling & ~steeper
        pair = np.repeat(ranked[:, :1], 2, axis=1)
        if mixed.any() and falling.any():
            pair[mixed] = self._rank_pairs(name, np.flatnonzero(mixed), falling, rising)
        self.mixed[name] = mixed
        self.ranked[name] = np.concatenate([ranked, pair], axis=1)

    def _clear_change(self) -> np.ndarray:
        """(K,) relative change along a line that noise does not explain: :data:`CLEAR_CHANGE`
        or four standard deviations of an aggregated point, whichever is larger. Lines that
        change less neither open the falling shapes nor make a call path mixed, so noisy flat
        lines cannot widen (or slow) the search."""
        counts = self.group.grid.counts.mean(axis=1)
        return np.maximum(CLEAR_CHANGE, 4.0 * self.group.noise / np.sqrt(np.maximum(counts, 1)))

    def _rank_pairs(
        self, name: str, rows: np.ndarray, falling: np.ndarray, rising: np.ndarray
    ) -> np.ndarray:
        """(len(rows), 2) shape indices: the falling and the rising shape whose sum (plus a
        constant) fits the lines along ``name`` best, for call paths that fall along some
        lines and rise along others (``c n^2/p + d log2(p)``: the first term dominates at
        large ``n``, the second at small). One shape per line cannot rank such shapes: each
        describes only the lines its term dominates."""
        m = self.options
        down, up = np.flatnonzero(falling), np.flatnonzero(rising)
        pairs = np.array([(f, r) for f in down for r in up])
        cost = np.zeros((len(rows), len(pairs)))
        for x, values in _lines(
            self.group.coordinates, self.parameters.index(name), self.y[rows], m.min_points
        ):
            basis = self._shapes_at(name, x)  # (n_shapes, len(x))
            design = np.stack(
                [np.ones((len(pairs), len(x))), basis[pairs[:, 0]], basis[pairs[:, 1]]], axis=2
            )
            lines = values.shape[1]
            step = max(1, LINE_BLOCK // (lines * len(pairs) * len(x)))
            for start in range(0, len(rows), step):
                block = values[start : start + step].reshape(-1, len(x))
                weights = fit_weights(self.options, block)
                fit = screen_shared_basis(design, block, weights)
                usable = fit.valid & ~negative_terms(self.options, fit.coefficients)
                line_cost = np.where(usable, fit.rss, constant_rss(block, weights)[:, None])
                cost[start : start + step] += line_cost.reshape(-1, lines, len(pairs)).sum(axis=1)
        return pairs[np.argmin(cost, axis=1)]

    def _shapes_at(self, name: str, x: np.ndarray) -> np.ndarray:
        """(n_shapes, len(x)): every single-factor shape of ``name`` evaluated at ``x``."""
        return np.stack([shape[0].evaluate(x) for shape in self.shapes[name]])


def _shape_basis(shapes: Sequence[tuple[Factor, ...]], x: np.ndarray) -> np.ndarray:
    """(n_shapes, terms, len(x))."""
    return np.stack([np.stack([factor.evaluate(x) for factor in shape]) for shape in shapes])


def _lines(
    coordinates: np.ndarray, index: int, values: np.ndarray, min_points: int
) -> Iterable[tuple[np.ndarray, np.ndarray]]:
    """Lines of the design along parameter ``index`` with at least ``min_points`` points,
    batched by identical x-vectors (:func:`~perfcast.modeling.lines.batched_lines`):
    yields (x sorted, values (K, lines, len(x)))."""
    for x, members in batched_lines(coordinates, index, lambda x: len(x) >= min_points):
        yield x, values[:, members]


def _relative_changes(x: np.ndarray, values: np.ndarray) -> np.ndarray:
    """(K, lines) change of each line from its smallest to its largest ``x`` along the
    least-squares line of its values against ``log(x)``, relative to the line's mean
    magnitude: negative where the metric falls along the parameter. Relative, so that lines
    at large and small values of the other parameters count alike."""
    log_x = np.log(np.maximum(x, np.finfo(float).tiny))
    centred = log_x - log_x.mean()
    scale = np.abs(values).mean(axis=2, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = np.where(scale > 0, values / scale, 0.0)
    slope = relative @ centred / max(float(centred @ centred), np.finfo(float).tiny)
    return np.asarray(slope * (log_x.max() - log_x.min()))


__all__ = [
    "CLEAR_CHANGE",
    "FLAT_EFFECT",
    "STEEP_RESIDUAL",
    "ShapeRanking",
    "fit_weights",
    "negative_terms",
]
