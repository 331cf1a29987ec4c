"""Is a parameter's effect larger than the measurement noise? A per-call-path F-test.

Repetitions at the same coordinate tell us how much a value varies by chance. For each
parameter we ask whether the cell means differ *along that parameter* (with the other
parameters held fixed) by more than that chance variation: a one-way analysis of variance
within every line of the design, pooled over the lines. A parameter that fails the test is
left out of the search, and a call path where every parameter fails gets a constant model,
instead of a formula fitted to noise.

The test runs on logarithms of positive data: timing noise is multiplicative, so in log
space it is roughly homoscedastic, as the F-test assumes.
"""

from __future__ import annotations

import math

import numpy as np

from perfcast.modeling.lines import lines_along
from perfcast.modeling.repetitions import RepetitionGrid


def parameter_p_values(cells: RepetitionGrid) -> np.ndarray:
    """p-value of "this parameter has no effect", shape (K, m). NaN where untestable
    (no repetitions anywhere, or no line with two distinct values of the parameter)."""
    values = cells.values
    positive = np.nanmin(values, axis=(1, 2)) > 0
    # padding (NaN: a row with fewer repetitions than the widest) must stay missing
    logs = np.log(np.where(np.isnan(values) | (values > 0), values, 1.0))
    data = np.where(positive[:, None, None], logs, values)
    # each call path in units of its largest magnitude: the F statistic and the thresholds
    # of _f_test are relative, and squares of values near 1e200 (a mutated input) overflow
    magnitude = np.max(np.where(np.isfinite(data), np.abs(data), 0.0), axis=(1, 2))
    magnitude = np.where(magnitude > 0, magnitude, 1.0)
    data = data / magnitude[:, None, None]
    count = np.sum(~np.isnan(data), axis=2)  # (K, n)
    mean = np.nanmean(data, axis=2)  # (K, n)
    within_ss = np.nansum((data - mean[:, :, None]) ** 2, axis=2).sum(axis=1)  # (K,)
    within_df = (count - 1).clip(min=0).sum(axis=1)
    n_params = cells.coordinates.shape[1]
    result = np.full((values.shape[0], n_params), np.nan)
    for index in range(n_params):
        between_ss, between_df = _between_cells_within_lines(cells.coordinates, index, mean, count)
        if between_df == 0:
            continue
        result[:, index] = _f_test(between_ss, between_df, within_ss, within_df, mean)
    return result


def _between_cells_within_lines(
    coordinates: np.ndarray, index: int, mean: np.ndarray, count: np.ndarray
) -> tuple[np.ndarray, int]:
    """Sum of squares of the cell means around their line's mean, over all lines that vary
    the parameter ``index`` (a line: every other parameter fixed)."""
    ss = np.zeros(mean.shape[0])
    df = 0
    for members in lines_along(coordinates, index):
        if len(np.unique(coordinates[members, index])) < 2:
            continue
        weight = count[:, members]
        line_mean = (mean[:, members] * weight).sum(axis=1) / weight.sum(axis=1).clip(min=1)
        ss += (weight * (mean[:, members] - line_mean[:, None]) ** 2).sum(axis=1)
        df += len(members) - 1
    return ss, df


def _f_test(
    between_ss: np.ndarray,
    between_df: int,
    within_ss: np.ndarray,
    within_df: np.ndarray,
    mean: np.ndarray,
) -> np.ndarray:
    scale = np.maximum(np.abs(mean).max(axis=1), 1e-300)
    exact = within_ss <= (1e-12 * scale) ** 2  # noiseless repetitions: any difference is real
    changes = between_ss > (1e-9 * scale) ** 2
    # a spread of 1e140 between points over repetitions 1e-140 apart overflows f to inf:
    # P(F > inf) is 0, a real change, as it should be
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        f = (between_ss / between_df) / (within_ss / np.maximum(within_df, 1))
        p = f_survival(f, between_df, np.maximum(within_df, 1))
    p = np.where(exact, np.where(changes, 0.0, 1.0), p)
    return np.where(within_df > 0, p, np.nan)


