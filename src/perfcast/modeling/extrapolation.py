"""Which models are fit to extrapolate to a target point, and why the others are not.

A summary that ranks call paths by their value at ``p = 4096`` leads with whatever model
grows fastest, and the fastest growth is most often an artifact: ``p^3`` fitted to the wall
time of an ``MPI_Wait`` measured with eight ranks on two cores (waiting for a core, x2e9 by
the target), or a model the fit itself calls poor. The user's first line must not be one of
those. :func:`unfit_reasons` says, per model, every reason it cannot be read at the target,
each with the runs that would fix it; the summary (:mod:`perfcast.report.summary`) and the
report page rank only the models without a reason and list the others apart.

The reasons, each a fact the model set already holds:

* **poor fit**: the modeler's own verdict (:func:`perfcast.modeling.model_warnings.poor_fit`);
* **a short last regime**: a change of regime leaves too few values beyond it to model the
  regime that continues (:mod:`perfcast.priors.segments`);
* **too few values** of a parameter the model grows with and extrapolates in
  (fewer than :data:`~perfcast.modeling.advice.RECOMMENDED_VALUES`, Extra-P's threshold);
* **wide interval**: the 95 % confidence interval of the model's value at the target, which
  counts the rival shapes the data could not tell apart, spans more than
  :data:`MAX_INTERVAL_RATIO` or reaches zero: the measurements do not pin the growth down
  (the expected cost is what a ranking compares, so a new run's own noise is left out);
* **shared cores**: wall or CPU time of an MPI call from runs with more ranks than cores
  (:mod:`perfcast.measure.oversubscription`) measures waiting for a core, and a polling MPI
  library burns CPU time while it waits;
* **simulator time**: ``cpu_time`` of virtual runs (SMPI) charges the simulator's own work
  to the MPI calls: 12 s of ``MPI_Wait`` CPU time in a run of 0.044 s simulated. This one
  holds at the measured points too (:attr:`Unfit.everywhere`);
* **instrumentation dominates**: the call path's visits x perfcast's cost per measured call
  (:mod:`perfcast.measure.overhead`) are most of its measured exclusive time: a tiny
  function called millions of times measures perfcast's entry and exit, not its own work
  (issue 25: an inline helper of HPCG led the summary with 72 % of the time). Everywhere,
  too; the remedy is to measure it inside its caller.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from perfcast.experiment.calltree import split_callpath
from perfcast.experiment.metrics import CPU_TIME_METRIC, INCLUSIVE_SUFFIX, TIME_METRIC
from perfcast.experiment.points import format_value
from perfcast.modeling.advice import POOR_FIT, RECOMMENDED_VALUES, SHORT_SEGMENT, extend_series
from perfcast.modeling.intervals import confidence_interval
from perfcast.modeling.pmnf import Model
from perfcast.modeling.provenance import Instrumentation, Provenance

MAX_INTERVAL_RATIO = 10.0
"""Largest ratio of the upper to the lower end of the 95 % confidence interval at the
target for a model to be ranked there: a model whose data allow anything between one value
and ten times it says nothing about which call path will dominate."""

MPI_PREFIX = "MPI_"


@dataclass(frozen=True)
class Unfit:
    """Why a model is not ranked at a target point, and what would make it usable."""

    reason: str
    remedy: str
    everywhere: bool = False
    """The reason holds at the measured points too (the values are an artifact there)."""

    def text(self) -> str:
        return f"{self.reason}; {self.remedy}"


def is_mpi_call(callpath: str) -> bool:
    """Is the call path's innermost frame an MPI routine?"""
    frames = split_callpath(callpath)
    return bool(frames) and frames[-1].startswith(MPI_PREFIX)


def is_time(metric: str) -> bool:
    """A wall or CPU time metric, with any suffix (``time:max``, ``cpu_time_inclusive``)."""
    return metric.startswith((TIME_METRIC, CPU_TIME_METRIC))


