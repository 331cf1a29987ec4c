"""Two campaigns compared (``perfcast report A B``): which call paths changed.

Before and after a code change the same program is measured twice; what a user wants to
know is which call paths now scale differently and which cost more or less where it
matters. So each (call path, metric) is compared twice:

* its **model**: a different set of terms (another leading term, another exponent) is a
  change of scaling behaviour -- where the measurements can tell the two apart: the cost
  test below finds the models apart at the target, and neither fit had the other's terms
  among its rivals (:attr:`Change.model_changed`); other terms that agree up to the target
  are noise in the model selection and are shown as such;
* its **cost at the target point**: the ratio after/before, tested. Two fits of noisy
  repetitions never agree exactly; :func:`cost_test` gives the p-value of the gap between
  them over its standard error (the fitted means' uncertainty, each fit widened to the
  rivals its selection could not tell from it, and to the other campaign's model where
  the two agree where measured: :func:`agree_where_measured`). Models that store no
  uncertainty (another tool's file) give no test, and their change is listed as not
  judged rather than guessed with a fixed percentage.

With thousands of call paths a test per call path at 5 % calls dozens of unchanged ones
changed, so the decision is made across all of them: a cost change is reported ("costs
more", "costs less") where Benjamini-Hochberg (:func:`benjamini_hochberg`) at a false
discovery rate ``q = 1 - level`` over all tested pairs finds it; the rest are within noise.
``--level`` sets it, and the prediction intervals shown beside each value.

Measured on the synthetic campaigns of ``tests/test_report_compare.py`` (1,000 call paths
of seven known costs, 2 % noise, three repetitions, p in 2..16 and size in 64..1024,
compared at p=64, size=4096; two halo exchanges become linear in p, x8): the former rule
(each value outside the other's 95 % prediction interval) called 127 of the 998 unchanged
call paths changed, by 3.5 to 38 %; the cost test with the stored rivals alone 47, by
2.5 to 36 % (all with other terms than in A); the test as above with Benjamini-Hochberg
at q = 0.05 none, in each of three pairs of noise seeds (10/11, 20/21, 30/31; the least
p-value of an unchanged one 0.005 in the first, where a first discovery needs 5e-5), and
both x8 changes in each (p below 1e-28). A
call path 1.3x costlier among 999 unchanged ones, five repetitions, is found (p 1e-24,
no false one); with three repetitions too (p 7e-20 and 6e-16).

Call paths only in one campaign (code added or removed, a renamed function) are listed
as such. Changes are sorted by their absolute size at the target, the largest first.
The comparison is at the target of B's page (``--at``, by default from B's points: 4x the
largest measured value, moved up to the next value of the measured series where the values
form one), so the page's rankings and the comparison speak of the same point.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from perfcast.errors import InputError
from perfcast.experiment.names import display_names
from perfcast.experiment.points import format_point
from perfcast.modeling.intervals import (
    DEFAULT_LEVEL,
    MeanEstimate,
    mean_estimate,
)
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.pmnf import Factor, Model, Term
from perfcast.modeling.search import RIVAL_TOLERANCE
from perfcast.report.page import ReportInputs, _round, band, drawable, others_at
from perfcast.report.summary import CALLPATH_WIDTH

ONLY_BEFORE, ONLY_AFTER = "only in A", "only in B"
UP, DOWN, NOISE, UNJUDGED = "costs more", "costs less", "within noise", "no interval"
SHOWN_IN_TEXT = 5
"""Changes the text summary lists: the largest; the page has them all."""
MEASURED_GRID = 5
"""Values per parameter, from its smallest to its largest measured one, at which two
models of other terms are compared (:func:`agree_where_measured`)."""


@dataclass(frozen=True)
class Change:
    """One (call path, metric) in the two campaigns; ``before`` or ``after`` is None when
    only the other has it. Values and prediction intervals are at the target point; the
    intervals are shown beside the values, the cost test decides."""

    callpath: str
    metric: str
    before: Model | None
    after: Model | None
    value_before: float
    value_after: float
    interval_before: tuple[float, float]
    interval_after: tuple[float, float]
    p_value: float = math.nan
    """Of the cost test (:func:`cost_test`); nan where it cannot be made."""
    significant: bool = False
    """The test's decision across all compared pairs (:func:`benjamini_hochberg`)."""

    @property
    def terms_differ(self) -> bool:
        """Both exist and their terms differ (coefficients aside)."""
        if self.before is None or self.after is None:
            return False
        return _shapes(self.before.terms) != _shapes(self.after.terms)

    @property
    def model_changed(self) -> bool:
        """The terms differ in a way the measurements can tell: neither fit had the other's
        terms among the rivals it could not tell from its own
        (:class:`~perfcast.modeling.pmnf.Alternative`), and the two models part beyond
        their noise and rivals at the target by the cost test's decision (a cost change;
        where the models store no uncertainty, the terms alone decide).
        Terms alone are not enough: with 2 % noise and p in 2..16, 287 of 1,000 unchanged
        call paths swapped ``p^(1/2)`` for ``p^(1/3) * log2(p)`` or the like between two
        campaigns, curves that agree up to the target and say nothing of the code."""
        if not self.terms_differ or self.verdict == NOISE:
            return False
        assert self.before is not None and self.after is not None
        before, after = _shapes(self.before.terms), _shapes(self.after.terms)
        return after not in _rivals(self.before) and before not in _rivals(self.after)

    @property
    def difference(self) -> float:
        """after - before at the target; nan where only one exists."""
        return self.value_after - self.value_before

    @property
    def ratio(self) -> float:
        if self.value_before > 0 and math.isfinite(self.value_after):
            return self.value_after / self.value_before
        return math.nan

    @property
    def verdict(self) -> str:
        """Where only one campaign has it, which; else no interval where the cost test
        cannot be made, "costs more" or "costs less" where it is significant across all
        pairs compared, and within noise otherwise."""
        if self.before is None:
            return ONLY_AFTER
        if self.after is None:
            return ONLY_BEFORE
        if not math.isfinite(self.p_value):
            return UNJUDGED
        if not self.significant:
            return NOISE
        return UP if self.value_after > self.value_before else DOWN

    @property
    def changed(self) -> bool:
        """What the comparison is for: a new model, a cost outside the noise, or a call
        path in one campaign only."""
        return self.model_changed or self.verdict in (UP, DOWN, ONLY_BEFORE, ONLY_AFTER)


