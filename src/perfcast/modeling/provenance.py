"""What a model set knows about the measurements behind it, so that predictions can say
where they stop resting on them.

A model is only as good as the runs it was fitted on, and ``perfcast predict`` reads a
model file long after those runs: it cannot look at the measurements again. Two facts
change how far a prediction can be trusted, so the model file carries them:

- the measured range of each parameter: ``p=4096`` from runs up to ``p=64`` is an
  extrapolation by 64x, which a reader must see next to the number;
- which models were fitted on the wall time of runs with more ranks than cores (see
  :mod:`perfcast.measure.oversubscription`): their growth in the ranks is partly waiting for
  a core, and extrapolating it predicts the scheduler of a small machine;
- the simulated platform, when the runs ran on a virtual cluster
  (:mod:`perfcast.measure.virtual`): every number then describes the machine of a platform
  file, not one anybody measured, and a prediction must say which;
- the compiler that built the measured program, and the one the user's own build runs:
  perfcast measures a clang-16 build (XRay), and a gcc build of the same code can run at a
  very different speed (issue 25: 1.61 s against 1.02 s), so every prediction names the
  compiler it describes;
- what perfcast's instrumentation costs per measured call, and the call paths whose
  measured time it makes up for the most part (:mod:`perfcast.measure.overhead`): a tiny
  function called millions of times measures perfcast, not itself.

Every command words these facts for its reader the same way (:func:`provenance_notes`),
as data: ``perfcast model``, ``perfcast report`` and ``perfcast predict`` print them, and a
library user gets them from the same functions.

In the model file this is the optional ``"provenance"`` object with its own ``"version"``
(:data:`VERSION`); files without it (written before it existed) stay readable, and a file
from a newer perfcast whose version this one does not know is read without it. (Not named
``"measurements"``: that key marks an Extra-P JSON file to format detection.)
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfcast.appspec import RANKS
from perfcast.errors import InputError
from perfcast.experiment.names import display_names
from perfcast.modeling.findings import Note

VERSION = 1
KEY = "provenance"


@dataclass(frozen=True)
class SharedCores:
    """Models fitted on wall time of runs that had more ranks than cores."""

    ranks_parameter: str
    """The parameter that counts MPI ranks (``p``)."""
    ranks_on: dict[int, tuple[int, ...]]
    """Cores -> the rank counts above them that ran on that many cores."""
    models: frozenset[tuple[str, str]]
    """(call path, metric) of every model whose measurements include such runs."""


@dataclass(frozen=True)
class SimulatedPlatform:
    """The platform virtual runs were simulated on (SimGrid SMPI)."""

    name: str
    file: str | None = None
    """The platform file as the runs named it (a path on the machine that simulated)."""

    def describe(self) -> str:
        file = f" ({self.file})" if self.file else ""
        return f"the simulated platform {self.name!r}{file}"


@dataclass(frozen=True)
class Compilers:
    """Which compiler built the measured program, and which one the user's build runs
    (each as its ``--version`` line)."""

    measured: str
    user: str

    @property
    def differ(self) -> bool:
        """The user's build runs another compiler than the one measured: a gcc build
        measured as built (``perfcast build --trace --user-compiler``) does not differ, and
        neither does a user's clang of another version than perfcast's clang-16."""
        both_clang = "clang" in self.user.lower() and "clang" in self.measured.lower()
        return self.measured != self.user and not both_clang

    def describe(self, program: str = "the measured program") -> str:
        """The compiler of ``program``, and what a different user compiler means."""
        if not self.differ:
            return f"{program} was built by {self.measured}"
        return (
            f"{program} was built by {self.measured}, not by the compiler the user's own "
            f"build runs ({self.user}): perfcast instruments with clang's XRay. What was "
            "measured, and every model and prediction from it, describes the clang build, "
            "which can run at another speed than the build the user runs"
        )


@dataclass(frozen=True)
class Instrumentation:
    """What perfcast's instrumentation cost the runs, from a calibration on their machine."""

    per_call_ns: float
    """Entry and exit of one measured call, with the clocks the runs read."""
    clocks: str
    """``wall``, or ``wall and CPU`` (``PERFCAST_CPU_TIME=1``)."""
    dominated: dict[str, float]
    """Call path -> its visits x :attr:`per_call_ns` over its measured exclusive time, for
    the call paths where that is most of the time (``inf``: no time measured)."""


