"""Effort priors and taint analysis together: ``perfcast model --priors effort --taint``.

The two sources say different things about a call path. Effort counters
(``noise-resilient-priors.txt`` III-B/C) are *measured and exact*: they fix the term shapes
of the time model. Taint analysis (``perf-taint-tainted-performance-modeling.txt``, section
B1) says which parameters the code *may* depend on: it restricts the hypothesis space but
fixes nothing. The combination, per (call path, metric):

1. **Effort first.** A time model with an effort prior keeps it: exact counts are a
   stronger statement than "may depend on". Intersecting the two would silently drop
   terms the counts measured whenever taint misses a dependency.
2. **Taint where effort has nothing to say.** Everything the effort modeler fits
   black-box -- call paths without counters, MPI operations without a Table I law
   (``MPI_Wait``, ``MPI_Init``), and every metric other than the constrained time
   (``time:max``, ``cpu_time``, ...) -- is fitted under the call path's taint prior, as
   ``perfcast model --taint`` would. The count models themselves (and their maxima over
   ranks) stay unrestricted: they are exact, and they are what the cross-check below
   compares with taint.
3. **Cross-check.** An effort prior whose counts depend on a parameter that taint says the
   call path's code cannot depend on is a finding: its time model gets a warning naming the
   parameter. Causes: an implicit (control-flow) dependency, which taint analysis does not
   follow; busy waiting, whose spin loop inflates the counts; for the ranks parameter, work
   that only some ranks do (counts are rank means, so rank-0 work is divided by ``p``).
   The other direction -- taint allows a parameter the counts do not grow with -- is not a
   finding: taint bounds what *may* matter (a parameter may change only values, not trip
   counts).
4. **Validity flags** of the taint analysis (:func:`perfcast.taint.validity.flag_models`:
   contention/noise, possible algorithm switches) apply to every final model, judged
   against the black-box fits the effort modeler made anyway. Contention is judged on
   measured metrics only: exact counts cannot be inflated by contention, and their
   disagreement with taint is rule 3. Nor is time that grows with a parameter the call
   path's counts grow with: the counted work explains it, and rule 3 has said what is
   wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from perfcast.effort.priors import (
    CLASSIC_FALLBACK,
    COUNTER_METRICS,
    EffortModeler,
    EffortModels,
    EffortPrior,
)
from perfcast.effort.report import render_effort, short_notes
from perfcast.experiment.experiment import CALLPATH, METRIC, Experiment
from perfcast.experiment.names import name_list
from perfcast.measure.profiles import MAX_SUFFIX
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.prior import Prior
from perfcast.taint.validity import (
    TaintMatch,
    flag_models,
    resolve_taint_conflicts,
    unreachable_parameters,
)

DISAGREEMENT_WARNING = "effort counts and taint analysis disagree"

DISAGREEMENT_CAUSES = (
    "an implicit (control-flow) dependency, which taint analysis does not follow",
    "busy waiting, whose spin loop inflates the counts",
)
"""Why exact counts can depend on a parameter that taint analysis rules out."""

RANKS_CAUSE = "work done on some ranks only, which the rank mean of the counts divides by {ranks}"
"""The extra cause for the ranks parameter: the counts are means over ranks, so work only
rank 0 does shrinks with ``p`` although no code reads ``p``."""


@dataclass
class EffortTaintModels:
    """What :func:`fit_with_taint` returns.

    Attributes:
        effort: the effort modeler's result; ``effort.models`` holds the final models (taint
            priors and warnings included), ``effort.blackbox`` the black-box time models.
        match: how the taint profile matched the experiment's call paths.
        taint_fitted: call path -> the metrics fitted under its taint prior (empty when
            the taint profile only checks).
        disagreements: call path -> parameters its effort counts depend on that the taint
            analysis rules out (rule 3 of the module docstring).
        priors_applied: whether taint priors were fitted (``False``: flags only).
        notes: what the user must know about the taint match.
    """

    effort: EffortModels
    match: TaintMatch
    taint_fitted: dict[str, list[str]] = field(default_factory=dict)
    disagreements: dict[str, list[str]] = field(default_factory=dict)
    priors_applied: bool = True
    notes: list[str] = field(default_factory=list)

    @property
    def models(self) -> ModelSet:
        return self.effort.models


def fit_with_taint(
    effort: EffortModeler,
    experiment: Experiment,
    profile: Mapping[str, Any],
    match: TaintMatch,
    *,
    apply_taint_priors: bool = True,
) -> EffortTaintModels:
    """Model ``experiment`` with effort priors first and taint priors where effort has
    none; cross-check the two and flag every model (module docstring).

    Args:
        effort: the effort modeler; its time modeler also fits the taint priors.
        experiment: the measurements, counters included.
        profile: the taint profile (for the algorithm-switch flags).
        match: the profile matched to ``experiment`` (:func:`~perfcast.taint.validity.
            match_profile`, inclusive or exclusive as the metrics are).
        apply_taint_priors: ``False`` keeps the effort modeler's black-box fits and only
            adds the taint flags and the cross-check (``--taint-mode check``).
    """
    unreachable = {  # contention, not work, where a black-box model uses these
        callpath: unreachable_parameters(profile, match, callpath, experiment.parameters)
        for callpath in match.priors
    }
    result = effort.fit(experiment, unreachable)
    free = _blackbox_models(result)
    combined = EffortTaintModels(
        result, match, priors_applied=apply_taint_priors, notes=match.notes()
    )
    if apply_taint_priors:
        combined.taint_fitted = _fit_taint_priors(effort, experiment, result, match)
        fitted = [result.models[(c, m)] for c, ms in combined.taint_fitted.items() for m in ms]
        tainted = ModelSet(result.models.parameters, fitted)
        conflicts = resolve_taint_conflicts(tainted, free, profile, match)
        for model in tainted:
            result.models.add(model)
        if conflicts:
            metrics: dict[str, list[str]] = {}
            for conflict in conflicts:
                metrics.setdefault(conflict.callpath, []).append(conflict.metric)
            listed = name_list(metrics, tags=metrics)
            combined.notes.append(
                f"{len(conflicts)} model(s) conflict with their taint prior; each says which "
                f"model was kept, with both fits, in its warnings: {listed}"
            )
    for callpath, entry in result.priors.items():
        prior = match.priors.get(callpath)
        excluded = [] if prior is None else _excluded_parameters(entry, prior)
        if not excluded:
            continue
        combined.disagreements[callpath] = excluded
        model = result.models[(callpath, result.time_metric)]
        for parameter in excluded:
            model.warnings.append(_disagreement_text(parameter, effort.ranks))
    flag_models(result.models, free, profile, experiment, _counted(match, combined.disagreements))
    return combined


def _counted(match: TaintMatch, disagreements: Mapping[str, list[str]]) -> TaintMatch:
    """``match`` with each taint prior widened by the parameters exact counts proved.

    For the contention flag only: a black-box time model that depends on a parameter the
    counted work depends on measured that work, not contention or noise -- the
    disagreement warning, not the contention one, says what is wrong there."""
    priors = dict(match.priors)
    for callpath, parameters in disagreements.items():
        prior = priors[callpath]
        allowed = (prior.parameters or frozenset()) | frozenset(parameters)
        priors[callpath] = replace(prior, parameters=allowed)
    return replace(match, priors=priors)


def is_count(metric: str) -> bool:
    """An effort counter, or its maximum over ranks (``basic_blocks:max``): exact, so never
    restricted by taint and never suspected of contention."""
    return metric.removesuffix(MAX_SUFFIX) in COUNTER_METRICS


def _blackbox_models(result: EffortModels) -> ModelSet:
    """The black-box fit of every measured (not counted) metric: what the effort modeler
    fitted without a prior, with the black-box time models of the effort call paths."""
    free = ModelSet(result.models.parameters, list(result.blackbox))
    for model in result.models:
        key = (model.callpath, model.metric)
        if not is_count(model.metric) and key not in free:
            free.add(model)
    return free


def _fit_taint_priors(
    effort: EffortModeler, experiment: Experiment, result: EffortModels, match: TaintMatch
) -> dict[str, list[str]]:
    """Refit, under their taint priors, the models the effort modeler fitted black-box;
    returns call path -> metrics refitted."""
    data = experiment.data
    constrained = data[CALLPATH].isin(list(result.priors)) & (data[METRIC] == result.time_metric)
    counts = data[METRIC].isin([m for m in experiment.metrics if is_count(m)])
    mask = data[CALLPATH].isin(list(match.priors)) & ~counts & ~constrained
    if not mask.any():
        return {}
    subset = Experiment(
        experiment.parameters,
        data[mask],
        experiment.metrics.values(),
        source=experiment.source,
    )
    priors = {callpath: match.priors[callpath] for callpath in subset.callpaths}
    fitted: dict[str, list[str]] = {}
    for model in effort.modeler.fit(subset, priors=priors):
        result.models.add(model)
        fitted.setdefault(model.callpath, []).append(model.metric)
    return fitted


def _excluded_parameters(entry: EffortPrior, taint: Prior) -> list[str]:
    """Parameters the counts behind ``entry`` depend on that ``taint`` rules out.

    The counts, not the prior's structure: a communication law adds the ``log2(p)`` tree
    latency as a modeling assumption, which the counts never measured."""
    return [p for p in entry.effort.parameters if not taint.allows_parameter(p)]


def _disagreement_text(parameter: str, ranks: str) -> str:
    causes = list(DISAGREEMENT_CAUSES)
    if parameter == ranks:
        causes.append(RANKS_CAUSE.format(ranks=ranks))
    return (
        f"{DISAGREEMENT_WARNING}: the counts depend on {parameter}, but taint analysis finds "
        f"no dependency of this call path's code on {parameter} (possible causes: "
        f"{'; '.join(causes)}); the effort prior is kept"
    )


def render_effort_with_taint(result: EffortTaintModels, precision: int = 4) -> str:
    """The effort report, then the call paths fitted under taint priors instead of
    black-box (their time model beside the black-box one) and the taint notes."""
    time = result.effort.time_metric
    lines = [render_effort(_taint_fallbacks_named(result), precision), ""]
    if not result.priors_applied:
        lines.append(
            "Taint analysis (perf-taint): flags only, no taint priors (--taint-mode check)"
        )
    else:
        lines.append(
            "Taint priors (perf-taint) where effort has none: prior -> time model "
            "(instead of the black-box fit)"
        )
        for callpath, metrics in result.taint_fitted.items():
            if time not in metrics:
                continue
            key = (callpath, time)
            lines.append(callpath)
            rows = [
                ("prior", result.match.priors[callpath].describe()),
                ("time (taint prior)", result.models[key].text(precision)),
            ]
            if key in result.effort.blackbox:
                rows.append(("time (black-box)", result.effort.blackbox[key].text(precision)))
            width = max(len(label) for label, _ in rows)
            lines += [f"  {label:<{width}}  {text}" for label, text in rows]
            lines += [f"  warning: {w}" for w in result.models[key].warnings]
        others = {c: [m for m in ms if m != time] for c, ms in result.taint_fitted.items()}
        others = {c: ms for c, ms in others.items() if ms}
        if others:
            metrics = sorted({m for ms in others.values() for m in ms})
            lines.append(
                f"also under taint priors: {', '.join(metrics)} of {len(others)} call "
                f"path(s) (effort constrains {time} only)"
            )
        if not any(time in metrics for metrics in result.taint_fitted.values()):
            lines.append(f"(no {time} model was fitted under a taint prior)")
    if result.disagreements:
        listed = "; ".join(f"{c}: {', '.join(p)}" for c, p in result.disagreements.items())
        lines.append(
            f"{DISAGREEMENT_WARNING} on {len(result.disagreements)} call path(s) "
            f"(parameters the counts use but taint rules out): {listed}"
        )
    lines += [
        f"note: {note}" for note in short_notes(result.notes, (m.callpath for m in result.models))
    ]
    return "\n".join(lines)


def _taint_fallbacks_named(result: EffortTaintModels) -> EffortModels:
    """The effort result with its notes on classic fall-backs saying where a taint prior
    took the black-box fit's place."""
    time = result.effort.time_metric
    tainted = {c for c, metrics in result.taint_fitted.items() if time in metrics}
    notes = []
    for note in result.effort.notes:
        callpath = note.split(": ", 1)[0]
        if note.endswith(CLASSIC_FALLBACK) and callpath in tainted:
            note = note.removesuffix(CLASSIC_FALLBACK) + "; modeled under its taint prior"
        notes.append(note)
    return replace(result.effort, notes=notes)


__all__ = [
    "DISAGREEMENT_WARNING",
    "EffortTaintModels",
    "fit_with_taint",
    "is_count",
    "render_effort_with_taint",
]
