"""What a new run is worth to a prediction: how much it is expected to narrow the interval.

The prediction interval at a target (:mod:`perfcast.modeling.intervals`) has two parts,
and a run narrows each in its own way:

1. **The fit's variance.** The fit is weighted least squares, so a new aggregated point
   at ``x`` (``r`` repetitions) adds the row ``z = X(x) / (|f(x)| scales)`` with variance
   ``noise^2 / r`` in the fit's relative units, and the covariance of the coefficients
   shrinks by the rank-one update of Sherman and Morrison: the variance of the fitted value
   at the target ``g`` falls by ``(g' C z)^2 / (noise^2 / r + z' C z)``. A point of high
   leverage (far out along a parameter) that moves the target's value much gains most.
   More runs at a measured point add no row: the fit weighs each point's mean alike,
   however many runs it has, so they only make that mean more precise, and the fitted
   value at the target moves with it by the point's influence ``l = g' (Z'Z)^-1 z``; its
   variance falls by ``l^2 noise^2 (1/h - 1/(h + r))`` for a point with ``h`` runs. That
   is little, and less with each run, at a point the target hardly rests on (the row
   formula promised the same gain for the 200th run at the cheapest corner as for the
   first, and the adaptive-design benchmark spent its rounds there while its model stayed
   wrong); and most at the points that set the extrapolation.
2. **The rival shapes.** The interval reaches from the lowest to the highest of the model
   and the alternatives the selection could not tell from it. A run at ``x`` rules out an
   alternative ``a`` with the power of a two-sided test at the interval's level: the
   chance that a measurement there, whose mean scatters by ``sd(x)`` (the fit's variance
   and the new runs' noise), lands farther than the test's quantile from ``a(x)`` when the
   selected model is right, ``Phi(s - z) + Phi(-s - z)`` with ``s = |a(x) - f(x)| /
   sd(x)``, less the test's false alarms (``1 - level``, its power where the two agree):
   a run where they agree rules nothing out, however often it is repeated. Only a point
   not yet measured can rule one out: the model and each alternative were both fitted to
   a measured point's mean, so more runs there move both refits with it and the test at
   that point, which takes the alternative's value there as fixed, promises what a refit
   takes back (a campaign that trusted it repeated one point 200 times at no change of
   the interval; ``benchmarks/adaptive_design.py``). Independent
   across alternatives, the envelope's expected reach above the model
   at the target is then ``sum_k e_k (1 - q_k) prod_{j<k} q_j`` over the alternatives above
   it, farthest first (``e_k`` how far each reaches, ``q_k`` its chance to be ruled out),
   and likewise below.

The expected width after the run is the sum of both, and its *gain* the width now less
that. Degrees of freedom stay as they are: one more point would add one, which narrows
Student's quantile a little more; leaving it out ranks the runs by what they are sure to
bring.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from perfcast.modeling.intervals import (
    DEFAULT_LEVEL,
    MeanEstimate,
    alternative_values,
    mean_estimate,
)
from perfcast.modeling.pmnf import Model, Term


@dataclass(frozen=True)
class WidthGain:
    """What runs at each of ``k`` candidate points are expected to do to one model's
    prediction interval at the target; arrays of shape (k,).

    Attributes:
        width: the interval's width at the target now (a number: the same for all).
        value: the model's value at the target.
        gain: the expected width removed by the runs at each candidate (0 where the model
            cannot be evaluated there).
        rivals: the part of ``gain`` from ruling out alternatives.
        separation: each candidate's largest separation of an alternative from the model,
            in standard deviations of the new runs' mean there.
        rival: the index into the model's alternatives of that alternative (-1: none).
    """

    width: float
    value: float
    gain: np.ndarray
    rivals: np.ndarray
    separation: np.ndarray
    rival: np.ndarray


def width_gain(
    model: Model,
    target: Mapping[str, float],
    points: Mapping[str, np.ndarray],
    repetitions: np.ndarray,
    level: float = DEFAULT_LEVEL,
    measured: np.ndarray | None = None,
    counts: np.ndarray | None = None,
) -> WidthGain | None:
    """The expected gain of measuring each of the candidate ``points`` (one array of ``k``
    values per parameter) ``repetitions`` times (k,) for ``model``'s prediction interval
    at ``target`` (module docstring); None where the model stores no uncertainty.

    ``measured`` (k, bool) marks the candidates already measured: more runs there narrow
    the fit's variance but rule out no alternative (module docstring)."""
    uncertainty = model.uncertainty
    now = mean_estimate(model, target)
    if uncertainty is None or now is None:
        return None
    low, high = (float(v) for v in now.interval(level))
    value = float(now.value)
    k = len(repetitions)
    arrays = {name: np.asarray(values, dtype=float) for name, values in points.items()}
    at = _values(model, arrays, k)
    usable = np.isfinite(at) & (at > 0)
    scales = np.asarray(uncertainty.scales)
    covariance = np.asarray(uncertainty.covariance)
    at_target = {name: np.asarray([v], dtype=float) for name, v in target.items()}
    g = _row(model, at_target, 1) / scales
    rows = _row(model, arrays, k) / scales
    rows = np.where(usable[:, None] & np.isfinite(rows), rows, 0.0)
    fitted_there = np.einsum("ij,jk,ik->i", rows, covariance, rows)
    z = rows / np.where(usable, at, 1.0)[:, None]  # the weighted (relative) row
    cz = z @ covariance
    new_noise = np.square(uncertainty.noise) / np.maximum(repetitions, 1)
    gcz = cz @ g[0]
    zcz = np.einsum("ij,ij->i", cz, z)
    fresh = np.ones(k, dtype=bool) if measured is None else ~np.asarray(measured, dtype=bool)
    added = np.maximum(now.variance - np.square(gcz) / (new_noise + zcz), 0.0)
    have = np.ones(k) if counts is None else np.maximum(np.asarray(counts, dtype=float), 1.0)
    repeated = _repeated_variance(now.variance, g[0], z, fresh, covariance, uncertainty.noise)
    fitted_after = np.where(fresh, added, repeated(have, np.maximum(repetitions, 1)))
    classic = _classic_halves(now, fitted_after, level)
    reach_up, reach_down, rivals, separation, rival = _envelope_after(
        model, value, at_target, arrays, at, fitted_there, repetitions, level, fresh
    )
    after_high = value + reach_up + classic
    after_low = np.where(value >= 0, np.maximum(value - reach_down - classic, 0.0), -np.inf)
    gain = np.where(usable, np.maximum((high - low) - (after_high - after_low), 0.0), 0.0)
    return WidthGain(
        high - low, value, gain, np.minimum(np.where(usable, rivals, 0.0), gain), separation, rival
    )


