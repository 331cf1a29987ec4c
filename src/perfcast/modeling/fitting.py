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

MAX_BATCH_ELEMENTS = 4_000_000
"""Chunk size (batch * n * t floats) that keeps temporary arrays around 100 MB."""

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
    """Result of :func:`fit_batch`; ``valid`` is False where a system was singular."""

    coefficients: np.ndarray  # (batch, t)
    predictions: np.ndarray  # (batch, n)
    loo_predictions: np.ndarray  # (batch, n)
    valid: np.ndarray  # (batch,)


def relative_weights(y: np.ndarray) -> np.ndarray:
    """1/|y|, floored so that no point (a zero, say) weighs more than
    ``1 / WEIGHT_FLOOR`` times the largest one and pins the fit on its own."""
    magnitude = np.abs(y)
    largest = magnitude.max(axis=-1, keepdims=True)
    floor = np.where(largest > 0, largest * WEIGHT_FLOOR, 1.0)  # all zero: plain weights
    return 1.0 / np.maximum(magnitude, floor)


def fit_batch(design: np.ndarray, y: np.ndarray, weights: np.ndarray | None) -> BatchFit:
    """Solve ``min || w * (design @ beta - y) ||`` for every system in the batch.

    design: (batch, n, t); y, weights: (batch, n), or broadcastable to it.
    """
    batch, n, t = design.shape
    y = np.broadcast_to(y, (batch, n))
    w = np.ones((batch, n)) if weights is None else np.broadcast_to(weights, (batch, n))
    coefficients = np.empty((batch, t))
    predictions = np.empty((batch, n))
    loo = np.empty((batch, n))
    valid = np.empty(batch, dtype=bool)
    step = max(1, MAX_BATCH_ELEMENTS // max(1, n * t))
    for start in range(0, batch, step):
        part = slice(start, min(batch, start + step))
        coefficients[part], predictions[part], loo[part], valid[part] = _solve(
            design[part], y[part], w[part]
        )
    return BatchFit(coefficients, predictions, loo, valid)


def _solve(
    design: np.ndarray, y: np.ndarray, w: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    xw = design * w[:, :, None]
    yw = y * w
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        scale = np.sqrt(np.square(xw).sum(axis=1))
        finite = np.isfinite(scale).all(axis=1) & (scale > 0).all(axis=1)
        scale = np.where(finite[:, None], scale, 1.0)
        xs = np.where(finite[:, None, None], xw / scale[:, None, :], 0.0)
        gram_inv, ok = _invert_symmetric(np.swapaxes(xs, 1, 2) @ xs)
        ok &= finite
        beta_scaled = _matvec(gram_inv, (xs * yw[:, :, None]).sum(axis=1))
        leverage = _quadratic(xs, gram_inv[:, None])
        ok &= (leverage < LEVERAGE_LIMIT).all(axis=1)
        beta = beta_scaled / scale
        predictions = _dot(design, beta[:, None, :])
        residual = y - predictions
        loo = y - residual / (1.0 - np.where(ok[:, None], leverage, 0.0))
    return beta, predictions, loo, ok


def fit_shared_basis(design: np.ndarray, y: np.ndarray, weights: np.ndarray | None) -> BatchFit:
    """Fit S hypotheses that share their design across C data rows: design (S, n, t),
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
        rhs = np.stack([(w2 * y) @ xs[:, :, i].T for i in range(t)], axis=-1)
        gram_inv, ok = _invert_symmetric(gram)
        ok &= finite[None, :]
        beta_scaled = _matvec(gram_inv, rhs)
        predictions = _dot(xs[None], beta_scaled[:, :, None, :])
        leverage = w2[:, None, :] * _quadratic(xs[None], gram_inv[:, :, None])
        ok &= (leverage < LEVERAGE_LIMIT).all(axis=2)
        residual = y[:, None, :] - predictions
        loo = y[:, None, :] - residual / (1.0 - np.where(ok[:, :, None], leverage, 0.0))
    return BatchFit(beta_scaled / scale[None, :, :], predictions, loo, ok)


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
