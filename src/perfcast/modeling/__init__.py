"""Empirical PMNF modeling: hypothesis space, batched fitting, selection, priors."""

from perfcast.modeling.modeler import PMNFModeler
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.pmnf import Factor, FitStatistics, Model, Term
from perfcast.modeling.prior import Prior
from perfcast.modeling.space import SearchSpace

__all__ = [
    "Factor",
    "FitStatistics",
    "Model",
    "ModelSet",
    "PMNFModeler",
    "Prior",
    "SearchSpace",
    "Term",
]
