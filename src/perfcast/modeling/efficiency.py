"""Speedup and parallel efficiency along the number of ranks, and totals over a subtree.

The views Extra-P 4.3 added, from the measurements and from the models alike:

* **strong scaling** (the problem fixed, more ranks share it): speedup ``T(p0) / T(p)``
  over the smallest measured ``p0``, efficiency ``speedup * p0 / p``;
* **weak scaling** (the problem per rank fixed): efficiency ``T(p0) / T(p)``, speedup
  ``efficiency * p / p0``;

where ``T`` is a call path's inclusive value per rank: the sum of the exclusive models (or
values) of its subtree (:func:`subtree_value`). From the models, each view comes with the
95 % prediction interval of ``T(p)`` carried through (a slower ``T`` is a lower
efficiency), so a user sees how far the target lies from what was measured. The maximum
over a subtree (the costliest single call path under a region) is :func:`subtree_value`
with ``how="max"``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from perfcast.errors import InputError
from perfcast.experiment.calltree import SEPARATOR
from perfcast.modeling.intervals import prediction_interval
from perfcast.modeling.modelset import ModelSet

KINDS = ("strong", "weak")
SUBTREE_OPERATIONS = ("sum", "max")


@dataclass(frozen=True)
class ScalingPoint:
    """One number of ranks: the value there and the views of it against the base."""

    ranks: float
    value: float
    speedup: float
    efficiency: float
    measured: bool
    """From the measurements (True) or from the models (False)."""
    low: float = float("nan")
    """The efficiency at the upper end of the value's 95 % prediction interval."""
    high: float = float("nan")
    """The efficiency at the lower end of that interval."""


def views(kind: str, base: tuple[float, float], ranks: float, value: float) -> tuple[float, float]:
    """(speedup, efficiency) of ``value`` at ``ranks`` against ``base`` = (ranks, value)."""
    if kind not in KINDS:
        raise InputError(f"scaling {kind!r}: choose one of {', '.join(KINDS)}")
    base_ranks, base_value = base
    if value <= 0 or base_value <= 0:
        return float("nan"), float("nan")
    if kind == "strong":
        speedup = base_value / value
        return speedup, speedup * base_ranks / ranks
    efficiency = base_value / value
    return efficiency * ranks / base_ranks, efficiency


def in_subtree(callpath: str, root: str) -> bool:
    return callpath == root or callpath.startswith(root + SEPARATOR)


def subtree_value(
    models: ModelSet,
    root: str,
    metric: str,
    point: Mapping[str, float],
    how: str = "sum",
) -> tuple[float, float, float]:
    """The sum (an inclusive value) or maximum of the exclusive models of ``root`` and
    every call path below it at ``point``, with the 95 % prediction interval carried
    through (bounds added for a sum; for a maximum, the bounds of the largest,
    :func:`subtree_largest`)."""
    if how not in SUBTREE_OPERATIONS:
        raise InputError(f"subtree {how!r}: choose one of {', '.join(SUBTREE_OPERATIONS)}")
    if how == "max":
        _, value, low, high = subtree_largest(models, root, metric, point)
        return value, low, high
    values, lows, highs, _ = _subtree(models, root, metric, point)
    return float(values.sum()), float(lows.sum()), float(highs.sum())


def subtree_largest(
    models: ModelSet, root: str, metric: str, point: Mapping[str, float]
) -> tuple[str, float, float, float]:
    """The call path at or below ``root`` whose exclusive model is largest at ``point``:
    (call path, value, and its 95 % prediction interval)."""
    values, lows, highs, callpaths = _subtree(models, root, metric, point)
    largest = int(np.argmax(values))
    return callpaths[largest], float(values[largest]), float(lows[largest]), float(highs[largest])


def _subtree(
    models: ModelSet, root: str, metric: str, point: Mapping[str, float]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    members = [m for m in models if m.metric == metric and in_subtree(m.callpath, root)]
    if not members:
        raise InputError(f"no model of {metric} at or below {root!r}")
    values = np.array([float(m.evaluate(point)) for m in members])
    bounds = [prediction_interval(m, point) for m in members]
    lows = np.array([float(low) for low, _ in bounds])
    highs = np.array([float(high) for _, high in bounds])
    return values, lows, highs, [m.callpath for m in members]


def scaling_from_data(totals: Mapping[float, float], kind: str) -> list[ScalingPoint]:
    """The views at every measured number of ranks: ``totals`` maps ranks to the
    measured inclusive value (other parameters held), the smallest ranks the base."""
    if not totals:
        raise InputError("no measured values to compute speedup and efficiency from")
    order = sorted(totals)
    base = (order[0], totals[order[0]])
    return [ScalingPoint(p, totals[p], *views(kind, base, p, totals[p]), True) for p in order]


def scaling_from_models(
    models: ModelSet,
    root: str,
    metric: str,
    ranks: str,
    at: Sequence[float],
    held: Mapping[str, float],
    base_ranks: float,
    kind: str,
) -> list[ScalingPoint]:
    """The views at each number of ranks in ``at`` from the models of ``root``'s
    subtree, other parameters at ``held``, against the models' value at ``base_ranks``."""
    base_value, _, _ = subtree_value(models, root, metric, {**held, ranks: base_ranks})
    points = []
    for p in at:
        value, low, high = subtree_value(models, root, metric, {**held, ranks: p})
        speedup, efficiency = views(kind, (base_ranks, base_value), p, value)
        # views gives nan for an end at or below zero (no efficiency there)
        _, slow = views(kind, (base_ranks, base_value), p, high)
        _, fast = views(kind, (base_ranks, base_value), p, low)
        points.append(ScalingPoint(p, value, speedup, efficiency, False, slow, fast))
    return points
