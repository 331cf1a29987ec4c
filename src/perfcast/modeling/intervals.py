"""Prediction intervals of fitted PMNF models.

A fitted model predicts ``f(x0) = sum_j beta_j X_j(x0)`` (``X_0 = 1``, the constant). Two
things make a new measurement at ``x0`` differ from it:

1. **The coefficients are estimates.** The fit is weighted least squares of the points'
   aggregated repetitions (weights ``1/|y|``: relative residuals, since timing noise is
   multiplicative), so ``Cov(beta) = s^2 (X'WX)^-1`` with ``s`` the standard deviation of
   an aggregated point around the model in the fit's weighted (relative) units. Its share
   at ``x0`` is ``X(x0)' Cov(beta) X(x0)``, which grows with the leverage of ``x0``: slowly
   inside the measured range, fast beyond it.
2. **A new measurement is noisy.** One repetition scatters around the model by the
   repetitions' own relative standard deviation, ``noise * f(x0)``.

The interval is ``f(x0) +- t * sqrt(X' Cov X + (noise f(x0))^2)``, the classic prediction
interval of a linear regression on the relative scale, with ``t`` Student's quantile for
the Welch-Satterthwaite degrees of freedom of the two estimated variances.
:func:`confidence_interval` leaves out the second: where the model's expected value lies.

This classic interval assumes that the selected terms are the true ones. The
search chose them because they fit the measured points best, and a neighbouring exponent
that fits them almost as well (``p^(4/5) log2(p)`` for ``p``, say) departs from them
beyond the measured range by more than the classic interval, the more the farther. Neither
the residuals nor the leave-one-out error the modeler selects by can show it: measured in
``benchmarks/prediction_intervals.py``, models with other terms than the truth's have the
same leave-one-out SMAPE as those with the true ones, and miss the truth 8x beyond the
range by more than the classic half-width in 40-50 % of the cases. So each model keeps
its *alternatives* (:class:`~perfcast.modeling.pmnf.Alternative`): the hypotheses whose
screening score lies within :data:`~perfcast.modeling.search.RIVAL_TOLERANCE` noise
standard errors of the best, fitted to the same points. The interval reaches from the
lowest of the model and its alternatives at ``x0``, minus the half-width, to the highest,
plus it: inside the measured range they agree and it stays the classic one, beyond it
grows where they part. It covers the selection among the hypotheses the search kept, not
a truth the search space lacks or ranked below them; the benchmark shows the coverage with
and without the alternatives (``selection=False`` gives the classic interval).

The interval is symmetric: it describes noise that scatters both ways by a few percent.
Noise that only adds (interference from other processes) makes measurements lean upward;
the model then fits their typical value, and the interval holds the measurements, not
the noiseless run time below them.

A model without stored uncertainty (read from an Extra-P file, or written before perfcast
stored it) has no interval: both bounds are nan.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from perfcast.modeling.pmnf import Alternative, ArrayLike, Model, Uncertainty

DEFAULT_LEVEL = 0.95


@dataclass(frozen=True)
class RepetitionNoise:
    """Per call path (K,): what its repetitions say of the noise, whatever model is fitted.

    ``noise`` is the pooled relative standard deviation of one repetition around its
    point's mean, ``sum (y_ij - mean_i)^2 / mean_i^2`` over ``sum (r_i - 1)`` (nan without
    a second repetition anywhere), with those ``dof``. Not the robust noise the modeler
    aggregates with (:func:`~perfcast.modeling.robust.robust_noise`): five repetitions
    bias that low (one of the deviations from the sample median is zero), and it calls
    spikes rarer than they are, while a new measurement can be a spike. ``aggregate`` is
    the variance this noise gives an aggregated point in the fit's weighted units,
    ``(w_i y_i noise)^2 / r_i`` averaged over the points."""

    noise: np.ndarray
    dof: np.ndarray
    aggregate: np.ndarray

    @classmethod
    def of(
        cls, repetitions: np.ndarray, values: np.ndarray, weights: np.ndarray | None
    ) -> RepetitionNoise:
        """From NaN-padded repetitions (K, n, r), the aggregated values (K, n) fitted and
        their weights (K, n; None: unweighted)."""
        counts = np.sum(~np.isnan(repetitions), axis=2)
        dof = np.sum(np.maximum(counts - 1, 0), axis=1).astype(float)
        with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)  # points never measured: all NaN
            centre = np.nanmean(repetitions, axis=2, keepdims=True)
            relative = np.where(np.abs(centre) > 0, (repetitions - centre) / np.abs(centre), 0)
            squares = np.nansum(np.square(relative), axis=(1, 2))
            noise = np.where(dof > 0, np.sqrt(squares / np.maximum(dof, 1.0)), np.nan)
            scaled = np.abs(values) if weights is None else np.abs(values) * weights
            variance = np.square(scaled * noise[:, None]) / np.maximum(counts, 1)
        return cls(noise, dof, variance.mean(axis=1))


@dataclass(frozen=True)
class FitResiduals:
    """What the modeler knows of one selected fit besides its design: the aggregated values
    it fitted, its predictions there, its weights (None: unweighted), and its call path's
    :class:`RepetitionNoise` (noise, degrees of freedom, aggregate variance)."""

    values: np.ndarray  # (n,)
    predictions: np.ndarray  # (n,)
    weights: np.ndarray | None  # (n,)
    noise: float
    noise_dof: float
    repetition_variance: float


def fit_uncertainty(
    fit: FitResiduals,
    gram_inverse: np.ndarray,
    scales: np.ndarray,
    alternatives: tuple[Alternative, ...] = (),
) -> Uncertainty | None:
    """The :class:`Uncertainty` of a weighted least-squares fit whose scaled design has the
    inverse Gram matrix ``gram_inverse``; None where the fit was singular or nothing is
    known of the noise (a single repetition at as many points as coefficients).

    ``noise`` is the repetitions' (:class:`RepetitionNoise`); with one repetition per
    point the residuals stand in for it.

    Two estimates of ``s^2``, the variance of an aggregated point around the model in the
    fit's weighted units, are at hand: the residuals' (``RSS / (n - t)``: few degrees of
    freedom, and it also grows with a misfit) and the repetitions' (``noise^2 / r_i`` per
    point: many degrees of freedom, blind to misfit). The larger one is used, with its own
    degrees of freedom: a model that misses its points by more than their noise gets the
    wider interval it deserves, and a model that fits them closer than the noise (it was
    selected for that) still gets the noise's.
    """
    if not np.all(np.isfinite(gram_inverse)):
        return None
    y = fit.values
    weights = np.ones_like(y) if fit.weights is None else fit.weights
    n, t = len(y), len(scales)
    residual_dof = float(n - t)
    residual = weights * (y - fit.predictions)
    residual_variance = float(residual @ residual) / residual_dof if residual_dof > 0 else np.nan
    noise, noise_dof, repetition_variance = fit.noise, fit.noise_dof, fit.repetition_variance
    if not noise_dof > 0:  # one repetition per point: the points' scatter is a repetition's
        with np.errstate(divide="ignore", invalid="ignore"):
            relative = np.where(y != 0, (y - fit.predictions) / np.abs(y), 0.0)
        noise = float(np.sqrt(relative @ relative / residual_dof)) if residual_dof > 0 else np.nan
        noise_dof, repetition_variance = residual_dof, np.nan
    if not residual_variance <= repetition_variance:  # also where one of them is nan
        variance, dof = residual_variance, residual_dof
    else:
        variance, dof = repetition_variance, noise_dof
    if not (np.isfinite(variance) and np.isfinite(noise) and dof > 0 and noise_dof > 0):
        return None
    covariance = variance * 0.5 * (gram_inverse + gram_inverse.T)  # symmetric to the last bit
    return Uncertainty(
        scales=tuple(float(v) for v in scales),
        covariance=tuple(tuple(float(v) for v in row) for row in covariance),
        dof=dof,
        noise=float(noise),
        noise_dof=float(noise_dof),
        alternatives=alternatives,
    )


def prediction_interval(
    model: Model,
    point: Mapping[str, ArrayLike],
    level: float = DEFAULT_LEVEL,
    *,
    selection: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper), each shaped like ``model.evaluate(point)``: where one new measurement
    at ``point`` lies with probability ``level``. nan where the model has no uncertainty.
    ``selection=False``: the classic interval of the selected terms alone, without the
    alternatives the selection could not tell from them."""
    return _interval(model, point, level, new_measurement=True, selection=selection)


