"""The effort counters as one prior source of the composition (:mod:`perfcast.priors`).

:meth:`EffortSource.derive` models the counts exactly and turns them into fixed structures
of the time model (:meth:`~perfcast.effort.priors.EffortModeler.derive`); the composition
decides what other sources may add, the pipeline fits. After the fit,
:meth:`EffortSource.check` says where counts vary between repetitions (busy waiting), and
:meth:`EffortSource.report` gives the side-by-side report of ``--priors effort``.
"""

from __future__ import annotations

from collections.abc import Mapping

from perfcast.effort.priors import DISAGREEMENT_WARNING, PRIOR_SOURCE, EffortModeler, EffortModels
from perfcast.effort.report import render_effort
from perfcast.effort.waiting import varying_counts
from perfcast.experiment.experiment import Experiment
from perfcast.experiment.metrics import COUNTER_METRICS, base_metric
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


def is_count(metric: str) -> bool:
    """An effort counter, or its maximum over ranks (``basic_blocks:max``): exact."""
    return base_metric(metric) in COUNTER_METRICS


class EffortSource:
    """Effort priors for :func:`perfcast.priors.fit_with_priors`.

    Holds what the last :meth:`derive` found (the priors with their count models, the
    call paths whose counts vary), which :meth:`check` and :meth:`report` use."""

    name = PRIOR_SOURCE

    def __init__(self, modeler: EffortModeler):
        self.modeler = modeler
        self._models: EffortModels | None = None

    def derive(self, experiment: Experiment) -> DerivedPriors:
        """Fixed structures of the time metric from the exact count models."""
        priors, counter_models, notes = self.modeler.derive(experiment)
        waiting = varying_counts(experiment, COUNTER_METRICS, self.modeler.repetition_tolerance)
        time = self.modeler.time_metric
        self._models = EffortModels(
            counter_models, priors, ModelSet(experiment.parameters), time, notes, waiting
        )
        return DerivedPriors(
            PRIOR_SOURCE,
            {(callpath, time): entry.prior for callpath, entry in priors.items()},
            notes=tuple(notes),
            models=tuple(counter_models),
            # the counts, not the structure: a law's log2(p) latency was never counted
            evidence={(c, time): frozenset(e.effort.parameters) for c, e in priors.items()},
            caveats=CAVEATS,
            exact_metrics=frozenset(m for m in experiment.metrics if is_count(m)),
            conflict_label=DISAGREEMENT_WARNING,
        )

    def check(
        self,
        models: ModelSet,
        free: ModelSet,
        experiment: Experiment,
        proven: Mapping[str, frozenset[str]],
    ) -> list[Finding]:
        """Busy waiting: a finding on every time model whose counts vary."""
        return self.modeler.waiting_findings(models, self._derived().waiting)

    def report(self, models: ModelSet, free: ModelSet) -> str:
        """The effort report (:func:`~perfcast.effort.report.render_effort`) of the final
        models, with the black-box time models of ``free`` beside them."""
        derived = self._derived()
        time = derived.time_metric
        blackbox = ModelSet(models.parameters, (m for m in free if m.metric == time))
        result = EffortModels(
            models, derived.priors, blackbox, time, derived.notes, derived.waiting
        )
        return render_effort(result)

    def _derived(self) -> EffortModels:
        if self._models is None:
            raise RuntimeError("EffortSource.derive must run before check and report")
        return self._models


__all__ = ["CAVEATS", "EffortSource", "is_count"]