def f_survival(f: np.ndarray | float, d1: np.ndarray | int, d2: np.ndarray | int) -> np.ndarray:
    """P(F > f) for F distributed as F(d1, d2) with whole degrees of freedom d1, d2 >= 1:
    ``scipy.special.fdtrc``, hand-written because importing ``scipy.special`` costs 0.2 s
    on every ``perfcast model`` (a fifth of a whole run on a thousand call paths), and the
    noise test's degrees of freedom are always counts (points, repetitions).

    P(F > f) = I_x(a, b) with a = d2/2, b = d1/2 and x = d2 / (d2 + d1 f), the regularized
    incomplete beta function. For (half-)integer a and b it is a finite sum: closed forms
    at a0, b0 in {1/2, 1} (x, sqrt(x), 1 - sqrt(1 - x), and (2/pi) arctan(sqrt(x / (1 - x)))
    when both degrees are odd, as for Student's t), then steps of one, first in a, then
    in b::

        I_x(a + 1, b) = I_x(a, b) - G(a + b) / (G(a + 1) G(b)) x^a (1 - x)^b
        I_x(a, b + 1) = I_x(a, b) + G(a + b) / (G(a) G(b + 1)) x^a (1 - x)^b

    each term the previous one times a ratio, kept as a logarithm so that a first term
    below the smallest float does not zero the later, larger ones. With d1 even the a
    steps are skipped (I_x(a, 1) = x^a) and every term is positive, so even tiny p-values
    keep their digits; with d1 odd the a steps subtract and the result is exact to about
    1e-13 absolute. Either is ample for a p-value compared with a significance level
    (tests/test_fifty.py compares with ``fdtrc``). The cost is (d1 + d2) / 2 vector
    steps. NaN where f is NaN or negative, as ``fdtrc``.
    """
    f, d1, d2 = np.broadcast_arrays(
        np.asarray(f, dtype=float), np.asarray(d1, dtype=np.int64), np.asarray(d2, dtype=np.int64)
    )
    if f.size and (d1.min() < 1 or d2.min() < 1):
        raise ValueError("degrees of freedom must be at least 1")
    odd_b, odd_a = d1 % 2 == 1, d2 % 2 == 1
    a0, b0 = np.where(odd_a, 0.5, 1.0), np.where(odd_b, 0.5, 1.0)
    a = d2 / 2.0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        f = np.where(f >= 0, f, np.nan)
        total = d2 + d1 * f
        x = np.where(np.isinf(f), 0.0, d2 / total)
        y = np.where(np.isinf(f), 1.0, d1 * f / total)  # 1 - x without cancellation
        log_x, log_y = np.log(x), np.log(y)
        root_x, root_y = np.sqrt(x), np.sqrt(y)
        both_odd = odd_a & odd_b
        p = np.where(
            both_odd,
            2 / math.pi * np.arctan2(root_x, root_y),
            np.where(odd_a, root_x, np.where(odd_b, x / (1 + root_y), x)),
        )
        # logarithms of the a-step term S and of the b-step term T, at (a0, b0)
        power = a0 * log_x + b0 * log_y
        first = np.where(both_odd, math.log(2 / math.pi), 0.0)
        log_s = power + np.where(odd_b & ~odd_a, math.log(0.5), first)
        log_t = power + np.where(odd_a & ~odd_b, math.log(0.5), first)
        a_steps, b_steps = (d2 - 1) // 2, (d1 - 1) // 2
        for step in range(int(a_steps.max(initial=0))):
            active = step < a_steps
            ai = a0 + step
            p = p - np.where(active & odd_b, np.exp(log_s), 0.0)
            log_s = log_s + np.log((ai + b0) / (ai + 1)) + log_x
            log_t = np.where(active, log_t + np.log((ai + b0) / ai) + log_x, log_t)
        p = np.where(odd_b, p, np.exp(a * log_x))  # I_x(a, 1) = x^a
        for step in range(int(b_steps.max(initial=0))):
            active = step < b_steps
            bj = b0 + step
            p = p + np.where(active, np.exp(log_t), 0.0)
            log_t = log_t + np.log((a + bj) / (bj + 1)) + log_y
    return np.clip(p, 0.0, 1.0)
