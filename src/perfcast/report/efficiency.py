"""The scaling section: speedup and parallel efficiency of a region along the ranks,
measured and modeled (:mod:`perfcast.modeling.efficiency`), as ``perfcast model
--efficiency strong|weak`` prints it and as the report page's Efficiency view draws it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perfcast.errors import InputError
from perfcast.experiment.calltree import SEPARATOR
from perfcast.experiment.experiment import Experiment
from perfcast.experiment.metrics import TIME_METRIC
from perfcast.experiment.points import format_point, format_value
from perfcast.modeling.efficiency import (
    ScalingPoint,
    in_subtree,
    scaling_from_data,
    scaling_from_models,
    subtree_largest,
)
from perfcast.modeling.modelset import ModelSet

if TYPE_CHECKING:
    import pandas as pd

KIND_MEANING = {
    "strong": "strong scaling: the problem fixed, shared by more ranks",
    "weak": "weak scaling: the problem per rank fixed",
}


@dataclass(frozen=True)
class ScalingSection:
    """One region's views along the ranks: at every measured number of ranks, then at the
    target's from the models (with the interval of the efficiency)."""

    root: str
    metric: str
    ranks: str
    kind: str
    held: dict[str, float]
    """The other parameters' values the views are taken at."""
    points: tuple[ScalingPoint, ...]
    largest: tuple[str, float, float, float]
    """The maximum over the subtree at the target: the call path whose exclusive model is
    largest there, its value and 95 % prediction interval."""

    def heading(self) -> str:
        where = f" at {format_point(self.held)}" if self.held else ""
        return (
            f"Speedup and parallel efficiency of {self.root} along {self.ranks} "
            f"({KIND_MEANING[self.kind]}; inclusive {self.metric}{where}, against "
            f"{format_point({self.ranks: self.points[0].ranks})})"
        )

    def text(self) -> str:
        lines = [
            self.heading() + ":",
            f"  {self.ranks:>10}  {'value':>10}  {'speedup':>8}  {'efficiency':>10}",
        ]
        callpath, value, low, high = self.largest
        costliest = (
            "  the largest single call path under it at "
            f"{format_point({self.ranks: self.points[-1].ranks})}: "
            f"{callpath}, {value:.4g} [{low:.4g}, {high:.4g}] ({value / self.points[-1].value:.0%})"
        )
        return "\n".join([*lines, *(_line(point) for point in self.points), costliest])

    def to_json(self) -> dict[str, Any]:
        """What the report page draws: the heading and one row per number of ranks (nan
        as null)."""
        callpath, value, low, high = self.largest
        return {
            "heading": self.heading(),
            "ranks": self.ranks,
            "largest": {
                "callpath": callpath,
                "value": _finite(value),
                "low": _finite(low),
                "high": _finite(high),
            },
            "rows": [
                {
                    "ranks": point.ranks,
                    "value": _finite(point.value),
                    "speedup": _finite(point.speedup),
                    "efficiency": _finite(point.efficiency),
                    "measured": point.measured,
                    "low": _finite(point.low),
                    "high": _finite(point.high),
                }
                for point in self.points
            ],
        }


def scaling_section(
    models: ModelSet,
    experiment: Experiment,
    ranks: str,
    kind: str,
    target: Mapping[str, float],
    root: str | None = None,
) -> ScalingSection:
    """The section for the time metric modeled (the first metric otherwise) of the region
    ``root`` (default: the costliest root of the call tree): its inclusive value at every
    measured number of ranks and at the target's, other parameters at the target's values
    where measured there, else at their largest."""
    if ranks not in experiment.parameters:
        raise InputError(
            f"--efficiency needs the parameter of the ranks, and there is no {ranks!r} "
            f"(parameters: {', '.join(experiment.parameters)}); name it with --ranks-parameter"
        )
    metric = TIME_METRIC if TIME_METRIC in models.metrics else models.metrics[0]
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
    base = measured_points[0].ranks
    modeled = scaling_from_models(models, root, metric, ranks, [target[ranks]], held, base, kind)
    largest = subtree_largest(models, root, metric, {**held, ranks: target[ranks]})
    return ScalingSection(root, metric, ranks, kind, held, (*measured_points, *modeled), largest)


def _costliest_root(table: pd.DataFrame) -> str:
    """The root of the call tree with the largest inclusive value, summed over the points."""
    callpaths = table["callpath"]
    roots = sorted({c for c in callpaths if SEPARATOR not in c})
    if not roots:
        raise InputError("no root call path measured: name one with --subtree")
    totals = {r: table[[in_subtree(c, r) for c in callpaths]]["value"].sum() for r in roots}
    return max(totals, key=lambda root: totals[root])


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _line(point: ScalingPoint) -> str:
    efficiency = f"{point.efficiency:.1%}" if math.isfinite(point.efficiency) else "-"
    source = "measured"
    if not point.measured:
        source = "model"
        if math.isfinite(point.low) and math.isfinite(point.high):
            source += f", 95 % interval of the efficiency [{point.low:.1%}, {point.high:.1%}]"
    return (
        f"  {format_value(point.ranks):>10}  {point.value:>10.4g}  {point.speedup:>8.3g}  "
        f"{efficiency:>10}  {source}"
    )