def unfit_reasons(
    model: Model,
    target: Mapping[str, float],
    values: Mapping[str, Sequence[float]],
    provenance: Provenance | None = None,
) -> tuple[Unfit, ...]:
    """Every reason ``model`` is not fit to be read at ``target`` (empty: it is).

    Args:
        model: a fitted model.
        target: a value for every parameter.
        values: the distinct measured values of each parameter, where known (a model
            file keeps only the ranges: its provenance says how far the target lies out).
        provenance: what the model set knows of its runs (shared cores, simulation).
    """
    found: list[Unfit] = []
    found += measurement_artifacts(model, provenance)
    poor = next((w for w in model.warnings if w.startswith(POOR_FIT)), None)
    if poor is not None:
        found.append(
            Unfit(
                poor.split(";")[0],
                "more repetitions, or a range of the parameters without a change of regime",
            )
        )
    short = next((w for w in model.warnings if w.startswith(SHORT_SEGMENT)), None)
    if short is not None:
        reason, _, remedy = short.rpartition("; ")
        found.append(Unfit(reason, remedy))
    beyond = extrapolated(model, target, values, provenance)
    few = too_few_values(beyond, values)
    if few:
        more = "; ".join(f"{p}={', '.join(map(format_value, more_values(values[p])))}" for p in few)
        found.append(
            Unfit(
                f"fewer than {RECOMMENDED_VALUES} values of {', '.join(few)} to extrapolate in",
                f"measure {more} as well",
            )
        )
    if beyond and model.uncertainty is not None:
        low, high = (float(v) for v in confidence_interval(model, target))
        if np.isfinite(low) and np.isfinite(high) and (low <= 0 or high > MAX_INTERVAL_RATIO * low):
            found.append(
                Unfit(
                    f"its 95 % confidence interval at the target, [{low:.3g}, {high:.3g}], "
                    f"spans more than x{MAX_INTERVAL_RATIO:g}: the measurements do not pin "
                    "its growth down",
                    f"measure larger {', '.join(beyond)} (or more repetitions)",
                )
            )
    return tuple(found)


def extrapolated(
    model: Model,
    target: Mapping[str, float],
    values: Mapping[str, Sequence[float]],
    provenance: Provenance | None = None,
) -> list[str]:
    """The parameters ``model`` grows with whose value at ``target`` lies beyond the largest
    measured (``values``, else the provenance's ranges)."""
    used = {f.parameter for term in model.terms for f in term.factors}
    largest = {p: max(v) for p, v in values.items() if len(v)}
    if provenance is not None:
        largest = {p: high for p, (_, high) in provenance.ranges.items()} | largest
    return [p for p in sorted(used) if p in largest and target[p] > largest[p]]


def too_few_values(beyond: Sequence[str], values: Mapping[str, Sequence[float]]) -> list[str]:
    """Those of the parameters ``beyond`` (:func:`extrapolated`) measured at fewer than
    :data:`~perfcast.modeling.advice.RECOMMENDED_VALUES` distinct values: too few to
    extrapolate in, whatever the interval says (:func:`more_values` are the runs that fix
    it)."""
    return [p for p in beyond if p in values and len(set(values[p])) < RECOMMENDED_VALUES]


def measurement_artifacts(model: Model, provenance: Provenance | None) -> list[Unfit]:
    """The reasons that come from how the runs were made, not from the fit (cheap: no
    interval is computed)."""
    if provenance is None or not is_time(model.metric):
        return []
    found = instrumentation_dominates(model, provenance.instrumentation)
    if not is_mpi_call(model.callpath):
        return found
    shared = provenance.shared_cores
    if shared is not None and shared.ranks_on:
        ranks = sorted({r for over in shared.ranks_on.values() for r in over})
        cores = ", ".join(str(c) for c in sorted(shared.ranks_on))
        found.append(
            Unfit(
                f"time of an MPI call from runs with more ranks than cores "
                f"({shared.ranks_parameter} = {', '.join(map(str, ranks))} on {cores} cores): "
                "it measures waiting for a core, not the network",
                f"run those {shared.ranks_parameter} on as many cores, or as a virtual "
                "campaign (perfcast measure --backend smpi)",
            )
        )
    if provenance.platform is not None and model.metric.startswith(CPU_TIME_METRIC):
        found.append(
            Unfit(
                "cpu_time of a virtual run charges the simulator's own work to the MPI calls",
                "model time, the simulated time (perfcast model --metric time)",
                everywhere=True,
            )
        )
    return found


def instrumentation_dominates(model: Model, cost: Instrumentation | None) -> list[Unfit]:
    """The reason for a model of a call path's own time that is mostly instrumentation
    (inclusive time adds the callees' work, so the share measured was of the exclusive)."""
    if cost is None or model.metric.endswith(INCLUSIVE_SUFFIX):
        return []
    share = cost.dominated.get(model.callpath)
    if share is None:
        return []
    function = split_callpath(model.callpath)[-1]
    amount = f"{100 * share:.0f} % of" if share <= 1 else f"{share:.2g} times"
    return [
        Unfit(
            f"instrumentation dominates: its calls x {cost.per_call_ns:.3g} ns of perfcast's "
            f"entry and exit ({cost.clocks} clock) come to {amount} its measured own time, so "
            "the time is mostly perfcast's",
            f"measure {function} inside its caller: delete it from the [build] filter (for a "
            "taint profile, write its list with perfcast taint --filter FILE, delete the line "
            "and filter with that file), or drop keep_inlined so that the compiler inlines it",
            everywhere=True,
        )
    ]


def more_values(values: Sequence[float]) -> list[float]:
    """The values that give a parameter measured at ``values`` its
    :data:`~perfcast.modeling.advice.RECOMMENDED_VALUES` distinct ones, continuing the
    series past the largest."""
    distinct = np.unique(np.asarray(values, dtype=float))
    return extend_series(distinct, RECOMMENDED_VALUES - len(distinct))
