"""Effort-based priors: deterministic basic-block and MPI byte counts fix a model's
exponents, noisy time only its coefficients (``noise-resilient-priors.txt``)."""

from perfcast.effort.combine import combine_sources
from perfcast.effort.counts import INEXACT_WARNING, CountModeler
from perfcast.effort.laws import OPERATION_LAWS, CommunicationLaw, Law
from perfcast.effort.priors import (
    COEFFICIENT_AGGREGATION,
    DISAGREEMENT_GAP,
    DISAGREEMENT_RATIO,
    DISAGREEMENT_WARNING,
    WAITING_WARNING,
    EffortModeler,
    EffortPrior,
)
from perfcast.effort.report import render_effort
from perfcast.effort.waiting import (
    RELATIVE_RANGE,
    REPETITION_TOLERANCE,
    VaryingCounts,
    repetition_ranges,
    varying_counts,
)

__all__ = [
    "COEFFICIENT_AGGREGATION",
    "DISAGREEMENT_GAP",
    "DISAGREEMENT_RATIO",
    "DISAGREEMENT_WARNING",
    "INEXACT_WARNING",
    "OPERATION_LAWS",
    "RELATIVE_RANGE",
    "REPETITION_TOLERANCE",
    "WAITING_WARNING",
    "CommunicationLaw",
    "CountModeler",
    "EffortModeler",
    "EffortPrior",
    "Law",
    "VaryingCounts",
    "combine_sources",
    "render_effort",
    "repetition_ranges",
    "varying_counts",
]
