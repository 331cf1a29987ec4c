"""The data behind the HTML report: one JSON document the page's script draws from.

The page draws everything from this document, so all that is known of a campaign is here
once: per call path (a node of the call tree) and metric the model, its values at the
largest measured point and at the target (exclusive and inclusive, as the text summary
computes them, :mod:`perfcast.report.summary`), its prior, warnings and findings, every
measured repetition, and the prediction interval along each parameter. The script
evaluates the models itself (a PMNF term is a product of powers and logarithms), so the
document carries only the interval's band at a few points per parameter, not curves.

Numbers are kept to :data:`DIGITS` significant digits: a plot shows three at most, and the
full precision would double the size of a page with thousands of call paths.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from perfcast.errors import InputError
from perfcast.experiment.calltree import CallTree
from perfcast.experiment.experiment import Experiment
from perfcast.experiment.names import display_names, function_name
from perfcast.modeling.advice import DEFAULT_TARGET_TEXT
from perfcast.modeling.intervals import DEFAULT_LEVEL, prediction_interval
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.pmnf import Model
from perfcast.report.campaign import CampaignFacts
from perfcast.report.summary import (
    CALLPATH_WIDTH,
    GROWTH_FLOOR,
    _summarise_metric,
    default_target,
    distinct_values,
    judge_at_target,
    largest_point,
    metric_kind,
    summarised_metrics,
)

if TYPE_CHECKING:
    from perfcast.report.taint import TaintPriors

DIGITS = 4
BAND_POINTS = 16
"""Points per parameter at which the prediction interval is computed; the page joins them
with straight lines, which a band that widens smoothly allows."""
LOG_AXIS_SPAN = 16.0
"""A parameter whose plotted values span more than this factor gets a logarithmic axis
(ranks from 1 to 4096); a narrower span reads better on a linear one."""


@dataclass(frozen=True)
class ReportInputs:
    """What a report is made of: the models, and where known the measurements they were
    fitted to and the campaign that measured them."""

    models: ModelSet
    source: str
    experiment: Experiment | None = None
    campaign: CampaignFacts | None = None
    notes: tuple[str, ...] = ()
    """What the reader must know of all models (shared cores, a virtual platform, what a
    value is over ranks and repetitions)."""
    alternatives: ModelSet | None = None
    """The black-box models of the same measurements, shown beside models fitted with a
    prior: where they differ, the prior decided the model, and the reader sees by how
    much the fit paid for it (both SMAPEs)."""
    taint: TaintPriors | None = None
    """The taint profile's prior of each call path (``--taint``)."""


def _round(value: float) -> float | None:
    """``value`` to :data:`DIGITS` significant digits; None (JSON null) where not finite."""
    if not math.isfinite(value):
        return None
    return float(f"{value:.{DIGITS}g}")


def _rounded(values: Iterable[float]) -> list[float | None]:
    return [_round(float(v)) for v in values]


def _leading(model: Model) -> str:
    """The term that dominates growth, ``size^(2) * iterations`` (``1``: a constant): the
    growth ranking's second key after the growth factor itself."""
    term = model.leading_term()
    return "1" if term is None else " * ".join(f.text() for f in term.factors)


def drawable(model: Model, parameters: Sequence[str]) -> dict[str, Any]:
    """What the page's script needs to evaluate and name ``model``: its formula, constant,
    terms as [coefficient, [[parameter index, exponent, log exponent], ...]], and the
    leading term."""
    return {
        "formula": model.text(),
        "constant": model.constant,
        "terms": [
            [
                term.coefficient,
                [
                    [parameters.index(f.parameter), float(f.exponent), f.log_exponent]
                    for f in term.factors
                ],
            ]
            for term in model.terms
        ],
        "lead": _leading(model),
    }


def _axis(low: float, high: float) -> tuple[list[float], bool]:
    """The points of a parameter's band from its smallest measured value to the farthest
    plotted one, and whether its axis is logarithmic."""
    logarithmic = low > 0 and high / low > LOG_AXIS_SPAN
    if high <= low:
        return [low], logarithmic
    grid = (
        np.geomspace(low, high, BAND_POINTS) if logarithmic else np.linspace(low, high, BAND_POINTS)
    )
    return grid.tolist(), logarithmic


