"""Text report of effort-prior modeling: per call path the effort model, the prior derived
from it and the time model fitted under it, beside the black-box time model; then the call
paths whose counts vary between repetitions."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from perfcast.columns import aligned
from perfcast.experiment.names import display_names
from perfcast.modeling.modelset import ModelSet

if TYPE_CHECKING:  # the prior source renders its derivation with this module
    from perfcast.effort.source import EffortPriors

REPORT_WIDTH = 120
"""Call paths longer than this lose middle frames in the report (:func:`short_callpath`)."""


def render_effort(
    derived: EffortPriors, models: ModelSet, blackbox: ModelSet, precision: int = 4
) -> str:
    """One block per call path with a prior (its count model, the prior, its time model in
    ``models`` and the black-box one in ``blackbox``), the call paths whose counts vary
    between repetitions (busy waiting), and the notes on classic fall-backs at the end."""
    lines = ["Effort priors (noise-resilient-priors.txt): effort model -> prior -> time model"]
    # function names as the summary shows them: a block per call path under LULESH's full
    # signatures was headed by lines of 200 characters; --full and -o keep the full paths
    names = display_names([*derived.effort_priors, *derived.waiting], REPORT_WIDTH)
    for callpath, entry in derived.effort_priors.items():
        lines.append(f"{names[callpath]}  [{entry.kind}]")
        rows = [(f"effort ({entry.effort.metric})", entry.effort.text(precision))]
        rows.append(("prior", entry.describe()))
        key = (callpath, derived.time_metric)
        if key in models:
            rows.append(("time (effort prior)", models[key].text(precision)))
        if key in blackbox:
            rows.append(("time (black-box)", blackbox[key].text(precision)))
        lines += aligned(rows, indent="  ")
        if key in models:
            lines += [f"  warning: {w}" for w in models.notes(key)]
    if not derived.effort_priors:
        lines.append("(no call path has an effort prior)")
    if derived.waiting:
        lines.append(
            "counts that vary between repetitions (busy waiting or timing-dependent flow):"
        )
        lines += [
            f"  {names[callpath]}  {found.describe()}"
            for callpath, found in derived.waiting.items()
        ]
    lines += [f"note: {note}" for note in short_notes(derived.notes, (m.callpath for m in models))]
    return "\n".join(lines)


def short_notes(notes: Sequence[str], callpaths: Iterable[str]) -> list[str]:
    """Notes that begin with the call path they are about (``CALLPATH: why``), that call
    path shown as the blocks above show it. The notes stay whole in the result (``--full``
    and the files keep full call paths)."""
    known = set(callpaths)
    about = [note.split(": ", 1)[0] for note in notes]
    names = display_names([c for c in about if c in known], REPORT_WIDTH)
    return [
        f"{names[callpath]}: {note.split(': ', 1)[1]}" if callpath in names else note
        for callpath, note in zip(about, notes, strict=True)
    ]
