"""Which runs of a store are real and which simulated, and which of them a model describes.

A run on a virtual cluster (``perfcast measure --backend smpi``) has times that SimGrid
computed for a platform file's machine; a real run's were measured on this one. A model
fitted to both describes neither machine, so a store holding both is read one kind at a
time: ``perfcast model STORE`` takes the real runs and names the virtual ones it left
out, ``--runs virtual`` (or ``--runs PLATFORM``) takes the virtual runs of one platform.
Virtual runs of two platforms are two machines as well, and are never read together.

The selection is made here, in the measurement stage that wrote the runs, and read by the
store's reader (:mod:`perfcast.measure.reader`), by the oversubscription notes
(:mod:`perfcast.measure.oversubscription`) and by ``perfcast model``, so that the three
always agree on which runs a model rests on.
"""

from __future__ import annotations

import itertools
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from perfcast.errors import InputError
from perfcast.measure.store import OK, StoredRun, open_store

BACKEND = "smpi"
"""The backend of a virtual run (:class:`perfcast.measure.smpi.SmpiBackend`)."""
PLATFORM_JOB = "platform "
"""What a virtual run stores as its job: ``platform <name>``, the platform it describes."""
REAL, VIRTUAL = "real", "virtual"
"""``--runs`` values besides a platform's name."""
UNNAMED = "unnamed"
"""The platform of a virtual run stored without a name (hand-made stores)."""


@dataclass(frozen=True)
class Platform:
    """The simulated machine virtual runs describe."""

    name: str
    file: str | None
    """The platform file the runs were simulated on (from the stored smpirun line)."""


def platform_of(run: StoredRun) -> Platform | None:
    """The platform a run was simulated on; None for a real run."""
    if run.backend != BACKEND:
        return None
    job = run.job or ""
    name = job[len(PLATFORM_JOB) :] if job.startswith(PLATFORM_JOB) else ""
    return Platform(name or UNNAMED, _platform_file(run.command))


def _platform_file(command: str) -> str | None:
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    for flag, value in itertools.pairwise(words):
        if flag == "-platform":
            return value
    return None


@dataclass(frozen=True)
class Selection:
    """The runs a model rests on, and what was left out."""

    runs: tuple[StoredRun, ...]
    platform: Platform | None
    """The platform of the selected runs (None: they are real)."""
    left_out: dict[str, int]
    """Kind (``real`` or a platform's name) -> runs of it not selected."""
    stored: int
    """Successful runs in the store."""

    def note(self, store: Path) -> str | None:
        """What ``perfcast model`` says of the selection (None: every run is real)."""
        parts = []
        if self.platform is not None:
            file = f", {self.platform.file}" if self.platform.file else ""
            parts.append(
                f"the {len(self.runs)} runs modeled from {store} ran on a virtual cluster "
                f"(SimGrid SMPI, platform {self.platform.name!r}{file}): their times are "
                "simulated for that platform, not measured on this machine, and the models "
                "describe it"
            )
        for kind, count in self.left_out.items():
            what = "real runs" if kind == REAL else f"virtual runs on platform {kind!r}"
            parts.append(
                f"{count} of the {self.stored} runs in {store} are {what}, kept apart: a "
                "model of both would describe neither machine (model them with --runs "
                f"{shlex.quote(kind)})"
            )
        return "; ".join(parts) or None


def select_runs(runs: Sequence[StoredRun], which: str | None, store: Path) -> Selection:
    """The runs of one machine: ``which`` is ``real``, ``virtual`` (the virtual runs, of one
    platform), a platform's name, or None (the real runs if there are any, else the virtual
    runs of the one platform they all ran on)."""
    kinds: dict[str, list[StoredRun]] = {}
    platforms: dict[str, Platform] = {}
    for run in runs:
        platform = platform_of(run)
        kind = REAL if platform is None else platform.name
        kinds.setdefault(kind, []).append(run)
        if platform is not None:
            platforms.setdefault(platform.name, platform)
    virtual = sorted(platforms)
    if which is None:
        which = REAL if REAL in kinds or not kinds else VIRTUAL
    if which == VIRTUAL:
        if len(virtual) > 1:
            raise InputError(
                f"the virtual runs ran on {len(virtual)} platforms ({', '.join(virtual)}), "
                "each a different machine: choose one with --runs NAME",
                path=store,
            )
        if not virtual:
            raise InputError(
                "the store has no virtual runs (perfcast measure --backend smpi makes them)",
                path=store,
            )
        which = virtual[0]
    if which not in kinds and which != REAL:
        known = ", ".join([REAL, VIRTUAL, *virtual])
        raise InputError(
            f"--runs {which}: the store has no runs on a platform of that name; choose "
            f"one of {known}",
            path=store,
        )
    chosen = kinds.get(which, [])
    if not chosen and kinds:
        raise InputError(
            f"--runs {which}: the store has no real runs, only virtual ones (platform "
            f"{', '.join(virtual)}): model them with --runs virtual",
            path=store,
        )
    return Selection(
        runs=tuple(chosen),
        platform=platforms.get(which),
        left_out={kind: len(rest) for kind, rest in kinds.items() if kind != which},
        stored=len(runs),
    )


def selection(store: Path, which: str | None = None) -> Selection:
    """:func:`select_runs` over the successful runs of the store at ``store``."""
    with open_store(store) as opened:
        runs = opened.runs(OK)
    return select_runs(runs, which, store)
