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

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Cells:
    """Repetitions arranged per call path and coordinate: values (K, n, r) padded with NaN."""

    coordinates: np.ndarray  # (n, m)
    values: np.ndarray  # (K, n, r)


def parameter_p_values(cells: Cells) -> np.ndarray:
    """p-value of "this parameter has no effect", shape (K, m). NaN where untestable
    (no repetitions anywhere, or no line with two distinct values of the parameter)."""
    values = cells.values
    positive = np.nanmin(values, axis=(1, 2)) > 0
    # padding (NaN: a row with fewer repetitions than the widest) must stay missing
    logs = np.log(np.where(np.isnan(values) | (values > 0), values, 1.0))
    data = np.where(positive[:, None, None], logs, values)
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
    others = np.delete(coordinates, index, axis=1)
    _, line_of = np.unique(others, axis=0, return_inverse=True)
    line_of = line_of.reshape(-1)
    ss = np.zeros(mean.shape[0])
    df = 0
    for line in np.unique(line_of):
        members = np.flatnonzero(line_of == line)
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
    from scipy import stats  # deferred: scipy.stats costs a second at start-up

    scale = np.maximum(np.abs(mean).max(axis=1), 1e-300)
    exact = within_ss <= (1e-12 * scale) ** 2  # noiseless repetitions: any difference is real
    changes = between_ss > (1e-9 * scale) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        f = (between_ss / between_df) / (within_ss / np.maximum(within_df, 1))
        p = stats.f.sf(f, between_df, np.maximum(within_df, 1))
    p = np.where(exact, np.where(changes, 0.0, 1.0), p)
    return np.where(within_df > 0, p, np.nan)