def _repeated_variance(
    variance: np.ndarray,
    g: np.ndarray,
    z: np.ndarray,
    fresh: np.ndarray,
    covariance: np.ndarray,
    noise: float,
) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """The fitted value's variance at the target after more runs at measured candidates:
    a function of the runs each has (``have``) and gets (``more``).

    The fit weighs each point's mean alike, however many runs it has, so runs at a measured
    point add no row to it: they make that mean more precise, its relative variance
    ``noise^2 / have`` falling to ``noise^2 / (have + more)``. The fitted value at the
    target moves with the point's mean by its influence ``l = g' (Z'Z)^-1 z`` (the point's
    weight in the target's estimate), so its variance falls by ``l^2 noise^2 (1 / have -
    1 / (have + more))``: a little, and less with every run, at a point that hardly
    moves the target (the cheap corner of a parameter the target lies far beyond); much at
    one that sets the extrapolation (the largest values). ``Z'Z`` is taken from the
    measured candidates' rows, which are the fit's points where every measured point is a
    candidate (as :func:`~perfcast.workflows.design.rank_runs` makes them); short of
    enough of them, from the covariance over the repetitions' share of it."""
    t = len(g)
    rows = z[~fresh]
    gram = rows.T @ rows
    if len(rows) >= t and np.linalg.matrix_rank(gram) == t:
        influence = z @ np.linalg.pinv(gram) @ g
    else:
        influence = z @ covariance @ g / max(float(np.square(noise)), 1e-300)

    def after(have: np.ndarray, more: np.ndarray) -> np.ndarray:
        removed = np.square(influence) * np.square(noise) * (1.0 / have - 1.0 / (have + more))
        return np.maximum(variance - removed, 0.0)

    return after