def _shapes(terms: Iterable[Term]) -> frozenset[tuple[Factor, ...]]:
    return frozenset(tuple(sorted(term.shape, key=lambda f: f.parameter)) for term in terms)


def _rivals(model: Model) -> list[frozenset[tuple[Factor, ...]]]:
    """The terms of the fits the model's selection could not tell from it."""
    if model.uncertainty is None:
        return []
    return [_shapes(alternative.terms) for alternative in model.uncertainty.alternatives]


def _at(
    model: Model | None, target: Mapping[str, float], level: float
) -> tuple[float, tuple[float, float], MeanEstimate | None]:
    """The model's value, prediction interval and mean estimate at ``target`` (nan and
    None for no model, or outside its domain)."""
    nothing = math.nan, (math.nan, math.nan), None
    if model is None:
        return nothing
    point = {p: np.float64(v) for p, v in target.items()}
    try:
        with np.errstate(all="ignore"):
            mean = mean_estimate(model, point)
            value = float(model.evaluate(point) if mean is None else mean.value)
    except InputError:  # outside the model's domain (log2 of 0): no value to compare
        return nothing
    if mean is None:  # no stored uncertainty: a value without an interval
        return value, (math.nan, math.nan), None
    lower, upper = mean.interval(level)
    return value, (float(lower), float(upper)), mean


def cost_test(before: MeanEstimate, after: MeanEstimate) -> float:
    """The two-sided p-value of "both campaigns have the same expected cost here": the gap
    between the two fits over its standard error, against Student's T with the
    Welch-Satterthwaite degrees of freedom of the two variance estimates. nan where a
    value is not finite (no cost to compare).

    The standard error is that of the fitted *means* (:func:`mean_estimate`: the
    confidence width, not the prediction width): both values are fits of many
    repetitions, and no new single measurement is compared, so a repetition's own noise
    does not belong in the test; with it, a change smaller than about three times the
    noise could never be found however many repetitions were made.

    The gap is between the two fits' *ranges*, each from the lowest to the highest of the
    model and the rivals its selection could not tell from it: a campaign is compatible
    with every one of them. Inside the measured range they agree and the gap is the
    difference of the two values; beyond it, where two campaigns of the same code pick
    ``p^(1/2)`` once and ``p^(1/3) * log2(p)`` the next time, they part by more than the
    coefficients' error (the module docstring counts how often). The p-value is that of
    the closest pair of hypotheses of the two sides, the largest over all pairs: a change
    is one that no choice among the rivals explains. Every rival is given the selected
    model's variance, as the prediction interval does.

    The noise is the repetitions' within each campaign: both campaigns must be measured
    alike (the same machine and settings), or a shift of the whole machine between them
    counts as a change of every call path."""
    values = [before.value, before.low, before.high, after.value, after.low, after.high]
    variances = [before.variance, after.variance]
    if not all(math.isfinite(float(v)) for v in values + variances):
        return math.nan
    gap = max(float(after.low - before.high), float(before.low - after.high), 0.0)
    if gap == 0.0:
        return 1.0
    variance = float(before.variance + after.variance)
    if variance <= 0.0:  # noiseless fits that differ
        return 0.0
    dof = variance**2 / (
        float(before.variance) ** 2 / before.dof + float(after.variance) ** 2 / after.dof
    )
    from scipy.special import stdtr  # deferred: a report of one campaign does not need SciPy

    return float(2.0 * stdtr(dof, -gap / math.sqrt(variance)))


