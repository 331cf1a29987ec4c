"""Batched least squares with exact leave-one-out cross-validation.

Every hypothesis of every call path is an independent small regression (n points, t
columns). Solving them one `lstsq` call at a time is what makes classic tools slow; here
they are stacked into arrays of shape (batch, n, t) and solved together through the normal
equations of column-scaled matrices. Leave-one-out predictions need no refits: for a
linear least-squares fit the held-out residual is ``r_i / (1 - h_ii)`` with ``h_ii`` the
leverage (diagonal of the hat matrix).

Fits are weighted by ``1/|y|`` by default, i.e. they minimise *relative* residuals: run-time
noise is multiplicative (a few percent of the value), so unweighted fits let the largest
points dictate the shape and ignore the small ones that pin down constant and exponent.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_BATCH_ELEMENTS = 1_000_000
"""Call paths per block are chosen so a block's temporaries (~8 MB each) stay cache-friendly."""

CONDITION_LIMIT = 1e-12
"""Smallest eigenvalue ratio of the scaled normal matrix before a hypothesis counts as singular."""

WEIGHT_FLOOR = 1e-4
"""Smallest |y| used for relative weights, as a fraction of the largest |y|."""

EXACT = 1e-12
"""Relative size below which a residual is floating-point rounding, not misfit."""

LEVERAGE_LIMIT = 1 - 1e-9
"""A point with leverage 1 is fitted exactly; its leave-one-out prediction is undefined."""


@dataclass
class BatchFit:
    """Fitted regressions; ``valid`` is False where a system was singular or a leave-one-out
    prediction is undefined."""

    coefficients: np.ndarray  # (batch, t)
    predictions: np.ndarray  # (batch, n)
    loo_predictions: np.ndarray  # (batch, n)
    valid: np.ndarray  # (batch,)
    gram_inverse: np.ndarray  # (batch, t, t) of the scaled weighted columns
    scales: np.ndarray  # (batch, t) the columns' scales: coefficient j is beta_j * scales_j there
    """Scaled coordinates, in which the coefficients' covariance is ``s^2 gram_inverse``:
    what a prediction interval needs (:mod:`perfcast.modeling.intervals`)."""


def relative_weights(y: np.ndarray) -> np.ndarray:
    """1/|y|, floored so that no point (a zero, say) weighs more than
    ``1 / WEIGHT_FLOOR`` times the largest one and pins the fit on its own."""
    magnitude = np.abs(y)
    largest = magnitude.max(axis=-1, keepdims=True)
    floor = np.where(largest > 0, largest * WEIGHT_FLOOR, 1.0)  # all zero: plain weights
    return 1.0 / np.maximum(magnitude, floor)


