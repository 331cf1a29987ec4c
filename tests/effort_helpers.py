"""Effort-prior modeling as every user gets it: the priors stage with the effort source,
as ``perfcast model --priors effort`` runs it (:func:`perfcast.workflows.model.fit_models`)."""

from __future__ import annotations

from collections.abc import Sequence

from perfcast.effort import EffortModeler
from perfcast.effort.source import EffortPriors, EffortSource
from perfcast.experiment.experiment import Experiment
from perfcast.priors import PriorFit, PriorSource, fit_with_priors


def fit_effort(
    experiment: Experiment,
    effort: EffortModeler | None = None,
    others: Sequence[PriorSource] = (),
) -> tuple[PriorFit, EffortPriors]:
    """The priors stage's result under the effort priors (and ``others``), and what the
    effort source derived (its priors by call path, notes, busy waiting)."""
    effort = effort or EffortModeler()
    sources = [EffortSource(effort), *others]
    fit = fit_with_priors(effort.modeler, experiment, sources, fixed=effort)
    (derived,) = [d for d in fit.derived if isinstance(d, EffortPriors)]
    return fit, derived
