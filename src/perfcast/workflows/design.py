"""The adaptive design: which runs to make next, and rounds of them until the prediction holds.

A fixed plan (``perfcast design``) spends its runs before anything is known of the code;
once a campaign is stored, its models say where the next core-hour buys most.
:func:`suggest_runs` (``perfcast design --suggest``) ranks candidate runs by the expected
narrowing of the 95 % prediction interval at the target (:mod:`perfcast.modeling.worth`)
of the call paths that matter there (the largest values at the target of the summary's
metric, :data:`TOP_CALLPATHS` of them), per core-hour the runs are predicted to cost.
:func:`measure_until` (``perfcast measure --until``) measures the best of them in rounds
through the campaign engine (:func:`perfcast.measure.campaign.measure` with a plan of the
chosen points), into the same store, until every such prediction is within the relative
width asked for, the budget is spent, or nothing is left worth running.

The candidates: the points one parameter away from a measured point, that parameter at a
value of the spec's list, a measured one, or one beyond the measured range (the next of the
series the measured values make, up to the target; where a parameter has fewer than
:data:`~perfcast.modeling.advice.RECOMMENDED_VALUES` values, as many as it lacks, the runs
:func:`~perfcast.modeling.extrapolation.unfit_reasons` names), and more repetitions of every
measured point. Each comes with the reason it is worth its cost:

* **new value**: a parameter an important model extrapolates in has fewer than five
  values. Such a model is not read at the target at all (the summary lists it apart),
  whatever its interval says, so these runs come first, best worth per cost among them.
* **repetition**: fewer than :data:`MIN_REPETITIONS` repetitions at the point (the noise
  test cannot tell a parameter's effect from noise there), or repetitions that spread more
  than :data:`SPREAD_FACTOR` times the call path's pooled noise.
* **between rival shapes**: most of the gain comes from ruling out shapes the data could
  not tell from the selected one (the model's alternatives), which part where the point
  lies by more than a standard deviation of the runs' mean.
* otherwise the run narrows the fit's own interval at the target.

Before a model exists (a parameter has fewer values than the modeler needs, as after a
design of two rank counts) nothing can be weighed: the runs suggested are new values of
that parameter, the spec's first, then the series' (cheapest first), and the rounds of
``--until`` go on from there.

The cost of a run is its predicted wall time times its ranks: the median of the stored runs
at that point, else a power law fitted to the stored points' run times
(:func:`~perfcast.measure.design.run_time_model`).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from perfcast.appspec import RANKS, AppSpec, format_value
from perfcast.columns import aligned
from perfcast.errors import InputError
from perfcast.experiment import read_experiment
from perfcast.experiment.experiment import Experiment
from perfcast.experiment.names import display_names
from perfcast.experiment.points import format_point
from perfcast.measure.campaign import CampaignResult, measure
from perfcast.measure.counting import counting_store
from perfcast.measure.design import (
    DEFAULT_PER_ROUND,
    DEFAULT_SUGGESTIONS,
    MAX_SUGGESTIONS,
    Coordinate,
    ExperimentPlan,
    run_time_model,
)
from perfcast.measure.runner import Backend
from perfcast.measure.smpi import SmpiBackend
from perfcast.measure.store import CampaignStore
from perfcast.modeling.advice import extend_series
from perfcast.modeling.extrapolation import extrapolated, more_values, too_few_values
from perfcast.modeling.intervals import DEFAULT_LEVEL, prediction_interval
from perfcast.modeling.modeler import PMNFModeler
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.pmnf import Model
from perfcast.modeling.worth import WidthGain, shape_text, width_gain
from perfcast.report.summary import (
    GROWTH_FLOOR,
    default_target,
    distinct_values,
    summarised_metrics,
)
from perfcast.workflows.model import ModelRequest, model_campaign

TOP_CALLPATHS = 5
"""Call paths that matter at the target: the largest values there of the summary's metric
(each at least :data:`~perfcast.report.summary.GROWTH_FLOOR` of the total), as the top of
the summary's growth ranking."""

MIN_REPETITIONS = 3
"""Repetitions a point needs for the noise test to say anything of it: two give one degree
of freedom per point, and a spike among two is half the sample."""

SPREAD_FACTOR = 2.0
"""A point whose repetitions spread more than this many times the call path's pooled noise
gets another repetition: something disturbed them, and one more says which is typical."""

HELPS_SHARE = 0.1
"""A call path is named as helped by a run when it gets at least this share of its gain."""

RIVAL_SHARE = 0.5
"""A run is "between rival shapes" where ruling out alternatives is at least this share of
its gain."""

MAX_ROUNDS = 1000
"""Rounds of ``--until`` at most, whatever the budget: each adds runs, so a campaign that
needs more is better described by a larger design."""

