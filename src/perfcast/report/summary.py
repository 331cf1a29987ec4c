"""The summary `perfcast model` prints by default: where the cost is, where it grows.

A real code has thousands of call paths and a dozen metrics; the full listing (one block
per call path and metric, ``--full``) buries the few call paths that matter. The summary
answers the two questions a user asks first, each with the models behind the answer:

* which call paths cost most at the largest measured point (exclusive and, where sums
  over the call tree make sense, inclusive, each with its share of the total);
* which grow fastest from there towards a target point (``--at``; by default every
  parameter at 4x the largest measured value, moved up to the next value of the measured
  series where the values form one: :func:`default_target`).

Warnings are printed once per call path with the metrics they concern, warnings on call
paths not listed are counted by text, and the last line says what was left out and which
flag shows it. Values are model values, so the two rankings and the models agree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from perfcast.errors import InputError
from perfcast.experiment.calltree import join_callpath, split_callpath
from perfcast.experiment.io.caliper import CALIPER_PROFILES
from perfcast.experiment.io.registry import CAMPAIGN_STORE
from perfcast.experiment.metrics import INCLUSIVE_SUFFIX, TIME_METRIC, is_max
from perfcast.experiment.names import display_names
from perfcast.experiment.points import format_point
from perfcast.modeling.advice import DEFAULT_TARGET_TEXT, TARGET_FACTOR, series_at_least
from perfcast.modeling.extrapolation import Unfit, measurement_artifacts, unfit_reasons
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.pmnf import Factor, Model
from perfcast.modeling.provenance import Provenance

DEFAULT_TOP = 10
"""Call paths per ranking."""

GROWTH_FLOOR = 0.01
"""A call path competes in the growth ranking only with at least this share of the total
(or of the largest value, for metrics that do not add up) at the target: a microsecond
that grows a hundredfold is no hot spot."""

OTHER_WARNING_TEXTS = 5
"""Warning texts on call paths not listed that are counted one per line."""

CALLPATH_WIDTH = 100
"""Call paths longer than this are shortened (function names, middle frames elided)."""


def metric_kind(metric: str) -> str:
    """``exclusive`` (a function's own cost: sums over the call tree give inclusive cost),
    ``inclusive`` (callees included: differences with the children give exclusive cost),
    or ``max`` (a maximum over ranks, which does not add up over the call tree)."""
    if is_max(metric):
        return "max"
    return "inclusive" if metric.endswith(INCLUSIVE_SUFFIX) else "exclusive"


def largest_point(parameters: Sequence[str], coordinates: np.ndarray) -> dict[str, float]:
    """The measured point farthest out: highest in the sum of its per-parameter ranks, so in
    a full-factorial design the corner of all largest values, in a cross-shaped one the
    point at the end of the longest arm."""
    points = np.asarray(coordinates, dtype=float).reshape(-1, len(parameters))
    if not len(points):
        raise InputError("no measured points to summarise")
    score = np.zeros(len(points))
    for column in points.T:
        levels = np.unique(column)
        if len(levels) > 1:
            score += np.searchsorted(levels, column) / (len(levels) - 1)
    best = points[int(np.argmax(score))]
    return {p: float(v) for p, v in zip(parameters, best, strict=True)}


def default_target(parameters: Sequence[str], coordinates: np.ndarray) -> dict[str, float]:
    """The target for parameters ``--at`` leaves out, one for the summary, the report page,
    the efficiency view and the suggested runs:
    :data:`~perfcast.modeling.advice.TARGET_FACTOR` times the :func:`largest_point` of
    ``coordinates`` (points x ``parameters``), each value moved up to the first of its
    measured series at or above it
    (:func:`~perfcast.modeling.advice.series_at_least`; kept where the values form none).
    LULESH runs only on cubes of ranks: after 1, 8, 27 the target is 125, a run it can
    make, not 108; powers of two and evenly spaced values keep 4x."""
    values = distinct_values(parameters, coordinates)
    target: dict[str, float] = {}
    for name, largest in largest_point(parameters, coordinates).items():
        scaled = TARGET_FACTOR * largest
        found = series_at_least(np.asarray(values[name]), scaled)
        target[name] = scaled if found is None else found
    return target


def summarised_metrics(models: ModelSet, requested: Sequence[str] | None = None) -> list[str]:
    """The metrics the summary ranks: those asked for, else the first time metric (its own
    exclusive time if there is one), else the first metric."""
    present = models.metrics
    if requested:
        return [m for m in dict.fromkeys(requested) if m in present]
    for candidate in (TIME_METRIC, TIME_METRIC + INCLUSIVE_SUFFIX):
        if candidate in present:
            return [candidate]
    timed = [m for m in present if TIME_METRIC in m and metric_kind(m) == "exclusive"]
    return (timed or present)[:1]


def describe_values(
    format_name: str,
    metrics: Sequence[str],
    *,
    aggregation: str,
    median_estimator: str,
    effort_aggregation: str | None = None,
    scaling: str = "weak",
    ranks_parameter: str = "p",
) -> list[str]:
    """What a modeled value is, over ranks and over repetitions, so that a user comparing
    the numbers with Extra-P's or with a profiler's knows which summary each tool took.
    ``scaling`` is ``perfcast model --scaling``: ``strong`` models totals over all ranks."""
    if format_name == "cube":
        ranks = (
            "over ranks (Cube, --scaling strong): the sum over a profile's processes, as "
            "Extra-P's strong scaling"
            if scaling == "strong"
            else "over ranks (Cube): every process/thread value is one repetition, so a "
            "point's value is the centre of all ranks' values, a typical rank; Extra-P "
            "models the mean over ranks by default"
        )
    elif format_name == CAMPAIGN_STORE:
        ranks = (
            "over ranks (perfcast's runtime): NAME is the mean over a run's ranks (a rank "
            "that never reaches a call path counts 0)"
        )
        if any(map(is_max, metrics)):
            ranks += ", NAME:max the slowest rank"
    elif format_name == CALIPER_PROFILES:
        ranks = (
            "over ranks (Caliper): time_inclusive is Caliper's mean over ranks of a region's "
            "inclusive time (avg#inclusive#sum#time.duration), time_inclusive:max the slowest "
            "rank's; time, where the profiles hold only inclusive time, is a region's mean "
            "less its children's; other metrics keep Caliper's names and statistics"
        )
    else:
        ranks = (
            f"over ranks: as the {format_name} file gives them (one value per repetition; "
            "the file does not say how ranks were summarised)"
        )
    if scaling == "strong" and format_name != "cube":
        ranks += f"; --scaling strong multiplies every value by {ranks_parameter}"
    if aggregation == "median":
        centre = {
            "huber": "Huber's centre (the mean of calm repetitions, spikes down-weighted)",
            "harrell-davis": "the Harrell-Davis median",
            "sample": "the sample median",
        }.get(median_estimator, f"the {median_estimator} median")
    else:
        centre = f"the {aggregation}"
    repetitions = (
        f"over repetitions: {centre} of a point's values (--aggregate, --median-estimator)"
    )
    lines = [f"Values {ranks}.", f"Values {repetitions}."]
    if effort_aggregation is not None:
        lines.append(
            f"Under effort priors the time coefficients are fitted to each point's "
            f"{effort_aggregation} (--effort-aggregate)."
        )
    return lines


@dataclass
class _Cost:
    """One call path's model and values of one metric."""

    callpath: str
    model: Model
    at_largest: float
    at_target: float
    exclusive: float = float("nan")
    inclusive: float = float("nan")

    @property
    def growth(self) -> float:
        return self.at_target / self.at_largest if self.at_largest > 0 else float("nan")


_Section = tuple[str, list[tuple[_Cost, str]], bool]
"""A heading, its rows (cost, numbers), and whether they are the models not ranked (whose
reasons are printed under each)."""


@dataclass
class _MetricSummary:
    metric: str
    kind: str
    costs: list[_Cost]
    total: float
    total_at_target: float
    unfit: dict[str, tuple[Unfit, ...]] = field(default_factory=dict)
    """Call path -> why its model is not ranked at the target (:func:`judge_at_target`),
    the artifacts' call paths included."""
    artifacts: list[Model] = field(default_factory=list)
    """Models whose values are artifacts even where measured, left out of every sum."""


def _nearest_ancestors(callpaths: Sequence[str]) -> dict[str, str | None]:
    """Each call path's nearest ancestor among ``callpaths`` (a call path folded away or
    left out by --callpath leaves a gap the sums step over)."""
    present = set(callpaths)
    ancestors: dict[str, str | None] = {}
    for callpath in callpaths:
        frames = split_callpath(callpath)
        ancestors[callpath] = next(
            (
                path
                for depth in range(len(frames) - 1, 0, -1)
                if (path := join_callpath(frames[:depth])) in present
            ),
            None,
        )
    return ancestors


def _values_at(
    models: Sequence[Model], largest: Mapping[str, float], target: Mapping[str, float]
) -> list[tuple[float, float]]:
    """Each model's value at the largest measured point and at the target.

    Models share few distinct factors (a few dozen over 100,000 call paths), so each factor
    is evaluated once and a model costs a few float operations, taken in the order of
    :meth:`Model.evaluate` so the values are the same; ``evaluate`` per model took 100 us,
    10 s for 100,000 call paths. A model with a factor outside its domain or a value beyond
    floating point goes through ``evaluate``, which raises the error that names it."""
    both = {p: np.array([largest[p], target[p]]) for p in largest}
    factors: dict[Factor, tuple[float, float] | None] = {}

    def factor_values(factor: Factor) -> tuple[float, float] | None:
        if factor not in factors:
            point = both[factor.parameter]
            defined = bool(factor.defined_at(point).all())
            factors[factor] = tuple(factor.evaluate(point).tolist()) if defined else None
        return factors[factor]

    def shared(model: Model) -> tuple[float, float] | None:
        at_largest = at_target = model.constant
        for term in model.terms:
            basis_largest = basis_target = 1.0
            for factor in term.factors:
                value = factor_values(factor)
                if value is None:
                    return None
                basis_largest *= value[0]
                basis_target *= value[1]
            at_largest += term.coefficient * basis_largest
            at_target += term.coefficient * basis_target
        if math.isfinite(at_largest) and math.isfinite(at_target):
            return float(at_largest), float(at_target)
        return None

    values = []
    for model in models:
        pair = shared(model)
        if pair is None:
            first, second = np.broadcast_to(model.evaluate(both), 2).tolist()
            pair = (first, second)
        values.append(pair)
    return values


def _summarise_metric(
    models: Sequence[Model], metric: str, largest: Mapping[str, float], target: Mapping[str, float]
) -> _MetricSummary:
    """Values at both points plus exclusive/inclusive values over the modeled call tree:
    one pass from the leaves up, so linear in the call paths."""
    kind = metric_kind(metric)
    values = _values_at(models, largest, target)
    costs = [_Cost(m.callpath, m, *pair) for m, pair in zip(models, values, strict=True)]
    by_path = {c.callpath: c for c in costs}
    ancestors = _nearest_ancestors(list(by_path))
    deepest_first = sorted(costs, key=lambda c: -len(split_callpath(c.callpath)))
    if kind == "exclusive":
        for cost in costs:
            cost.exclusive = cost.inclusive = cost.at_largest
        for cost in deepest_first:
            parent = ancestors[cost.callpath]
            if parent is not None:
                by_path[parent].inclusive += cost.inclusive
        total = sum(c.exclusive for c in costs)
        total_at_target = sum(c.at_target for c in costs)
    elif kind == "inclusive":
        for cost in costs:
            cost.exclusive = cost.inclusive = cost.at_largest
        for cost in costs:
            parent = ancestors[cost.callpath]
            if parent is not None:
                by_path[parent].exclusive -= cost.inclusive
        roots = [c for c in costs if ancestors[c.callpath] is None]
        total = sum(c.inclusive for c in roots)
        total_at_target = sum(c.at_target for c in roots)
    else:
        total = max((c.at_largest for c in costs), default=0.0)
        total_at_target = max((c.at_target for c in costs), default=0.0)
    return _MetricSummary(metric, kind, costs, total, total_at_target)


UNFIT_SCREEN = 1e-3
"""Models are judged for the target (an interval each) where their value there is at least
this share of the total: smaller ones move no ranking and no total."""


def judge_at_target(
    models: Sequence[Model],
    metric: str,
    largest: Mapping[str, float],
    target: Mapping[str, float],
    values: Mapping[str, Sequence[float]],
    provenance: Provenance | None,
) -> _MetricSummary:
    """:func:`_summarise_metric` with the models unfit to be read at the target set apart
    (:mod:`perfcast.modeling.extrapolation`): artifacts of the measurement leave every sum;
    the others stay in the values at the measured point but leave the total at the target,
    so that a ``p^3`` artifact neither leads the growth ranking nor shrinks every share."""
    artifacts = [
        m for m in models if any(u.everywhere for u in measurement_artifacts(m, provenance))
    ]
    dropped = {id(m) for m in artifacts}
    kept = [m for m in models if id(m) not in dropped]
    summary = _summarise_metric(kept, metric, largest, target)
    summary.artifacts = artifacts
    for model in artifacts:
        summary.unfit[model.callpath] = tuple(measurement_artifacts(model, provenance))
    scale = summary.total_at_target if np.isfinite(summary.total_at_target) else 0.0
    for cost in summary.costs:
        if not (cost.at_target >= UNFIT_SCREEN * scale or not np.isfinite(cost.at_target)):
            continue
        reasons = unfit_reasons(cost.model, target, values, provenance)
        if reasons:
            summary.unfit[cost.callpath] = reasons
    if summary.kind == "max":
        summary.total_at_target = max(
            (c.at_target for c in summary.costs if c.callpath not in summary.unfit), default=0.0
        )
    elif summary.unfit:
        ancestors = _nearest_ancestors([c.callpath for c in summary.costs])
        for cost in summary.costs:
            if cost.callpath in summary.unfit and not _under(
                cost.callpath, summary.unfit, ancestors
            ):
                summary.total_at_target -= cost.at_target
    return summary


def _under(callpath: str, unfit: Mapping[str, object], ancestors: Mapping[str, str | None]) -> bool:
    """Is an ancestor of ``callpath`` in ``unfit`` (its value already left the total)?"""
    parent = ancestors.get(callpath)
    while parent is not None:
        if parent in unfit:
            return True
        parent = ancestors.get(parent)
    return False


def distinct_values(parameters: Sequence[str], coordinates: np.ndarray) -> dict[str, list[float]]:
    """Each parameter's distinct measured values at ``coordinates`` (points x parameters):
    how many there are decides whether a model may be extrapolated in it."""
    points = np.asarray(coordinates, dtype=float).reshape(-1, len(parameters))
    return {p: np.unique(points[:, j]).tolist() for j, p in enumerate(parameters)}


def _value(value: float, unit: str) -> str:
    return f"{value:.3g} {unit}".rstrip() if np.isfinite(value) else "-"


def _share(value: float, total: float) -> str:
    return f"{100 * value / total:5.1f} %" if total > 0 and np.isfinite(value) else "      "


def render_summary(
    models: ModelSet,
    measured: np.ndarray,
    *,
    target: Mapping[str, float] | None = None,
    metrics: Sequence[str] | None = None,
    units: Mapping[str, str] | None = None,
    values_note: Sequence[str] = (),
    top: int = DEFAULT_TOP,
) -> str:
    """The summary of ``models`` fitted to the points ``measured`` (rows in the order of
    ``models.parameters``). ``target`` completes missing parameters with the default;
    ``metrics`` are the metrics to rank (default :func:`summarised_metrics`); ``values_note``
    says what a value is over ranks and repetitions (:func:`describe_values`)."""
    units = units or {}
    parameters = models.parameters
    callpaths = list(dict.fromkeys(m.callpath for m in models))
    by_metric: dict[str, list[Model]] = {}
    for model in models:  # one pass: every later lookup is a dictionary access
        by_metric.setdefault(model.metric, []).append(model)
    ranked = summarised_metrics(models, metrics)
    lines = [
        f"Summary of {len(models):,} models: {len(callpaths):,} call paths, "
        f"{len(by_metric)} metric(s) ({', '.join(by_metric)}) over "
        f"{', '.join(parameters) or 'no parameters'}.",
        *values_note,
    ]
    if not models:
        return "\n".join([*lines, "No models."])
    largest = largest_point(parameters, measured)
    chosen_target = {**default_target(parameters, measured), **(target or {})}
    defaulted = [p for p in parameters if p not in (target or {})]
    how = f"{', '.join(defaulted)} at {DEFAULT_TARGET_TEXT}" if defaulted else "as given"
    lines.append(
        f"Largest measured point: {format_point(largest)}; target: {format_point(chosen_target)} "
        f"({how}; set it with --at NAME=VALUE,...). Values below are the models' values."
    )
    listed: dict[str, None] = {}
    sections: list[_Section] = []
    unfit_of: dict[tuple[str, str], tuple[Unfit, ...]] = {}
    values = distinct_values(parameters, measured)
    for metric in ranked:
        summary = judge_at_target(
            by_metric[metric], metric, largest, chosen_target, values, models.provenance
        )
        sections += _metric_sections(summary, units.get(metric, ""), largest, chosen_target, top)
        unfit_of.update(((c, metric), r) for c, r in summary.unfit.items())
    for _, rows, _ in sections:
        listed.update((cost.callpath, None) for cost, _ in rows)
    names = display_names(list(listed), CALLPATH_WIDTH)
    for heading, rows, apart in sections:
        lines += ["", heading]
        for cost, numbers in rows:
            lines.append(f"  {numbers}  {names[cost.callpath]}")
            lines.append(f"  {'':{len(numbers)}}  model: {cost.model.text()}")
            if apart:  # the section of models not ranked: why not, and what fixes it
                for reason in unfit_of.get((cost.callpath, cost.model.metric), ()):
                    lines.append(f"  {'':{len(numbers)}}  not ranked: {reason.text()}")
    lines += _warnings(models, listed, names)
    lines.append("")
    lines.append(_left_out(callpaths, listed, by_metric, ranked, top))
    return "\n".join(lines)


def _metric_sections(
    summary: _MetricSummary,
    unit: str,
    largest: Mapping[str, float],
    target: Mapping[str, float],
    top: int,
) -> list[_Section]:
    """The cost ranking, the growth ranking and the models not ranked at the target of one
    metric (:data:`_Section`)."""
    metric, costs = summary.metric, summary.costs
    label = f"{metric} [{unit}]" if unit else metric
    if summary.kind == "max":
        heading = (
            f"Costliest call paths at {format_point(largest)}: {label}, the maximum over ranks "
            f"(no sums over the call tree or shares: maxima of different ranks do not add up)"
        )
        heading += f"\n  {'value':>10}"
        hot = sorted(costs, key=lambda c: -c.at_largest)[:top]
        cost_rows = [(c, f"{_value(c.at_largest, unit):>10}") for c in hot]
    else:
        heading = (
            f"Costliest call paths at {format_point(largest)}: {label}, by exclusive value; "
            f"share of the total {_value(summary.total, unit)}\n"
            f"  {'exclusive':>10} {'share':>7}  {'inclusive':>10} {'share':>7}"
        )
        hot = sorted(costs, key=lambda c: -c.exclusive)[:top]
        cost_rows = [
            (
                c,
                f"{_value(c.exclusive, unit):>10} {_share(c.exclusive, summary.total):>7}  "
                f"{_value(c.inclusive, unit):>10} {_share(c.inclusive, summary.total):>7}",
            )
            for c in hot
        ]
    floor = GROWTH_FLOOR * summary.total_at_target
    growing = [
        c
        for c in costs
        if np.isfinite(c.growth) and c.at_target >= floor and c.callpath not in summary.unfit
    ]
    fastest = sorted(growing, key=lambda c: -c.growth)[:top]
    share_label = "of the total" if summary.kind != "max" else "of the largest value"
    growth_heading = (
        f"Fastest growing call paths towards {format_point(target)}: {label}, among those with "
        f">= {100 * GROWTH_FLOOR:g} % {share_label} there ({len(growing):,} of {len(costs):,})\n"
        f"  {'growth':>8} {'now':>10} {'at target':>10} {'share':>7}"
    )
    growth_rows = [
        (
            c,
            f"{'x' + format(c.growth, '.3g'):>8} {_value(c.at_largest, unit):>10} "
            f"{_value(c.at_target, unit):>10} {_share(c.at_target, summary.total_at_target):>7}",
        )
        for c in fastest
    ]
    sections = [(heading, cost_rows, False), (growth_heading, growth_rows, False)]
    apart = sorted(
        (c for c in costs if c.callpath in summary.unfit and c.at_target >= floor),
        key=lambda c: -c.at_target if np.isfinite(c.at_target) else -math.inf,
    )
    if apart or summary.artifacts:
        count = len(apart) + len(summary.artifacts)
        heading = (
            f"Not ranked towards {format_point(target)}: {label}, {count} model(s) not fit to "
            "extrapolate there (left out of the total at the target), each with the runs "
            f"that would fix it\n  {'growth':>8} {'now':>10} {'at target':>10}"
        )
        rows = [
            (
                c,
                f"{'x' + format(c.growth, '.3g'):>8} {_value(c.at_largest, unit):>10} "
                f"{_value(c.at_target, unit):>10}",
            )
            for c in apart[:top]
        ]
        rows += [
            (_Cost(m.callpath, m, math.nan, math.nan), f"{'':>8} {'-':>10} {'-':>10}")
            for m in summary.artifacts[: max(0, top - len(rows))]
        ]
        sections.append((heading, rows, True))
    return sections


def _warnings(models: ModelSet, listed: Mapping[str, None], names: Mapping[str, str]) -> list[str]:
    """Each warning text once, followed by the listed call paths it concerns, each once
    with its metrics (``all metrics`` when it concerns every one); warnings on call paths
    not listed are counted per text."""
    all_metrics = models.metrics
    by_text: dict[str, dict[str, list[str]]] = {}
    findings = models.findings_by_model()  # a later stage's finding shows its stage
    for model in models:
        found = findings.get((model.callpath, model.metric), [])
        for warning in [*model.warnings, *(f.text() for f in found)]:
            by_text.setdefault(warning, {}).setdefault(model.callpath, []).append(model.metric)
    shown = {t: {c: ms for c, ms in paths.items() if c in listed} for t, paths in by_text.items()}
    lines = []
    for text, paths in shown.items():
        if not paths:
            continue
        concerned = [
            f"{names[c]} [{'all metrics' if len(ms) == len(all_metrics) > 1 else ', '.join(ms)}]"
            for c, ms in paths.items()
        ]
        lines += [f"  {text}", *(f"    {entry}" for entry in concerned)]
    if lines:
        heading = "Warnings on the call paths listed (each text once, then where it applies):"
        lines = ["", heading, *lines]
    others = {t: len(paths) - len(shown[t]) for t, paths in by_text.items()}
    others = {t: n for t, n in others.items() if n}
    if others:
        unlisted = len({c for paths in by_text.values() for c in paths if c not in listed})
        lines += ["", f"Warnings on {unlisted:,} call path(s) not listed (--full shows them):"]
        common = sorted(others.items(), key=lambda item: -item[1])
        lines += [f"  {n:>6,} call path(s): {text}" for text, n in common[:OTHER_WARNING_TEXTS]]
        if len(common) > OTHER_WARNING_TEXTS:
            lines.append(f"  and {len(common) - OTHER_WARNING_TEXTS:,} other warning text(s)")
    return lines


def _left_out(
    callpaths: Sequence[str],
    listed: Mapping[str, None],
    by_metric: Mapping[str, Sequence[Model]],
    ranked: Sequence[str],
    top: int,
) -> str:
    other_metrics = [m for m in by_metric if m not in ranked]
    parts = [f"{len(callpaths) - len(listed):,} of {len(callpaths):,} call paths"]
    if other_metrics:
        parts.append(f"{len(other_metrics)} metric(s) not ranked ({', '.join(other_metrics)})")
    return (
        f"Left out: {'; '.join(parts)}. --full lists every model with its full call path, "
        f"--top N ranks more than {top}, --metric NAME ranks that metric."
    )
