"""The metric names perfcast's own stages give a meaning to, each spelled once.

The measurement runtime writes these names (:mod:`perfcast.measure.profiles`), the effort
and taint priors look models up by them, the report classifies metrics by their suffixes
and the synthetic programs' ground truth uses them. Metrics read from other tools' files
keep whatever names those files carry; only these names carry meaning. They live at the
experiment layer, below every stage, so that no stage imports another just for a name.
"""

from __future__ import annotations

TIME_METRIC = "time"
"""Exclusive wall time of a call path (seconds): what a model of "the runtime" fits."""

CPU_TIME_METRIC = "cpu_time"
"""Exclusive CPU time (seconds), measured when ``PERFCAST_CPU_TIME=1``."""

VISITS_METRIC = "visits"
"""How often a call path was entered: the count taint and effort priors explain."""

COMPUTATION_METRIC = "basic_blocks"
"""Basic blocks executed (``perfcast build --counters``): a call path's computational effort."""

BYTES_SENT = "mpi_bytes_sent"
"""Bytes an MPI call path sent: its communication effort."""

BYTES_RECEIVED = "mpi_bytes_received"
"""Bytes an MPI call path received (receive-only operations send nothing)."""

COUNTER_METRICS = (COMPUTATION_METRIC, BYTES_SENT, BYTES_RECEIVED)
"""The effort counters: deterministic counts, not timings, so repetitions agree."""

INCLUSIVE_SUFFIX = "_inclusive"
"""Ends a metric that includes its callees (``time_inclusive``); others are exclusive."""

MAX_SUFFIX = ":max"
"""Ends a metric that is the maximum over ranks (``time:max``); its twin without the
suffix is the mean over ranks. A maximum does not add up over the call tree."""


def base_metric(name: str) -> str:
    """The metric a per-rank maximum is taken of (``time:max`` -> ``time``), else the name."""
    return name.removesuffix(MAX_SUFFIX)


def is_counter(name: str) -> bool:
    """An effort counter or its maximum over ranks (``basic_blocks:max``): exact counts,
    which no prior constrains and the black-box time modeler never fits."""
    return base_metric(name) in COUNTER_METRICS


def is_max(name: str) -> bool:
    """Whether ``name`` is a maximum over ranks (``time:max``), which does not add up."""
    return name.endswith(MAX_SUFFIX)


def with_max(name: str) -> str:
    """The maximum over ranks of the metric ``name`` (``time`` -> ``time:max``)."""
    return name + MAX_SUFFIX


__all__ = [
    "BYTES_RECEIVED",
    "BYTES_SENT",
    "COMPUTATION_METRIC",
    "COUNTER_METRICS",
    "CPU_TIME_METRIC",
    "INCLUSIVE_SUFFIX",
    "MAX_SUFFIX",
    "TIME_METRIC",
    "VISITS_METRIC",
    "base_metric",
    "is_counter",
    "is_max",
    "with_max",
]