def benjamini_hochberg(p_values: Sequence[float], q: float) -> list[bool]:
    """Which of ``p_values`` are discoveries at false discovery rate ``q`` (nan: not
    tested, never one): the ``k`` smallest, for the largest ``k`` whose ``k``-th smallest
    p-value is at most ``q k / m`` of the ``m`` tested (Benjamini and Hochberg, 1995).
    A test per call path at ``q`` would call ``q`` of the unchanged ones changed, dozens
    among thousands; this way at most about ``q`` of those reported are false."""
    tested = sorted((p, i) for i, p in enumerate(p_values) if math.isfinite(p))
    count = len(tested)
    last = max((rank for rank, (p, _) in enumerate(tested, 1) if p <= q * rank / count), default=0)
    significant = [False] * len(p_values)
    for _, index in tested[:last]:
        significant[index] = True
    return significant


def measured_grid(
    ranges: Sequence[Mapping[str, tuple[float, float]] | None], parameters: Sequence[str]
) -> dict[str, np.ndarray] | None:
    """Points where every campaign of ``ranges`` measured (the intersection of their
    ranges, :data:`MEASURED_GRID` values per parameter, geometric where all are positive,
    every combination); None where a campaign's ranges are unknown or do not overlap."""
    if any(r is None or any(p not in r for p in parameters) for r in ranges):
        return None
    axes = []
    for parameter in parameters:
        low = max(r[parameter][0] for r in ranges if r is not None)
        high = min(r[parameter][1] for r in ranges if r is not None)
        if high < low:
            return None
        spaced = np.geomspace if low > 0 else np.linspace
        axes.append(spaced(low, high, MEASURED_GRID) if high > low else np.array([low]))
    mesh = np.meshgrid(*axes, indexing="ij")
    return {p: values.ravel() for p, values in zip(parameters, mesh, strict=True)}


def agree_where_measured(before: Model, after: Model, measured: Mapping[str, np.ndarray]) -> bool:
    """Whether the two models could describe one cost: over ``measured`` their relative
    difference (root mean square) is at most the sum of their :func:`rival_distance`. A
    cost curve that could be a rival of both fits lies within that sum of each, so the
    two lie within it of each other; farther apart, no one curve explains both campaigns.
    False where a model has no value there (or no uncertainty: the distance is nan).

    Two campaigns of the same code select other terms for a third of their call paths
    (``size^2`` once, ``size^(5/3) * log2(size)^2`` the next time) whose curves part beyond
    the measured range, and neither search kept the other's terms among its rivals: with
    the stored rivals alone, 47 of 998 unchanged call paths of the module docstring's
    campaigns parted at the target by 2.5 to 36 %, with p-values down to 1e-37. The two
    fits' confidence cannot tell: selected terms that miss the truth do so by a systematic
    percent inside the range, an error that does not shrink with the points as the
    coefficients' does (the two curves of unchanged pairs differ by up to 7.2 of their
    standard errors where measured). Their distance there is the scale that tells: the
    unchanged pairs of other terms lie at most 1.8 % RMS apart (the sum of their
    distances: 1.6 to 2.0 %, at 2 % noise and three repetitions), the two x8 changes 85 %.
    :func:`compare` then counts each model among the other's rivals, so that only a
    change larger than what the other terms explain at the target counts."""
    with np.errstate(all="ignore"):
        try:
            old, new = before.evaluate(measured), after.evaluate(measured)
        except InputError:  # outside a model's domain (log2 of 0)
            return False
        relative = (new - old) / (0.5 * (np.abs(old) + np.abs(new)))
        difference = float(np.sqrt(np.mean(np.square(relative))))
    return difference <= rival_distance(before) + rival_distance(after)


