"""The effort counters as one prior source of the composition (:mod:`perfcast.priors`).

:meth:`EffortSource.derive` models the counts exactly and turns them into fixed structures
of the time model (:meth:`~perfcast.effort.priors.EffortModeler.derive`); the composition
decides what other sources may add, the pipeline fits. What it derived
(:class:`EffortPriors`) then judges the final models: :meth:`EffortPriors.check` says where
counts vary between repetitions (busy waiting), and :meth:`EffortPriors.report` gives the
side-by-side report of ``--priors effort``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from perfcast.effort.priors import (
    DISAGREEMENT_WARNING,
    PRIOR_SOURCE,
    WAITING_WARNING,
    EffortModeler,
    EffortPrior,
)
from perfcast.effort.report import render_effort
from perfcast.effort.waiting import VaryingCounts, varying_counts
from perfcast.experiment.experiment import Experiment
from perfcast.experiment.metrics import COUNTER_METRICS, is_counter
from perfcast.modeling.findings import Finding
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.prior import DerivedPriors

CAVEATS = (
    "an implicit (control-flow) dependency, which taint analysis does not follow",
    "busy waiting, whose spin loop inflates the counts",
    "work done on some ranks only, which the rank mean of the counts divides by the ranks",
)
"""Why exact counts can depend on a parameter that another source (taint analysis) rules
out: the counts are measured, so they are kept, and these are what to look for."""


@dataclass(frozen=True, kw_only=True)
class EffortPriors(DerivedPriors):
    """What :meth:`EffortSource.derive` found: the priors of the composition and, for
    :meth:`check` and :meth:`report`, where each came from.

    Attributes:
        effort_priors: call path -> its effort prior with the count model (and the
            communication law) it was derived from.
        waiting: the call paths whose effort counts vary between repetitions of a point
            (busy waiting, :mod:`perfcast.effort.waiting`), with the largest variation;
            empty when every point was measured once.
        time_metric: the metric the priors constrain.
    """

    effort_priors: Mapping[str, EffortPrior]
    waiting: Mapping[str, VaryingCounts]
    time_metric: str

    def check(
        self,
        models: ModelSet,
        free: ModelSet,
        experiment: Experiment,
        proven: Mapping[str, frozenset[str]],
    ) -> list[Finding]:
        """Busy waiting: a finding on the time model of every call path whose counts vary
        between repetitions, saying which model carries the waiting: the one under the
        prior, or the black-box one kept instead."""
        findings = []
        for callpath, found in self.waiting.items():
            key = (callpath, self.time_metric)
            if key not in models:
                continue
            carried = (
                "the prior carries that waiting"
                if models[key].prior is not None
                else "the counts did not follow the time, so the black-box model is kept"
            )
            findings.append(
                Finding(
                    PRIOR_SOURCE,
                    callpath,
                    self.time_metric,
                    "waiting",
                    f"{WAITING_WARNING} ({found.describe()}): busy waiting or "
                    f"timing-dependent control flow; {carried}",
                )
            )
        return findings

    def report(self, models: ModelSet, free: ModelSet) -> str:
        """The effort report (:func:`~perfcast.effort.report.render_effort`) of the final
        models, with the black-box time models of ``free`` beside them."""
        blackbox = ModelSet(models.parameters, (m for m in free if m.metric == self.time_metric))
        return render_effort(self, models, blackbox)


class EffortSource:
    """Effort priors for :func:`perfcast.priors.fit_with_priors`, derived by ``modeler``."""

    name = PRIOR_SOURCE

    def __init__(self, modeler: EffortModeler):
        self.modeler = modeler

    def derive(self, experiment: Experiment) -> EffortPriors:
        """Fixed structures of the time metric from the exact count models."""
        priors, counter_models, notes = self.modeler.derive(experiment)
        waiting = varying_counts(experiment, COUNTER_METRICS, self.modeler.repetition_tolerance)
        time = self.modeler.time_metric
        return EffortPriors(
            PRIOR_SOURCE,
            {(callpath, time): entry.prior for callpath, entry in priors.items()},
            notes=tuple(notes),
            models=tuple(counter_models),
            # the counts, not the structure: a law's log2(p) latency was never counted
            evidence={(c, time): frozenset(e.effort.parameters) for c, e in priors.items()},
            caveats=CAVEATS,
            exact_metrics=frozenset(m for m in experiment.metrics if is_counter(m)),
            conflict_label=DISAGREEMENT_WARNING,
            effort_priors=priors,
            waiting=waiting,
            time_metric=time,
        )


__all__ = ["CAVEATS", "EffortPriors", "EffortSource"]
