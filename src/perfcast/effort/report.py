"""Text report of effort-prior modeling: per call path the effort model, the prior derived
from it and the time model fitted under it, beside the black-box time model; then the call
paths whose counts vary between repetitions."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from perfcast.columns import aligned
from perfcast.effort.priors import EffortModels
from perfcast.experiment.names import display_names

REPORT_WIDTH = 120
"""Call paths longer than this lose middle frames in the report (:func:`short_callpath`)."""


def render_effort(result: EffortModels, precision: int = 4) -> str:
    """One block per call path with a prior, the call paths whose counts vary between
    repetitions (busy waiting), and the notes on classic fall-backs at the end."""
    lines = ["Effort priors (noise-resilient-priors.txt): effort model -> prior -> time model"]
    # function names as the summary shows them: a block per call path under LULESH's full
    # signatures was headed by lines of 200 characters; --full and -o keep the full paths
    names = display_names([*result.priors, *result.waiting], REPORT_WIDTH)
    for callpath, entry in result.priors.items():
        lines.append(f"{names[callpath]}  [{entry.kind}]")
        rows = [(f"effort ({entry.effort.metric})", entry.effort.text(precision))]
        rows.append(("prior", entry.describe()))
        key = (callpath, result.time_metric)
        if key in result.models:
            rows.append(("time (effort prior)", result.models[key].text(precision)))
        if key in result.blackbox:
            rows.append(("time (black-box)", result.blackbox[key].text(precision)))
        lines += aligned(rows, indent="  ")
        if key in result.models:
            lines += [f"  warning: {w}" for w in result.models.notes(key)]
    if not result.priors:
        lines.append("(no call path has an effort prior)")
    if result.waiting:
        lines.append(
            "counts that vary between repetitions (busy waiting or timing-dependent flow):"
        )
        lines += [
            f"  {names[callpath]}  {found.describe()}" for callpath, found in result.waiting.items()
        ]
    lines += [
        f"note: {note}" for note in short_notes(result.notes, (m.callpath for m in result.models))
    ]
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