def rival_distance(model: Model) -> float:
    """How far (relative, root mean square over the measured points) another curve may lie
    from ``model`` and still be a rival its selection kept: the modeler keeps hypotheses
    whose screening score (the weighted residual sum of squares) lies within
    :data:`~perfcast.modeling.search.RIVAL_TOLERANCE` standard errors ``s^2 sqrt(2 n)``
    of the best, and a curve ``d`` away on ``n`` points adds ``n d^2`` to it. ``s^2``,
    the variance of an aggregated point in the fit's relative units, is read from the
    stored covariance: the scaled design's columns have unit norm, so the inverse
    covariance's diagonal is ``1 / s^2``. nan without uncertainty or points."""
    uncertainty = model.uncertainty
    points = model.statistics.points
    if uncertainty is None or points < 1:
        return math.nan
    try:
        precision = float(np.linalg.inv(np.asarray(uncertainty.covariance))[0, 0])
    except np.linalg.LinAlgError:  # a singular covariance says nothing of the noise
        return math.nan
    if not (math.isfinite(precision) and precision > 0):
        return math.nan
    return math.sqrt(RIVAL_TOLERANCE * math.sqrt(2.0 * points) / points / precision)


def _with_rival(mean: MeanEstimate, value: np.ndarray) -> MeanEstimate:
    """``mean`` with ``value`` among its rivals' values."""
    return replace(mean, low=np.fmin(mean.low, value), high=np.fmax(mean.high, value))


def _tested(
    before: Model,
    after: Model,
    mean_before: MeanEstimate | None,
    mean_after: MeanEstimate | None,
    measured: Mapping[str, np.ndarray] | None,
) -> float:
    """The cost test's p-value of two models with their estimates at the target, each
    counting the other among its rivals where their terms differ but the measurements
    cannot tell them apart; nan where one has no estimate."""
    if mean_before is None or mean_after is None:
        return math.nan
    if (
        measured is not None
        and _shapes(before.terms) != _shapes(after.terms)
        and agree_where_measured(before, after, measured)
    ):
        mean_before, mean_after = (
            _with_rival(mean_before, mean_after.value),
            _with_rival(mean_after, mean_before.value),
        )
    return cost_test(mean_before, mean_after)


def compare(
    before: ModelSet,
    after: ModelSet,
    target: Mapping[str, float],
    level: float = DEFAULT_LEVEL,
    measured: Mapping[str, np.ndarray] | None = None,
) -> list[Change]:
    """Every (call path, metric) of either set, the largest change at ``target`` first
    (call paths in one set only after the changes, then the unchanged). A cost changed
    where its test (:func:`cost_test`) is significant among all pairs tested at false
    discovery rate ``1 - level``; the intervals are the prediction intervals at ``level``.
    ``measured``: points both campaigns measured (:func:`measured_grid`), where two models
    of other terms that agree there count as each other's rivals (None: only the stored
    rivals count)."""
    if not 0 < level < 1:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level}")
    keys = dict.fromkeys(
        [*((m.callpath, m.metric) for m in before), *((m.callpath, m.metric) for m in after)]
    )
    sides = []
    p_values = []
    for key in keys:
        old, new = before.get(key), after.get(key)
        side_before, side_after = _at(old, target, level), _at(new, target, level)
        sides.append((key, old, new, side_before, side_after))
        p_value = math.nan
        if old is not None and new is not None:
            p_value = _tested(old, new, side_before[2], side_after[2], measured)
        p_values.append(p_value)
    significant = benjamini_hochberg(p_values, 1.0 - level)
    changes = [
        Change(*key, old, new, b[0], a[0], b[1], a[1], p_value, decided)
        for (key, old, new, b, a), p_value, decided in zip(
            sides, p_values, significant, strict=True
        )
    ]

    def order(change: Change) -> tuple[bool, bool, float]:
        size = abs(change.difference)
        if not math.isfinite(size):  # only in one: its own value is the change
            size = abs(change.value_before if change.after is None else change.value_after)
        one_side = change.before is None or change.after is None
        return (not change.changed, one_side, -size if math.isfinite(size) else 0.0)

    return sorted(changes, key=order)


def decision_rule(changes: Sequence[Change], level: float) -> str:
    """How the costs were judged, for the page and the terminal."""
    tested = sum(math.isfinite(c.p_value) for c in changes)
    return f"changed: Benjamini-Hochberg at q = {1.0 - level:g} over {tested:,} comparisons"