def _values(model: Model, arrays: Mapping[str, np.ndarray], k: int) -> np.ndarray:
    """The model at the candidates, nan where it is undefined (a logarithm at 0)."""
    total = np.full(k, float(model.constant))
    with np.errstate(all="ignore"):
        for term in model.terms:
            total = total + term.coefficient * np.broadcast_to(term.basis(arrays), (k,))
    return np.where(np.isfinite(total), total, np.nan)


def _row(model: Model, arrays: Mapping[str, np.ndarray], k: int) -> np.ndarray:
    """The unweighted design rows (k, 1 + terms): the constant's column, then each term."""
    with np.errstate(all="ignore"):
        columns = [np.ones(k)] + [np.broadcast_to(t.basis(arrays), (k,)) for t in model.terms]
    return np.stack(columns, axis=-1)


def _classic_halves(now: MeanEstimate, fitted: np.ndarray, level: float) -> np.ndarray:
    """The half-width of the classic prediction interval with the fit's variance
    ``fitted`` (k,) at the target."""
    after = MeanEstimate(
        np.full_like(fitted, float(now.value)),
        np.full_like(fitted, float(now.value)),
        np.full_like(fitted, float(now.value)),
        fitted,
        now.dof,
        now.noise,
        now.noise_dof,
    )
    _, upper = after.interval(level)
    return upper - float(now.value)


def _envelope_after(
    model: Model,
    value: float,
    target: Mapping[str, np.ndarray],
    arrays: Mapping[str, np.ndarray],
    at: np.ndarray,
    fitted: np.ndarray,
    repetitions: np.ndarray,
    level: float,
    fresh: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Expected reach of the alternatives above and below the model (``value``) at the
    ``target`` after the runs, the reach they are expected to lose, each candidate's largest
    separation and the alternative it belongs to. ``at`` is the model at the candidates,
    ``fitted`` the variance of its fitted value there; only ``fresh`` candidates can rule
    an alternative out."""
    k = len(repetitions)
    assert model.uncertainty is not None
    alternatives = model.uncertainty.alternatives
    targets = [float(v[0]) for v in alternative_values(alternatives, target, (1,))]
    at_candidates = alternative_values(alternatives, arrays, (k,))
    usable = np.isfinite(at) & (at > 0)
    noise = np.square(model.uncertainty.noise * np.where(usable, at, 0.0))
    sd = np.sqrt(fitted + noise / np.maximum(repetitions, 1))
    quantile = NormalDist().inv_cdf(0.5 + 0.5 * level)
    normal = np.vectorize(NormalDist().cdf, otypes=[float])
    separation = np.zeros(k)
    rival = np.full(k, -1)
    power: list[np.ndarray] = []
    for index, other in enumerate(at_candidates):
        with np.errstate(all="ignore"):
            s = np.where(sd > 0, np.abs(other - at) / sd, 0.0)
        s = np.where(np.isfinite(s) & usable, s, 0.0)
        chance = normal(s - quantile) + normal(-s - quantile)
        power.append(np.where(fresh, np.maximum(chance - (1 - level), 0.0) / level, 0.0))
        wider = s > separation
        separation, rival = np.where(wider, s, separation), np.where(wider, index, rival)
    reach_up = reach_down = np.zeros(k)
    lost = np.zeros(k)
    for above in (True, False):
        reaches = [
            (abs(t - value), q)
            for t, q in zip(targets, power, strict=True)
            if np.isfinite(t) and ((t > value) if above else (t < value))
        ]
        reaches.sort(key=lambda pair: -pair[0])
        expected = np.zeros(k)
        survive_all_farther = np.ones(k)  # probability every farther one was ruled out
        for reach, q in reaches:
            expected = expected + reach * (1 - q) * survive_all_farther
            survive_all_farther = survive_all_farther * q
        now_reach = reaches[0][0] if reaches else 0.0
        lost = lost + (now_reach - expected)
        if above:
            reach_up = expected
        else:
            reach_down = expected
    return reach_up, reach_down, lost, separation, rival


def shape_text(terms: tuple[Term, ...]) -> str:
    """The shape of a model's or alternative's terms without coefficients:
    ``n^2 * log2(n)``; ``constant`` for none."""
    return " + ".join(" * ".join(f.text() for f in term.factors) for term in terms) or "constant"
