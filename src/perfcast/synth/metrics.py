"""Model accuracy against a known truth (``noise-resilient-priors.txt`` V-A5).

* Exponent deviation, Eq. (4): ``ED(f1, f2) = |n1 - n2|`` where ``n`` is a function's
  leading polynomial exponent. Logarithmic and constant factors count as exponent 0
  (``log2(x)`` is ``x^0 * log2(x)``). With several parameters ED is taken per parameter,
  as the paper's Table II reports it per parameter (MPI ranks, message size).
* Relative error, Eq. (5): ``RE = |y - f1(x)| / y * 100 %`` at an unseen test point.
* Exact leading-exponent match: stricter than ``ED == 0``, the model's leading
  ``(exponent, log exponent)`` of a parameter equals the truth's, so ``n * log2(n)`` for a
  true ``n`` is a miss although its ED is 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction

import numpy as np

from perfcast.modeling.pmnf import ArrayLike, Model

NO_GROWTH: tuple[Fraction, int] = (Fraction(0), 0)
"""Leading (exponent, log exponent) of a parameter that does not appear in a model."""


def leading_exponent(model: Model, parameter: str) -> tuple[Fraction, int]:
    """The model's leading (exponent, log exponent) of ``parameter``; (0, 0) if absent."""
    return model.leading_exponents().get(parameter, NO_GROWTH)


def exponent_deviation(model: Model, truth: Model, parameter: str) -> Fraction:
    """Eq. (4) for one parameter, exact: ``|n_model - n_truth|``."""
    return abs(leading_exponent(model, parameter)[0] - leading_exponent(truth, parameter)[0])


def exponent_deviations(
    model: Model, truth: Model, parameters: Sequence[str]
) -> dict[str, Fraction]:
    return {p: exponent_deviation(model, truth, p) for p in parameters}


def leading_exponent_matches(
    model: Model, truth: Model, parameters: Sequence[str]
) -> dict[str, bool]:
    """Per parameter: does the model's leading (exponent, log exponent) equal the truth's?"""
    return {p: leading_exponent(model, p) == leading_exponent(truth, p) for p in parameters}


def relative_error(predicted: ArrayLike, measured: ArrayLike) -> np.ndarray:
    """Eq. (5) in percent: ``|measured - predicted| / measured * 100``."""
    y = np.asarray(measured, dtype=float)
    return np.abs(y - np.asarray(predicted, dtype=float)) / y * 100.0


def model_relative_error(model: Model, truth: Model, point: Mapping[str, ArrayLike]) -> float:
    """RE of ``model`` at ``point`` where the "measured" value is the truth's exact value."""
    return float(relative_error(model.evaluate(point), truth.evaluate(point)))
