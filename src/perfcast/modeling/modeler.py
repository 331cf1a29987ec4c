"""The PMNF modeler: hypothesis search with batched fits and cross-validated selection.

How a call path is modeled, and why:

1. **Noise test.** Repetitions estimate the measurement noise; an F-test per parameter
   (:mod:`perfcast.modeling.noise`) drops parameters whose effect is within the noise. A
   call path left with no parameter gets a constant model.
2. **Shapes per parameter.** Every single-parameter shape ``x^i log2(x)^j`` is fitted on
   *every* line of the design that varies that parameter (the others fixed), and its
   weighted in-sample error is summed over the lines. Using all lines rather than one makes
   the choice of exponent far more robust to noise; it is valid for additive and
   multiplicative structures alike because each line gets its own coefficients. The best
   ``candidates`` shapes per parameter are kept, not only the best one. Where the data
   leave the space, the ranking looks beyond it (``beyond_space``): negative exponents for
   a call path that clearly falls along a parameter on some line (strong scaling), larger
   exponents where the space's steepest shape ranks first and fits closely, and for a
   call path that falls on some lines and rises on others the best falling and rising
   pair of shapes, which stage B may put in different terms (``n^2/p + log2(p)``).
3. **Structures.** Term families (which parameters multiply, which add; see
   :mod:`perfcast.modeling.space`) are enumerated over the significant parameters and
   screened on all points with each parameter's best shape; the best ``refine_structures``
   families are then screened with the combinations of the kept candidate shapes (at most
   ``combinations`` per family).
   Screening is an in-sample fit scored by generalised cross-validation (``RSS / (1 -
   t/n)^2``), which needs only the Gram matrix of each call path's column dictionary.
4. **Selection.** Among the hypotheses screened within ``parsimony`` standard errors of the
   noise of the best, the one with the fewest terms goes first (the one-standard-error
   rule). It, or the ``finalists`` first, and the constant model are validated by exact
   leave-one-out cross-validation (SMAPE by default, RSS optional); the lowest cost wins.
   Measured on synthetic truths (see ``benchmarks/``), screening scores pick the right
   exponent more often than leave-one-out SMAPE (which weighs the corner points' high
   leverage heavily), so one finalist is the default and leave-one-out only guards against
   a model worse than the constant.

Repetitions are aggregated per point, by default by Huber's M-estimate with a scale pooled
over the call path's points, which also gives the noise level that ``parsimony`` uses.

Every model carries its fit's uncertainty (:class:`~perfcast.modeling.pmnf.Uncertainty`:
the selected terms' scaled covariance and the repetitions' noise), from which
:mod:`perfcast.modeling.intervals` derives prediction intervals anywhere.

Every model carries warnings where it should not be read as a scaling law: a poor fit
(:func:`poor_fit`), fewer than :data:`RECOMMENDED_VALUES` values of a parameter (with the
values to add), fewer than :data:`RECOMMENDED_REPETITIONS` repetitions, and where a call
path exists only at some points (:func:`existence_note`).

All fits are stacked NumPy solves across hypotheses and call paths
(:mod:`perfcast.modeling.fitting`); there is no per-hypothesis Python loop.

Priors (:class:`~perfcast.modeling.prior.Prior`) restrict steps 1-3: the parameters that may
appear, the products that may be formed, or a fixed term structure whose coefficients alone
are fitted.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from itertools import combinations, permutations, product

import numpy as np

from perfcast.errors import InputError
from perfcast.experiment.experiment import (
    AGGREGATIONS,
    Experiment,
    first_use_codes,
    point_label,
)
from perfcast.modeling.advice import POOR_FIT, RECOMMENDED_VALUES, extend_series
from perfcast.modeling.blas import serial_blas
from perfcast.modeling.fitting import (
    CRITERIA,
    SCREEN_FLOOR,
    adjusted_r2,
    constant_rss,
    fit_subsets,
    relative_weights,
    screen_shared_basis,
    screen_subsets,
    selection_cost,
)
from perfcast.modeling.intervals import FitResiduals, RepetitionNoise, fit_uncertainty
from perfcast.modeling.lines import batched_lines, lines_along
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.noise import RepetitionGrid, parameter_p_values
from perfcast.modeling.options import (
    OPTION,
    Estimator,
    Flag,
    OptionError,
    document_options,
    option,
)
from perfcast.modeling.pmnf import Alternative, Factor, FitStatistics, Model, Term, Uncertainty
from perfcast.modeling.prior import Prior
from perfcast.modeling.space import (
    Family,
    SearchSpace,
    falling_factors,
    family_parameters,
    steeper_factors,
    term_families,
)

WEIGHTINGS = ("relative", "none")

MEDIAN_ESTIMATORS = ("huber", "harrell-davis", "sample")
"""How ``aggregation="median"`` estimates a point's central value from its repetitions."""

MAD_TO_SD = 1.4826
"""Median absolute deviation -> standard deviation (exact for normal noise)."""

HUBER_TUNING = 2.0
"""Huber's k: repetitions within k robust standard deviations of a point's centre count
fully, farther ones with weight ``k * sd / distance``. Within 1.345 (95 % efficiency under
normal noise) and 2 (nearly the mean's efficiency), the usual range; 2 keeps every
repetition of bounded noise (uniform noise never lies beyond 1.8 standard deviations)
while a spike of several standard deviations still counts like one at 2."""

HUBER_ITERATIONS = 50
"""Most reweighting steps of the Huber estimate (it converges long before, see below)."""

HUBER_TOLERANCE = 1e-12
"""Relative change of every centre below which the Huber reweighting stops."""

RECOMMENDED_REPETITIONS = 3
"""Fewest repetitions per point without a warning: two give the noise test one degree of
freedom per point, one none at all."""

EXACT_SMAPE = 1e-6
"""SMAPE (percent) at or below which a model reproduces its data exactly (counts)."""

POOR_SMAPE = 10.0
"""SMAPE (percent) above which a model is flagged as a poor fit, unless the repetitions'
own spread explains it (see :func:`poor_fit`)."""

POOR_ADJUSTED_R2 = 0.5
"""Adjusted R^2 below which a model with terms explains too little of the variation."""

