"""Time from one campaign, effort counts from another (``noise-resilient-priors.txt`` V-A4).

The paper's cost model measures every point twice: once for time with the light
instrumentation, once for the counts with the basic-block-counting build, ``2 * 5^m`` runs
instead of ``5^(m+1)`` repetitions. The two builds cannot be one: the counting build runs
about 3.4x slower than native (``benchmarks/results/instrumentation_overhead.txt``), so its
time describes an instrumented program, not the real one. The counts do not mind: they are
exact and identical in every build that counts.

:func:`combine_sources` joins the two campaigns into the one :class:`Experiment` the effort
modeler reads: the counter metrics (effort counters as rank means and rank maxima,
:func:`~perfcast.experiment.metrics.is_counter`) from the counting campaign,
every other metric from the timing campaign. The counts are modeled on their own points
and the priors applied across the time points, so the two campaigns may use different
points; counts extrapolated beyond their own range are less trustworthy, which a note says.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from perfcast.errors import InputError
from perfcast.experiment.experiment import CALLPATH, METRIC, Experiment
from perfcast.experiment.metrics import COUNTER_METRICS, TIME_METRIC, is_counter
from perfcast.experiment.points import format_value

if TYPE_CHECKING:  # pandas loads with Experiment.data, not on `perfcast model`'s path
    import pandas as pd

LISTED_CALLPATHS = 5
"""Call paths a note names before it says how many more there are."""


@dataclass
class CombinedSources:
    """What :func:`combine_sources` returns: the joined measurements and what to know
    about them (notes, not errors: the effort modeler falls back per call path)."""

    experiment: Experiment
    notes: list[str] = field(default_factory=list)


def combine_sources(
    time: Experiment, counts: Experiment, *, time_metric: str = TIME_METRIC
) -> CombinedSources:
    """Counter metrics from ``counts``, everything else from ``time``, as one Experiment.

    Raises InputError when the two campaigns have different parameters or ``counts`` has no
    effort counters. ``time``'s own counters, if any, are dropped (the counting campaign is
    the one asked for), and a note says so. ``time_metric`` names the metric whose call
    paths should have counts.
    """
    counts_name = counts.source or "the counts"
    time_name = time.source or "the time measurements"
    if sorted(counts.parameters) != sorted(time.parameters):
        raise InputError(
            f"the counts are measured over parameters {counts.parameters} but the time in "
            f"{time_name} over {time.parameters}: measure both campaigns over the same "
            "parameters (one spec, with [build] counters = true for the counts)",
            path=counts.source,
        )
    counted = counts.data[METRIC].map(is_counter).to_numpy(dtype=bool)
    if not counted.any():
        raise InputError(
            f"no effort counters ({', '.join(COUNTER_METRICS)}) in these measurements: build "
            "the program with counters ([build] counters = true in the campaign's spec, or "
            "`perfcast build --counters`), leave them in its [metrics] collect list (absent: "
            "every metric is kept) and measure it again",
            path=counts.source,
        )
    notes: list[str] = []
    own = time.data[METRIC].map(is_counter).to_numpy(dtype=bool)
    if own.any():
        dropped = sorted(set(time.data.loc[own, METRIC]))
        notes.append(
            f"{time_name}: its own counters ({', '.join(dropped)}) are dropped; the counts "
            f"come from {counts_name}"
        )
    counted_rows = counts.data[counted]
    timed_rows = time.data[~own]
    if timed_rows.empty:
        raise InputError(
            "these measurements hold nothing but effort counters, so there is no time to "
            f"model; give the light (timing) campaign first and the counts ({counts_name}) "
            "second",
            path=time.source,
        )
    notes += _uncounted_note(timed_rows, counted_rows, time_metric, time_name, counts_name)
    notes += _range_notes(time, counts, time_name, counts_name)
    parts = [
        _part(time, timed_rows, time.parameters),
        _part(counts, counted_rows, time.parameters),  # in the time campaign's order
    ]
    return CombinedSources(Experiment.concat(parts), notes)


def _part(source: Experiment, rows: pd.DataFrame, parameters: Sequence[str]) -> Experiment:
    """``rows`` of ``source`` as an Experiment, with the units of their metrics."""
    present = set(rows[METRIC])
    metrics = [metric for name, metric in source.metrics.items() if name in present]
    return Experiment(parameters, rows, metrics, source=source.source)


def _uncounted_note(
    timed_rows: pd.DataFrame,
    counted_rows: pd.DataFrame,
    time_metric: str,
    time_name: str,
    counts_name: str,
) -> list[str]:
    """A note on the call paths with time but no counts: they get no prior."""
    timed = timed_rows.loc[timed_rows[METRIC] == time_metric, CALLPATH].unique()
    known = set(counted_rows[CALLPATH])
    missing = [str(callpath) for callpath in timed if callpath not in known]
    if not missing:
        return []
    shown = ", ".join(missing[:LISTED_CALLPATHS])
    more = f" and {len(missing) - LISTED_CALLPATHS} more" if len(missing) > LISTED_CALLPATHS else ""
    return [
        f"{len(missing)} call path(s) timed in {time_name} were never counted in "
        f"{counts_name} ({shown}{more}): they get no effort prior. Were both builds "
        "instrumented alike ([build] filter)?"
    ]


def _range_notes(
    time: Experiment, counts: Experiment, time_name: str, counts_name: str
) -> list[str]:
    """Notes on parameters whose time points reach beyond the counted range: there the
    priors rest on count models extrapolated, not interpolated."""
    notes = []
    for parameter in time.parameters:
        timed = _range(time.data[parameter])
        counted = _range(counts.data[parameter])
        if timed[0] < counted[0] or timed[1] > counted[1]:
            notes.append(
                f"{parameter} is timed over {_span(timed)} in {time_name} but counted over "
                f"only {_span(counted)} in {counts_name}: the effort priors extrapolate the "
                "count models to the time points outside, which is less trustworthy than "
                "counting there too"
            )
    return notes


def _range(values: pd.Series) -> tuple[float, float]:
    array = np.asarray(values, dtype=float)
    return float(array.min()), float(array.max())


def _span(bounds: tuple[float, float]) -> str:
    return f"{format_value(bounds[0])}..{format_value(bounds[1])}"


__all__ = ["CombinedSources", "combine_sources"]
