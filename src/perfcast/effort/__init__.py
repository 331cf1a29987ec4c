"""Effort-based priors: deterministic basic-block and MPI byte counts fix a model's
exponents, noisy time only its coefficients (``noise-resilient-priors.txt``)."""

from perfcast.effort.counts import INEXACT_WARNING, CountModeler
from perfcast.effort.laws import OPERATION_LAWS, CommunicationLaw, Law
from perfcast.effort.priors import (
    COEFFICIENT_AGGREGATION,
    DISAGREEMENT_GAP,
    DISAGREEMENT_RATIO,
    DISAGREEMENT_WARNING,
    EffortModeler,
    EffortModels,
    EffortPrior,
)
from perfcast.effort.report import render_effort

__all__ = [
    "COEFFICIENT_AGGREGATION",
    "DISAGREEMENT_GAP",
    "DISAGREEMENT_RATIO",
    "DISAGREEMENT_WARNING",
    "INEXACT_WARNING",
    "OPERATION_LAWS",
    "CommunicationLaw",
    "CountModeler",
    "EffortModeler",
    "EffortModels",
    "EffortPrior",
    "Law",
    "render_effort",
]