def measured_in_both(before: ReportInputs, after: ReportInputs) -> dict[str, np.ndarray] | None:
    """The points where both campaigns measured (:func:`measured_grid`), for
    :func:`compare`."""
    return measured_grid([_ranges_of(before), _ranges_of(after)], after.models.parameters)


def _ranges_of(inputs: ReportInputs) -> dict[str, tuple[float, float]] | None:
    """The measured ranges of a campaign, None where its model file does not keep them."""
    if inputs.experiment is not None:
        return inputs.experiment.ranges()
    provenance = inputs.models.provenance
    if provenance is None or any(p not in provenance.ranges for p in inputs.models.parameters):
        return None
    return dict(provenance.ranges)


def comparison_data(
    changes: Sequence[Change], before: ReportInputs, data: Mapping[str, Any]
) -> dict[str, Any]:
    """The comparison in the report's document ``data`` (B's, :func:`report_data`): per
    change both models, drawable with their bands along the page's axes (the other
    parameters at B's largest measured point), the cost test's p-value, A's measured
    ranges, and the rule that decided at the document's level."""
    parameters = data["parameters"]
    largest = data["largest"]
    names = display_names([c.callpath for c in changes], CALLPATH_WIDTH)

    def side(model: Model | None) -> dict[str, Any] | None:
        if model is None:
            return None
        return {
            **drawable(model, parameters),
            "smape": _round(model.statistics.smape),
            "bands": {
                p: band(model, p, data["axes"][p]["grid"], others_at(largest, p), data["level"])
                for p in parameters
            },
        }

    return {
        "before": before.source,
        "ranges_before": _ranges_of(before),
        "rule": decision_rule(changes, data["level"]),
        "rows": [
            {
                "callpath": c.callpath,
                "short": names[c.callpath],
                "metric": c.metric,
                "verdict": c.verdict,
                "model_changed": c.model_changed,
                "terms_differ": c.terms_differ,
                "changed": c.changed,
                "before": side(c.before),
                "after": side(c.after),
                "value_before": _round(c.value_before),
                "value_after": _round(c.value_after),
                "interval_before": [_round(v) for v in c.interval_before],
                "interval_after": [_round(v) for v in c.interval_after],
                "ratio": _round(c.ratio),
                "p_value": _round(c.p_value),
            }
            for c in changes
        ],
    }


def _number(value: float) -> str:
    return f"{value:.3g}" if math.isfinite(value) else "-"


def render_comparison(
    changes: Sequence[Change],
    before: str,
    after: str,
    target: Mapping[str, float],
    level: float = DEFAULT_LEVEL,
) -> list[str]:
    """A few lines for the terminal: the counts, then the largest changes."""
    counts = {
        "changed model": sum(c.model_changed for c in changes),
        UP: sum(c.verdict == UP for c in changes),
        DOWN: sum(c.verdict == DOWN for c in changes),
        NOISE: sum(c.verdict == NOISE for c in changes),
        UNJUDGED: sum(c.verdict == UNJUDGED for c in changes),
        ONLY_BEFORE: sum(c.verdict == ONLY_BEFORE for c in changes),
        ONLY_AFTER: sum(c.verdict == ONLY_AFTER for c in changes),
    }
    lines = [
        f"A = {before}, B = {after}: {len(changes):,} models compared at {format_point(target)} "
        f"({decision_rule(changes, level)}; the rest is within noise)",
        "  " + ", ".join(f"{n:,} {what}" for what, n in counts.items() if n or what == NOISE),
    ]
    shown = [c for c in changes if c.changed][:SHOWN_IN_TEXT]
    names = display_names([c.callpath for c in shown], CALLPATH_WIDTH)
    for change in shown:
        if change.before is None or change.after is None:
            only = change.after or change.before
            assert only is not None  # a change has a model on one side at least
            where = f"{names[change.callpath]} [{change.metric}]"
            lines.append(f"  {change.verdict:<12} {where}: {only.text()}")
            continue
        ratio = f"x{_number(change.ratio)}"
        text = (
            f"  {ratio:<12} {names[change.callpath]} [{change.metric}]: "
            f"{_number(change.value_before)} -> {_number(change.value_after)} ({change.verdict})"
        )
        if change.model_changed:
            text += f"; model {change.before.text()} -> {change.after.text()}"
        lines.append(text)
    return lines