MAX_CORE_HOURS = 1e7
MAX_WALL_SECONDS = 366 * 86400.0
MAX_WIDTH = 100.0
"""Largest relative width ``--until`` takes: beyond it any prediction qualifies."""


@dataclass(frozen=True)
class TargetWidth:
    """One call path that matters and its 95 % prediction interval at the target now.

    ``few`` are the parameters it extrapolates in with fewer than five values: its interval
    does not count until they have them."""

    callpath: str
    value: float
    low: float
    high: float
    few: tuple[str, ...] = ()

    @property
    def relative(self) -> float:
        """The interval's width over the value (inf without an interval)."""
        width = self.high - self.low
        return width / self.value if self.value > 0 and math.isfinite(width) else math.inf

    def within(self, width: float) -> bool:
        return not self.few and self.relative <= width


@dataclass(frozen=True)
class Suggestion:
    """Runs at one point, what they are expected to bring and what they cost.

    ``first_repetition`` is the repetition number of the first new run (the point's runs
    so far, failed ones included): the campaign store keys its runs by it."""

    point: Mapping[str, float]
    runs: int
    first_repetition: int
    seconds: float
    """Predicted wall time of the runs, one after the other."""
    core_hours: float
    worth: float
    """Expected narrowing of the prediction intervals at the target of the call paths
    that matter, summed, relative to the sum of their values there."""
    reason: str
    callpaths: tuple[str, ...]
    first: bool = False
    """A new value of a parameter with too few values: ranked before the others."""

    @property
    def ranks(self) -> int:
        return int(self.point.get(RANKS, 1))


@dataclass(frozen=True)
class Suggestions:
    """What :func:`suggest_runs` returns: the call paths that matter, how wide their
    prediction intervals are at the target now, and the runs ranked best first."""

    target: Mapping[str, float]
    metric: str
    widths: tuple[TargetWidth, ...]
    suggestions: tuple[Suggestion, ...]
    notes: tuple[str, ...] = ()

    def reached(self, width: float) -> bool:
        """Every call path that matters predicted within ``width`` (relative)."""
        return bool(self.widths) and all(w.within(width) for w in self.widths)

    def widths_table(self) -> str:
        """The call paths that matter, numbered as the runs' "helps" column names them."""
        names = display_names([w.callpath for w in self.widths])
        rows = [["#", "value", "95 % interval", "width", "call path"]]
        for number, w in enumerate(self.widths, 1):
            width = f"{100 * w.relative:.0f} %" if math.isfinite(w.relative) else "-"
            few = f" (too few values of {', '.join(w.few)})" if w.few else ""
            interval = f"[{w.low:.3g}, {w.high:.3g}]"
            rows.append([str(number), f"{w.value:.3g}", interval, width, names[w.callpath] + few])
        return "\n".join(aligned(rows, right=range(4)))

    def table(self) -> str:
        """The ranked runs: rank, point, repetitions, core-hours, reason, call paths."""
        if not self.suggestions:
            return "nothing left worth running: no candidate run narrows these intervals"
        # the call paths a run helps by their numbers in the widths table: a row of full
        # call paths ran to hundreds of characters
        number = {w.callpath: str(i) for i, w in enumerate(self.widths, 1)}
        rows = [["rank", "point", "runs", "core-hours", "worth/core-h", "reason", "helps #"]]
        for rank, s in enumerate(self.suggestions, 1):
            per = s.worth / s.core_hours if s.core_hours > 0 else math.inf
            rows.append(
                [
                    str(rank),
                    format_point(s.point, separator=","),
                    str(s.runs),
                    f"{s.core_hours:.3g}",
                    f"{per:.3g}",
                    s.reason,
                    _helped(s.callpaths, number),
                ]
            )
        return "\n".join(aligned(rows, right=range(5)))

    def text(self) -> str:
        if not self.widths and self.suggestions:  # no model yet (see the notes)
            return "\n".join(
                [
                    f"target {format_point(self.target)}: nothing modeled yet",
                    "next runs, the cheapest first:",
                    self.table(),
                ]
            )
        return "\n".join(
            [
                f"target {format_point(self.target)}: the call paths that matter ({self.metric})",
                self.widths_table(),
                "",
                "next runs, best worth per core-hour first (worth: the expected narrowing of "
                "their prediction intervals there, relative to their values):",
                self.table(),
            ]
        )


def _helped(callpaths: Sequence[str], number: Mapping[str, str]) -> str:
    """The call paths one run helps, by number: ``all`` where it helps every one."""
    if not callpaths:
        return "-"
    if len(number) > 1 and set(callpaths) >= set(number):
        return "all"
    return ",".join(number.get(c, c) for c in callpaths)


