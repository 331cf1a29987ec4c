"""The scaling section of ``perfcast model --efficiency strong|weak``: speedup and
parallel efficiency of a region along the ranks, measured and modeled
(:mod:`perfcast.modeling.efficiency`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from perfcast.errors import InputError
from perfcast.experiment.calltree import SEPARATOR
from perfcast.experiment.experiment import Experiment
from perfcast.experiment.points import format_point
from perfcast.modeling.efficiency import (
    ScalingPoint,
    in_subtree,
    scaling_from_data,
    scaling_from_models,
)
from perfcast.modeling.modelset import ModelSet

if TYPE_CHECKING:
    import pandas as pd

KIND_MEANING = {
    "strong": "strong scaling: the problem fixed, shared by more ranks",
    "weak": "weak scaling: the problem per rank fixed",
}


def render_efficiency(
    models: ModelSet,
    experiment: Experiment,
    metric: str,
    ranks: str,
    kind: str,
    target: Mapping[str, float],
    root: str | None = None,
) -> str:
    """The section: the region ``root`` (default: the costliest root of the call tree),
    its inclusive ``metric`` at every measured number of ranks and at the target's, other
    parameters at the target's values where measured there, else at their largest."""
    if ranks not in experiment.parameters:
        raise InputError(
            f"--efficiency needs the parameter of the ranks, and there is no {ranks!r} "
            f"(parameters: {', '.join(experiment.parameters)}); name it with --ranks-parameter"
        )
    table = experiment.aggregate()
    table = table[table["metric"] == metric]
    held = {}
    for name in experiment.parameters:
        if name != ranks:
            measured = set(table[name])
            held[name] = target[name] if target[name] in measured else max(measured)
    for name, value in held.items():
        table = table[table[name] == value]
    root = root or _costliest_root(table)
    inside = table[[in_subtree(c, root) for c in table["callpath"]]]
    if inside.empty:
        raise InputError(f"--subtree {root!r}: no call path at or below it has {metric}")
    sums = inside.groupby(ranks)["value"].sum()
    totals = dict(zip(sums.index.astype(float), sums.to_numpy(dtype=float), strict=True))
    measured_points = scaling_from_data(totals, kind)
    base = measured_points[0]
    modeled = scaling_from_models(
        models, root, metric, ranks, [target[ranks]], held, base.ranks, kind
    )
    where = f" at {format_point(held)}" if held else ""
    lines = [
        f"Speedup and parallel efficiency of {root} along {ranks} ({KIND_MEANING[kind]}; "
        f"inclusive {metric}{where}, against {ranks}={base.ranks:g}):",
        f"  {ranks:>10}  {'value':>10}  {'speedup':>8}  {'efficiency':>10}",
    ]
    lines += [_line(point) for point in [*measured_points, *modeled]]
    return "\n".join(lines)


def _costliest_root(table: pd.DataFrame) -> str:
    """The root of the call tree with the largest inclusive value at any measured point."""
    callpaths = table["callpath"]
    roots = sorted({c for c in callpaths if SEPARATOR not in c})
    if not roots:
        raise InputError("no root call path measured: name one with --subtree")
    totals = {
        root: table[[in_subtree(c, root) for c in callpaths]]["value"].sum() for root in roots
    }
    return max(totals, key=lambda root: totals[root])


def _line(point: ScalingPoint) -> str:
    efficiency = f"{point.efficiency:.1%}" if math.isfinite(point.efficiency) else "-"
    source = "measured"
    if not point.measured:
        source = "model"
        if math.isfinite(point.low) and math.isfinite(point.high):
            source += f", 95 % interval of the efficiency [{point.low:.1%}, {point.high:.1%}]"
    return (
        f"  {point.ranks:>10g}  {point.value:>10.4g}  {point.speedup:>8.3g}  "
        f"{efficiency:>10}  {source}"
    )
