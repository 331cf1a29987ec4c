"""The search for one group of call paths: after stage 0 (the noise test and the shapes
per parameter, :mod:`perfcast.modeling.shapes`), the structures and the selection (the steps
of :mod:`perfcast.modeling.modeler`'s docstring), then each selected model with its
statistics, uncertainty and warnings.

:class:`GroupSearch` works on a :class:`~perfcast.modeling.repetitions.CallPathGroup` (call
paths sharing points and prior) and is configured by the modeler's options
(:class:`~perfcast.modeling.modeler_options.ModelerOptions`), nothing else of the modeler.
All fits are stacked NumPy solves across hypotheses and call paths
(:mod:`perfcast.modeling.fitting`); there is no per-hypothesis Python loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations, permutations, product

import numpy as np

from perfcast.modeling import model_warnings
from perfcast.modeling.fitting import (
    CRITERIA,
    SCREEN_FLOOR,
    adjusted_r2,
    fit_subsets,
    screen_subsets,
    selection_cost,
)
from perfcast.modeling.hypotheses import ColumnKey, Finalists, Hypothesis
from perfcast.modeling.intervals import FitResiduals, RepetitionNoise, fit_uncertainty
from perfcast.modeling.modeler_options import ModelerOptions
from perfcast.modeling.pmnf import Alternative, Factor, FitStatistics, Model, Term, Uncertainty
from perfcast.modeling.repetitions import CallPathGroup
from perfcast.modeling.shapes import ShapeRanking, fit_weights, negative_terms
from perfcast.modeling.space import Family, family_parameters, term_families

PARSIMONY_POOL = 10
"""Best-screened hypotheses per call path among which ``parsimony`` picks the simplest."""

RIVAL_TOLERANCE = 2.0
"""Noise standard errors of the screening score (:meth:`GroupSearch._score_error`) within
which another hypothesis counts as one the measurements cannot tell from the selected
model: it is kept with the model (:class:`~perfcast.modeling.pmnf.Alternative`) and widens
its prediction interval where the two part. Measured with ``python3
benchmarks/prediction_intervals.py --quick --rival-tolerance T``: share of new measurements
(Gaussian noise) inside the 95 % / 80 % interval 8x beyond the measured range, all models,
79.0 / 64.3 % with none kept (T=0), 87.6 / 75.7 % at 1, 90.5 / 79.3 % at 2 and
91.3 / 80.8 % at 3, while inside the range it stays 94.6-95.1 % at 95 %: two is where the
80 % interval holds and more buys little."""

SHAPE_WEIGHT = 1000
"""Weight of a fractional exponent in the shape key of :meth:`GroupSearch._simplicity`,
in logarithms: fractions count before logarithms (no hypothesis has 1000 logarithms)."""


@dataclass(frozen=True)
class _Design:
    """The selected fit's scaled design (:class:`~perfcast.modeling.fitting.BatchFit`):
    what its coefficients' covariance is made of."""

    gram_inverse: np.ndarray  # (t, t)
    scales: np.ndarray  # (t,)
    alternatives: tuple[Alternative, ...] = ()


@dataclass
class _Fits:
    """Fitted hypotheses per (call path, slot): leave-one-out cost (inf: rejected) and what
    a model and its uncertainty are made of."""

    cost: np.ndarray  # (K, width)
    coefficients: np.ndarray  # (K, width, t)
    predictions: np.ndarray  # (K, width, n)
    gram_inverse: np.ndarray  # (K, width, t, t)
    scales: np.ndarray  # (K, width, t)