def plan_of(spec: AppSpec, chosen: Sequence[Suggestion]) -> ExperimentPlan:
    """The chosen runs as a plan over the spec's parameters: each point measured up to its
    first new repetition plus its runs (the stored ones are skipped by their keys)."""
    names = tuple(p.name for p in spec.parameters)
    points = tuple(tuple(float(s.point[n]) for n in names) for s in chosen)
    counts = tuple(s.first_repetition + s.runs for s in chosen)
    return ExperimentPlan(
        names, points, max(counts, default=1), "suggested", point_repetitions=counts
    )


def check_count(count: int, flag: str = "--suggest") -> int:
    if not 1 <= count <= MAX_SUGGESTIONS:
        raise InputError(f"{flag} {count}: give a number of runs from 1 to {MAX_SUGGESTIONS}")
    return count


def rank_runs(
    models: ModelSet,
    experiment: Experiment,
    target: Mapping[str, float],
    *,
    seconds: Callable[[Mapping[str, float]], float],
    count: int = DEFAULT_SUGGESTIONS,
    repetitions: int = MIN_REPETITIONS,
    grid: Mapping[str, Sequence[float]] | None = None,
    fixed: Mapping[str, float] | None = None,
    stored: Mapping[Coordinate, int] | None = None,
    metric: str | None = None,
    level: float = DEFAULT_LEVEL,
) -> Suggestions:
    """The ``count`` best runs for ``models`` fitted to ``experiment``, at ``target``.

    Args:
        seconds: predicted wall time of one run at a point (every parameter, ``fixed`` too).
        repetitions: runs at a new point (the spec's ``run.repetitions``).
        grid: each parameter's values in the spec (more candidates than the measured).
        fixed: the parameters the experiment does not vary, at their values.
        stored: each measured point's runs so far, failed ones included (default: the
            repetitions in ``experiment``).
        metric: the metric whose call paths matter (default: the summary's).
    """
    check_count(count)
    parameters = list(experiment.parameters)
    missing = [p for p in parameters if p not in target]
    if missing:
        raise InputError(f"--at: give a value of {', '.join(missing)} too")
    metric = metric or summarised_metrics(models)[0]
    important = _important(models, metric, target)
    measured = experiment.coordinates()
    values = distinct_values(parameters, measured)
    widths = tuple(_width(m, target, values, models, level) for m in important)
    if not important:
        return Suggestions(target, metric, widths, ())
    counts, spread = _repetitions(experiment, [m.callpath for m in important], metric)
    stored = dict(counts) | dict(stored or {})
    few = {p for w in widths for p in w.few}
    candidates = _candidates(parameters, measured, values, target, grid or {}, few)
    measured_set = {tuple(map(float, point)) for point in measured}
    new = [c for c in candidates if c not in measured_set]
    again = sorted(measured_set)
    points = [*new, *again]
    if not points:
        return Suggestions(target, metric, widths, ())
    runs = np.array(
        [max(repetitions, 1)] * len(new)
        + [max(MIN_REPETITIONS - counts.get(c, 0), 1) for c in again]
    )
    arrays = {p: np.array([c[j] for c in points]) for j, p in enumerate(parameters)}
    measured_already = np.arange(len(points)) >= len(new)
    have = np.array([0] * len(new) + [counts.get(c, 0) for c in again])
    gains = [width_gain(m, target, arrays, runs, level, measured_already, have) for m in important]
    total_value = sum(w.value for w in widths)
    gain = sum((g.gain for g in gains if g is not None), np.zeros(len(points)))
    worth = gain / total_value if total_value > 0 else gain
    suggestions = []
    for index, point in enumerate(points):
        full = {**(fixed or {}), **dict(zip(parameters, point, strict=True))}
        one = float(seconds(full))
        wall = one * int(runs[index])
        core_hours = wall * int(full.get(RANKS, 1)) / 3600.0
        repeated = index >= len(new)
        new_value = [p for j, p in enumerate(parameters) if p in few and point[j] not in values[p]]
        if not (worth[index] > 0 or new_value):
            continue
        helps = tuple(
            m.callpath
            for m, g in zip(important, gains, strict=True)
            if g is not None and gain[index] > 0 and g.gain[index] >= HELPS_SHARE * gain[index]
        )
        reason = _reason(
            point if repeated else None,
            new_value,
            values,
            counts,
            spread,
            important,
            gains,
            index,
        )
        suggestions.append(
            Suggestion(
                full,
                int(runs[index]),
                stored.get(point, 0) if repeated else 0,
                wall,
                core_hours,
                float(worth[index]),
                reason,
                helps,
                first=bool(new_value),
            )
        )
    suggestions.sort(
        key=lambda s: (
            not s.first,
            -(s.worth / s.core_hours if s.core_hours > 0 else math.inf),
            s.core_hours,
        )
    )
    return Suggestions(target, metric, widths, tuple(suggestions[:count]))


