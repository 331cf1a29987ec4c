"""The text report of the priors stage: each source's own report (effort's side-by-side
blocks), then the models fitted under the other sources' priors beside their black-box
fits, and what the composition found."""

from __future__ import annotations

from perfcast.experiment.names import name_list
from perfcast.priors.compose import FIXED_CONFLICT
from perfcast.priors.pipeline import PriorFit


def render_priors(fit: PriorFit, metric: str, precision: int = 4) -> str:
    """Each source's own report (:meth:`~perfcast.modeling.prior.DerivedPriors.report`),
    then per call path whose ``metric`` was fitted under a prior of a source without one:
    the prior, the model, the black-box model; then the other metrics under priors, and
    the composition's findings."""
    lines: list[str] = []
    reported = set()
    for derived, report in zip(fit.derived, fit.reports, strict=True):
        if report is not None:
            lines += [report, ""]
            reported.add(derived.source)
    named = ", ".join(d.source for d in fit.derived)
    lines += [
        f"{d.source}: flags only, its priors are compared but not fitted"
        for d in fit.derived
        if d.advisory
    ]
    lines.append(
        f"Priors ({named}) composed: prior -> {metric} model (instead of the black-box fit)"
    )
    others: dict[str, list[str]] = {}
    shown = 0
    for (callpath, key_metric), prior in fit.composition.priors.items():
        model = fit.models.get((callpath, key_metric))
        if model is None or prior.source in reported:
            continue
        if key_metric != metric:
            others.setdefault(key_metric, []).append(callpath)
            continue
        shown += 1
        rows = [("prior", prior.describe()), (f"{metric} (prior)", model.text(precision))]
        if model.prior is None:
            rows[1] = (f"{metric} (kept black-box)", model.text(precision))
        free = fit.free.get((callpath, metric))
        if free is not None and free is not model:
            rows.append((f"{metric} (black-box)", free.text(precision)))
        width = max(len(label) for label, _ in rows)
        lines.append(callpath)
        lines += [f"  {label:<{width}}  {text}" for label, text in rows]
        lines += [f"  warning: {w}" for w in fit.models.notes((callpath, metric))]
    if not shown:
        lines.append(f"(no {metric} model was fitted under these priors)")
    for other, callpaths in others.items():
        lines.append(f"also under priors: {other} of {len(callpaths)} call path(s)")
    if fit.composition.ruled_out:
        listed = "; ".join(
            f"{c}: {', '.join(sorted(p))}" for c, p in fit.composition.ruled_out.items()
        )
        lines.append(
            f"priors disagree on {len(fit.composition.ruled_out)} call path(s) (parameters "
            f"a fixed structure's evidence uses but a restriction rules out): {listed}"
        )
    fixed = {
        f.callpath: [f.metric or ""] for f in fit.composition.findings if f.kind == FIXED_CONFLICT
    }
    if fixed:
        lines.append(
            f"fixed structures of two sources differ on {len(fixed)} call path(s), the first "
            f"in precedence kept: {name_list(fixed, tags=fixed)}"
        )
    return "\n".join(lines)


__all__ = ["render_priors"]