def fit_subsets(
    columns: np.ndarray, y: np.ndarray, weights: np.ndarray | None, subsets: np.ndarray
) -> BatchFit:
    """Fit, for every data row, every hypothesis that is a subset of a shared column set.

    columns: (K, n, d) candidate columns per call path (column 0 the constant);
    y, weights: (K, n); subsets: (H, t) column indices of each hypothesis, all of width t.
    Results have leading shape (K, H).

    Every hypothesis of a structure search draws its columns from a small dictionary, so
    the weighted Gram matrix of the dictionary is formed once per call path and each
    hypothesis's normal matrix is a sub-matrix of it: the n-length products are done once
    per column pair, not once per hypothesis.
    """
    rows, n, d = columns.shape
    hypotheses, t = subsets.shape
    w = np.ones((rows, n)) if weights is None else np.broadcast_to(weights, (rows, n))
    out = BatchFit(
        np.empty((rows, hypotheses, t)),
        np.empty((rows, hypotheses, n)),
        np.empty((rows, hypotheses, n)),
        np.empty((rows, hypotheses), dtype=bool),
        np.empty((rows, hypotheses, t, t)),
        np.empty((rows, hypotheses, t)),
    )
    step = max(1, MAX_BATCH_ELEMENTS // (n * max(d * d, hypotheses * t)))
    for start in range(0, rows, step):
        part = slice(start, min(rows, start + step))
        fit = _fit_subsets_chunk(columns[part], y[part], w[part], subsets)
        out.coefficients[part] = fit.coefficients
        out.predictions[part] = fit.predictions
        out.loo_predictions[part] = fit.loo_predictions
        out.valid[part] = fit.valid
        out.gram_inverse[part] = fit.gram_inverse
        out.scales[part] = fit.scales
    return out


@dataclass
class Screen:
    """In-sample fits without predictions: enough to rank hypotheses, not to validate them."""

    coefficients: np.ndarray  # (batch, t)
    rss: np.ndarray  # (batch,) weighted residual sum of squares
    valid: np.ndarray  # (batch,)


def screen_subsets(
    columns: np.ndarray, y: np.ndarray, weights: np.ndarray | None, subsets: np.ndarray
) -> Screen:
    """Like :func:`fit_subsets`, but only coefficients and the weighted in-sample RSS.

    Both follow from the Gram matrix alone (``rss = y'Wy - beta' X'Wy``), so a hypothesis
    costs O(t^2) once the dictionary's Gram matrix exists, against O(n t^2) for predictions
    and leverages: cheap enough to screen every structure and shape combination, leaving
    leave-one-out validation to the few best. The subtraction loses ~1e-15 of ``y'Wy`` to
    rounding; callers floor the RSS at :data:`SCREEN_FLOOR` so such ties stay ties.
    """
    rows, n, d = columns.shape
    hypotheses, t = subsets.shape
    w = np.ones((rows, n)) if weights is None else np.broadcast_to(weights, (rows, n))
    out = Screen(
        np.empty((rows, hypotheses, t)),
        np.empty((rows, hypotheses)),
        np.empty((rows, hypotheses), dtype=bool),
    )
    step = max(1, MAX_BATCH_ELEMENTS // max(n * d, hypotheses * t * t))
    for start in range(0, rows, step):
        part = slice(start, min(rows, start + step))
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            xs, scale, finite, yw = _scaled_columns(columns[part], y[part], w[part])
            gram = np.swapaxes(xs, 1, 2) @ xs  # (K, d, d)
            rhs = (xs * yw[:, :, None]).sum(axis=1)  # (K, d)
            rhs_s = rhs[:, subsets]
            beta, ok = _solve_symmetric(gram[:, subsets[:, :, None], subsets[:, None, :]], rhs_s)
            ok &= finite[:, subsets].all(axis=2)
            total = np.square(yw).sum(axis=1)[:, None]
            out.rss[part] = np.maximum(total - _dot(beta, rhs_s), 0.0)
            out.coefficients[part] = beta / np.where(finite, scale, 1.0)[:, subsets]
            out.valid[part] = ok
    return out


SCREEN_FLOOR = 1e-12
"""Relative in-sample RSS (a fraction of ``y'Wy``) below which screened fits count as exact."""


def _scaled_columns(
    columns: np.ndarray, y: np.ndarray, w: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Weighted columns scaled to unit norm (conditions the normal matrices), the scales,
    which columns are usable, and the weighted data."""
    xw = columns * w[:, :, None]
    scale = np.sqrt(np.square(xw).sum(axis=1))  # (K, d)
    finite = np.isfinite(scale) & (scale > 0)
    xs = np.where(finite[:, None, :], xw / np.where(finite, scale, 1.0)[:, None, :], 0.0)
    return xs, scale, finite, y * w


def _fit_subsets_chunk(
    columns: np.ndarray, y: np.ndarray, w: np.ndarray, subsets: np.ndarray
) -> BatchFit:
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        xs, scale, finite, yw = _scaled_columns(columns, y, w)
        gram = np.swapaxes(xs, 1, 2) @ xs  # (K, d, d)
        rhs = (xs * yw[:, :, None]).sum(axis=1)  # (K, d)
        gram_inv, ok = _invert_symmetric(gram[:, subsets[:, :, None], subsets[:, None, :]])
        ok &= finite[:, subsets].all(axis=2)
        beta = _matvec(gram_inv, rhs[:, subsets])  # (K, H, t), scaled coordinates
        gathered = xs[:, :, subsets]  # (K, n, H, t)
        fitted = (_dot(gathered, beta[:, None]) / w[:, :, None]).transpose(0, 2, 1)
        leverage = _quadratic(gathered, gram_inv[:, None]).transpose(0, 2, 1)  # (K, H, n)
        ok &= (leverage < LEVERAGE_LIMIT).all(axis=2)
        residual = y[:, None, :] - fitted
        loo = y[:, None, :] - residual / (1.0 - np.where(ok[:, :, None], leverage, 0.0))
        scales = np.where(finite, scale, 1.0)[:, subsets]
        coefficients = beta / scales
    return BatchFit(coefficients, fitted, loo, ok, gram_inv, scales)


def screen_shared_basis(design: np.ndarray, y: np.ndarray, weights: np.ndarray | None) -> Screen:
    """Screen S hypotheses that share their design across C data rows: design (S, n, t),
    y and weights (C, n). Results have leading shape (C, S).

    This is the hot path of the per-parameter search (every shape on every line of every
    call path). The weighted normal equations are assembled from sufficient statistics,
    one matrix product per Gram entry, instead of materialising C * S design matrices.
    """
    shapes, n, t = design.shape
    rows = y.shape[0]
    w2 = np.ones((rows, n)) if weights is None else np.asarray(weights) ** 2
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        scale = np.abs(design).max(axis=1)  # (S, t): keeps the Gram matrices well conditioned
        finite = np.isfinite(scale).all(axis=1) & (scale > 0).all(axis=1)
        scale = np.where(finite[:, None], scale, 1.0)
        xs = np.where(finite[:, None, None], design / scale[:, None, :], 0.0)
        gram = np.empty((rows, shapes, t, t))
        for i in range(t):
            for j in range(i, t):
                gram[:, :, i, j] = gram[:, :, j, i] = w2 @ (xs[:, :, i] * xs[:, :, j]).T
        wy = w2 * y
        rhs = np.stack([wy @ xs[:, :, i].T for i in range(t)], axis=-1)  # (C, S, t)
        gram_inv, ok = _invert_symmetric(gram)
        ok &= finite[None, :]
        beta = _matvec(gram_inv, rhs)
        total = (wy * y).sum(axis=1)[:, None]
        rss = np.maximum(total - _dot(beta, rhs), 0.0)
    return Screen(beta / scale[None, :, :], rss, ok)


def constant_rss(y: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
    """Weighted in-sample RSS of the constant model (the weighted mean)."""
    w2 = np.ones_like(y) if weights is None else np.square(weights)
    mean = (w2 * y).sum(axis=-1, keepdims=True) / w2.sum(axis=-1, keepdims=True)
    return (w2 * np.square(y - mean)).sum(axis=-1)


# Small-matrix helpers. Regressions here have 2 to ~6 columns; numpy's stacked matmul has a
# per-matrix overhead that dominates at that size, so the products are spelled out over the
# (tiny) column index and run as whole-array operations over the (huge) batch instead.


def _dot(x: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """sum_i x[..., i] * beta[..., i], broadcasting."""
    out = x[..., 0] * beta[..., 0]
    for i in range(1, x.shape[-1]):
        out = out + x[..., i] * beta[..., i]
    return out


def _matvec(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """matrix (..., t, t) @ vector (..., t)."""
    return np.stack([_dot(matrix[..., i, :], vector) for i in range(matrix.shape[-1])], axis=-1)


def _quadratic(x: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """x^T M x over the last axis of x (..., t) with symmetric M (..., t, t), broadcasting."""
    t = x.shape[-1]
    out = x[..., 0] * x[..., 0] * matrix[..., 0, 0]
    for i in range(t):
        for j in range(i, t):
            if i or j:
                term = x[..., i] * x[..., j] * matrix[..., i, j]
                out = out + (term if i == j else 2.0 * term)
    return out


def _invert_symmetric(gram: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of stacked symmetric positive semi-definite matrices and a well-conditioned
    mask; closed form for 2x2 (the common single-term case), eigendecomposition otherwise."""
    t = gram.shape[-1]
    if t == 2:
        a, b, d = gram[..., 0, 0], gram[..., 0, 1], gram[..., 1, 1]
        det = a * d - b * b
        half_trace = 0.5 * (a + d)
        root = np.sqrt(np.maximum(half_trace**2 - det, 0.0))
        ok = (half_trace - root) > CONDITION_LIMIT * (half_trace + root)
        safe = np.where(ok, det, 1.0)
        inverse = (
            np.stack([np.stack([d, -b], -1), np.stack([-b, a], -1)], -2) / safe[..., None, None]
        )
        return np.where(ok[..., None, None], inverse, 0.0), ok
    eigval, eigvec = np.linalg.eigh(gram)
    ok = eigval[..., 0] > CONDITION_LIMIT * eigval[..., -1]
    inv_eig = np.where(ok[..., None], 1.0 / np.where(ok[..., None], eigval, 1.0), 0.0)
    return (eigvec * inv_eig[..., None, :]) @ np.swapaxes(eigvec, -1, -2), ok


def _solve_symmetric(gram: np.ndarray, rhs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Solve stacked symmetric positive semi-definite systems by an LDL' factorisation
    spelled out over the (tiny) matrix index, and flag the ill-conditioned ones: a pivot
    below ``CONDITION_LIMIT`` times the trace means a column is (nearly) a combination of
    the others. Several times faster than an eigendecomposition when only a solution is
    needed, not the inverse."""
    t = gram.shape[-1]
    lower = np.zeros(gram.shape)
    pivot = np.empty(gram.shape[:-1])
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        for j in range(t):
            pivot[..., j] = (
                gram[..., j, j] - _dot(lower[..., j, :j] ** 2, pivot[..., :j])
                if j
                else gram[..., j, j]
            )
            safe = np.where(pivot[..., j] > 0, pivot[..., j], 1.0)
            lower[..., j, j] = 1.0
            for i in range(j + 1, t):
                product = gram[..., i, j]
                if j:
                    product = product - _dot(lower[..., i, :j] * lower[..., j, :j], pivot[..., :j])
                lower[..., i, j] = product / safe
        ok = pivot.min(axis=-1) > CONDITION_LIMIT * np.trace(gram, axis1=-2, axis2=-1)
        z = np.empty(rhs.shape)
        for i in range(t):  # forward: L z = rhs
            z[..., i] = rhs[..., i] - (_dot(lower[..., i, :i], z[..., :i]) if i else 0.0)
        z = z / np.where(ok[..., None], pivot, 1.0)
        x = np.empty(rhs.shape)
        for i in reversed(range(t)):  # backward: L' x = D^-1 z
            below = _dot(lower[..., i + 1 :, i], x[..., i + 1 :]) if i < t - 1 else 0.0
            x[..., i] = z[..., i] - below
    return np.where(ok[..., None], x, 0.0), ok


def smape(y: np.ndarray, prediction: np.ndarray, axis: int = -1) -> np.ndarray:
    """Symmetric mean absolute percentage error in percent. Points where both values are
    zero up to rounding (relative to the largest value) count as exact."""
    scale = np.abs(y).max(axis=axis, keepdims=True) * EXACT
    denominator = np.maximum(np.abs(y) + np.abs(prediction), scale)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(denominator > 0, 2.0 * np.abs(prediction - y) / denominator, 0.0)
    return 100.0 * ratio.mean(axis=axis)


def rss(y: np.ndarray, prediction: np.ndarray, axis: int = -1) -> np.ndarray:
    return ((prediction - y) ** 2).sum(axis=axis)


CRITERIA = {"smape": smape, "rss": rss}
"""Selection criteria applied to leave-one-out predictions."""


def selection_cost(criterion: str, y: np.ndarray, prediction: np.ndarray) -> np.ndarray:
    """The criterion, floored at what floating-point rounding alone produces.

    Without the floor, exact data would pick whichever hypothesis has the luckiest rounding,
    often one with a spurious extra term of coefficient 1e-14. Floored costs tie, and the
    search enumerates simpler hypotheses first, so the simplest exact model wins.
    """
    cost = CRITERIA[criterion](y, prediction)
    if criterion == "smape":
        floor = 100.0 * EXACT * 100
    else:
        floor = (EXACT * 100) ** 2 * np.square(y).sum(axis=-1)
    return np.maximum(cost, floor)


def adjusted_r2(y: np.ndarray, prediction: np.ndarray, n_coefficients: int) -> float:
    n = y.size
    total = float(((y - y.mean()) ** 2).sum())
    residual = float(((y - prediction) ** 2).sum())
    if total == 0.0:
        return 1.0 if residual == 0.0 else 0.0
    if n - n_coefficients <= 0:
        return float("nan")
    return 1.0 - (residual / (n - n_coefficients)) / (total / (n - 1))