def _important(models: ModelSet, metric: str, target: Mapping[str, float]) -> list[Model]:
    """The models of ``metric`` with the largest values at ``target`` (:data:`TOP_CALLPATHS`,
    each at least :data:`GROWTH_FLOOR` of the total there)."""
    valued = []
    for model in models:
        if model.metric != metric:
            continue
        value = float(model.evaluate(target))
        if math.isfinite(value) and value > 0:
            valued.append((value, model))
    total = sum(v for v, _ in valued)
    valued.sort(key=lambda pair: -pair[0])
    return [m for v, m in valued[:TOP_CALLPATHS] if v >= GROWTH_FLOOR * total]


def _width(
    model: Model,
    target: Mapping[str, float],
    values: Mapping[str, Sequence[float]],
    models: ModelSet,
    level: float,
) -> TargetWidth:
    low, high = (float(v) for v in prediction_interval(model, target, level))
    few = too_few_values(extrapolated(model, target, values, models.provenance), values)
    return TargetWidth(model.callpath, float(model.evaluate(target)), low, high, tuple(few))


def _repetitions(
    experiment: Experiment, callpaths: Sequence[str], metric: str
) -> tuple[dict[Coordinate, int], dict[Coordinate, tuple[float, float]]]:
    """Per measured point: its repetitions (the fewest among ``callpaths``), and the widest
    relative spread there among them with that call path's pooled spread."""
    counts: dict[Coordinate, int] = {}
    spread: dict[Coordinate, tuple[float, float]] = {}
    data = experiment.data
    parameters = list(experiment.parameters)
    for callpath in callpaths:
        rows = data[(data["callpath"] == callpath) & (data["metric"] == metric)]
        if not parameters:
            continue
        stats = rows.groupby(parameters)["value"].agg(["count", "mean", "std"]).reset_index()
        with np.errstate(all="ignore"):
            relative = (stats["std"] / stats["mean"].abs()).to_numpy(dtype=float)
        relative = np.where(np.isfinite(relative), relative, np.nan)
        known = relative[np.isfinite(relative)]
        pooled = float(np.sqrt(np.mean(np.square(known)))) if len(known) else 0.0
        coordinates = stats[parameters].to_numpy(dtype=float)
        for row, number, here in zip(coordinates, stats["count"], relative, strict=True):
            point = tuple(float(v) for v in row)
            counts[point] = min(counts.get(point, int(number)), int(number))
            if np.isfinite(here) and here > spread.get(point, (0.0, 0.0))[0]:
                spread[point] = (float(here), pooled)
    return counts, spread


def _candidates(
    parameters: Sequence[str],
    measured: np.ndarray,
    values: Mapping[str, Sequence[float]],
    target: Mapping[str, float],
    grid: Mapping[str, Sequence[float]],
    few: set[str],
) -> list[Coordinate]:
    """The points one parameter away from a measured point (module docstring)."""
    axes = {}
    for p in parameters:
        known = sorted(set(values[p]) | {float(v) for v in grid.get(p, ())})
        if p in few:
            beyond = more_values(values[p])
        else:
            beyond = [v for v in extend_series(np.asarray(values[p]), 1) if v <= target[p]]
        axes[p] = sorted(set(known) | {float(v) for v in beyond})
    found: dict[Coordinate, None] = {}
    for point in measured:
        for j, p in enumerate(parameters):
            for value in axes[p]:
                if value != point[j]:
                    found[tuple(float(v) for v in (*point[:j], value, *point[j + 1 :]))] = None
    return list(found)


def _reason(
    repeated: Coordinate | None,
    new_value: Sequence[str],
    values: Mapping[str, Sequence[float]],
    counts: Mapping[Coordinate, int],
    spread: Mapping[Coordinate, tuple[float, float]],
    important: Sequence[Model],
    gains: Sequence[WidthGain | None],
    index: int,
) -> str:
    if new_value:
        return "; ".join(
            f"new value of {p}: it has {len(values[p])} values, too few to extrapolate in"
            for p in new_value
        )
    if repeated is not None:
        have = counts.get(repeated, 0)
        if have < MIN_REPETITIONS:
            return f"repetition: {have} of the {MIN_REPETITIONS} the noise test needs at a point"
        here, pooled = spread.get(repeated, (0.0, 0.0))
        if pooled > 0 and here > SPREAD_FACTOR * pooled:
            return (
                f"repetition: the repetitions spread {100 * here:.0f} % here, "
                f"{here / pooled:.1f}x the {100 * pooled:.0f} % elsewhere"
            )
    best = max(
        (
            (g.rivals[index], m, g)
            for m, g in zip(important, gains, strict=True)
            if g is not None and g.rival[index] >= 0
        ),
        key=lambda triple: triple[0],
        default=None,
    )
    total = sum(g.gain[index] for g in gains if g is not None)
    if (
        best is not None
        and total > 0
        and best[0] >= RIVAL_SHARE * total
        and best[2].separation[index] >= 1
    ):
        _, model, gain = best
        assert model.uncertainty is not None
        rival = model.uncertainty.alternatives[int(gain.rival[index])]
        return (
            f"between rival shapes: {shape_text(model.terms)} and {shape_text(rival.terms)} "
            f"differ here by {gain.separation[index]:.1f} standard deviations of the runs' mean"
        )
    if repeated is not None:
        return "repetition: narrows the fit's interval at the target"
    return "new point: narrows the fit's interval at the target"