FLAT_EFFECT = 0.01
"""Least relative change (1 %) of the values along some line of the design for a parameter
to enter the model of a call path measured once per point (:meth:`_GroupSearch._flat`)."""

CLEAR_CHANGE = 0.1
"""Least relative change (10 %) along a line that counts as falling or rising there."""

STEEP_RESIDUAL = 0.05
"""Steeper shapes than the space's are offered only where its steepest shape leaves at most
this share of the lines' variation around their means: a clear steep curve, not noise
that a high power happens to follow."""

PARSIMONY_POOL = 10
"""Best-screened hypotheses per call path among which ``parsimony`` picks the simplest."""

RIVAL_TOLERANCE = 2.0
"""Noise standard errors of the screening score (:meth:`_GroupSearch._score_error`) within
which another hypothesis counts as one the measurements cannot tell from the selected
model: it is kept with the model (:class:`~perfcast.modeling.pmnf.Alternative`) and widens
its prediction interval where the two part. Measured with ``python3
benchmarks/prediction_intervals.py --quick --rival-tolerance T``: share of new measurements
(Gaussian noise) inside the 95 % / 80 % interval 8x beyond the measured range, all models,
79.0 / 64.3 % with none kept (T=0), 87.6 / 75.7 % at 1, 90.5 / 79.3 % at 2 and
91.3 / 80.8 % at 3, while inside the range it stays 94.6-95.1 % at 95 %: two is where the
80 % interval holds and more buys little."""

SHAPE_WEIGHT = 1000
"""Weight of a fractional exponent in the shape key of :meth:`_GroupSearch._simplicity`,
in logarithms: fractions count before logarithms (no hypothesis has 1000 logarithms)."""

LINE_BLOCK = 200_000
"""Elements (rows x shapes x points) of the per-line search processed at once."""

ColumnKey = tuple[tuple[str, int, int], ...]
"""A design column: (parameter, candidate rank, shape term) for each factor of a product."""


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


@dataclass(frozen=True)
class _Hypothesis:
    """A term family plus, per parameter, which kept candidate shape it uses."""

    family: Family
    slots: tuple[tuple[str, int], ...]  # (parameter, candidate rank)
    term_slots: tuple[tuple[int, str, int], ...] = ()
    """(term index, parameter, candidate rank): a parameter with its own shape in that term,
    for sums like ``n^2/p + log2(p)`` whose parameter falls in one term and rises in another."""


@dataclass
class _Group:
    """Call paths (of any metric) measured at the same coordinates with the same prior."""

    keys: list[tuple[str, str]]
    coordinates: np.ndarray  # (n, m)
    values: np.ndarray  # (K, n) aggregated
    repetitions: np.ndarray  # (K, n, r) raw, NaN-padded
    spread: np.ndarray  # (K,) robust relative standard deviation of one repetition
    prior: Prior | None
    warnings: list[list[str]] = field(default_factory=list)


MAX_SHAPE_COMBINATIONS = 50_000
"""Combinations of ``terms`` shapes the per-parameter search may fit: it tries every
combination on every line, so their number bounds its time. Extra-P's default space gives
59 for one term, 1711 for two and 32509 for three (already tens of seconds per parameter);
``terms=4`` would be 455126, minutes to hours."""


