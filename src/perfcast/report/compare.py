"""Two campaigns compared (``perfcast report A B``): which call paths changed.

Before and after a code change the same program is measured twice; what a user wants to
know is which call paths now scale differently and which cost more or less where it
matters. So each (call path, metric) is compared twice:

* its **model**: a different set of terms (another leading term, another exponent) is a
  change of scaling behaviour -- where the measurements can tell the two apart: the
  models part beyond their intervals at the target, and neither fit had the other's terms
  among its rivals (:attr:`Change.model_changed`); other terms that agree up to the target
  are noise in the model selection and are shown as such;
* its **cost at the target point**: the ratio after/before. Two fits of noisy repetitions
  never agree exactly, so a difference counts only when it leaves the prediction intervals
  (:mod:`perfcast.modeling.intervals`): when each value lies inside the other model's
  interval the two campaigns cannot be told apart there, and the change is *within noise*.
  Models that store no uncertainty (another tool's file) give no interval, and their
  change is listed as not judged rather than guessed with a fixed percentage.

Call paths only in one campaign (code added or removed, a renamed function) are listed
as such. Changes are sorted by their absolute size at the target, the largest first.
The comparison is at the target of B's page (``--at``, by default 4x B's largest point),
so the page's rankings and the comparison speak of the same point.

Each call path is tested on its own at the intervals' level, so about 1 - level of the
unchanged ones leave their intervals by chance: of 998 unchanged synthetic call paths
(2 % noise, two campaigns, p in 2..16 and size in 64..1024, compared at p=64, size=4096)
49 did at 95 %, by 7 to 14 %, far below the two real changes of the same run (x8). The
sort puts the large changes first for that reason.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfcast.errors import InputError
from perfcast.experiment.names import display_names
from perfcast.modeling.intervals import DEFAULT_LEVEL, prediction_interval
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.pmnf import Factor, Model, Term
from perfcast.report.page import ReportInputs, _round, band, drawable, others_at
from perfcast.report.summary import CALLPATH_WIDTH

ONLY_BEFORE, ONLY_AFTER = "only in A", "only in B"
UP, DOWN, NOISE, UNJUDGED = "costs more", "costs less", "within noise", "no interval"
SHOWN_IN_TEXT = 5
"""Changes the text summary lists: the largest; the page has them all."""


@dataclass(frozen=True)
class Change:
    """One (call path, metric) in the two campaigns; ``before`` or ``after`` is None when
    only the other has it. Values and intervals are at the target point."""

    callpath: str
    metric: str
    before: Model | None
    after: Model | None
    value_before: float
    value_after: float
    interval_before: tuple[float, float]
    interval_after: tuple[float, float]

    @property
    def terms_differ(self) -> bool:
        """Both exist and their terms differ (coefficients aside)."""
        if self.before is None or self.after is None:
            return False
        return _shapes(self.before.terms) != _shapes(self.after.terms)

    @property
    def model_changed(self) -> bool:
        """The terms differ in a way the measurements can tell: neither fit had the other's
        terms among the rivals it could not tell from its own
        (:class:`~perfcast.modeling.pmnf.Alternative`), and the two models part beyond
        their intervals at the target (where no interval says, the terms alone decide).
        Terms alone are not enough: with 2 % noise and p in 2..16, 287 of 1,000 unchanged
        call paths swapped ``p^(1/2)`` for ``p^(1/3) * log2(p)`` or the like between two
        campaigns, curves that agree up to the target and say nothing of the code."""
        if not self.terms_differ or self.verdict == NOISE:
            return False
        assert self.before is not None and self.after is not None
        before, after = _shapes(self.before.terms), _shapes(self.after.terms)
        return after not in _rivals(self.before) and before not in _rivals(self.after)

    @property
    def difference(self) -> float:
        """after - before at the target; nan where only one exists."""
        return self.value_after - self.value_before

    @property
    def ratio(self) -> float:
        if self.value_before > 0 and math.isfinite(self.value_after):
            return self.value_after / self.value_before
        return math.nan

    @property
    def verdict(self) -> str:
        if self.before is None:
            return ONLY_AFTER
        if self.after is None:
            return ONLY_BEFORE
        intervals = [*self.interval_before, *self.interval_after]
        if not all(math.isfinite(v) for v in intervals):
            return UNJUDGED
        inside_before = self.interval_before[0] <= self.value_after <= self.interval_before[1]
        inside_after = self.interval_after[0] <= self.value_before <= self.interval_after[1]
        if inside_before and inside_after:
            return NOISE
        return UP if self.value_after > self.value_before else DOWN

    @property
    def changed(self) -> bool:
        """What the comparison is for: a new model, a cost outside the noise, or a call
        path in one campaign only."""
        return self.model_changed or self.verdict in (UP, DOWN, ONLY_BEFORE, ONLY_AFTER)


def _shapes(terms: Iterable[Term]) -> frozenset[tuple[Factor, ...]]:
    return frozenset(tuple(sorted(term.shape, key=lambda f: f.parameter)) for term in terms)


def _rivals(model: Model) -> list[frozenset[tuple[Factor, ...]]]:
    """The terms of the fits the model's selection could not tell from it."""
    if model.uncertainty is None:
        return []
    return [_shapes(alternative.terms) for alternative in model.uncertainty.alternatives]