@dataclass(frozen=True)
class SuggestRequest:
    """One ``perfcast design --suggest`` job.

    Attributes:
        spec: the campaign's perfcast.toml.
        store: its campaign store (default: the spec's).
        count: runs to suggest (1 to :data:`MAX_SUGGESTIONS`).
        target: the point the prediction is for (``--at``; parameters left out: the
            summary's default target, 4x the largest measured value, moved up to the next
            value of the measured series where the values form one:
            :func:`~perfcast.report.summary.default_target`, 125 ranks after LULESH's 1, 8,
            27).
        metric: the metric whose call paths matter (``--metric``; default: the summary's):
            ``cpu_time`` where ranks shared cores, as ``perfcast model --metric`` takes it.
    """

    spec: AppSpec
    store: Path | None = None
    count: int = DEFAULT_SUGGESTIONS
    target: Mapping[str, float] | None = None
    metric: str | None = None


def suggest_runs(request: SuggestRequest) -> Suggestions:
    """The next runs for the campaign in ``request.store``, its models fitted as
    ``perfcast model`` fits them (:func:`~perfcast.workflows.model.model_campaign`)."""
    check_count(request.count)
    spec = request.spec
    store = Path(request.store or spec.store)
    if not store.is_file():
        raise InputError(
            f"no campaign store {store}: run perfcast measure first (or name it with --store)"
        )
    metrics = (request.metric,) if request.metric else None
    measured = read_experiment(store)
    parameters = list(measured.parameters)
    unknown = [p for p in (request.target or {}) if p not in parameters]
    if unknown:
        raise InputError(
            f"--at names {', '.join(unknown)}, which the campaign in {store} does not vary "
            f"(it varies {', '.join(parameters) or 'nothing'})"
        )
    coordinates = measured.coordinates()
    values = distinct_values(parameters, coordinates)
    target = {**default_target(parameters, coordinates), **(request.target or {})}
    fixed, seconds, stored = _stored_runs(spec, store, parameters)
    names = [p.name for p in spec.parameters]
    predict = run_time_model(names, seconds)

    def cost(point: Mapping[str, float]) -> float:
        return predict(tuple(float(point[n]) for n in names))

    needed = PMNFModeler().min_points
    short = [p for p in parameters if len(values[p]) < needed]
    if short:
        return _values_to_model(
            spec, measured, short, values, needed, target, cost, fixed, request.count
        )
    fitted = model_campaign(ModelRequest(measured, store=store, metrics=metrics))
    experiment = fitted.experiment
    suggestions = rank_runs(
        fitted.models,
        experiment,
        target,
        seconds=cost,
        count=request.count,
        repetitions=spec.run.repetitions,
        grid={p.name: p.values for p in spec.parameters if p.name in parameters},
        fixed=fixed,
        stored=stored,
        metric=request.metric,
    )
    return Suggestions(
        suggestions.target,
        suggestions.metric,
        suggestions.widths,
        suggestions.suggestions,
        fitted.notes,
    )


def _stored_runs(
    spec: AppSpec, store: Path, parameters: Sequence[str]
) -> tuple[dict[str, float], dict[Coordinate, list[float]], dict[Coordinate, int]]:
    """From the store's runs: the values of the parameters the campaign does not vary, the
    wall seconds of the successful runs by point (every spec parameter), and each
    measured point's runs so far (failed ones included) by its varied parameters."""
    names = [p.name for p in spec.parameters]
    with CampaignStore.open(store) as opened:
        runs = opened.runs()
    fixed = {p.name: p.values[0] for p in spec.parameters if p.name not in parameters}
    seconds: dict[Coordinate, list[float]] = {}
    stored: dict[Coordinate, int] = {}
    for run in runs:
        if any(name not in run.point for name in names):
            continue
        fixed.update({n: run.point[n] for n in fixed})
        point = tuple(float(run.point[p]) for p in parameters)
        stored[point] = max(stored.get(point, 0), run.repetition + 1)
        if run.status == "ok" and run.seconds is not None:
            seconds.setdefault(tuple(float(run.point[n]) for n in names), []).append(run.seconds)
    if not seconds:
        raise InputError(f"{store} has no successful run with a wall time to cost runs by")
    return fixed, seconds, stored