@dataclass(frozen=True)
class Provenance:
    """The measured range per parameter, the models that rest on shared cores, and the
    platform of simulated runs."""

    ranges: dict[str, tuple[float, float]]
    """Parameter -> (smallest, largest) measured value."""
    shared_cores: SharedCores | None = None
    platform: SimulatedPlatform | None = None
    """None: the runs were real."""
    compilers: Compilers | None = None
    """None: the store did not record the build (not built by perfcast measure, or by an
    older perfcast)."""
    instrumentation: Instrumentation | None = None
    """None: no calibration (not measured by perfcast measure, or by an older perfcast)."""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "version": VERSION,
            "ranges": {name: [low, high] for name, (low, high) in self.ranges.items()},
        }
        if self.shared_cores is not None:
            shared = self.shared_cores
            data["shared_cores"] = {
                "ranks_parameter": shared.ranks_parameter,
                "ranks_on": {str(cores): list(ranks) for cores, ranks in shared.ranks_on.items()},
                "models": [list(key) for key in sorted(shared.models)],
            }
        if self.platform is not None:
            data["platform"] = {"name": self.platform.name, "file": self.platform.file}
        if self.compilers is not None:
            data["compilers"] = {"measured": self.compilers.measured, "user": self.compilers.user}
        if self.instrumentation is not None:
            cost = self.instrumentation
            data["instrumentation"] = {
                "per_call_ns": cost.per_call_ns,
                "clocks": cost.clocks,
                # JSON has no infinity: a call path without measured time shares null
                "dominated": {
                    path: share if math.isfinite(share) else None
                    for path, share in sorted(cost.dominated.items())
                },
            }
        return data

    @classmethod
    def from_json(cls, data: object, path: str | Path) -> Provenance | None:
        """Read the ``"provenance"`` object of a model file (None: written by a newer
        perfcast in a version this one cannot interpret)."""
        if not isinstance(data, Mapping):
            raise InputError(f"'{KEY}' must be an object", path=path)
        version = data.get("version")
        if not isinstance(version, int) or isinstance(version, bool):
            raise InputError(f"'{KEY}' lacks an integer 'version'", path=path)
        if version > VERSION:
            return None
        try:
            ranges = {
                str(name): (float(low), float(high))
                for name, (low, high) in dict(data.get("ranges", {})).items()
            }
            shared = data.get("shared_cores")
            shared_cores = None
            if shared is not None:
                shared_cores = SharedCores(
                    ranks_parameter=str(shared["ranks_parameter"]),
                    ranks_on={
                        int(cores): tuple(int(r) for r in ranks)
                        for cores, ranks in dict(shared["ranks_on"]).items()
                    },
                    models=frozenset(
                        (str(callpath), str(metric)) for callpath, metric in shared["models"]
                    ),
                )
            platform = _platform(data.get("platform"))
            compilers = _compilers(data.get("compilers"))
            instrumentation = _instrumentation(data.get("instrumentation"))
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise InputError(f"malformed '{KEY}' object ({exc})", path=path) from None
        for name, (low, high) in ranges.items():
            if not (math.isfinite(low) and math.isfinite(high) and low <= high):
                raise InputError(
                    f"'{KEY}.ranges.{name}' must be two finite numbers, smallest first; write "
                    "the file again with `perfcast model FILE -o FILE`",
                    path=path,
                )
        return cls(ranges, shared_cores, platform, compilers, instrumentation)


MODEL_REMEDY = (
    "Fit CPU time instead (metrics cpu_time and cpu_time_inclusive, measured with "
    "PERFCAST_CPU_TIME=1; effort priors fit it with --time-metric cpu_time), or measure "
    "where each rank has a core of its own (e.g. --backend slurm)"
)
"""What to do about models that rest on shared cores."""


def provenance_notes(provenance: Provenance | None) -> list[Note]:
    """What every reader of models with this provenance must know: :func:`runs_notes`, then
    :func:`shared_cores_notes` of all its models. ``perfcast predict`` puts its
    extrapolation notes between the two and names only the models it predicts."""
    if provenance is None:
        return []
    return runs_notes(provenance) + shared_cores_notes(provenance)


def runs_notes(provenance: Provenance) -> list[Note]:
    """Which program and machine the numbers describe, where that is not what a reader
    assumes: the compiler of the measured build, and a simulated platform."""
    notes = []
    if provenance.compilers is not None:
        text = provenance.compilers.describe("the program the models rest on")
        notes.append(Note("compiler", text))
    if provenance.platform is not None:
        notes.append(
            Note(
                "platform",
                f"the models rest on runs on {provenance.platform.describe()} "
                "(a virtual cluster, SimGrid SMPI): the predictions describe that platform's "
                "machine, not one that was measured",
            )
        )
    return notes