def band(
    model: Model, parameter: str, grid: Sequence[float], fixed: Mapping[str, float], level: float
) -> list[list[float | None]] | None:
    """The prediction interval along ``parameter`` (the others at ``fixed``): [lower, upper]
    at each grid point, or None where the model stores no uncertainty."""
    point: dict[str, Any] = {**fixed, parameter: np.asarray(grid, dtype=float)}
    try:
        lower, upper = prediction_interval(model, point, level)
    except InputError:  # outside the model's domain (log2 of 0): no band, the page says so
        return None
    if not np.isfinite(lower).any():
        return None
    return [
        _rounded(np.broadcast_to(lower, len(grid))),
        _rounded(np.broadcast_to(upper, len(grid))),
    ]


def _observations(
    experiment: Experiment, wanted: set[tuple[str, str]]
) -> tuple[list[list[float]], dict[tuple[str, str], list[float | None]]]:
    """The measured points (coordinates) and, per (call path, metric), every repetition as
    a flat list ``[point, value, point, value, ...]``: one sort of the whole table."""
    table = experiment.columns
    point_of_row, points = table.points()
    order = np.lexsort((point_of_row, table.metric, table.callpath))
    callpath, metric = table.callpath[order], table.metric[order]
    keys = callpath * max(len(table.metrics), 1) + metric
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else np.array([], int)
    bounds = np.r_[starts, len(keys)]
    rows_point, rows_value = point_of_row[order], table.value[order]
    observed: dict[tuple[str, str], list[float | None]] = {}
    for start, end in itertools.pairwise(bounds.tolist()):
        key = (table.callpaths[callpath[start]], table.metrics[metric[start]])
        if key not in wanted:
            continue
        flat: list[float | None] = []
        for index, value in zip(
            rows_point[start:end].tolist(), rows_value[start:end].tolist(), strict=True
        ):
            flat += [index, _round(value)]
        observed[key] = flat
    return [_rounded(row) for row in points], observed  # type: ignore[misc]