def _values_to_model(
    spec: AppSpec,
    experiment: Experiment,
    short: Sequence[str],
    values: Mapping[str, Sequence[float]],
    needed: int,
    target: Mapping[str, float],
    cost: Callable[[Mapping[str, float]], float],
    fixed: Mapping[str, float],
    count: int,
) -> Suggestions:
    """Before there is a model: new values of the ``short`` parameters, which have fewer
    than the ``needed`` values (``values``), the cheapest first. No interval exists to
    narrow yet, so worth is not weighed; the spec's own values come first, then the series
    the measured values make."""
    parameters = list(experiment.parameters)
    measured = experiment.coordinates()
    grid = {p.name: [float(v) for v in p.values] for p in spec.parameters}
    found: dict[Coordinate, str] = {}
    for name in short:
        j = parameters.index(name)
        reason = (
            f"new value of {name}: it has {len(values[name])} value(s) "
            f"({', '.join(map(format_value, values[name]))}), a model needs {needed}"
        )
        listed = sorted(set(grid.get(name, ())) - set(values[name]))
        for value in [*listed, *more_values(values[name])]:
            for point in measured:
                candidate = tuple(float(v) for v in (*point[:j], value, *point[j + 1 :]))
                found.setdefault(candidate, reason)
    suggestions = []
    runs = max(spec.run.repetitions, 1)
    for candidate, reason in found.items():
        full = {**fixed, **dict(zip(parameters, candidate, strict=True))}
        wall = float(cost(full)) * runs
        core_hours = wall * int(full.get(RANKS, 1)) / 3600.0
        suggestions.append(Suggestion(full, runs, 0, wall, core_hours, 0.0, reason, (), True))
    suggestions.sort(key=lambda s: s.core_hours)
    note = (
        f"no model yet: {', '.join(short)} {'has' if len(short) == 1 else 'have'} fewer than "
        f"the {needed} values a model needs; these runs add them, the cheapest first"
    )
    return Suggestions(target, "", (), tuple(suggestions[:count]), (note,))


@dataclass(frozen=True)
class Budget:
    """What ``--until`` may spend: core-hours of runs (ranks x wall seconds) and wall time,
    each ``None`` where not limited."""

    core_hours: float | None = None
    wall_seconds: float | None = None

    @classmethod
    def parse(cls, text: str, flag: str = "--budget") -> Budget:
        """``core-hours=5``, ``wall=2h`` (``s``, ``m``, ``h``, ``d``; no unit: seconds), or
        both, comma-separated."""
        found: dict[str, float] = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            name, _, value = item.partition("=")
            name = name.strip()
            if name == "core-hours":
                found[name] = _bounded(_number(value, flag, text), MAX_CORE_HOURS, flag, item)
            elif name == "wall":
                found[name] = _bounded(_duration(value, flag, text), MAX_WALL_SECONDS, flag, item)
            else:
                raise InputError(
                    f"{flag} {text!r}: {item!r} is not core-hours=NUMBER or wall=DURATION "
                    "(e.g. --budget core-hours=5 or --budget wall=2h)"
                )
        if not found:
            raise InputError(f"{flag} {text!r}: give core-hours=NUMBER, wall=DURATION or both")
        return cls(found.get("core-hours"), found.get("wall"))

    def left(self, core_hours: float, wall_seconds: float) -> str | None:
        """Why the budget is spent after ``core_hours`` and ``wall_seconds`` (None: not)."""
        if self.core_hours is not None and core_hours >= self.core_hours:
            return f"budget spent: {core_hours:.3g} of {self.core_hours:g} core-hours"
        if self.wall_seconds is not None and wall_seconds >= self.wall_seconds:
            return f"budget spent: {wall_seconds:.0f} of {self.wall_seconds:.0f} s wall time"
        return None


