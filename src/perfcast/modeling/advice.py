"""What the modeler advises, in a module light enough for every reader of a model file.

``perfcast predict`` reads models without the search (``tests/test_startup.py``), yet says
when a model is not fit to extrapolate (:mod:`perfcast.modeling.extrapolation`) with the
same thresholds and the same suggested runs as the modeler's own warnings: they are
defined here once.
"""

from __future__ import annotations

import numpy as np

RECOMMENDED_VALUES = 5
"""Fewest distinct values of a modeled parameter without a warning (Extra-P's threshold)."""

POOR_FIT = "poor fit"
"""The start of :func:`perfcast.modeling.model_warnings.poor_fit`'s warning (which later stages
look for)."""

SHORT_SEGMENT = "the regime that continues is not modeled"
"""The start of the warning on a model whose last regime has too few values of its
parameter, or too poor a fit, to be modeled (:mod:`perfcast.priors.segments`): such a
model is not fit to extrapolate."""


def extend_series(values: np.ndarray, count: int) -> list[float]:
    """``count`` values continuing the sorted ``values`` past the largest with their own
    spacing: geometric (1, 2, 4 -> 8, 16) where the ratios agree, otherwise arithmetic with
    the last step (10, 20, 30 -> 40, 50). Integers stay integers where the series has them."""
    values = np.sort(np.asarray(values, dtype=float))
    if len(values) < 2:
        return [float(values[-1] * 2 ** (i + 1)) for i in range(count)] if len(values) else []
    geometric, arithmetic = _spacing(values)
    powers = None if geometric or arithmetic else _evenly_spaced_powers(values)
    if powers is not None:
        exponent, roots = powers
        step = roots[-1] - roots[-2]
        return [float((roots[-1] + step * (i + 1)) ** exponent) for i in range(count)]
    more = []
    last = float(values[-1])
    for _ in range(count):
        if geometric and not arithmetic:
            last = last * float(values[-1] / values[-2])
        else:
            last = last + float(values[-1] - values[-2])
        more.append(float(np.round(last)) if np.all(values == np.round(values)) else last)
    return more


TARGET_FACTOR = 4.0
"""Default target: every parameter at this many times its largest measured value (then
moved up to its measured series, :func:`perfcast.report.summary.default_target`), far
enough to separate growth rates, near enough for the models to be worth believing."""

DEFAULT_TARGET_TEXT = (
    f"{TARGET_FACTOR:g}x the largest measured value, moved up to the next value of the "
    "measured series where the values form one"
)
"""What the default target is, in the words the summary, the page and every ``--at`` help
use: here, not beside :func:`~perfcast.report.summary.default_target`, so that ``perfcast
design`` and ``measure`` build their help without importing the report stage."""

SERIES_STEPS = 64
"""The most continuation steps :func:`series_at_least` looks ahead."""


def series_at_least(values: np.ndarray, floor: float) -> float | None:
    """The first value continuing ``values``' series (:func:`extend_series`) at or above
    ``floor``, or None where the values form no series (fewer than 3, irregular spacing) or
    it does not get there within :data:`SERIES_STEPS` steps: a default target of 4x the
    largest of LULESH's cube rank counts (1, 8, 27 -> 108) is a run the program refuses,
    the next cube at or above it (125) is not."""
    values = np.unique(np.asarray(values, dtype=float))
    if len(values) < 3 or not np.isfinite(floor):
        return None
    if not (any(_spacing(values)) or _evenly_spaced_powers(values) is not None):
        return None
    return next((v for v in extend_series(values, SERIES_STEPS) if v >= floor), None)


def _spacing(values: np.ndarray) -> tuple[bool, bool]:
    """Whether the sorted ``values`` (2 or more) are evenly spaced geometrically (a common
    ratio) and arithmetically (a common step)."""
    ratios = values[1:] / values[:-1] if values[0] > 0 else np.array([np.nan])
    steps = np.diff(values)
    geometric = bool(np.all(np.isfinite(ratios)) and np.ptp(ratios) <= 1e-6 * ratios.max())
    return geometric, bool(np.ptp(steps) <= 1e-6 * np.abs(steps).max())


def _evenly_spaced_powers(values: np.ndarray) -> tuple[int, np.ndarray] | None:
    """(e, roots) where ``values`` are the e-th powers (cubes, then squares) of evenly spaced
    integers: LULESH runs only on cube numbers of ranks (1, 8, 27), and the arithmetic
    continuation of those (46, 65) is a rank count it refuses, the next cubes (64, 125) are
    not."""
    if len(values) < 3 or values[0] < 1 or np.any(values != np.round(values)):
        return None
    for exponent in (3, 2):
        roots = np.round(values ** (1 / exponent))
        steps = np.diff(roots)
        if np.all(roots**exponent == values) and steps[0] > 0 and np.all(steps == steps[0]):
            return exponent, roots
    return None