def _at(
    model: Model | None, target: Mapping[str, float], level: float
) -> tuple[float, tuple[float, float]]:
    """The model's value and prediction interval at ``target`` (nan for no model)."""
    if model is None:
        return math.nan, (math.nan, math.nan)
    point = {p: np.float64(v) for p, v in target.items()}
    try:
        with np.errstate(all="ignore"):
            value = float(model.evaluate(point))
            lower, upper = prediction_interval(model, point, level)
    except InputError:  # outside the model's domain (log2 of 0): no value to compare
        return math.nan, (math.nan, math.nan)
    return value, (float(lower), float(upper))


def compare(
    before: ModelSet,
    after: ModelSet,
    target: Mapping[str, float],
    level: float = DEFAULT_LEVEL,
) -> list[Change]:
    """Every (call path, metric) of either set, the largest change at ``target`` first
    (call paths in one set only after the changes, then the unchanged)."""
    keys = dict.fromkeys(
        [*((m.callpath, m.metric) for m in before), *((m.callpath, m.metric) for m in after)]
    )
    changes = []
    for key in keys:
        old = before.get(key)
        new = after.get(key)
        value_before, interval_before = _at(old, target, level)
        value_after, interval_after = _at(new, target, level)
        changes.append(
            Change(*key, old, new, value_before, value_after, interval_before, interval_after)
        )

    def order(change: Change) -> tuple[bool, bool, float]:
        size = abs(change.difference)
        if not math.isfinite(size):  # only in one: its own value is the change
            size = abs(change.value_before if change.after is None else change.value_after)
        one_side = change.before is None or change.after is None
        return (not change.changed, one_side, -size if math.isfinite(size) else 0.0)

    return sorted(changes, key=order)


def _ranges_of(inputs: ReportInputs) -> dict[str, tuple[float, float]] | None:
    """The measured ranges of a campaign, None where its model file does not keep them."""
    if inputs.experiment is not None:
        return inputs.experiment.ranges()
    provenance = inputs.models.provenance
    if provenance is None or any(p not in provenance.ranges for p in inputs.models.parameters):
        return None
    return dict(provenance.ranges)


def comparison_data(
    changes: Sequence[Change], before: ReportInputs, data: Mapping[str, Any]
) -> dict[str, Any]:
    """The comparison in the report's document ``data`` (B's, :func:`report_data`): per
    change both models, drawable with their bands along the page's axes (the other
    parameters at B's largest measured point), and A's measured ranges."""
    parameters = data["parameters"]
    largest = data["largest"]
    names = display_names([c.callpath for c in changes], CALLPATH_WIDTH)

    def side(model: Model | None) -> dict[str, Any] | None:
        if model is None:
            return None
        return {
            **drawable(model, parameters),
            "smape": _round(model.statistics.smape),
            "bands": {
                p: band(model, p, data["axes"][p]["grid"], others_at(largest, p), data["level"])
                for p in parameters
            },
        }

    return {
        "before": before.source,
        "ranges_before": _ranges_of(before),
        "rows": [
            {
                "callpath": c.callpath,
                "short": names[c.callpath],
                "metric": c.metric,
                "verdict": c.verdict,
                "model_changed": c.model_changed,
                "terms_differ": c.terms_differ,
                "changed": c.changed,
                "before": side(c.before),
                "after": side(c.after),
                "value_before": _round(c.value_before),
                "value_after": _round(c.value_after),
                "interval_before": [_round(v) for v in c.interval_before],
                "interval_after": [_round(v) for v in c.interval_after],
                "ratio": _round(c.ratio),
            }
            for c in changes
        ],
    }


def _number(value: float) -> str:
    return f"{value:.3g}" if math.isfinite(value) else "-"


def render_comparison(
    changes: Sequence[Change],
    before: str,
    after: str,
    target: Mapping[str, float],
    level: float = DEFAULT_LEVEL,
) -> list[str]:
    """A few lines for the terminal: the counts, then the largest changes."""
    counts = {
        "changed model": sum(c.model_changed for c in changes),
        UP: sum(c.verdict == UP for c in changes),
        DOWN: sum(c.verdict == DOWN for c in changes),
        NOISE: sum(c.verdict == NOISE for c in changes),
        UNJUDGED: sum(c.verdict == UNJUDGED for c in changes),
        ONLY_BEFORE: sum(c.verdict == ONLY_BEFORE for c in changes),
        ONLY_AFTER: sum(c.verdict == ONLY_AFTER for c in changes),
    }
    where = ", ".join(f"{p}={v:g}" for p, v in target.items())
    lines = [
        f"A = {before}, B = {after}: {len(changes):,} models compared at {where} "
        f"(a change inside both {100 * level:g} % prediction intervals is within noise)",
        "  " + ", ".join(f"{n:,} {what}" for what, n in counts.items() if n or what == NOISE),
    ]
    shown = [c for c in changes if c.changed][:SHOWN_IN_TEXT]
    names = display_names([c.callpath for c in shown], CALLPATH_WIDTH)
    for change in shown:
        if change.before is None or change.after is None:
            only = change.after or change.before
            assert only is not None  # a change has a model on one side at least
            where = f"{names[change.callpath]} [{change.metric}]"
            lines.append(f"  {change.verdict:<12} {where}: {only.text()}")
            continue
        ratio = f"x{_number(change.ratio)}"
        text = (
            f"  {ratio:<12} {names[change.callpath]} [{change.metric}]: "
            f"{_number(change.value_before)} -> {_number(change.value_after)} ({change.verdict})"
        )
        if change.model_changed:
            text += f"; model {change.before.text()} -> {change.after.text()}"
        lines.append(text)
    return lines
