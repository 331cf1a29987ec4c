"""When a prior makes a model much worse: keep the better model and say so, with both fits.

A prior (taint: which parameters the code may use; effort: the exact term shapes of the
counted work) restricts the hypothesis space. When it is right it only removes hypotheses
that chase noise; when it is wrong -- taint analysis misses an implicit flow, the counts
miss waiting time -- the constrained model is a poor description of what was measured, and
nothing in a single model says so. :func:`resolve_conflict` compares the model fitted under
the prior with the black-box (free) fit of the same measurements and the measured visits:

* **Fit.** The constrained model conflicts when its SMAPE on the training points exceeds
  the free model's by more than :data:`CONFLICT_RATIO` times *and* by more than
  :data:`CONFLICT_GAP` percentage points. A prior fits somewhat worse by design (it may not
  bend towards noise), so a small loss is its purpose; twice the error and five points more
  is a shape the prior cannot express, not noise it declined to follow. (The effort
  modeler's disagreement thresholds, ``effort.priors.DISAGREEMENT_RATIO``/``GAP``, are these
  constants, so one rule decides for both sources.)
* **Visits.** Call counts are exact. A visits model that uses a parameter the prior rules
  out proves the call path's total depends on it (every visit costs at least a call), so
  the prior is refuted whatever the fit says.

A conflict keeps the free model, with a warning naming the prior model and both fits,
unless the free model's extra parameters are all ones the code provably cannot depend on
(``unreachable``: taint analysis found no loop and no branch that reads them): then the
measured dependency is contention or noise (paper C1) and the prior model, the code's own
work, is kept -- with the same warning, so the conflict is never silent either way. The
warning is a :class:`~perfcast.modeling.findings.Finding` of stage ``"conflict"``; the two
models stay as they were fitted.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from perfcast.modeling.findings import Finding
from perfcast.modeling.pmnf import Model
from perfcast.modeling.prior import Prior

CONFLICT_RATIO = 2.0
"""The constrained model's training SMAPE must exceed the free model's by this factor ..."""

CONFLICT_GAP = 5.0
"""... and by this many percentage points for the fits to conflict (module docstring)."""


def allowed_parameters(prior: Prior) -> frozenset[str] | None:
    """The parameters a model under ``prior`` may use (``None``: any)."""
    if prior.structure is not None:
        return frozenset(f.parameter for shape in prior.structure for f in shape)
    return prior.parameters


def fits_much_worse(
    constrained: Model, free: Model, ratio: float = CONFLICT_RATIO, gap: float = CONFLICT_GAP
) -> bool:
    """Is the constrained model's training SMAPE more than ``ratio`` times and ``gap``
    points above the free model's?"""
    ours, theirs = constrained.statistics.smape, free.statistics.smape
    return bool(ours > ratio * theirs and ours - theirs > gap)


CONFLICT_KIND = "prior-conflict"


@dataclass(frozen=True)
class PriorConflict:
    """One (call path, metric) whose prior disagrees with its measurements."""

    callpath: str
    metric: str
    source: str  # the prior's source: "taint", "effort", "static" or a composition
    constrained: Model
    free: Model
    reasons: tuple[str, ...]
    kept_prior: bool  # True: the free model's extra dependence is contention or noise
    label: str | None = None  # how the warning starts (default: "<source> prior conflicts ...")

    def finding(self) -> Finding:
        """The conflict as the record the model set keeps (stage ``"conflict"``)."""
        return Finding(
            "conflict",
            self.callpath,
            self.metric,
            CONFLICT_KIND,
            self.warning(),
            {"source": self.source, "kept": "prior" if self.kept_prior else "black-box"},
        )

    def warning(self) -> str:
        label = self.label
        kept = (
            f"the {self.source}-prior model is kept: the black-box model's extra dependence "
            "is one the code cannot have (contention or noise)"
            if self.kept_prior
            else "the black-box model is kept"
        )
        return (
            f"{label or f'{self.source} prior conflicts with the measurements'}: "
            f"{'; '.join(self.reasons)}; {kept}. {self.source}-prior model: "
            f"{self.constrained.text()} (SMAPE {self.constrained.statistics.smape:.1f} %), "
            f"black-box model: {self.free.text()} (SMAPE {self.free.statistics.smape:.1f} %)"
        )


def resolve_conflict(
    constrained: Model,
    free: Model,
    prior: Prior,
    *,
    source: str,
    visits: Model | None = None,
    unreachable: Collection[str] = (),
    ratio: float = CONFLICT_RATIO,
    gap: float = CONFLICT_GAP,
    label: str | None = None,
) -> tuple[Model, PriorConflict | None]:
    """The model to report for one (call path, metric), and the conflict if there is one.

    Args:
        constrained: the model fitted under ``prior``.
        free: the black-box fit of the same measurements (the same aggregation, so the
            SMAPEs compare).
        prior: the prior ``constrained`` was fitted under.
        source: "taint" or "effort", for the message.
        visits: the black-box model of the call path's visits, if measured.
        unreachable: parameters the code provably cannot depend on (taint analysis).
        ratio, gap: the fit thresholds (:data:`CONFLICT_RATIO`, :data:`CONFLICT_GAP`).
        label: how the warning starts (default ``<source> prior conflicts with the
            measurements``).

    Returns ``(constrained, None)`` without a conflict; else the kept model (``free``, or
    ``constrained``), unchanged, and the conflict (:meth:`PriorConflict.finding` is what the
    model set records).
    """
    allowed = allowed_parameters(prior)
    reasons = []
    refuted_by_visits = False
    if visits is not None and allowed is not None:
        excluded = [p for p in visits.parameters if p not in allowed]
        if excluded:
            refuted_by_visits = True
            reasons.append(
                f"the measured visits depend on {', '.join(excluded)} "
                f"(visits model {visits.text()}), which the prior rules out"
            )
    if fits_much_worse(constrained, free, ratio, gap):
        reasons.append(
            f"its fit is much worse than the black-box fit (SMAPE more than {ratio:g}x and "
            f"{gap:g} points above)"
        )
    if not reasons:
        return constrained, None
    extra = {p for p in free.parameters if allowed is not None and p not in allowed}
    kept_prior = bool(extra) and not refuted_by_visits and extra <= set(unreachable)
    conflict = PriorConflict(
        constrained.callpath,
        constrained.metric,
        source,
        constrained,
        free,
        tuple(reasons),
        kept_prior,
        label,
    )
    return (constrained if kept_prior else free), conflict


__all__ = [
    "CONFLICT_GAP",
    "CONFLICT_KIND",
    "CONFLICT_RATIO",
    "PriorConflict",
    "allowed_parameters",
    "fits_much_worse",
    "resolve_conflict",
]