def confidence_interval(
    model: Model,
    point: Mapping[str, ArrayLike],
    level: float = DEFAULT_LEVEL,
    *,
    selection: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) of the model's expected value at ``point`` at ``level``: the
    prediction interval without the noise of a new measurement."""
    return _interval(model, point, level, new_measurement=False, selection=selection)


def _interval(
    model: Model,
    point: Mapping[str, ArrayLike],
    level: float,
    *,
    new_measurement: bool,
    selection: bool,
) -> tuple[np.ndarray, np.ndarray]:
    if not 0 < level < 1:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level}")
    mean = mean_estimate(model, point, selection=selection)
    if mean is None:
        missing = np.full(np.shape(model.evaluate(point)), np.nan)
        return missing, missing.copy()
    return mean.interval(level, new_measurement=new_measurement)


@dataclass(frozen=True)
class MeanEstimate:
    """What a fit says of the model's expected value at a point, each array shaped like
    ``model.evaluate(point)``: the ``value``, the ``low`` and ``high`` end of the model and
    the alternatives the selection could not tell from it (both the value where there are
    none, or with ``selection=False``), and the ``variance`` of the fitted value,
    ``X' Cov X``, in the model's own units, an estimate resting on ``dof`` degrees of
    freedom. No noise of a new measurement: what it describes is the fit, so that two fits
    can be compared with each other (:mod:`perfcast.report.compare`); ``noise`` (relative,
    on ``noise_dof`` degrees of freedom) is kept for :meth:`interval`."""

    value: np.ndarray
    low: np.ndarray
    high: np.ndarray
    variance: np.ndarray
    dof: float
    noise: float
    noise_dof: float

    def interval(
        self, level: float, *, new_measurement: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) at ``level``: the prediction interval of one new measurement, or
        with ``new_measurement=False`` the confidence interval of the expected value."""
        if not 0 < level < 1:
            raise ValueError(f"level must lie strictly between 0 and 1, got {level}")
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            fitted = self.variance
            noise = np.square(self.noise * self.value) if new_measurement else np.zeros_like(fitted)
            variance = fitted + noise
            # Welch-Satterthwaite: the degrees of freedom of a sum of two estimated variances
            dof = np.square(variance) / (
                np.square(fitted) / self.dof + np.square(noise) / self.noise_dof
            )
            half = np.where(variance > 0, _quantile(level, dof) * np.sqrt(variance), 0.0)
        # Costs (times, counts, bytes) are never negative: where the model's value is not,
        # neither is the interval (a symmetric interval around a small time crossed zero).
        lower = self.low - half
        return np.where(self.value >= 0, np.maximum(lower, 0.0), lower), self.high + half


