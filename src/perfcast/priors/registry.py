"""The prior sources, each registered once: its name (the ``--priors`` word), the flag of
its input, when ``perfcast model`` uses it unasked, and how it is built.

Registration order is precedence: where two sources fix different structures, the one
registered first wins (:mod:`perfcast.priors.compose`, rule 3) — measured counts of this
very run (effort) before counts derived from source code (static), and both before what
the code may depend on (taint). ``--priors`` choices, the precedence and the default
choice all come from this table, so a new source is one :func:`register` call with its
builder, not edits to the precedence list, the command's if/elif and its help text.

Builders import their source's stage when called: the static source is a GPL extra that
only ``--static`` loads, and the taint source's profile reader is not on ``perfcast
model``'s path without ``--taint``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from perfcast.effort.priors import PRIOR_SOURCE as EFFORT
from perfcast.errors import PerfcastError
from perfcast.experiment.metrics import COUNTER_METRICS

if TYPE_CHECKING:
    from perfcast.effort.priors import EffortModeler
    from perfcast.experiment.experiment import Experiment
    from perfcast.priors.pipeline import PriorSource

STATIC, TAINT = "static", "taint"
"""The names of the static and taint sources; :data:`perfcast.static.prior.SOURCE` and
:data:`perfcast.taint.priors.SOURCE` spell them for the priors they derive (a test keeps
them equal): neither stage is imported here, since ``perfcast model`` without ``--static``
or ``--taint`` must not load them."""


@dataclass(frozen=True)
class PriorInputs:
    """The files the prior sources read, as the user named them (``None``: not given)."""

    taint: Path | None = None
    static: Path | None = None
    static_rename: str | None = None
    exclusive: bool = False
    """The metrics cover each function's own code only (exclusive taint dependencies)."""
    taint_check_only: bool = False
    """Compare the taint profile with the models instead of restricting them."""


@dataclass(frozen=True)
class SourceEntry:
    """One prior source.

    Attributes:
        name: the ``--priors`` word and the name its priors carry.
        flag: the option that names its input file (``None``: its evidence is in the
            measurements themselves); a source asked for without it is an error naming it.
        given: its input file among the user's inputs; giving it implies the source.
        unasked: why ``perfcast model`` uses it when ``--priors`` is not given (a note
            for the user), or ``None`` where it does not.
        build: the source, its input read.
    """

    name: str
    flag: str | None
    given: Callable[[PriorInputs], Path | None]
    unasked: Callable[[Experiment, PriorInputs], str | None]
    build: Callable[[PriorInputs, EffortModeler], PriorSource]


def _effort_unasked(experiment: Experiment, inputs: PriorInputs) -> str | None:
    counters = [m for m in COUNTER_METRICS if m in experiment.columns.metrics]
    if not counters:
        return None
    return (
        f"priors: effort, from the input's exact {' and '.join(counters)} counts: they fix "
        "each time model's lead term, the time data its coefficients (--priors none for "
        "black-box models)"
    )


def _build_effort(inputs: PriorInputs, effort: EffortModeler) -> PriorSource:
    from perfcast.effort.source import EffortSource

    return EffortSource(effort)


def _build_static(inputs: PriorInputs, effort: EffortModeler) -> PriorSource:
    from perfcast.static.prior import StaticSource, parse_rename  # the static extra

    assert inputs.static is not None
    rename = parse_rename(inputs.static_rename or "", "--static-rename")
    return StaticSource.read(inputs.static, metric=effort.time_metric, rename=rename)


def _taint_unasked(experiment: Experiment, inputs: PriorInputs) -> str | None:
    if inputs.taint is None:
        return None
    return (
        f"priors: taint, from {inputs.taint}: each call path uses only the parameters its "
        "code depends on"
    )


def _build_taint(inputs: PriorInputs, effort: EffortModeler) -> PriorSource:
    from perfcast.taint.profile_model import read_profile
    from perfcast.taint.source import TaintSource

    assert inputs.taint is not None
    return TaintSource(
        read_profile(inputs.taint),
        inclusive=not inputs.exclusive,
        apply=not inputs.taint_check_only,
        path=inputs.taint,
    )


_SOURCES: list[SourceEntry] = [
    SourceEntry(EFFORT, None, lambda inputs: None, _effort_unasked, _build_effort),
    SourceEntry(
        STATIC, "--static MODELFILE", lambda inputs: inputs.static, lambda e, i: None, _build_static
    ),
    SourceEntry(
        TAINT, "--taint PROFILE", lambda inputs: inputs.taint, _taint_unasked, _build_taint
    ),
]


def register(entry: SourceEntry, before: str | None = None) -> SourceEntry:
    """Add a prior source; ``before`` names the source it takes precedence over (default:
    after all)."""
    if any(known.name == entry.name for known in _SOURCES):
        raise PerfcastError(f"prior source {entry.name!r} is registered twice")
    names = [known.name for known in _SOURCES]
    if before is not None and before not in names:
        raise PerfcastError(f"prior source {before!r} is not registered: {', '.join(names)}")
    _SOURCES.insert(names.index(before) if before else len(_SOURCES), entry)
    return entry


def sources() -> tuple[SourceEntry, ...]:
    """Every prior source, in precedence order."""
    return tuple(_SOURCES)


def precedence() -> tuple[str, ...]:
    """The sources' names, the one that wins a conflict first."""
    return tuple(entry.name for entry in _SOURCES)
