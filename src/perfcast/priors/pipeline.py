"""Priors as one stage: derive from every source, compose, fit, settle conflicts, check.

:func:`fit_with_priors` is what ``perfcast model --priors taint,effort,static`` runs, in
any combination:

1. **Derive.** Each source (:class:`PriorSource`: the taint profile, the effort counters
   in the experiment, the static model) turns its input into priors per (call path,
   metric), with notes and findings; effort also models its counts exactly.
2. **Compose** (:func:`perfcast.priors.compose`): restrictions intersect, a fixed
   structure wins over a restriction, conflicts between sources become findings.
3. **Fit.** Every measured metric black-box (only a model free to use every parameter
   reveals a dependency the code lacks), then each composed prior
   (:func:`~perfcast.modeling.prior_fit.fit_under_priors`: fixed structures by their
   coefficients, restrictions by the modeler's search under them).
4. **Conflicts.** A constrained model much worse than the black-box one, or contradicted
   by the measured visits, gives way to it, with a finding (stage ``"conflict"``).
5. **Regimes.** A model of measured (not exact) data that crosses a change of regime
   along a parameter is refitted on the last segment, the regime that continues
   (:mod:`perfcast.priors.segments`).
6. **Checks.** What each source derived judges the final models
   (:meth:`DerivedPriors.check <perfcast.modeling.prior.DerivedPriors.check>`; taint:
   contention and algorithm switches; effort: busy waiting), as findings.

The result is one :class:`~perfcast.modeling.modelset.ModelSet`: the models, immutable,
and every finding with the stage that made it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Protocol

from perfcast.effort.counts import CountModeler
from perfcast.effort.priors import EffortModeler
from perfcast.effort.waiting import RELATIVE_RANGE, repetition_ranges
from perfcast.experiment.experiment import METRIC, Experiment
from perfcast.experiment.metrics import VISITS_METRIC, base_metric, is_counter
from perfcast.modeling.modeler import PMNFModeler
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.pmnf import Model
from perfcast.modeling.prior import DerivedPriors
from perfcast.modeling.prior_conflicts import PriorConflict
from perfcast.modeling.prior_fit import FixedFit, fit_under_priors
from perfcast.modeling.space import SearchSpace
from perfcast.priors.compose import Composition, compose
from perfcast.priors.segments import segment_models


class PriorSource(Protocol):
    """One source of priors: :class:`~perfcast.taint.source.TaintSource`,
    :class:`~perfcast.effort.source.EffortSource`,
    :class:`~perfcast.static.prior.StaticSource`."""

    name: str

    def derive(self, experiment: Experiment) -> DerivedPriors:
        """Priors per (call path, metric), with notes and findings; a source that judges
        the final models or reports them returns a :class:`DerivedPriors` that does
        (its ``check`` and ``report``)."""
        ...


@dataclass(frozen=True)
class PriorFit:
    """What :func:`fit_with_priors` returns.

    Attributes:
        models: the final models and every finding on them.
        free: the black-box models of the measured metrics.
        derived: what each source derived, in the order given.
        composition: the composed priors and the sources' conflicts.
        conflicts: the constrained models that conflicted with their measurements.
    """

    models: ModelSet
    free: ModelSet
    derived: tuple[DerivedPriors, ...]
    composition: Composition
    conflicts: tuple[PriorConflict, ...]

    @property
    def notes(self) -> list[str]:
        """The sources' notes, each once."""
        return list(dict.fromkeys(note for d in self.derived for note in d.notes))

    @cached_property
    def reports(self) -> tuple[str | None, ...]:
        """Each derivation's own report of the final models (None: it has none), rendered
        once: the priors stage's report prints them, and the modeling workflow leaves out
        the notes of a source whose report shows them."""
        return tuple(d.report(self.models, self.free) for d in self.derived)


