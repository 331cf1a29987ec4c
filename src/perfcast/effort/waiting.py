"""Busy waiting seen in effort counts that vary between repetitions (``noise-resilient-priors.txt``
III-C, V-C).

Deterministic code executes the same basic blocks and moves the same bytes in every run of
one parameter point, so its counts (rank means included) are identical in every repetition.
Counts that differ come from control flow that depends on timing: a process spinning in a
loop until a condition holds (polling a flag, ``MPI_Test``/``MPI_Iprobe`` in a loop), a retry
loop, work stealing. Every turn of such a loop adds basic blocks, so the count model, and the
prior derived from it, carries waiting time and its noise rather than work alone.

The effort priors take the *median* of the repetitions (:mod:`perfcast.effort.counts`), which
hides the variation; this module looks at it. The check needs at least two repetitions of a
point: with one repetition per point (the paper's cost) it finds nothing and says nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from perfcast.experiment.experiment import CALLPATH, METRIC, VALUE, Experiment
from perfcast.experiment.points import format_point

if TYPE_CHECKING:  # pandas loads with Experiment.data, not on `perfcast model`'s path
    import pandas as pd

REPETITION_TOLERANCE = 1e-9
"""Largest relative range of a call path's counts across the repetitions of one point,
``(max - min) / median``, that is still taken for deterministic code.

Deterministic code gives exactly 0: the runtime counts integers, and the mean over ranks of
the same integers is the same float in every run. The margin is for a mean summed in a
different order (a reader that visits rank files in another order): each addition of
float64 rounds by at most 1.1e-16 relative, so even a million ranks stay below 1e-10.
Anything above that margin is a real difference, and the tolerance is kept that low so a
spin loop with few turns is not missed: one extra basic block in the rank mean of ``p``
ranks is seen up to ``1e9 / p`` blocks of deterministic work in the same call path. The
spin loop of ``tests/test_effort_waiting.py`` (rank 0 polls ``MPI_Test`` while rank 1
sleeps 1-5 ms; two ranks on two shared cores) varied by 0.7-300 % at single points and by
27-300 % at its worst point in three campaigns of 5 points x 3 repetitions; the counts of
its plain loop nest by exactly 0."""


RELATIVE_RANGE = "relative_range"
"""The column of :func:`repetition_ranges`: ``(max - min) / |median|`` of a point's
repetitions. Not the ``spread`` of :meth:`~perfcast.experiment.Experiment.aggregate`
(standard deviation over mean) nor the modeler's robust noise
(:func:`~perfcast.modeling.robust.robust_noise`)."""


@dataclass(frozen=True)
class VaryingCounts:
    """A call path whose effort counts differ between repetitions of one point.

    Attributes:
        callpath: the call path.
        metric: the counter with the largest relative range (``basic_blocks``,
            ``mpi_bytes_sent``, ...).
        relative_range: ``(max - min) / median`` of that counter's repetitions at ``point``,
            as a fraction; the largest over all points (:func:`repetition_ranges` for a
            median 0).
        point: the parameter values where that range was seen.
        repetitions: how many repetitions that point has.
    """

    callpath: str
    metric: str
    relative_range: float
    point: dict[str, float]
    repetitions: int

    def describe(self) -> str:
        """``basic_blocks by up to 35.2 % across 3 repetitions at p=2, n=50``."""
        where = format_point(self.point)
        return (
            f"{self.metric} by up to {100 * self.relative_range:.1f} % across {self.repetitions} "
            f"repetitions at {where}"
        )


def repetition_ranges(experiment: Experiment, metrics: Iterable[str]) -> pd.DataFrame:
    """Per (call path, metric) of ``metrics``, the largest relative range of the values
    across the repetitions of one point, and that point.

    The relative range of one point is ``(max - min) / |median|``; where the median is 0 but the
    values differ (a loop that runs in some repetitions only) it is taken relative to the
    largest absolute value instead, so it stays finite (at least 100 %). Points with fewer
    than two repetitions (missing values do not count) have no range; a (call path, metric)
    without any point of two repetitions is left out.

    Returns:
        columns ``callpath``, ``metric``, one per parameter, ``repetitions`` and
        ``relative_range``,
        one row per (call path, metric), sorted by call path and metric.
    """
    import pandas as pd

    parameters = experiment.parameters
    columns = [CALLPATH, METRIC, *parameters, "repetitions", RELATIVE_RANGE]
    data = experiment.data
    data = data[data[METRIC].isin(list(metrics))].dropna(subset=[VALUE])
    if data.empty:
        return pd.DataFrame(columns=columns)
    points = (
        data.groupby([CALLPATH, METRIC, *parameters], sort=False)[VALUE]
        .agg(low="min", high="max", centre="median", repetitions="count")
        .reset_index()
    )
    points = points[points["repetitions"] >= 2]
    if points.empty:
        return pd.DataFrame(columns=columns)
    width = (points["high"] - points["low"]).to_numpy(dtype=float)
    scale = np.abs(points["centre"].to_numpy(dtype=float))
    largest = np.maximum(np.abs(points["low"]), np.abs(points["high"])).to_numpy(dtype=float)
    scale = np.where(scale > 0, scale, largest)
    points[RELATIVE_RANGE] = np.divide(width, scale, out=np.zeros_like(width), where=width > 0)
    widest = points.loc[points.groupby([CALLPATH, METRIC], sort=True)[RELATIVE_RANGE].idxmax()]
    return widest[columns].reset_index(drop=True)


def varying_counts(
    experiment: Experiment,
    metrics: Iterable[str],
    tolerance: float = REPETITION_TOLERANCE,
) -> dict[str, VaryingCounts]:
    """The call paths whose counts of ``metrics`` vary between repetitions by more than
    ``tolerance`` (:data:`REPETITION_TOLERANCE`), each with its largest relative range.

    Empty when no point was measured twice: one repetition cannot show variation.
    """
    ranges = repetition_ranges(experiment, metrics)
    flagged = ranges[ranges[RELATIVE_RANGE] > tolerance]
    found: dict[str, VaryingCounts] = {}
    for row in flagged.sort_values(RELATIVE_RANGE, ascending=False).itertuples(index=False):
        callpath, metric, *point, repetitions, relative_range = row  # positional: any name
        if callpath in found:  # the call path's largest range came first
            continue
        found[callpath] = VaryingCounts(
            callpath=str(callpath),
            metric=str(metric),
            relative_range=float(relative_range),
            point={
                name: float(value) for name, value in zip(experiment.parameters, point, strict=True)
            },
            repetitions=int(repetitions),
        )
    return {callpath: found[callpath] for callpath in sorted(found)}


__all__ = [
    "RELATIVE_RANGE",
    "REPETITION_TOLERANCE",
    "VaryingCounts",
    "repetition_ranges",
    "varying_counts",
]