@document_options
@dataclass(eq=False)
class PMNFModeler(Estimator):
    """Finds a PMNF model per (call path, metric) of an :class:`Experiment`.

    A modeler in the sense of :mod:`perfcast.modeling`: its options below are its
    constructor's parameters (the search space positional, the rest by keyword), checked
    when given and kept as given; ``fit(experiment, priors)`` returns a :class:`ModelSet`
    and leaves the modeler unchanged, so one modeler fits many experiments.
    """

    space: SearchSpace = option(  # noqa: RUF009 (option() is a field specifier)
        default_factory=SearchSpace, doc="exponent sets of the search (Extra-P's defaults)."
    )
    _: KW_ONLY
    terms: int = option(
        1,
        minimum=1,
        doc="number of terms per parameter (``terms`` shapes summed; 1 = Extra-P's default); "
        "at most :data:`MAX_SHAPE_COMBINATIONS` combinations of that many shapes.",
        flag=Flag("--terms", type=int, help="terms per parameter (default {default})"),
    )
    criterion: str = option(
        "smape",
        choices=tuple(sorted(CRITERIA)),
        doc='``"smape"`` or ``"rss"`` of leave-one-out predictions.',
        flag=Flag("--criterion"),
    )
    aggregation: str = option(
        "median",
        choices=AGGREGATIONS,
        doc="how repetitions at a point are combined before fitting.",
        flag=Flag("--aggregate"),
    )
    median_estimator: str = option(
        "huber",
        choices=MEDIAN_ESTIMATORS,
        doc='how ``aggregation="median"`` estimates a point\'s central value. ``"huber"`` '
        "(default) is Huber's M-estimate with a scale pooled over all points of the call "
        "path (the median absolute relative deviation of the repetitions from their "
        "point's sample median): repetitions within ``HUBER_TUNING`` robust standard "
        "deviations count like in the mean, farther ones (spikes from other processes) are "
        "down-weighted. With five repetitions the mean's variance under well-behaved noise "
        "is the lowest, the sample median's about 2.2 times higher under uniform noise, and "
        "that variance is what confuses neighbouring exponents; the pooled scale is what "
        'lets five repetitions tell a spike from noise. ``"harrell-davis"`` is a '
        "Beta-weighted average of the sorted repetitions (Harrell & Davis, 1982; 6 % weight "
        "each on the smallest and largest of five, so a spike still shifts it), "
        '``"sample"`` the middle value.',
        flag=Flag(
            "--median-estimator",
            help="how --aggregate median estimates a point's centre: huber (default: starts "
            "at the sample median, counts calm repetitions fully and down-weights spikes), "
            "harrell-davis (Beta-weighted order statistics) or sample (the middle value)",
        ),
    )
    candidates: int = option(
        5,
        minimum=1,
        doc="most shapes kept per parameter for the multi-parameter combination.",
        flag=Flag("--candidates", type=int, help="shapes kept per parameter (default {default})"),
    )
    combinations: int = option(
        27,
        minimum=1,
        doc="most shape combinations refitted per structure: a structure over ``k`` "
        "parameters combines each one's best ``c`` candidates, ``c`` the largest with "
        "``c^k <= combinations`` (and ``c <= candidates``). A fixed budget rather than a "
        "fixed ``c``: two parameters can afford five candidates each (25 fits), three only "
        "three (27), and more candidates mostly help at high noise, where the true shape "
        "ranks lower.",
    )
    refine_structures: int = option(
        3, minimum=1, doc="structures refitted with every candidate combination."
    )
    finalists: int = option(
        1,
        minimum=1,
        doc="hypotheses per call path that pass screening (in-sample fit, generalised "
        "cross-validation) on to exact leave-one-out validation, besides the constant.",
    )
    parsimony: float = option(
        1.0,
        minimum=0,
        doc="hypotheses whose screening score exceeds the best one's by less than "
        "``parsimony`` standard errors of the residual sum of squares that pure noise leaves "
        "(estimated from the repetitions' pooled robust spread) count as equally good, and "
        "the one with the fewest terms is selected: the one-standard-error rule at the "
        "default 1. An extra term always fits some of the noise, and generalised "
        "cross-validation's penalty for it is small with few points per parameter. Among "
        "those with the fewest terms, ``shape_tolerance`` decides. ``0`` selects the "
        "best-screened hypothesis.",
    )
    shape_tolerance: float = option(
        0.25,
        minimum=0,
        doc="among the hypotheses ``parsimony`` counts as equally good and with the fewest "
        "terms, those whose screening score exceeds the best one's by less than "
        "``shape_tolerance`` noise standard errors count as indistinguishable, and the one "
        "with integer exponents and fewer logarithms is selected (the others stay with the "
        "model as alternatives and widen its prediction interval). Between ``n = 16`` and "
        "``48`` a kernel's working set leaves the caches and ``n^(11/4) * log2(n)^2`` can "
        "follow the rise a little better than the code's ``n^3``; an engineer reads integer "
        "exponents as loop nests. A prior on real codes, which is why it is narrower than "
        "``parsimony``: on truths drawn uniformly from Extra-P's exponent sets (where integer "
        "shapes are 4 of 60), lead-exponent matches at 5 % noise, 2 parameters, fell from 82 "
        "to 76 % at 1 standard error, and at 0.25 stay within a point "
        "(``docs/architecture.md``). ``0`` takes the best-screened.",
        flag=Flag(
            "--shape-tolerance",
            type=float,
            help="noise standard errors within which integer exponents and fewer logarithms "
            "are preferred (default {default}; 0: the best-scored shape)",
        ),
    )
    max_terms: int | None = option(
        None,
        kind=int,
        minimum=1,
        optional=True,
        doc="largest number of product terms in a structure besides the constant (``None``: "
        "the number of significant parameters, the paper's ``n = m + 1``).",
    )
    significance: float | None = option(
        0.001,
        minimum=0,
        below=1,
        optional=True,
        doc="level of the per-parameter noise F-test; ``0`` or ``None`` disables it.",
        flag=Flag(
            "--significance",
            type=float,
            help="level of the per-parameter noise test; 0 disables it (default {default})",
        ),
    )
    positive_terms: bool = option(
        True,
        doc="reject hypotheses with a negative term coefficient. Costs are sums of positive "
        "contributions; a negative term is almost always noise being fitted. Disable for "
        "quantities that can fall (or use negative exponents).",
        flag=Flag(
            "--allow-negative-terms",
            const=False,
            help="accept hypotheses with negative term coefficients",
        ),
    )
    weighting: str = option(
        "relative",
        choices=WEIGHTINGS,
        doc='``"relative"`` fits relative residuals (multiplicative noise), ``"none"`` plain '
        "least squares.",
        flag=Flag("--unweighted", const="none", help="plain instead of relative least squares"),
    )
    min_points: int = option(
        3, minimum=2, doc="fewest distinct values of a parameter that can support a model of it."
    )
    beyond_space: bool = option(
        True,
        doc="where the data leave the space, look beyond it: negative exponents "
        "(:data:`~perfcast.modeling.space.FALLING_EXPONENTS`) for a parameter along which a "
        "call path's metric falls on average over the design's lines (strong scaling, "
        "``n^4/p``), unless the space has negative exponents of its own; exponents above "
        "the largest (:data:`~perfcast.modeling.space.STEEPER_STEPS`) where the space's "
        "steepest shape ranks first (miniFE's ``nx^4``). Other call paths rank the space's "
        "shapes only, so typical weak-scaling models are unchanged. ``False`` is Extra-P's "
        "search (``--scaling weak``).",
    )

    def _check_together(self) -> None:
        """The per-parameter search fits every combination of ``terms`` shapes on every
        line: their number bounds its time (:data:`MAX_SHAPE_COMBINATIONS`)."""
        shapes = len(self.space.shapes)
        count = math.comb(shapes, self.terms)
        if count > MAX_SHAPE_COMBINATIONS:
            raise OptionError(
                "terms",
                f"{OPTION} {self.terms}: {count} combinations of the {shapes} shapes per "
                f"parameter, more than the limit of {MAX_SHAPE_COMBINATIONS}; use fewer "
                "terms or fewer exponents",
            )

    # -- public API --------------------------------------------------------------------------

    @serial_blas
    def fit(self, experiment: Experiment, priors: Mapping[str, Prior] | None = None) -> ModelSet:
        """Model every (call path, metric) of ``experiment``; ``priors`` by call path."""
        experiment.validate()
        priors = dict(priors or {})
        for callpath, prior in priors.items():
            prior.check(experiment.parameters, f"call path {callpath!r}")
        self._check_parameters(experiment)
        models = ModelSet(experiment.parameters)
        for group in self._groups(experiment, priors):
            for model in self._fit_group(group, experiment.parameters):
                models.add(model)
        return models

    # -- input checks ------------------------------------------------------------------------

    def _check_parameters(self, experiment: Experiment) -> None:
        where = f" in {experiment.source}" if experiment.source else ""
        if not experiment.parameters:
            raise InputError(f"the experiment{where} has no parameters to model")
        for name, measured in zip(
            experiment.parameters, experiment.columns.coordinates, strict=True
        ):
            values = np.unique(measured)
            if len(values) < self.min_points:
                raise InputError(
                    f"parameter {name!r}{where} has {len(values)} distinct value(s) "
                    f"{values.tolist()}; modeling needs at least {self.min_points} (5 or more "
                    "recommended): measure more values of it"
                )
            if self.space.needs_positive_values and values.min() <= 0:
                raise InputError(
                    f"parameter {name!r}{where} takes the value {values.min():g}, but logarithms, "
                    "fractional and negative exponents need positive values: shift the "
                    "parameter (e.g. x+1) or restrict the search to non-negative integer "
                    "exponents without logs"
                )

    # -- grouping ----------------------------------------------------------------------------

    def _groups(self, experiment: Experiment, priors: Mapping[str, Prior]) -> Iterable[_Group]:
        params = experiment.parameters
        table = experiment.columns
        # The experiment's integer codes instead of group-bys: on large experiments
        # (10^6 rows) pandas group-bys cost more than the whole search.
        n_metrics = len(table.metrics)
        key_codes, pairs = first_use_codes(table.callpath * n_metrics + table.metric)
        key_index = [
            (
                str(table.callpaths[int(pair) // n_metrics]),
                str(table.metrics[int(pair) % n_metrics]),
            )
            for pair in pairs
        ]
        point_codes, coords = table.points()
        n_keys, n_points = len(key_index), len(coords)
        raw = table.value
        reps = _occurrence(key_codes * n_points + point_codes)
        repetitions = np.full((n_keys, n_points, int(reps.max()) + 1), np.nan)
        repetitions[key_codes, point_codes, reps] = raw
        spread = _relative_spread(repetitions)
        aggregated = self._aggregate(repetitions, spread)
        present = ~np.isnan(aggregated)
        signature = [(present[k].tobytes(), priors.get(key_index[k][0])) for k in range(n_keys)]
        members: dict[tuple[bytes, Prior | None], list[int]] = {}
        for k, sig in enumerate(signature):
            members.setdefault(sig, []).append(k)
        for (_, prior), rows in members.items():
            mask = present[rows[0]]
            domain = None if mask.all() else existence_note(params, coords, mask)
            yield _Group(
                keys=[key_index[k] for k in rows],
                coordinates=coords[mask],
                values=aggregated[rows][:, mask],
                repetitions=repetitions[rows][:, mask, :],
                spread=spread[rows],
                prior=prior,
                warnings=[[] if domain is None else [domain] for _ in rows],
            )

    # -- the search --------------------------------------------------------------------------

    def _fit_group(self, group: _Group, parameters: Sequence[str]) -> list[Model]:
        search = _GroupSearch(self, group, parameters)
        if group.prior is not None and group.prior.structure is not None:
            return search.fixed(group.prior.structure)
        return search.run()

    def _aggregate(self, repetitions: np.ndarray, spread: np.ndarray) -> np.ndarray:
        """(K, n, r) NaN-padded repetitions and (K,) relative spreads -> (K, n) values to fit."""
        if self.aggregation == "median" and self.median_estimator == "huber":
            return _huber_centre(repetitions, spread)
        if self.aggregation == "median" and self.median_estimator == "harrell-davis":
            return _harrell_davis_median(repetitions)
        reducer = getattr(np, f"nan{self.aggregation}")  # nanmedian, nanmean, nanmin, nanmax
        with warnings.catch_warnings():  # all-NaN cells (unmeasured points) are expected
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.asarray(reducer(repetitions, axis=2))

    def _weights(self, y: np.ndarray) -> np.ndarray | None:
        return relative_weights(y) if self.weighting == "relative" else None

    def _cost(
        self, y: np.ndarray, loo: np.ndarray, coefficients: np.ndarray, valid: np.ndarray
    ) -> np.ndarray:
        """Cross-validation cost; inf for singular fits and (optionally) negative terms."""
        cost = selection_cost(self.criterion, y, loo)
        bad = ~valid | ~np.isfinite(cost) | self._negative(coefficients)
        return np.where(bad, np.inf, cost)

    def _negative(self, coefficients: np.ndarray) -> np.ndarray:
        """Fits rejected by ``positive_terms``: a negative term coefficient (not the constant)."""
        if not self.positive_terms:
            return np.zeros(coefficients.shape[:-1], dtype=bool)
        return np.asarray((coefficients[..., 1:] < 0).any(axis=-1))


class _GroupSearch:
    """The search for one group of call paths sharing coordinates and prior."""

    def __init__(self, modeler: PMNFModeler, group: _Group, parameters: Sequence[str]):
        self.modeler = modeler
        self.group = group
        self.parameters = list(parameters)
        self.y = group.values
        self.weights = modeler._weights(self.y)
        self.coords = {name: group.coordinates[:, j] for j, name in enumerate(parameters)}
        self.shapes: dict[str, list[tuple[Factor, ...]]] = {}
        self.basis: dict[str, np.ndarray] = {}  # name -> (n_shapes, terms, n)
        self.ranked: dict[str, np.ndarray] = {}  # name -> (K, candidates) shape indices
        self.dropped_by_noise: dict[int, list[str]] = {}  # row -> parameters within the noise
        self.kept: dict[str, int] = {}  # name -> candidate shapes ranked (before the pair)
        self.mixed: dict[str, np.ndarray] = {}  # name -> (K,) falls on some lines, rises on others
        self.noise = RepetitionNoise.of(group.repetitions, self.y, self.weights)
        self._keys: dict[_Hypothesis, list[ColumnKey]] = {}  # memo of _column_keys

    # stage 0 ---------------------------------------------------------------------------------

    def run(self) -> list[Model]:
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
        models: dict[int, Model] = {}
        for active, rows in by_active.items():
            models.update(zip(rows, self._search(np.array(rows), active), strict=True))
        return [models[k] for k in range(len(self.group.keys))]

    def _warn_few_values(self, usable: list[str]) -> None:
        """One warning per call path for all parameters measured at fewer than
        :data:`RECOMMENDED_VALUES` values: three points fit many shapes about equally well
        (Extra-P warns below five), so the model's exponents are weakly supported however
        well it fits. The warning names the values that would extend the existing series."""
        few = []
        for name in usable:
            values = np.unique(self.coords[name])
            if len(values) < RECOMMENDED_VALUES:
                more = extend_series(values, RECOMMENDED_VALUES - len(values))
                shown = ", ".join(f"{v:g}" for v in values)
                few.append(
                    f"{name} ({shown}): measure {name}={', '.join(f'{v:g}' for v in more)} as well"
                )
        if few:
            note = (
                f"too few values to tell the shapes apart (fewer than {RECOMMENDED_VALUES}): "
                + "; ".join(few)
            )
            for notes in self.group.warnings:
                notes.append(note)

    def _usable(self, name: str) -> bool:
        prior = self.group.prior
        if prior is not None and not prior.allows_parameter(name):
            return False
        distinct = len(np.unique(self.coords[name]))
        if distinct >= self.modeler.min_points:
            return True
        for notes in self.group.warnings:
            notes.append(
                f"{name} has only {distinct} distinct value(s) for this call path; "
                "it is left out of the model"
            )
        return False

    def _significant(self, usable: list[str]) -> np.ndarray:
        """(K, len(usable)): parameters whose effect exceeds the noise (untestable = yes)."""
        mask = np.ones((len(self.group.keys), len(usable)), dtype=bool)
        if not self.modeler.significance or not usable:  # 0 or None: no test
            return mask
        columns = [self.parameters.index(name) for name in usable]
        cells = RepetitionGrid(self.group.coordinates[:, columns], self.group.repetitions)
        return mask & ~(parameter_p_values(cells) >= self.modeler.significance)

    def _flat(self, usable: list[str]) -> np.ndarray:
        """(K, len(usable)): for call paths measured once per point, parameters along which
        no line of the design changes the values by :data:`FLAT_EFFECT` of their mean.
        With repetitions the noise test compares an effect with the data's own scatter;
        with one there is no scatter to compare with, and ``p^3`` fitted to values that
        vary by 0.5 % along ``p`` (one repetition of a virtual campaign) grows a
        thousandfold by ``p = 4096``. A term that explains less than that is not a
        dependency: such a parameter is left out, with a warning naming it."""
        flat = np.zeros((len(self.group.keys), len(usable)), dtype=bool)
        once = np.sum(~np.isnan(self.group.repetitions), axis=2).max(axis=1) <= 1
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
                spread = np.ptp(values, axis=1) / np.where(scale > 0, scale, 1.0)
                largest = np.maximum(largest, spread)
            flat[:, j] = once & (largest < FLAT_EFFECT)
        for k in np.flatnonzero(flat.any(axis=1)):
            names = [p for j, p in enumerate(usable) if flat[k, j]]
            self.group.warnings[k].append(
                f"{', '.join(names)} change(s) the values by less than "
                f"{100 * FLAT_EFFECT:g} % over the measured range: not a dependency, left out "
                "of the model"
            )
        return flat

    def _rank_shapes(self, name: str) -> None:
        """Keep the ``candidates`` shapes with the lowest weighted in-sample error summed
        over every line of the design along ``name``.

        In-sample error, not cross-validation: every shape has the same two coefficients
        per line, so no shape gains from extra freedom and the smallest (relative) squared
        error is the maximum-likelihood choice; leave-one-out over five points per line
        only adds variance, and costs an n-length pass per shape that the sufficient
        statistics avoid."""
        m = self.modeler
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
                weights = m._weights(block)
                fit = screen_shared_basis(design, block, weights)
                # A shape that cannot describe a line (singular, or a negative slope on a
                # flat, noisy line) scores like the constant model there, not as infinitely
                # bad: otherwise one flat line vetoes every shape of a parameter and the
                # ranking degenerates to enumeration order.
                usable = fit.valid & ~m._negative(fit.coefficients)
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
        counts = np.sum(~np.isnan(self.group.repetitions), axis=2).mean(axis=1)
        return np.maximum(CLEAR_CHANGE, 4.0 * self.group.spread / np.sqrt(np.maximum(counts, 1)))

    def _rank_pairs(
        self, name: str, rows: np.ndarray, falling: np.ndarray, rising: np.ndarray
    ) -> np.ndarray:
        """(len(rows), 2) shape indices: the falling and the rising shape whose sum (plus a
        constant) fits the lines along ``name`` best, for call paths that fall along some
        lines and rise along others (``c n^2/p + d log2(p)``: the first term dominates at
        large ``n``, the second at small). One shape per line cannot rank such shapes: each
        describes only the lines its term dominates."""
        m = self.modeler
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
                weights = m._weights(block)
                fit = screen_shared_basis(design, block, weights)
                usable = fit.valid & ~m._negative(fit.coefficients)
                line_cost = np.where(usable, fit.rss, constant_rss(block, weights)[:, None])
                cost[start : start + step] += line_cost.reshape(-1, lines, len(pairs)).sum(axis=1)
        return pairs[np.argmin(cost, axis=1)]

    def _shapes_at(self, name: str, x: np.ndarray) -> np.ndarray:
        """(n_shapes, len(x)): every single-factor shape of ``name`` evaluated at ``x``."""
        return np.stack([shape[0].evaluate(x) for shape in self.shapes[name]])

    # stages A and B ---------------------------------------------------------------------------

    def _search(self, rows: np.ndarray, active: tuple[str, ...]) -> list[Model]:
        m = self.modeler
        families = term_families(active, m.max_terms or max(1, len(active)), self._products(active))
        stage_a = [_Hypothesis(f, tuple((p, 0) for p in family_parameters(f))) for f in families]
        pool = _Finalists(len(rows), max(m.finalists, PARSIMONY_POOL if m.parsimony else 1))
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

    def _offer_splits(self, rows: np.ndarray, families: list[Family], pool: _Finalists) -> None:
        """For call paths that fall along a parameter on some lines and rise on others,
        every family with that parameter in two or more terms, two of them taking the best
        falling and rising pair of shapes (:meth:`_rank_pairs`): one shape per parameter
        cannot describe ``c n^2/p + d log2(p)``. Other call paths never see these
        hypotheses, so their search is unchanged."""
        for name in sorted({p for family in families for term in family for p in term}):
            mixed = np.flatnonzero(self.mixed[name][rows])
            if not len(mixed):
                continue
            down, up = self.kept[name], self.kept[name] + 1
            hypotheses = []
            for family in families:
                terms = [index for index, term in enumerate(family) if name in term]
                others = [p for p in family_parameters(family) if p != name]
                each = self._per_parameter(len(others))
                for ranks in product(*(range(min(each, self.kept[p])) for p in others)):
                    base = ((name, 0), *zip(others, ranks, strict=True))
                    for first, second in permutations(terms, 2):
                        own = ((first, name, down), (second, name, up))
                        hypotheses.append(_Hypothesis(family, tuple(sorted(base)), own))
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
        counts = np.sum(~np.isnan(self.group.repetitions[rows]), axis=2).mean(axis=1)
        variance = np.square(self.group.spread[rows]) / counts * np.square(weighted).mean(axis=1)
        return variance * np.sqrt(2.0 * y.shape[1])

    def _simplicity(self, rows: np.ndarray, pool: _Finalists) -> tuple[np.ndarray, np.ndarray]:
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
        while count and (per_parameter + 1) ** count <= self.modeler.combinations:
            per_parameter += 1
        return per_parameter

    def _refinements(self, family: Family) -> list[_Hypothesis]:
        """``family`` with every combination of candidate shapes within the
        ``combinations`` budget, but the best-only one."""
        names = family_parameters(family)
        per_parameter = self._per_parameter(len(names))
        return [
            _Hypothesis(family, tuple(zip(names, ranks, strict=True)))
            for ranks in product(*(range(min(per_parameter, self.kept[name])) for name in names))
            if any(ranks)
        ]

    def _screen(self, rows: np.ndarray, hypotheses: list[_Hypothesis]) -> np.ndarray:
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
                columns[:, :, column] *= self.basis[name][self.ranked[name][rows, slot], q, :]
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
            usable = fit.valid & ~self.modeler._negative(fit.coefficients)
            gcv = np.maximum(fit.rss, floor[:, None]) / (1.0 - t / n) ** 2
            score[:, members] = np.where(usable, gcv, np.inf)
        return score

    def _select(
        self,
        rows: np.ndarray,
        pool: _Finalists,
        constant: _Hypothesis,
        active: tuple[str, ...],
        rivals: np.ndarray,
    ) -> list[Model]:
        """Leave-one-out validation of each call path's finalists (and the constant model,
        always); the lowest cost wins, ties going to the hypothesis enumerated first (the
        simpler one), which is what makes exact data pick the simplest exact model.

        ``rivals`` (K, pool size; -1 pads) are the hypotheses each model's uncertainty
        keeps as the alternatives its data cannot tell from it (:meth:`_alternatives`)."""
        ids = pool.finalist_ids(pool.register([constant])[0], self.modeler.finalists)
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

    def _fit_ids(self, rows: np.ndarray, ids: np.ndarray, pool: _Finalists) -> _Fits:
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
                        shape = self.ranked[name][rows[members], slot]
                        block[:, :, c + 1] *= self.basis[name][shape, q, :]
                offset += len(members)
            y = self.y[rows[at_row]]
            weights = None if self.weights is None else self.weights[rows[at_row]]
            fit = fit_subsets(columns, y, weights, np.arange(t)[None, :])
            fits.cost[at_row, at_slot] = self.modeler._cost(
                y[:, None, :], fit.loo_predictions, fit.coefficients, fit.valid
            )[:, 0]
            fits.coefficients[at_row, at_slot, :t] = fit.coefficients[:, 0]
            fits.predictions[at_row, at_slot] = fit.predictions[:, 0]
            fits.gram_inverse[at_row, at_slot, :t, :t] = fit.gram_inverse[:, 0]
            fits.scales[at_row, at_slot, :t] = fit.scales[:, 0]
        return fits

    def _alternatives(
        self, rows: np.ndarray, rivals: np.ndarray, pool: _Finalists
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

    def _column_keys(self, hypothesis: _Hypothesis) -> list[ColumnKey]:
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
            for picks in product(range(self.modeler.terms), repeat=len(term))
        ]
        return keys

    def _column_factors(self, hypothesis: _Hypothesis, row: int) -> list[tuple[Factor, ...]]:
        return [
            tuple(self.shapes[name][self.ranked[name][row, slot]][q] for name, slot, q in key)
            for key in self._column_keys(hypothesis)
        ]

    # fixed structure (prior) -----------------------------------------------------------------

    def fixed(self, structure: Sequence[Sequence[Factor]]) -> list[Model]:
        """Fit only the coefficients of a prescribed structure (effort/static priors)."""
        shapes = [tuple(shape) for shape in structure if shape]
        n_rows, n = self.y.shape
        columns = np.ones((n_rows, n, len(shapes) + 1))
        for c, shape in enumerate(shapes):
            columns[:, :, c + 1] = _product(shape, self.coords)
        fit = fit_subsets(columns, self.y, self.weights, np.arange(len(shapes) + 1)[None, :])
        cost = selection_cost(self.modeler.criterion, self.y, fit.loo_predictions[:, 0])
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
                float(np.median(y)) if self.modeler.aggregation == "median" else float(y.mean())
            )
            prediction = np.full_like(y, constant)
        else:
            constant = float(coefficients[0])
        ignored = [p for p in self.parameters if p not in active and p in self.basis]
        if not terms and ignored and self.modeler.significance and len(active) == 0:
            warnings.append("variation is within the measurement noise: constant model")
        prior = self.group.prior
        statistics = FitStatistics(
            rss=float(((y - prediction) ** 2).sum()),
            smape=float(CRITERIA["smape"](y, prediction)),
            adjusted_r2=adjusted_r2(y, prediction, len(terms) + 1),
            cv_error=cv_error,
            points=len(y),
        )
        warnings.extend(self._repetition_warnings(row, statistics))
        poor = poor_fit(statistics, float(self.group.spread[row]), bool(terms))
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

    def _repetition_warnings(self, row: int, statistics: FitStatistics) -> list[str]:
        """Fewer than :data:`RECOMMENDED_REPETITIONS` repetitions per point: with one, noise
        cannot be told from a trend at all (the noise test does not run); with two, the
        test's estimate of the noise is so rough that it can take a real trend for noise.
        Exact data (a count the model reproduces) needs no repetitions, so it gets none."""
        counts = np.sum(~np.isnan(self.group.repetitions[row]), axis=1)
        fewest = int(counts.min()) if len(counts) else 0
        if fewest >= RECOMMENDED_REPETITIONS or statistics.smape <= EXACT_SMAPE:
            return []
        dropped = self.dropped_by_noise.get(row, [])
        if fewest <= 1:
            what = "the noise test cannot run, so noise may have been fitted as a trend"
        elif dropped:
            what = (
                f"the noise test left out {', '.join(dropped)}, but with so few repetitions "
                "it may have taken a real trend for noise"
            )
        else:
            what = "the noise estimate behind the model choice is rough"
        return [
            f"only {fewest} repetition(s) at some points: {what}; measure every point "
            f"{RECOMMENDED_REPETITIONS} times or more (5 recommended)"
        ]


class _Finalists:
    """Each call path's ``size`` best-screened hypotheses so far, over every stage.

    Hypotheses get ids in the order they are first offered (stage A's simple structures
    first), and screening ties are broken by that order."""

    def __init__(self, rows: int, size: int):
        self.hypotheses: list[_Hypothesis] = []
        self._ids: dict[_Hypothesis, int] = {}
        self.score = np.full((rows, size), np.inf)
        self.id = np.full((rows, size), -1)

    def register(self, hypotheses: Sequence[_Hypothesis]) -> np.ndarray:
        for h in hypotheses:
            if h not in self._ids:
                self._ids[h] = len(self.hypotheses)
                self.hypotheses.append(h)
        return np.array([self._ids[h] for h in hypotheses])

    def offer(self, members: np.ndarray, hypotheses: list[_Hypothesis], score: np.ndarray) -> None:
        """Merge the screening scores (len(members), H) of ``hypotheses`` into the pool."""
        ids = np.broadcast_to(self.register(hypotheses), score.shape)
        all_scores = np.concatenate([self.score[members], score], axis=1)
        all_ids = np.concatenate([self.id[members], ids], axis=1)
        unused = np.where(all_ids < 0, np.iinfo(all_ids.dtype).max, all_ids)
        order = np.lexsort((unused, all_scores), axis=-1)[:, : self.score.shape[1]]
        self.score[members] = np.take_along_axis(all_scores, order, axis=1)
        self.id[members] = np.take_along_axis(all_ids, order, axis=1)

    def prefer_simplest(
        self,
        terms: np.ndarray,
        shapes: np.ndarray,
        tolerance: np.ndarray,
        shape_tolerance: np.ndarray,
    ) -> None:
        """Move each row's simplest hypothesis to the front, the others keeping their order
        behind it: among those scoring within ``tolerance`` (K,) of the best, the fewest
        ``terms`` (K, size, like the pool); among those, the one with the smallest
        ``shapes`` key that scores within ``shape_tolerance`` (K,) of the best of them;
        ties go to the best-scored."""
        big = np.iinfo(terms.dtype).max
        best = self.score.min(axis=1, keepdims=True)
        eligible = np.isfinite(self.score) & (self.score <= best + tolerance[:, None])
        fewest = np.where(eligible, terms, big)
        eligible &= fewest == fewest.min(axis=1, keepdims=True)
        best_fewest = np.where(eligible, self.score, np.inf).min(axis=1, keepdims=True)
        eligible &= self.score <= best_fewest + shape_tolerance[:, None]
        chosen = np.argmin(np.where(eligible, shapes, big), axis=1)[:, None]
        slots = np.arange(self.score.shape[1])
        order = np.argsort(np.where(slots == chosen, -1, slots), axis=1, kind="stable")
        self.score = np.take_along_axis(self.score, order, axis=1)
        self.id = np.take_along_axis(self.id, order, axis=1)

    def within(self, tolerance: np.ndarray) -> np.ndarray:
        """(K, size) ids of each row's hypotheses scoring within ``tolerance`` (K,) of its
        best; -1 elsewhere."""
        best = self.score.min(axis=1, keepdims=True)
        close = np.isfinite(self.score) & (self.score <= best + tolerance[:, None])
        return np.where(close, self.id, -1)

    def finalist_ids(self, always: int, count: int) -> np.ndarray:
        """(K, count + 1) ids of each row's first ``count`` hypotheses, sorted per row, plus
        ``always``; -1 pads unused slots."""
        ids = np.where(np.isfinite(self.score), self.id, -1)[:, :count]
        ids = np.concatenate([ids, np.full((len(ids), 1), always)], axis=1)
        ids[:, :-1][ids[:, :-1] == always] = -1  # already a finalist: no second copy
        last = np.iinfo(ids.dtype).max
        ordered = np.sort(np.where(ids < 0, last, ids), axis=1)
        return np.where(ordered == last, -1, ordered)


def _product(factors: Sequence[Factor], coords: Mapping[str, np.ndarray]) -> np.ndarray:
    out = np.ones(len(next(iter(coords.values()))))
    for factor in factors:
        out = out * factor.evaluate(coords[factor.parameter])
    return out


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


def existence_note(parameters: Sequence[str], coordinates: np.ndarray, present: np.ndarray) -> str:
    """Where a call path exists, for one that is absent from some measured points.

    A call path absent from a completed run was not called there: MPI calls at ``p = 1``,
    a branch taken only for large inputs. Its model is fitted where it exists and holds
    only there; the zeros are not fitted, since no PMNF function jumps from zero to a
    latency, and one that tried would bend every coefficient towards the jump. The note
    names the parameter that decides, as a threshold (``exists for p >= 2``) where one
    parameter's values separate the points, otherwise the absent points themselves."""
    absent = coordinates[~present]
    for j, name in enumerate(parameters):
        inside, outside = coordinates[present, j], absent[:, j]
        for above, relation in ((True, ">="), (False, "<=")):
            bound = inside.min() if above else inside.max()
            beyond = coordinates[:, j] >= bound if above else coordinates[:, j] <= bound
            if np.array_equal(beyond, present):
                shown = ", ".join(f"{v:g}" for v in np.unique(outside))
                return (
                    f"exists for {name} {relation} {bound:g} only: not called at {name}={shown} "
                    "(zero there); the model holds where it exists"
                )
    shown = "; ".join(point_label(parameters, point) for point in absent[:3])
    more = f" and {len(absent) - 3} more" if len(absent) > 3 else ""
    return (
        f"absent from {len(absent)} of {len(coordinates)} points ({shown}{more}): not called "
        "there (zero); the model holds where it exists"
    )


def poor_fit(statistics: FitStatistics, spread: float, has_terms: bool) -> str | None:
    """Why a model does not describe its data well enough to be read as a scaling law, or
    None. A SMAPE above :data:`POOR_SMAPE` counts only where it also exceeds twice the
    spread of one repetition (in percent): noisy points are not the model's fault. An
    adjusted R^2 below :data:`POOR_ADJUSTED_R2` counts for models with terms: their terms
    explain less than half the variation, as the strong-scaling miss (``nx^3 log2(nx)^2``
    for ``nx^4/p``, R^2 0.18) did."""
    reasons = []
    if statistics.smape > max(POOR_SMAPE, 200.0 * spread):
        reasons.append(f"SMAPE {statistics.smape:.1f} % is above {POOR_SMAPE:g} %")
    if has_terms and statistics.adjusted_r2 < POOR_ADJUSTED_R2:
        reasons.append(f"adjusted R^2 {statistics.adjusted_r2:.2f} is below {POOR_ADJUSTED_R2:g}")
    if not reasons:
        return None
    return (
        f"{POOR_FIT}: "
        + " and ".join(reasons)
        + "; the model misses part of the variation (a shape outside the search space, "
        "a change of algorithm, or noise): do not extrapolate it"
    )


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


def _occurrence(codes: np.ndarray) -> np.ndarray:
    """How many earlier entries share each entry's code (0 for the first), in order."""
    order = np.argsort(codes, kind="stable")
    ordered = codes[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    run_start = np.repeat(starts, np.diff(np.r_[starts, len(codes)]))
    out = np.empty(len(codes), dtype=np.int64)
    out[order] = np.arange(len(codes)) - run_start
    return out


def _harrell_davis_median(repetitions: np.ndarray) -> np.ndarray:
    """The Harrell-Davis median of each cell's repetitions (NaN where a cell has none):
    sorted values weighted by the Beta((c+1)/2, (c+1)/2) mass of each order statistic."""
    from scipy.special import betainc  # deferred like fdtrc in noise.py

    ordered = np.sort(repetitions, axis=2)  # NaN padding sorts last
    count = np.sum(~np.isnan(repetitions), axis=2)
    out = np.full(count.shape, np.nan)
    for c in np.unique(count[count > 0]):
        half = (c + 1) / 2
        weights = np.diff(betainc(half, half, np.arange(c + 1) / c))
        cells = count == c
        out[cells] = ordered[cells][:, :c] @ weights
    return out


def _sample_median(repetitions: np.ndarray) -> np.ndarray:
    """The middle value (mean of the two middle ones for even counts) of each cell's
    repetitions, NaN where a cell has none; one sort instead of ``np.nanmedian``'s
    per-cell work."""
    ordered = np.sort(repetitions, axis=2)  # NaN padding sorts last
    count = np.sum(~np.isnan(repetitions), axis=2)[..., None]
    low = np.take_along_axis(ordered, np.maximum(count - 1, 0) // 2, axis=2)
    high = np.take_along_axis(ordered, count // 2, axis=2) if ordered.shape[2] > 1 else low
    high = np.where(count % 2 == 1, low, high)
    return np.where(count > 0, 0.5 * (low + high), np.nan)[..., 0]


def _relative_spread(repetitions: np.ndarray) -> np.ndarray:
    """(K,) robust standard deviation of one repetition relative to its point's value,
    pooled over all points of a row: ``MAD_TO_SD`` times the median absolute relative
    deviation from the points' sample medians. One number per call path because five
    repetitions are too few to estimate each point's own; relative because run-time noise
    is. 0 where the repetitions agree (exact data, or a single repetition)."""
    centre = _sample_median(repetitions)[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        deviation = np.abs(repetitions - centre) / np.abs(centre)
    deviation = np.where(np.isfinite(deviation), deviation, np.nan).reshape(len(deviation), -1)
    with warnings.catch_warnings():  # rows without any deviation are expected (all NaN)
        warnings.simplefilter("ignore", RuntimeWarning)
        spread = MAD_TO_SD * np.nanmedian(deviation, axis=1)
    return np.nan_to_num(spread, nan=0.0)


def _huber_centre(repetitions: np.ndarray, spread: np.ndarray) -> np.ndarray:
    """Huber's M-estimate of each cell's centre with the scale ``spread * |median|`` fixed
    (:func:`_relative_spread`). Where every repetition lies within the limit of the cell's
    mean, the mean solves Huber's equation exactly (the usual case); the other cells
    reweight iteratively from their sample median. Cells without spread keep their sample
    median, so exact data stays exact."""
    centre = _sample_median(repetitions)
    limit = HUBER_TUNING * spread[:, None] * np.abs(centre)
    todo = np.flatnonzero(np.isfinite(centre) & (limit > 0))
    values = repetitions.reshape(-1, repetitions.shape[2])[todo]
    present = ~np.isnan(values)
    values = np.where(present, values, 0.0)
    bound = limit.reshape(-1)[todo, None]
    mean = values.sum(axis=1) / present.sum(axis=1)
    result = centre.reshape(-1).copy()
    result[todo] = mean
    active = np.flatnonzero((present & (np.abs(values - mean[:, None]) > bound)).any(axis=1))
    current = centre.reshape(-1)[todo]
    with np.errstate(divide="ignore"):
        for _ in range(HUBER_ITERATIONS):
            distance = np.abs(values[active] - current[active, None])
            weight = np.where(present[active], np.minimum(1.0, bound[active] / distance), 0.0)
            new = (weight * values[active]).sum(axis=1) / weight.sum(axis=1)
            moving = np.abs(new - current[active]) > HUBER_TOLERANCE * np.abs(new)
            current[active] = new
            result[todo[active]] = new
            active = active[moving]
            if not len(active):
                break
    return result.reshape(centre.shape)