def fit_with_priors(
    modeler: PMNFModeler,
    experiment: Experiment,
    sources: Sequence[PriorSource],
    *,
    fixed: FixedFit | None = None,
) -> PriorFit:
    """Model ``experiment`` under the composed priors of ``sources`` (module docstring).

    Args:
        modeler: the black-box modeler; also searches under restricting priors.
        experiment: the measurements.
        sources: the prior sources; none gives the black-box models alone.
        fixed: fits the coefficients of fixed structures (default: an
            :class:`~perfcast.effort.priors.EffortModeler` on ``modeler``: each point's
            fastest repetition, the negative-term policy).
    """
    fixed = fixed or EffortModeler(modeler)
    derived = tuple(source.derive(experiment) for source in sources)
    exact = [model for d in derived for model in d.models]
    modeled = {m.metric for m in exact}  # a source's own exact models are not refitted
    exact_metrics = modeled | {m for d in derived for m in d.exact_metrics}
    # no prior constrains a metric known exactly
    composition = compose(
        [
            replace(d, priors={k: p for k, p in d.priors.items() if k[1] not in exact_metrics})
            for d in derived
        ]
    )
    measured = [m for m in experiment.columns.metrics if m not in modeled]  # with values
    counted = deterministic_metrics(experiment, measured)
    exact = [*exact, *_count_models(experiment, counted, modeler.space)]
    exact_metrics |= set(counted)
    measured = [m for m in measured if m not in counted]
    free = ModelSet(experiment.parameters)
    if measured:
        free = modeler.fit(experiment.restricted(metrics=measured))
    unreachable: dict[str, frozenset[str]] = {}
    for d in derived:
        for callpath, parameters in d.unreachable.items():
            unreachable[callpath] = unreachable.get(callpath, frozenset()) | parameters
    labels = {d.source: d.conflict_label for d in derived if d.conflict_label is not None}
    constrained, conflicts = fit_under_priors(
        modeler,
        fixed,
        experiment,
        composition.priors,
        free,
        unreachable=unreachable,
        labels=labels,
    )
    findings = [
        *(f for d in derived for f in d.findings),
        *composition.findings,
        *(c.finding() for c in conflicts),
    ]
    models = ModelSet(experiment.parameters, [*exact, *free, *constrained], None, findings)
    models = segment_models(
        models, experiment, modeler, fixed, composition.priors, sorted(exact_metrics)
    )
    checked_free = ModelSet(free.parameters, (m for m in free if m.metric not in exact_metrics))
    for d in derived:
        models = models.with_findings(
            d.check(models, checked_free, experiment, composition.ruled_out)
        )
    return PriorFit(models, free, derived, composition, tuple(conflicts))


def deterministic_metrics(experiment: Experiment, metrics: Sequence[str]) -> list[str]:
    """Those of ``metrics`` that are counts (effort counters, their maxima over ranks, and
    visits) and repeat exactly wherever a point was measured twice. Such data has no noise
    to average: fitted like time, ``1428 n^3 - 1836 n^2`` became ``658 n^(11/4) log2(n)``.
    Visits of a polling call (``MPI_Test`` until a message arrives) differ between
    repetitions and stay with the time modeler."""
    present = set(experiment.columns.metrics)  # a store declares metrics no run measured
    named = [
        m for m in metrics if m in present and (is_counter(m) or base_metric(m) == VISITS_METRIC)
    ]
    if not named:
        return []
    ranges = repetition_ranges(experiment, named)
    moving = set(ranges.loc[ranges[RELATIVE_RANGE] > 0, METRIC])
    return [m for m in named if m not in moving]


def _count_models(
    experiment: Experiment, metrics: Sequence[str], space: SearchSpace
) -> list[Model]:
    """The exact-count models of ``metrics``, in the time modeler's search space."""
    if not metrics:
        return []
    return list(CountModeler(space).fit(experiment.restricted(metrics=list(metrics))))


__all__ = ["PriorFit", "PriorSource", "fit_with_priors"]