_DURATION = re.compile(r"\s*([0-9.eE+-]+)\s*([smhd]?)\s*")
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def _number(text: str, flag: str, whole: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{flag} {whole!r}: {text.strip()!r} is not a number") from None
    return value


def _duration(text: str, flag: str, whole: str) -> float:
    found = _DURATION.fullmatch(text)
    if found is None:
        raise InputError(
            f"{flag} {whole!r}: {text.strip()!r} is not a duration (such as 90s, 30m, 2h, 1d)"
        )
    return _number(found.group(1), flag, whole) * _UNITS[found.group(2)]


def _bounded(value: float, high: float, flag: str, item: str) -> float:
    if not (math.isfinite(value) and 0 < value <= high):
        raise InputError(f"{flag} {item!r}: give a number above 0 and at most {high:g}")
    return value


def parse_width(text: str, flag: str = "--until") -> float:
    """``width=0.2``: the relative width of the prediction interval to reach."""
    name, equals, value = text.partition("=")
    if not equals or name.strip() != "width":
        raise InputError(
            f"{flag} {text!r}: give width=NUMBER, the 95 % prediction interval's width over "
            "the value at the target (e.g. width=0.2)"
        )
    return _bounded(_number(value, flag, text), MAX_WIDTH, flag, text)


@dataclass(frozen=True)
class UntilRequest:
    """One ``perfcast measure --until`` job: the campaign as ``perfcast measure`` runs it
    (``resume``, ``retry_failed``, ``build``, ``design``, ``counting_pass``), then rounds
    of :data:`DEFAULT_PER_ROUND` suggested points until every call path that matters is
    predicted at ``target`` within ``width`` (the 95 % prediction interval's width over
    the value), within ``budget`` (this call's runs only: a resumed campaign has it anew)."""

    spec: AppSpec
    width: float
    budget: Budget
    store: Path | None = None
    target: Mapping[str, float] | None = None
    per_round: int = DEFAULT_PER_ROUND
    resume: bool = False
    retry_failed: bool = False
    build: bool = True
    design: str | None = None
    counting_pass: bool = True
    metric: str | None = None
    """The metric whose call paths matter (:attr:`SuggestRequest.metric`)."""


@dataclass(frozen=True)
class UntilResult:
    """How ``--until`` went: the campaigns it ran (the spec's first, then one per round),
    the last suggestions (what the models said when it stopped), why it stopped, and what
    it spent."""

    campaigns: tuple[CampaignResult, ...]
    suggestions: Suggestions | None
    stopped: str
    core_hours: float
    wall_seconds: float
    rounds: int
    reached: bool

    def summary(self) -> str:
        lines = [self.campaigns[-1].summary()] if self.campaigns else []
        lines.append(
            f"--until: {self.rounds} round(s) of suggested runs, {self.core_hours:.3g} "
            f"core-hours and {self.wall_seconds:.0f} s spent; stopped: {self.stopped}"
        )
        if self.suggestions is not None:
            lines.append(self.suggestions.widths_table())
        return "\n".join(lines)


def measure_until(
    request: UntilRequest, backend: Backend, stream: IO[str] | None = None
) -> UntilResult:
    """The campaign, then rounds of the best suggested runs (module docstring)."""
    spec = request.spec
    store = Path(request.store or spec.store)
    check_count(request.per_round, "--per-round")
    start = time.monotonic()
    stores = [store, counting_store(store)]
    before = {path: _run_keys(path) for path in stores}
    campaigns = [
        measure(
            spec,
            backend,
            store_path=store,
            resume=request.resume,
            retry_failed=request.retry_failed,
            build=request.build,
            design=request.design,
            stream=stream,
            counting_pass=request.counting_pass,
        )
    ]
    suggestions = None
    rounds = 0

    def spent() -> tuple[float, float]:
        return _core_hours(stores, before), time.monotonic() - start

    def result(stopped: str, reached: bool = False) -> UntilResult:
        core_hours, wall = spent()
        return UntilResult(
            tuple(campaigns), suggestions, stopped, core_hours, wall, rounds, reached
        )

    widest: list[float] = []
    if campaigns[0].report.stopped is not None:
        return result("the campaign's runs failed; fix the program and --resume")
    while True:
        # the target of the first round stays: the default one moves with the largest
        # measured point, and rounds that measure farther out would chase it
        target = request.target if suggestions is None else suggestions.target
        suggestions = suggest_runs(
            SuggestRequest(spec, store, MAX_SUGGESTIONS, target, request.metric)
        )
        if suggestions.reached(request.width):
            return result(
                f"target reached: every call path that matters is predicted within "
                f"{100 * request.width:g} % at {format_point(suggestions.target)}",
                reached=True,
            )
        widest.append(_widest(suggestions))
        if _stalled(widest):
            return result(
                f"the intervals stopped narrowing: the widest is {100 * widest[-1]:.3g} % after "
                f"{STALL_ROUNDS} rounds that took it from {100 * widest[-1 - STALL_ROUNDS]:.3g} %"
                f", against {100 * request.width:g} % asked. More of the same runs buy little: "
                "measure farther out along the parameters (--at a nearer target, or a larger "
                "value in [parameters]), or question the model's shape, which its interval "
                "does not count (perfcast model --full shows its rivals)"
            )
        core_hours, wall = spent()
        over = request.budget.left(core_hours, wall)
        if over is not None:
            return result(over)
        if rounds >= MAX_ROUNDS:
            return result(f"{MAX_ROUNDS} rounds, the most --until makes")
        chosen = _affordable(suggestions.suggestions, request, backend, core_hours, wall)
        if not suggestions.suggestions:
            return result("nothing left worth running: no candidate narrows the intervals")
        if not chosen:
            cheapest = min(s.core_hours for s in suggestions.suggestions)
            return result(
                "budget spent: no suggested run fits what is left of it (the cheapest "
                f"cost {cheapest:.3g} core-hours)"
            )
        rounds += 1
        if stream is not None:
            for s in chosen:
                print(
                    f"round {rounds}: {format_point(s.point)} x{s.runs} "
                    f"(about {s.core_hours:.3g} core-hours): {s.reason}",
                    file=stream,
                    flush=True,
                )
        campaign = measure(
            spec,
            backend,
            store_path=store,
            resume=True,
            build=False,
            stream=stream,
            counting_pass=request.counting_pass,
            plan=plan_of(spec, chosen),
        )
        campaigns.append(campaign)
        ran = campaign.report.succeeded + len(campaign.report.failed)
        if campaign.report.stopped is not None or (ran and not campaign.report.succeeded):
            return result(
                f"round {rounds}'s runs failed ({len(campaign.report.failed)}); fix the "
                "program and --resume"
            )
        if not ran:
            return result("nothing left to run: the suggested runs are stored already")


STALL_ROUNDS = 3
"""Rounds over which the widest interval must narrow by :data:`STALL_GAIN` for ``--until``
to go on: ranked per core-hour, the suggestions turn to cheap repetitions once the model
has settled, and the adaptive-design benchmark saw 200 such rounds leave the error flat
(``benchmarks/results/adaptive_design.txt``, before a run at a measured point was worth
only what it does to that point's mean, :mod:`perfcast.modeling.worth`)."""
STALL_GAIN = 0.1
"""The least relative narrowing of the widest interval over :data:`STALL_ROUNDS` rounds."""


def _widest(suggestions: Suggestions) -> float:
    """The widest relative interval among the call paths that matter (inf where a call
    path has too few values of a parameter to count its interval yet, or nothing is
    modeled yet)."""
    return max((math.inf if w.few else w.relative for w in suggestions.widths), default=math.inf)


def _stalled(widest: Sequence[float]) -> bool:
    """Whether the last :data:`STALL_ROUNDS` rounds narrowed the widest interval by less
    than :data:`STALL_GAIN` of it (never while an interval does not count yet)."""
    if len(widest) <= STALL_ROUNDS:
        return False
    before, now = widest[-1 - STALL_ROUNDS], widest[-1]
    return math.isfinite(before) and now > (1 - STALL_GAIN) * before


def _affordable(
    suggestions: Sequence[Suggestion],
    request: UntilRequest,
    backend: Backend,
    core_hours: float,
    wall: float,
) -> list[Suggestion]:
    """The best suggestions, at most ``request.per_round``, that fit what is left of the
    budget (and, on a virtual cluster, its cores)."""
    budget = request.budget
    hours_left = math.inf if budget.core_hours is None else budget.core_hours - core_hours
    wall_left = math.inf if budget.wall_seconds is None else budget.wall_seconds - wall
    cores = len(backend.cluster.hosts) if isinstance(backend, SmpiBackend) else None
    chosen: list[Suggestion] = []
    for s in suggestions:
        if len(chosen) == request.per_round:
            break
        if s.core_hours > hours_left or s.seconds > wall_left:
            continue
        if cores is not None and s.ranks > cores:
            continue
        chosen.append(s)
        hours_left -= s.core_hours
        wall_left -= s.seconds
    return chosen


def _run_keys(path: Path) -> set[str]:
    if not path.is_file():
        return set()
    with CampaignStore.open(path) as store:
        return store.finished_keys()


def _core_hours(stores: Sequence[Path], before: Mapping[Path, set[str]]) -> float:
    """Core-hours (ranks x wall seconds) of the runs stored since ``before`` was taken."""
    total = 0.0
    for path in stores:
        if not path.is_file():
            continue
        with CampaignStore.open(path) as store:
            for run in store.runs():
                if run.key in before[path] or run.seconds is None:
                    continue
                total += run.seconds * (run.ranks or int(run.point.get(RANKS, 1))) / 3600.0
    return total


__all__ = [
    "Budget",
    "SuggestRequest",
    "Suggestion",
    "Suggestions",
    "UntilRequest",
    "UntilResult",
    "measure_until",
    "parse_width",
    "rank_runs",
    "suggest_runs",
]
