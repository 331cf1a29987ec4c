"""Robust statistics of repetitions: a point's centre and a call path's noise.

Repetitions arrive NaN-padded per (call path, point) cell, ``(K, n, r)``
(:class:`~perfcast.modeling.repetitions.RepetitionGrid`). :func:`aggregate` reduces each
cell to the one value the search fits, by default Huber's M-estimate (:func:`huber_centre`)
with a scale pooled over the call path's points (:func:`robust_noise`), which is also the
noise level the search's tolerances count in.
"""

from __future__ import annotations

import warnings

import numpy as np

MEDIAN_ESTIMATORS = ("huber", "harrell-davis", "sample")
"""How ``aggregation="median"`` estimates a point's central value from its repetitions."""

MAD_TO_SD = 1.4826
"""Median absolute deviation -> standard deviation (exact for normal noise)."""

HUBER_TUNING = 2.0
"""Huber's k: repetitions within k robust standard deviations of a point's centre count
fully, farther ones with weight ``k * sd / distance``. Within 1.345 (95 % efficiency under
normal noise) and 2 (nearly the mean's efficiency), the usual range; 2 keeps every
repetition of bounded noise (uniform noise never lies beyond 1.8 standard deviations)
while a spike of several standard deviations still counts like one at 2."""

HUBER_ITERATIONS = 50
"""Most reweighting steps of the Huber estimate (it converges long before, see below)."""

HUBER_TOLERANCE = 1e-12
"""Relative change of every centre below which the Huber reweighting stops."""


def aggregate(
    repetitions: np.ndarray, noise: np.ndarray, aggregation: str, median_estimator: str
) -> np.ndarray:
    """(K, n, r) NaN-padded repetitions and (K,) robust relative noise (:func:`robust_noise`)
    -> (K, n) values to fit: ``aggregation`` (``median``, ``mean``, ``min``, ``max``) of each
    cell, the median estimated by ``median_estimator`` (:data:`MEDIAN_ESTIMATORS`)."""
    if aggregation == "median" and median_estimator == "huber":
        return huber_centre(repetitions, noise)
    if aggregation == "median" and median_estimator == "harrell-davis":
        return harrell_davis_median(repetitions)
    reducer = getattr(np, f"nan{aggregation}")  # nanmedian, nanmean, nanmin, nanmax
    with warnings.catch_warnings():  # all-NaN cells (unmeasured points) are expected
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.asarray(reducer(repetitions, axis=2))


def harrell_davis_median(repetitions: np.ndarray) -> np.ndarray:
    """The Harrell-Davis median of each cell's repetitions (NaN where a cell has none):
    sorted values weighted by the Beta((c+1)/2, (c+1)/2) mass of each order statistic."""
    from scipy.special import betainc  # deferred like fdtrc in noise.py

    ordered = np.sort(repetitions, axis=2)  # NaN padding sorts last
    count = np.sum(~np.isnan(repetitions), axis=2)
    out = np.full(count.shape, np.nan)
    for c in np.unique(count[count > 0]):
        half = (c + 1) / 2
        weights = np.diff(betainc(half, half, np.arange(c + 1) / c))
        cells = count == c
        out[cells] = ordered[cells][:, :c] @ weights
    return out


def sample_median(repetitions: np.ndarray) -> np.ndarray:
    """The middle value (mean of the two middle ones for even counts) of each cell's
    repetitions, NaN where a cell has none; one sort instead of ``np.nanmedian``'s
    per-cell work."""
    ordered = np.sort(repetitions, axis=2)  # NaN padding sorts last
    count = np.sum(~np.isnan(repetitions), axis=2)[..., None]
    low = np.take_along_axis(ordered, np.maximum(count - 1, 0) // 2, axis=2)
    high = np.take_along_axis(ordered, count // 2, axis=2) if ordered.shape[2] > 1 else low
    high = np.where(count % 2 == 1, low, high)
    return np.where(count > 0, 0.5 * (low + high), np.nan)[..., 0]


def robust_noise(repetitions: np.ndarray) -> np.ndarray:
    """(K,) robust standard deviation of one repetition relative to its point's value,
    pooled over all points of a row: ``MAD_TO_SD`` times the median absolute relative
    deviation from the points' sample medians. One number per call path because five
    repetitions are too few to estimate each point's own; relative because run-time noise
    is. 0 where the repetitions agree (exact data, or a single repetition)."""
    centre = sample_median(repetitions)[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        deviation = np.abs(repetitions - centre) / np.abs(centre)
    deviation = np.where(np.isfinite(deviation), deviation, np.nan).reshape(len(deviation), -1)
    with warnings.catch_warnings():  # rows without any deviation are expected (all NaN)
        warnings.simplefilter("ignore", RuntimeWarning)
        noise = MAD_TO_SD * np.nanmedian(deviation, axis=1)
    return np.nan_to_num(noise, nan=0.0)


def huber_centre(repetitions: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """Huber's M-estimate of each cell's centre with the scale ``noise * |median|`` fixed
    (:func:`robust_noise`). Where every repetition lies within the limit of the cell's
    mean, the mean solves Huber's equation exactly (the usual case); the other cells
    reweight iteratively from their sample median. Cells without noise keep their sample
    median, so exact data stays exact."""
    centre = sample_median(repetitions)
    limit = HUBER_TUNING * noise[:, None] * np.abs(centre)
    todo = np.flatnonzero(np.isfinite(centre) & (limit > 0))
    values = repetitions.reshape(-1, repetitions.shape[2])[todo]
    present = ~np.isnan(values)
    values = np.where(present, values, 0.0)
    bound = limit.reshape(-1)[todo, None]
    mean = values.sum(axis=1) / present.sum(axis=1)
    result = centre.reshape(-1).copy()
    result[todo] = mean
    active = np.flatnonzero((present & (np.abs(values - mean[:, None]) > bound)).any(axis=1))
    current = centre.reshape(-1)[todo]
    with np.errstate(divide="ignore"):
        for _ in range(HUBER_ITERATIONS):
            distance = np.abs(values[active] - current[active, None])
            weight = np.where(present[active], np.minimum(1.0, bound[active] / distance), 0.0)
            new = (weight * values[active]).sum(axis=1) / weight.sum(axis=1)
            moving = np.abs(new - current[active]) > HUBER_TOLERANCE * np.abs(new)
            current[active] = new
            result[todo[active]] = new
            active = active[moving]
            if not len(active):
                break
    return result.reshape(centre.shape)