def mean_estimate(
    model: Model, point: Mapping[str, ArrayLike], *, selection: bool = True
) -> MeanEstimate | None:
    """The model's expected value at ``point`` with its uncertainty; None where the model
    stores none. The intervals of this module are built from it."""
    centre = model.evaluate(point)
    uncertainty = model.uncertainty
    if uncertainty is None:
        return None
    arrays = {k: np.asarray(v, dtype=float) for k, v in point.items()}
    columns = [np.ones(centre.shape)] + [
        np.broadcast_to(term.basis(arrays), centre.shape) for term in model.terms
    ]
    scaled = np.stack(columns, axis=-1) / np.asarray(uncertainty.scales)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        fitted = np.einsum("...i,ij,...j->...", scaled, np.asarray(uncertainty.covariance), scaled)
        fitted = np.maximum(fitted, 0.0)
    low, high = centre, centre
    if selection:
        for other in alternative_values(uncertainty.alternatives, arrays, centre.shape):
            low, high = np.fmin(low, other), np.fmax(high, other)
    return MeanEstimate(
        centre, low, high, fitted, uncertainty.dof, uncertainty.noise, uncertainty.noise_dof
    )


def alternative_values(
    alternatives: tuple[Alternative, ...], arrays: Mapping[str, np.ndarray], shape: tuple[int, ...]
) -> list[np.ndarray]:
    """The alternatives evaluated at ``arrays``, nan where one is undefined (a logarithm at
    0, beyond floating point): it describes no value to cover there. One over a parameter
    the point does not give is left out (give every parameter of the model set, as
    :meth:`~perfcast.modeling.modelset.ModelSet.predict` asks)."""
    values = []
    with np.errstate(all="ignore"):
        for alternative in alternatives:
            try:
                value = alternative.constant + sum(
                    (t.coefficient * t.basis(arrays) for t in alternative.terms), np.zeros(shape)
                )
            except KeyError:
                continue
            values.append(np.where(np.isfinite(value), value, np.nan))
    return values


