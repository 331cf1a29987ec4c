"""Priors as one stage of the pipeline: every source's priors composed in one place and
fitted by one procedure (:func:`fit_with_priors`).

This package sits above the sources (taint, effort, static) and the modeler; nothing below
it imports it.
"""

from perfcast.priors.compose import Composition, compose, intersect
from perfcast.priors.pipeline import PriorFit, PriorSource, fit_with_priors
from perfcast.priors.registry import PriorInputs, SourceEntry, precedence, register, sources

__all__ = [
    "Composition",
    "PriorFit",
    "PriorInputs",
    "PriorSource",
    "SourceEntry",
    "compose",
    "fit_with_priors",
    "intersect",
    "precedence",
    "register",
    "sources",
]