def _tree(callpaths: Sequence[str]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Every node of the call tree of ``callpaths`` (ancestors that have no model too), in
    pre-order: its frame's short name, full call path, display name and parent."""
    tree = CallTree(callpaths)
    nodes = list(tree)
    index = {node.path: position for position, node in enumerate(nodes)}
    names = display_names([node.path for node in nodes], CALLPATH_WIDTH)
    return [
        {
            "name": function_name(node.name),
            "frame": node.name,
            "path": node.path,
            "short": names[node.path],
            "parent": -1 if node.parent is None else index[node.parent.path],
        }
        for node in nodes
    ], index


def _measured_points(inputs: ReportInputs) -> np.ndarray:
    """The measured points the summary's largest point is chosen from: the experiment's, or
    without one the corner of the ranges the model file keeps (one point: no series to move
    the default target up to, so it stays at 4x)."""
    parameters = inputs.models.parameters
    if inputs.experiment is not None:
        return inputs.experiment.coordinates()
    provenance = inputs.models.provenance
    if provenance is None or any(p not in provenance.ranges for p in parameters):
        raise InputError(
            f"{inputs.source} does not say which values were measured (a model file written "
            "before perfcast kept the ranges): write it again with `perfcast model STORE -o "
            "FILE`, or give the measurements"
        )
    return np.array([[provenance.ranges[p][1] for p in parameters]])


def report_data(
    inputs: ReportInputs,
    *,
    target: Mapping[str, float] | None = None,
    metrics: Sequence[str] | None = None,
    level: float = DEFAULT_LEVEL,
) -> dict[str, Any]:
    """The JSON document the page draws (see the module docstring). ``target`` completes
    missing parameters with the summary's default; ``metrics`` are those the summary ranks
    first (default: as ``perfcast model`` ranks)."""
    models = inputs.models
    parameters = models.parameters
    if not len(models):
        raise InputError(f"{inputs.source} holds no models to report")
    measured = _measured_points(inputs)
    largest = largest_point(parameters, measured)
    chosen_target = {**default_target(parameters, measured), **(target or {})}
    defaulted = [p for p in parameters if p not in (target or {})]
    units = {}
    if inputs.experiment is not None:
        units = {name: metric.unit for name, metric in inputs.experiment.metrics.items()}
    ranges = _ranges(inputs)
    grids = {p: _axis(ranges[p][0], max(ranges[p][1], chosen_target[p])) for p in parameters}
    callpaths = list(dict.fromkeys(m.callpath for m in models))
    nodes, node_of = _tree(callpaths)
    metric_names = models.metrics
    by_metric: dict[str, list[Model]] = {}
    for model in models:
        by_metric.setdefault(model.metric, []).append(model)
    observed: dict[tuple[str, str], list[float | None]] = {}
    points: list[list[float]] = []
    if inputs.experiment is not None:
        wanted = {(m.callpath, m.metric) for m in models}
        points, observed = _observations(inputs.experiment, wanted)
    shared = set()
    provenance = models.provenance
    if provenance is not None and provenance.shared_cores is not None:
        shared = set(provenance.shared_cores.models)
    taint_of = {}
    if inputs.taint is not None:
        taint_of = {c: prior.to_json() for c, prior in inputs.taint.by_callpath.items()}
    records = []
    totals = {}
    values: dict[str, list[float]] = {}  # without measurements: no count of values to judge
    if inputs.experiment is not None:
        values = distinct_values(parameters, inputs.experiment.coordinates())
    for metric_index, metric in enumerate(metric_names):
        judged = judge_at_target(
            by_metric[metric], metric, largest, chosen_target, values, provenance
        )
        now = _summarise_metric(by_metric[metric], metric, largest, chosen_target)
        then = _summarise_metric(by_metric[metric], metric, chosen_target, chosen_target)
        totals[metric] = {  # without the artifacts and the models unfit at the target
            "largest": _round(judged.total),
            "target": _round(judged.total_at_target),
        }
        for cost, later in zip(now.costs, then.costs, strict=True):
            model = cost.model
            key = (model.callpath, model.metric)
            records.append(
                {
                    "node": node_of[model.callpath],
                    "metric": metric_index,
                    **drawable(model, parameters),
                    "stats": {  # nan (a statistic the fit could not compute) as null
                        name: _round(value) if name != "points" else value
                        for name, value in model.statistics.to_json().items()
                    },
                    "prior": model.prior,
                    "warnings": list(model.warnings),
                    "findings": [
                        {"stage": f.stage, "kind": f.kind, "message": f.message}
                        for f in models.findings_of(key)
                    ],
                    "shared_cores": key in shared,
                    "unfit": [u.text() for u in judged.unfit.get(model.callpath, ())],
                    "at_largest": _round(cost.at_largest),
                    "at_target": _round(cost.at_target),
                    "exclusive": _round(cost.exclusive),
                    "inclusive": _round(cost.inclusive),
                    "exclusive_target": _round(later.exclusive),
                    "inclusive_target": _round(later.inclusive),
                    "bands": {
                        p: band(model, p, grids[p][0], others_at(largest, p), level)
                        for p in parameters
                    },
                    "observed": observed.get(key, []),
                    "alternative": _alternative(model, inputs.alternatives),
                    "taint": taint_of.get(model.callpath),
                }
            )
    return {
        "source": inputs.source,
        "parameters": parameters,
        "largest": largest,
        "target": chosen_target,
        "target_how": (
            f"{', '.join(defaulted)} at {DEFAULT_TARGET_TEXT} (--at NAME=VALUE,... sets it)"
            if defaulted
            else "as given with --at"
        ),
        "ranges": ranges,
        "axes": {p: {"grid": grid, "log": log} for p, (grid, log) in grids.items()},
        "level": level,
        "growth_floor": GROWTH_FLOOR,
        "metrics": [
            {"name": m, "unit": units.get(m, ""), "kind": metric_kind(m), "total": totals[m]}
            for m in metric_names
        ],
        "ranked": summarised_metrics(models, metrics),
        "nodes": nodes,
        "models": records,
        "points": points,
        "has_measurements": inputs.experiment is not None,
        "notes": list(inputs.notes),
        "campaign": inputs.campaign.to_json() if inputs.campaign is not None else None,
    }


def _alternative(model: Model, alternatives: ModelSet | None) -> dict[str, Any] | None:
    """The black-box model beside one fitted with a prior (its formula and SMAPE)."""
    key = (model.callpath, model.metric)
    if not model.prior or alternatives is None or key not in alternatives:
        return None
    free = alternatives[key]
    return {"formula": free.text(), "smape": _round(free.statistics.smape)}


def others_at(largest: Mapping[str, float], parameter: str) -> dict[str, float]:
    return {p: v for p, v in largest.items() if p != parameter}


def _ranges(inputs: ReportInputs) -> dict[str, tuple[float, float]]:
    """Each parameter's measured range: the experiment's, else the model file's."""
    if inputs.experiment is not None:
        return inputs.experiment.ranges()
    provenance = inputs.models.provenance
    assert provenance is not None  # _measured_points refused a file without ranges
    return dict(provenance.ranges)