def shared_cores_notes(
    provenance: Provenance,
    models: Collection[tuple[str, str]] | None = None,
    *,
    predicted: bool = False,
) -> list[Note]:
    """The note on those of ``models`` (default: all) that rest on wall time of runs with
    more ranks than cores (empty: none)."""
    shared = provenance.shared_cores
    if shared is None:
        return []
    named = shared.models if models is None else shared.models & set(models)
    if not named:
        return []
    text = models_note(named, shared, predicted=predicted)
    return [Note("shared-cores", text, tuple(sorted(named)))]


def models_note(
    models: Collection[tuple[str, str]], shared: SharedCores, *, predicted: bool = False
) -> str:
    """Which of ``models`` rest on wall time of runs that shared cores, and what to do;
    ``predicted`` words it for ``perfcast predict``."""
    named = sorted(models)
    short = display_names({callpath for callpath, _ in named[:3]})
    shown = ", ".join(f"{metric} of {short[callpath]}" for callpath, metric in named[:3])
    if len(named) > 3:
        shown += f" and {len(named) - 3} more"
    plural = len(named) != 1
    extrapolating = "extrapolating them predicts" if plural else "extrapolating it predicts"
    if predicted:
        extrapolating = "these predictions extrapolate"
    count = f"{len(named)} {'predicted ' if predicted else ''}{'models' if plural else 'model'}"
    return (
        f"{count} ({shown}) {'rest' if plural else 'rests'} on wall time of runs with more "
        "ranks than cores "
        f"({ranks_on_cores(shared.ranks_on)}): {'their' if plural else 'its'} growth includes "
        "waiting for a core, so "
        f"{extrapolating} the scheduler of that machine, not the program. "
        f"{MODEL_REMEDY}"
    )


def rank_counts(counts: Iterable[int]) -> str:
    """``p = 3, 4``"""
    return f"{RANKS} = {', '.join(str(c) for c in sorted(counts))}"


def core_count(count: int) -> str:
    """``1 core``, ``4 cores``"""
    return f"{count} core" if count == 1 else f"{count} cores"


def ranks_on_cores(ranks_on: Mapping[int, Collection[int]]) -> str:
    """``p = 3, 4 on 2 cores; p = 8 on 4 cores``"""
    return "; ".join(f"{rank_counts(ranks_on[c])} on {core_count(c)}" for c in sorted(ranks_on))


def _platform(data: object) -> SimulatedPlatform | None:
    """The ``platform`` object; a name that is not a string is malformed (TypeError), since
    str() of anything would turn a damaged file into a platform nobody named."""
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise TypeError("'platform' must be an object")
    name, file = data.get("name"), data.get("file")
    if not isinstance(name, str) or not (file is None or isinstance(file, str)):
        raise TypeError("'platform' needs a string 'name' and a string or null 'file'")
    return SimulatedPlatform(name, file)


def _compilers(data: object) -> Compilers | None:
    """The ``compilers`` object (absent in files written before perfcast recorded it)."""
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise TypeError("'compilers' must be an object")
    measured, user = data.get("measured"), data.get("user")
    if not isinstance(measured, str) or not isinstance(user, str):
        raise TypeError("'compilers' needs a string 'measured' and a string 'user'")
    return Compilers(measured, user)


def _instrumentation(data: object) -> Instrumentation | None:
    """The ``instrumentation`` object (absent in files without a calibration)."""
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise TypeError("'instrumentation' must be an object")
    per_call, clocks, dominated = data.get("per_call_ns"), data.get("clocks"), data.get("dominated")
    if isinstance(per_call, bool) or not isinstance(per_call, int | float) or not per_call >= 0:
        raise TypeError("'instrumentation' needs a number 'per_call_ns', at least 0")
    if not isinstance(clocks, str) or not isinstance(dominated, Mapping):
        raise TypeError("'instrumentation' needs a string 'clocks' and an object 'dominated'")
    shares = {}
    for path, share in dominated.items():
        if share is not None and (isinstance(share, bool) or not isinstance(share, int | float)):
            raise TypeError(f"'instrumentation.dominated.{path}' must be a number or null")
        shares[str(path)] = math.inf if share is None else float(share)
    return Instrumentation(float(per_call), clocks, shares)