class GroupSearch:
    """The search for one group of call paths sharing coordinates and prior."""

    def __init__(self, options: ModelerOptions, group: CallPathGroup, parameters: Sequence[str]):
        self.options = options
        self.group = group
        self.parameters = list(parameters)
        self.y = group.values
        self.weights = fit_weights(options, self.y)
        self.ranking = ShapeRanking(options, group, parameters)
        self.noise = RepetitionNoise.of(group.repetitions, self.y, self.weights)
        self._keys: dict[Hypothesis, list[ColumnKey]] = {}  # memo of _column_keys

    def _cost(
        self, y: np.ndarray, loo: np.ndarray, coefficients: np.ndarray, valid: np.ndarray
    ) -> np.ndarray:
        """Cross-validation cost; inf for singular fits and (optionally) negative terms."""
        cost = selection_cost(self.options.criterion, y, loo)
        bad = ~valid | ~np.isfinite(cost) | negative_terms(self.options, coefficients)
        return np.where(bad, np.inf, cost)

    def run(self) -> list[Model]:
        """Stage 0 (:class:`~perfcast.modeling.shapes.ShapeRanking`), then stages A and B
        for each set of call paths whose models may use the same parameters."""
        models: dict[int, Model] = {}
        for active, rows in self.ranking.rows_by_active().items():
            models.update(zip(rows, self._search(np.array(rows), active), strict=True))
        return [models[k] for k in range(len(self.group.keys))]

    # stages A and B ---------------------------------------------------------------------------

    def _search(self, rows: np.ndarray, active: tuple[str, ...]) -> list[Model]:
        m = self.options
        families = term_families(active, m.max_terms or max(1, len(active)), self._products(active))
        stage_a = [Hypothesis(f, tuple((p, 0) for p in family_parameters(f))) for f in families]
        pool = Finalists(len(rows), max(m.finalists, PARSIMONY_POOL if m.parsimony else 1))
        score = self._screen(rows, stage_a)
        pool.offer(np.arange(len(rows)), stage_a, score)
        if m.candidates > 1 and active:
            # Each call path refines only its own best structures, so the work grows with
            # the number of call paths, not with the union of everybody's favourites.
            ranked_families = np.argsort(score, axis=1, kind="stable")[:, : m.refine_structures]
            for rank in range(ranked_families.shape[1]):
                for index in np.unique(ranked_families[:, rank]):
                    members = np.flatnonzero(ranked_families[:, rank] == index)
                    hypotheses = self._refinements(families[int(index)])
                    if hypotheses:
                        pool.offer(members, hypotheses, self._screen(rows[members], hypotheses))
            self._offer_splits(rows, families, pool)
        standard_error = self._score_error(rows)
        if m.parsimony:
            terms, shapes = self._simplicity(rows, pool)
            pool.prefer_simplest(
                terms,
                shapes,
                m.parsimony * standard_error,
                m.shape_tolerance * standard_error,
            )
        rivals = pool.within(RIVAL_TOLERANCE * standard_error)
        return self._select(rows, pool, stage_a[0], active, rivals)

    def _offer_splits(self, rows: np.ndarray, families: list[Family], pool: Finalists) -> None:
        """For call paths that fall along a parameter on some lines and rise on others,
        every family with that parameter in two or more terms, two of them taking the best
        falling and rising pair of shapes
        (:meth:`~perfcast.modeling.shapes.ShapeRanking._rank_pairs`): one shape per
        parameter cannot describe ``c n^2/p + d log2(p)``. Other call paths never see these
        hypotheses, so their search is unchanged."""
        for name in sorted({p for family in families for term in family for p in term}):
            mixed = np.flatnonzero(self.ranking.mixed[name][rows])
            if not len(mixed):
                continue
            down, up = self.ranking.kept[name], self.ranking.kept[name] + 1
            hypotheses = []
            for family in families:
                terms = [index for index, term in enumerate(family) if name in term]
                others = [p for p in family_parameters(family) if p != name]
                each = self._per_parameter(len(others))
                for ranks in product(*(range(min(each, self.ranking.kept[p])) for p in others)):
                    base = ((name, 0), *zip(others, ranks, strict=True))
                    for first, second in permutations(terms, 2):
                        own = ((first, name, down), (second, name, up))
                        hypotheses.append(Hypothesis(family, tuple(sorted(base)), own))
            if hypotheses:
                pool.offer(mixed, hypotheses, self._screen(rows[mixed], hypotheses))

    def _score_error(self, rows: np.ndarray) -> np.ndarray:
        """(K,) the screening-score difference that the noise explains: one standard error
        of the residual sum of squares that pure noise leaves over ``n`` points,
        ``sigma^2 * sqrt(2 n)`` (a chi-square's), with ``sigma^2`` the estimated variance
        of one aggregated point (a repetition's over the number of repetitions) in the
        weighted units of the score. ``parsimony`` and :data:`RIVAL_TOLERANCE` count in it."""
        y = self.y[rows]
        weighted = y if self.weights is None else y * self.weights[rows]
        counts = self.group.grid.counts[rows].mean(axis=1)
        variance = np.square(self.group.noise[rows]) / counts * np.square(weighted).mean(axis=1)
        return variance * np.sqrt(2.0 * y.shape[1])

    def _simplicity(self, rows: np.ndarray, pool: Finalists) -> tuple[np.ndarray, np.ndarray]:
        """(K, pool size) twice: each pooled hypothesis's number of terms, and how unusual
        its shapes are (fractional exponents weigh :data:`SHAPE_WEIGHT` logarithms)."""
        columns = np.array([len(self._column_keys(h)) for h in pool.hypotheses])
        terms = columns[np.maximum(pool.id, 0)]
        shapes = np.zeros_like(terms)
        for r, slot in zip(*np.nonzero(pool.id >= 0), strict=True):
            hypothesis = pool.hypotheses[pool.id[r, slot]]
            factors = [f for term in self._column_factors(hypothesis, int(rows[r])) for f in term]
            fractional = sum(f.exponent.denominator != 1 for f in factors)
            shapes[r, slot] = fractional * SHAPE_WEIGHT + sum(f.log_exponent for f in factors)
        return terms, shapes

    def _per_parameter(self, count: int) -> int:
        """Candidates per parameter that ``count`` parameters can combine within the
        ``combinations`` budget."""
        per_parameter = 1
        while count and (per_parameter + 1) ** count <= self.options.combinations:
            per_parameter += 1
        return per_parameter

    def _refinements(self, family: Family) -> list[Hypothesis]:
        """``family`` with every combination of candidate shapes within the
        ``combinations`` budget, but the best-only one."""
        names = family_parameters(family)
        per_parameter = self._per_parameter(len(names))
        return [
            Hypothesis(family, tuple(zip(names, ranks, strict=True)))
            for ranks in product(
                *(range(min(per_parameter, self.ranking.kept[name])) for name in names)
            )
            if any(ranks)
        ]

    def _screen(self, rows: np.ndarray, hypotheses: list[Hypothesis]) -> np.ndarray:
        """Screening score (K, H) of every hypothesis for the call paths ``rows``: the
        generalised cross-validation error ``RSS / (1 - t/n)^2`` of the in-sample fit, which
        approximates leave-one-out with the average leverage instead of each point's.

        The hypotheses' columns are collected into one dictionary per call path, so each
        distinct product column is computed once however many hypotheses share it."""
        y = self.y[rows]
        n = y.shape[1]
        weights = None if self.weights is None else self.weights[rows]
        keys_of = [self._column_keys(h) for h in hypotheses]
        index: dict[ColumnKey, int] = {}
        for keys in keys_of:
            for key in keys:
                index.setdefault(key, len(index) + 1)  # column 0 is the constant
        columns = np.ones((len(rows), n, len(index) + 1))
        for key, column in index.items():
            for name, slot, q in key:
                columns[:, :, column] *= self.ranking.basis[name][
                    self.ranking.ranked[name][rows, slot], q, :
                ]
        floor = SCREEN_FLOOR * (y * y if weights is None else np.square(y * weights)).sum(axis=1)
        score = np.full((len(rows), len(hypotheses)), np.inf)
        by_width: dict[int, list[int]] = {}
        for h, keys in enumerate(keys_of):
            by_width.setdefault(len(keys) + 1, []).append(h)
        for t, members in by_width.items():
            if t >= n:
                continue  # no residual degree of freedom: nothing to validate on
            subsets = np.array([[0] + [index[k] for k in keys_of[h]] for h in members])
            fit = screen_subsets(columns, y, weights, subsets)
            usable = fit.valid & ~negative_terms(self.options, fit.coefficients)
            gcv = np.maximum(fit.rss, floor[:, None]) / (1.0 - t / n) ** 2
            score[:, members] = np.where(usable, gcv, np.inf)
        return score

    def _select(
        self,
        rows: np.ndarray,
        pool: Finalists,
        constant: Hypothesis,
        active: tuple[str, ...],
        rivals: np.ndarray,
    ) -> list[Model]:
        """Leave-one-out validation of each call path's finalists (and the constant model,
        always); the lowest cost wins, ties going to the hypothesis enumerated first (the
        simpler one), which is what makes exact data pick the simplest exact model.

        ``rivals`` (K, pool size; -1 pads) are the hypotheses each model's uncertainty
        keeps as the alternatives its data cannot tell from it (:meth:`_alternatives`)."""
        ids = pool.finalist_ids(pool.register([constant])[0], self.options.finalists)
        fits = self._fit_ids(rows, ids, pool)
        pick = np.argmin(fits.cost, axis=1)
        chosen = ids[np.arange(len(rows)), pick]
        alternatives = self._alternatives(
            rows, np.where(rivals == chosen[:, None], -1, rivals), pool
        )
        models = []
        for r, row in enumerate(rows):
            factors = self._column_factors(pool.hypotheses[chosen[r]], int(row))
            t = len(factors) + 1
            design = _Design(
                fits.gram_inverse[r, pick[r], :t, :t], fits.scales[r, pick[r], :t], alternatives[r]
            )
            models.append(
                self._model(
                    int(row),
                    factors,
                    fits.coefficients[r, pick[r]],
                    fits.predictions[r, pick[r]],
                    float(fits.cost[r, pick[r]]),
                    active,
                    design,
                )
            )
        return models

    def _fit_ids(self, rows: np.ndarray, ids: np.ndarray, pool: Finalists) -> _Fits:
        """Fit the hypotheses ``ids`` (K, width; -1 pads) of each call path ``rows`` with
        leave-one-out costs, stacked by number of columns."""
        n_rows, width = ids.shape
        n = self.y.shape[1]
        by_width: dict[int, list[tuple[np.ndarray, np.ndarray, list[ColumnKey]]]] = {}
        for h in np.unique(ids[ids >= 0]):
            at_row, at_slot = np.nonzero(ids == h)
            keys = self._column_keys(pool.hypotheses[h])
            by_width.setdefault(len(keys) + 1, []).append((at_row, at_slot, keys))
        widest = max(by_width, default=1)
        fits = _Fits(
            cost=np.full((n_rows, width), np.inf),
            coefficients=np.full((n_rows, width, widest), np.nan),
            predictions=np.full((n_rows, width, n), np.nan),
            gram_inverse=np.full((n_rows, width, widest, widest), np.nan),
            scales=np.full((n_rows, width, widest), np.nan),
        )
        for t, groups in by_width.items():
            at_row = np.concatenate([g[0] for g in groups])
            at_slot = np.concatenate([g[1] for g in groups])
            columns = np.ones((len(at_row), n, t))
            offset = 0
            for members, _, keys in groups:
                block = columns[offset : offset + len(members)]
                for c, key in enumerate(keys):
                    for name, slot, q in key:
                        shape = self.ranking.ranked[name][rows[members], slot]
                        block[:, :, c + 1] *= self.ranking.basis[name][shape, q, :]
                offset += len(members)
            y = self.y[rows[at_row]]
            weights = None if self.weights is None else self.weights[rows[at_row]]
            fit = fit_subsets(columns, y, weights, np.arange(t)[None, :])
            fits.cost[at_row, at_slot] = self._cost(
                y[:, None, :], fit.loo_predictions, fit.coefficients, fit.valid
            )[:, 0]
            fits.coefficients[at_row, at_slot, :t] = fit.coefficients[:, 0]
            fits.predictions[at_row, at_slot] = fit.predictions[:, 0]
            fits.gram_inverse[at_row, at_slot, :t, :t] = fit.gram_inverse[:, 0]
            fits.scales[at_row, at_slot, :t] = fit.scales[:, 0]
        return fits

    def _alternatives(
        self, rows: np.ndarray, rivals: np.ndarray, pool: Finalists
    ) -> list[tuple[Alternative, ...]]:
        """Per call path, its ``rivals`` fitted: the hypotheses whose screening score lies
        within :data:`RIVAL_TOLERANCE` noise standard errors of the best. The selection
        cannot tell them from the model it picked, and beyond the measured range they part
        from it; a prediction interval that assumed the pick right would miss where one of
        them is (``benchmarks/prediction_intervals.py`` measures how often). Fits the
        search rejects (singular, a negative term) are left out."""
        fits = self._fit_ids(rows, rivals, pool)
        out = []
        for r, row in enumerate(rows):
            found = []
            for slot in np.flatnonzero((rivals[r] >= 0) & np.isfinite(fits.cost[r])):
                factors = self._column_factors(pool.hypotheses[rivals[r, slot]], int(row))
                coefficients = fits.coefficients[r, slot]
                terms = tuple(
                    Term(float(coefficients[c + 1]), tuple(sorted(f)))
                    for c, f in enumerate(factors)
                )
                found.append(Alternative(float(coefficients[0]), terms))
            out.append(tuple(found))
        return out

    def _products(self, active: tuple[str, ...]) -> frozenset[frozenset[str]] | None:
        prior = self.group.prior
        if prior is None or prior.multiplicative is None:
            return None
        return frozenset(
            frozenset(s)
            for r in range(1, len(active) + 1)
            for s in combinations(active, r)
            if prior.allows_product(s)
        )

    def _column_keys(self, hypothesis: Hypothesis) -> list[ColumnKey]:
        """Each term's columns: one per choice of a shape term for each of its parameters
        (computed once per hypothesis: selection and alternatives ask for it per call path)."""
        if hypothesis in self._keys:
            return self._keys[hypothesis]
        slots = dict(hypothesis.slots)
        own = {(index, name): rank for index, name, rank in hypothesis.term_slots}
        keys = self._keys[hypothesis] = [
            tuple(
                (name, own.get((index, name), slots[name]), q)
                for name, q in zip(sorted(term), picks, strict=True)
            )
            for index, term in enumerate(hypothesis.family)
            for picks in product(range(self.options.terms), repeat=len(term))
        ]
        return keys

    def _column_factors(self, hypothesis: Hypothesis, row: int) -> list[tuple[Factor, ...]]:
        return [
            tuple(
                self.ranking.shapes[name][self.ranking.ranked[name][row, slot]][q]
                for name, slot, q in key
            )
            for key in self._column_keys(hypothesis)
        ]

    # fixed structure (prior) -----------------------------------------------------------------

    def fixed(self, structure: Sequence[Sequence[Factor]]) -> list[Model]:
        """Fit only the coefficients of a prescribed structure (effort/static priors)."""
        shapes = [tuple(shape) for shape in structure if shape]
        n_rows, n = self.y.shape
        columns = np.ones((n_rows, n, len(shapes) + 1))
        for c, shape in enumerate(shapes):
            columns[:, :, c + 1] = _product(shape, self.ranking.coords)
        fit = fit_subsets(columns, self.y, self.weights, np.arange(len(shapes) + 1)[None, :])
        cost = selection_cost(self.options.criterion, self.y, fit.loo_predictions[:, 0])
        return [
            self._model(
                k,
                shapes,
                fit.coefficients[k, 0],
                fit.predictions[k, 0],
                float(cost[k]),
                (),
                _Design(fit.gram_inverse[k, 0], fit.scales[k, 0]),
            )
            for k in range(n_rows)
        ]

    # results ---------------------------------------------------------------------------------

    def _model(
        self,
        row: int,
        columns: Sequence[tuple[Factor, ...]],
        coefficients: np.ndarray,
        prediction: np.ndarray,
        cv_error: float,
        active: tuple[str, ...],
        design: _Design,
    ) -> Model:
        callpath, metric = self.group.keys[row]
        y = self.y[row]
        warnings = list(self.group.warnings[row])
        terms = tuple(
            Term(float(coefficients[c + 1]), tuple(sorted(factors)))
            for c, factors in enumerate(columns)
        )
        if not terms:
            constant = (
                float(np.median(y)) if self.options.aggregation == "median" else float(y.mean())
            )
            prediction = np.full_like(y, constant)
        else:
            constant = float(coefficients[0])
        ignored = [p for p in self.parameters if p not in active and p in self.ranking.basis]
        if not terms and ignored and self.options.significance and len(active) == 0:
            warnings.append(model_warnings.WITHIN_NOISE)
        prior = self.group.prior
        statistics = FitStatistics(
            rss=float(((y - prediction) ** 2).sum()),
            smape=float(CRITERIA["smape"](y, prediction)),
            adjusted_r2=adjusted_r2(y, prediction, len(terms) + 1),
            cv_error=cv_error,
            points=len(y),
        )
        few = model_warnings.few_repetitions(
            self.group.grid.counts[row], statistics, self.ranking.dropped_by_noise.get(row, [])
        )
        if few:
            warnings.append(few)
        poor = model_warnings.poor_fit(statistics, float(self.group.noise[row]), bool(terms))
        if poor:
            warnings.append(poor)
        return Model(
            callpath=callpath,
            metric=metric,
            constant=constant,
            terms=terms,
            statistics=statistics,
            prior=None if prior is None else prior.describe(),
            warnings=tuple(warnings),
            uncertainty=self._uncertainty(row, prediction, design),
        )

    def _uncertainty(self, row: int, prediction: np.ndarray, design: _Design) -> Uncertainty | None:
        """The selected fit's uncertainty (:mod:`perfcast.modeling.intervals`), from its
        residuals and the repetitions."""
        weights = None if self.weights is None else self.weights[row]
        noise = self.noise
        return fit_uncertainty(
            FitResiduals(
                self.y[row],
                prediction,
                weights,
                float(noise.noise[row]),
                float(noise.dof[row]),
                float(noise.aggregate[row]),
            ),
            design.gram_inverse,
            design.scales,
            design.alternatives,
        )


def _product(factors: Sequence[Factor], coords: Mapping[str, np.ndarray]) -> np.ndarray:
    out = np.ones(len(next(iter(coords.values()))))
    for factor in factors:
        out = out * factor.evaluate(coords[factor.parameter])
    return out
