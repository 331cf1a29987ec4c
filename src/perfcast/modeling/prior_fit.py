"""Fitting under priors and settling their conflicts: one procedure for every source.

A prior either restricts the search (taint: which parameters, which products) or fixes the
term structure (effort counts, the static model, communication laws). The two are fitted
differently: a restriction by the modeler's own search under the prior, a fixed structure
by a coefficient fit (:class:`FixedFit`: the effort modeler fits each point's fastest
repetition, since the exponents cannot chase the minimum's noise, and treats negative
coefficients by a policy). Every constrained model then meets its black-box counterpart
under the one conflict rule (:mod:`perfcast.modeling.prior_conflicts`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

from perfcast.experiment.experiment import Experiment
from perfcast.experiment.metrics import VISITS_METRIC
from perfcast.modeling.modeler import PMNFModeler
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.pmnf import Model
from perfcast.modeling.prior import Prior, PriorKey
from perfcast.modeling.prior_conflicts import (
    CONFLICT_GAP,
    CONFLICT_RATIO,
    PriorConflict,
    resolve_conflict,
)


class FixedFit(Protocol):
    """How the coefficients of fixed term structures are fitted
    (:class:`perfcast.effort.EffortModeler` is one)."""

    disagreement_ratio: float
    disagreement_gap: float

    def fit_coefficients(
        self, experiment: Experiment, priors: Mapping[str, Prior], metric: str | None = None
    ) -> list[Model]:
        """Models of ``metric`` for the call paths of ``priors``, coefficients only."""
        ...

    def comparable_blackbox(
        self, experiment: Experiment, callpaths: Sequence[str], metric: str, free: ModelSet
    ) -> ModelSet:
        """Black-box models fitted to the same points as :meth:`fit_coefficients` fits."""
        ...


def fit_under_priors(
    modeler: PMNFModeler,
    fixed: FixedFit,
    experiment: Experiment,
    priors: Mapping[PriorKey, Prior],
    free: ModelSet,
    *,
    unreachable: Mapping[str, Collection[str]] | None = None,
    labels: Mapping[str, str] | None = None,
) -> tuple[list[Model], list[PriorConflict]]:
    """The model to report for every (call path, metric) of ``priors``, and the conflicts.

    Args:
        modeler: fits the restricting priors (its own search under the prior).
        fixed: fits the fixed structures.
        experiment: the measurements.
        priors: (call path, metric) -> prior.
        free: the black-box models of the measured metrics (visits included, if measured).
        unreachable: call path -> parameters its code provably cannot read (taint).
        labels: prior source -> how its conflict warnings start (default:
            ``<source> prior conflicts with the measurements``).

    A key whose metric has no black-box model (nothing to compare with) keeps its
    constrained model without a check.
    """
    by_metric: dict[str, dict[str, Prior]] = {}
    for (callpath, metric), prior in priors.items():
        by_metric.setdefault(metric, {})[callpath] = prior
    kept: list[Model] = []
    conflicts: list[PriorConflict] = []
    for metric, entries in by_metric.items():
        structured = {c: p for c, p in entries.items() if p.structure is not None}
        restricted = {c: p for c, p in entries.items() if p.structure is None}
        fitted: list[tuple[Model, ModelSet, float, float]] = []
        if structured:
            comparable = fixed.comparable_blackbox(experiment, list(structured), metric, free)
            ratio, gap = fixed.disagreement_ratio, fixed.disagreement_gap
            fitted += [
                (m, comparable, ratio, gap)
                for m in fixed.fit_coefficients(experiment, structured, metric)
            ]
        if restricted:
            subset = experiment.restricted(callpaths=list(restricted), metrics=[metric])
            fitted += [
                (m, free, CONFLICT_RATIO, CONFLICT_GAP)
                for m in modeler.fit(subset, priors=restricted)
            ]
        for model, comparable, ratio, gap in fitted:
            key = (model.callpath, model.metric)
            if key not in comparable:
                kept.append(model)
                continue
            prior = entries[model.callpath]
            model, conflict = resolve_conflict(
                model,
                comparable[key],
                prior,
                source=prior.source,
                visits=free.get((model.callpath, VISITS_METRIC)),
                unreachable=(unreachable or {}).get(model.callpath, ()),
                ratio=ratio,
                gap=gap,
                label=(labels or {}).get(prior.source),
            )
            kept.append(model)
            if conflict is not None:
                conflicts.append(conflict)
    return kept, conflicts


__all__ = ["FixedFit", "fit_under_priors"]