NORMAL_DOF = 1e9
"""Degrees of freedom from which Student's quantile is the normal one (they differ by less
than 1e-8 relative there; Hill's formula divides by numbers that underflow far above)."""


def _quantile(level: float, dof: np.ndarray) -> np.ndarray:
    """Two-sided Student quantiles at ``level`` for each of ``dof`` (nan stays nan)."""
    out = np.full(np.shape(dof), np.nan)
    finite = np.isfinite(dof)
    for value in np.unique(dof[finite]):
        out[dof == value] = student_quantile(level, float(value))
    return out


def student_quantile(level: float, dof: float) -> float:
    """``t`` with ``P(|T| <= t) = level`` for Student's T with ``dof >= 1`` degrees of freedom
    (fewer count as 1; :data:`NORMAL_DOF` or more: the normal quantile): G. W. Hill's
    approximation (Algorithm 396, Comm. ACM 13(10), 1970).

    Not SciPy's ``stdtrit``, because ``perfcast predict`` prints intervals and must start
    without SciPy (its import costs more than the rest of the command). Measured against
    ``stdtrit`` (``tests/test_intervals.py``): exact at 1 and 2 degrees of freedom, within
    0.11 % above 2 and 1e-5 above 6; between 1 and 2 (only sums of two variance estimates
    have fractional degrees of freedom) up to 25 % wider, never more than 1 % narrower.
    """
    tail = 1.0 - level  # two-sided probability beyond t
    n = max(dof, 1.0)
    if n >= NORMAL_DOF:
        return NormalDist().inv_cdf(0.5 + 0.5 * level)
    if n == 1.0:
        return math.tan(math.pi / 2 * level)
    if n == 2.0:
        return math.sqrt(2.0 / (tail * (2.0 - tail)) - 2.0)
    a = 1.0 / (n - 0.5)
    b = 48.0 / (a * a)
    c = ((20700.0 * a / b - 98.0) * a - 16.0) * a + 96.36
    d = ((94.5 / (b + c) - 3.0) / b + 1.0) * math.sqrt(a * math.pi / 2.0) * n
    y = (d * tail) ** (2.0 / n)
    if y > 0.05 + a:  # the normal quantile, corrected (an asymptotic expansion)
        x = NormalDist().inv_cdf(0.5 * tail)
        y = x * x
        if n < 5.0:
            c += 0.3 * (n - 4.5) * (x + 0.6)
        c = (((0.05 * d * x - 5.0) * x - 7.0) * x - 2.0) * x + b + c
        y = (((((0.4 * y + 6.3) * y + 36.0) * y + 94.5) / c - y - 3.0) / b + 1.0) * x
        y = a * y * y
        y = math.expm1(y) if y > 0.002 else 0.5 * y * y + y
    else:  # far in the tail of few degrees of freedom: a series in the tail probability
        y = (
            (1.0 / (((n + 6.0) / (n * y) - 0.089 * d - 0.822) * (n + 2.0) * 3.0) + 0.5 / (n + 4.0))
            * y
            - 1.0
        ) * (n + 1.0) / (n + 2.0) + 1.0 / y
    return math.sqrt(n * y)
