"""Reading the runtime's per-rank profiles into an :class:`Experiment`.

One run of a program built with ``perfcast build`` leaves one ``rank-<r>.pcprof`` per
process in its profile directory (format: ``README.md`` beside this module). This module
reads them (:func:`read_rank_profile`), checks that they form one complete run, and turns
them into measurements (:func:`read_profiles`); :func:`combine_runs` joins many runs at
different parameter values, or repetitions at the same values, into one Experiment for
``perfcast model``.

Metric convention. Every quantity is per call path and *exclusive* (time spent, blocks
executed in the function itself, not in measured callees), as in Score-P/Cube profiles
and Extra-P; ``time_inclusive`` adds the callees. Within a rank, threads are summed. Over
ranks, two metrics are kept: ``<name>`` is the mean over all ranks (a rank that never
reached the call path counts as 0) and ``<name>:max`` the maximum (the slowest rank decides
the run time of bulk-synchronous codes).

==================== ===== ==============================================================
metric               unit  per call path
==================== ===== ==============================================================
time                 s     exclusive wall time
time_inclusive       s     wall time including measured callees
cpu_time             s     exclusive CPU time of the calling thread (runs with
                           ``PERFCAST_CPU_TIME=1``)
cpu_time_inclusive   s     CPU time including measured callees
visits                     calls
basic_blocks               executed basic blocks (``--counters`` builds; not on MPI leaves)
mpi_bytes_sent       bytes bytes sent by the MPI call path (rules: runtime/perfcast_mpi.c)
mpi_bytes_received   bytes bytes received by the MPI call path
==================== ===== ==============================================================
"""

from __future__ import annotations

import itertools
import re
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from perfcast.errors import InputError
from perfcast.experiment.calltree import join_callpath
from perfcast.experiment.experiment import Experiment, Metric, Row
from perfcast.experiment.metrics import (
    BYTES_RECEIVED,
    BYTES_SENT,
    COMPUTATION_METRIC,
    CPU_TIME_METRIC,
    INCLUSIVE_SUFFIX,
    TIME_METRIC,
    VISITS_METRIC,
    with_max,
)
from perfcast.experiment.names import name_list
from perfcast.inputs import read_text

FORMAT_VERSION = 2
READABLE_VERSIONS = (1, FORMAT_VERSION)
"""Version 1 (before CPU time) is still read, so campaign stores measured with it stay usable."""
PROFILE_GLOB = "rank-*.pcprof"
PARTIAL_GLOB = ".rank-*.pcprof.*.tmp"
NANOSECONDS = 1e-9

METRICS = (
    Metric(TIME_METRIC, "s"),
    Metric(TIME_METRIC + INCLUSIVE_SUFFIX, "s"),
    Metric(CPU_TIME_METRIC, "s"),
    Metric(CPU_TIME_METRIC + INCLUSIVE_SUFFIX, "s"),
    Metric(VISITS_METRIC),
    Metric(COMPUTATION_METRIC),
    Metric(BYTES_SENT, "bytes"),
    Metric(BYTES_RECEIVED, "bytes"),
)
"""The per-rank quantities; each appears as ``name`` (mean over ranks) and ``name:max``."""

_PROFILE_NAME = re.compile(r"^rank-(\d+)\.pcprof$")


@dataclass(frozen=True)
class MpiRecord:
    """One MPI operation at one call path on communicators of one size."""

    operation: str
    comm_size: int
    calls: int
    bytes_sent: int
    bytes_received: int


@dataclass
class CallPathRecord:
    """What one rank measured at one call path (threads summed)."""

    visits: int = 0
    inclusive_ns: int = 0
    exclusive_ns: int = 0
    inclusive_cpu_ns: int = 0
    exclusive_cpu_ns: int = 0
    basic_blocks: int = 0
    mpi: list[MpiRecord] = field(default_factory=list)

    def values(self) -> dict[str, float]:
        """This record's metric values, named as in :data:`METRICS`."""
        values = {
            TIME_METRIC: self.exclusive_ns * NANOSECONDS,
            TIME_METRIC + INCLUSIVE_SUFFIX: self.inclusive_ns * NANOSECONDS,
            CPU_TIME_METRIC: self.exclusive_cpu_ns * NANOSECONDS,
            CPU_TIME_METRIC + INCLUSIVE_SUFFIX: self.inclusive_cpu_ns * NANOSECONDS,
            VISITS_METRIC: float(self.visits),
        }
        if self.mpi:
            values[BYTES_SENT] = float(sum(m.bytes_sent for m in self.mpi))
            values[BYTES_RECEIVED] = float(sum(m.bytes_received for m in self.mpi))
        else:
            values[COMPUTATION_METRIC] = float(self.basic_blocks)
        return values


@dataclass
class RankProfile:
    """One process's profile file."""

    path: Path
    rank: int
    ranks: int
    run: str
    program: str
    counters: bool
    cpu_time: bool
    functions_measured: int
    functions_total: int
    filter_source: str
    unmatched_filter: list[str]
    threads: int
    outside_basic_blocks: int
    callpaths: dict[str, CallPathRecord]


PROFILE_KIND = "perfcast profile"
"""What a profile is called in errors; with :data:`PROFILE_HINT`, for
:func:`perfcast.inputs.decode_text` on a profile kept in a campaign store."""
PROFILE_HINT = "remove it and measure the run again (the runtime writes UTF-8 text files)"


def read_rank_profile(path: str | Path) -> RankProfile:
    """Parse one ``rank-<r>.pcprof``; InputError (file and line) if it is not complete.

    Anything but a regular file is refused before it is opened
    (:func:`perfcast.inputs.read_text`): a named pipe in the profile directory would block
    the reader, a device such as ``/dev/zero`` never ends.
    """
    path = Path(path)
    return parse_rank_profile(read_text(path, PROFILE_KIND, PROFILE_HINT), path)


def parse_rank_profile(text: str, source: str | Path) -> RankProfile:
    """Parse a profile's text (e.g. kept in a campaign store); ``source`` names it in errors."""
    return _Parser(Path(source), text.splitlines()).parse()


COUNTER_LIMIT = 2**64 - 1
"""The largest value the runtime writes: every count is an unsigned 64-bit integer."""


class _Parser:
    """A line reader that names the file and line of anything unexpected."""

    def __init__(self, path: Path, lines: list[str]):
        self.path = path
        self.lines = lines
        self.number = 0
        self.version = FORMAT_VERSION

    def fail(self, message: str) -> InputError:
        return InputError(message, path=self.path, line=self.number or None)

    def next(self, keyword: str, fields: int) -> list[str]:
        """The next line, which must start with ``keyword``: its ``fields`` values (the
        last one takes the rest of the line)."""
        if self.number >= len(self.lines):
            raise self.fail(
                f"the profile ends before its '{keyword}' line: it is not a complete "
                "perfcast profile (was it written by an older or crashed program?)"
            )
        self.number += 1
        parts = self.lines[self.number - 1].split(" ", fields)
        if parts[0] != keyword or len(parts) != fields + 1:
            raise self.fail(f"expected a '{keyword}' line with {fields} value(s)")
        return parts[1:]

    def peek(self) -> str:
        return self.lines[self.number].split(" ", 1)[0] if self.number < len(self.lines) else ""

    def integers(self, values: Sequence[str]) -> list[int]:
        """``values`` as the runtime's counts: ASCII digits up to :data:`COUNTER_LIMIT`.

        Python's ``int`` would also take ``-1``, ``+3``, ``1_000`` and other scripts' digits,
        none of which the runtime writes; a negative count would become a negative time.
        """
        for value in values:
            if not (value.isascii() and value.isdigit()):
                raise self.fail(f"expected counts (integers >= 0), got {' '.join(values)!r}"[:200])
            if len(value) > len(str(COUNTER_LIMIT)) or int(value) > COUNTER_LIMIT:
                raise self.fail(
                    f"the count {value[:30]}{'...' if len(value) > 30 else ''} is larger than "
                    "the runtime's 64-bit counters hold"
                )
        return [int(v) for v in values]

    def parse(self) -> RankProfile:
        (version,) = self.next("perfcast-profile", 1)
        if version not in {str(v) for v in READABLE_VERSIONS}:
            raise self.fail(
                f"profile format version {version} is not one this perfcast reads "
                f"({', '.join(map(str, READABLE_VERSIONS))}); rebuild the program with this "
                "perfcast"
            )
        self.version = int(version)
        (rank,) = self.integers(self.next("rank", 1))
        (ranks,) = self.integers(self.next("ranks", 1))
        (run,) = self.next("run", 1)
        (program,) = self.next("program", 1)
        self.next("clock", 2)
        cpu_time = False
        if self.version >= 2:
            (enabled,) = self.integers(self.next("cpu-clock", 3)[:1])
            cpu_time = bool(enabled)
        counters, _blocks = self.integers(self.next("counters", 2))
        measured, total, source = self.next("functions", 3)
        measured_total = self.integers([measured, total])
        unmatched = []
        while self.peek() == "unmatched":
            unmatched.append(self.next("unmatched", 1)[0])
        (threads,) = self.integers(self.next("threads", 1))
        callpaths: dict[str, CallPathRecord] = {}
        outside = 0
        for _ in range(threads):
            outside += self._thread(callpaths)
        self.next("end", 0)
        if self.number != len(self.lines):
            self.number += 1
            raise self.fail("unexpected text after the 'end' line")
        return RankProfile(
            path=self.path,
            rank=rank,
            ranks=ranks,
            run=run,
            program=program,
            counters=bool(counters),
            cpu_time=cpu_time,
            functions_measured=measured_total[0],
            functions_total=measured_total[1],
            filter_source=source,
            unmatched_filter=unmatched,
            threads=threads,
            outside_basic_blocks=outside,
            callpaths=callpaths,
        )

    def _thread(self, callpaths: dict[str, CallPathRecord]) -> int:
        """Add one thread's nodes to ``callpaths``; returns its blocks outside any function."""
        self.next("thread", 1)
        (outside,) = self.integers(self.next("outside", 1))
        paths: dict[int, str] = {}
        while self.peek() in ("node", "mpi"):
            if self.peek() == "mpi":
                values = self.integers(self.next("mpi", 5))
                node, comm_size, calls, sent, received = values
                if node not in paths:
                    raise self.fail(f"MPI record for node {node}, which is not defined above")
                operation = paths[node].rsplit("->", 1)[-1]
                mpi = MpiRecord(operation, comm_size, calls, sent, received)
                callpaths[paths[node]].mpi.append(mpi)
                continue
            if self.version >= 2:
                *numbers, name = self.next("node", 9)
                node, parent, visits, inclusive, exclusive, *cpu, blocks = self.integers(numbers)
            else:
                *numbers, name = self.next("node", 7)
                node, parent, visits, inclusive, exclusive, blocks = self.integers(numbers)
                cpu = [0, 0]
            if parent != 0 and parent not in paths:
                raise self.fail(f"node {node} names parent {parent}, which is not defined above")
            path = join_callpath([paths[parent], name]) if parent else name
            paths[node] = path
            record = callpaths.setdefault(path, CallPathRecord())
            record.visits += visits
            record.inclusive_ns += inclusive
            record.exclusive_ns += exclusive
            record.inclusive_cpu_ns += cpu[0]
            record.exclusive_cpu_ns += cpu[1]
            record.basic_blocks += blocks
        return outside


def without_counters(files: Mapping[str, bytes]) -> list[str]:
    """The names of the profiles in ``files`` (file name -> contents, as a campaign keeps a
    run's profiles) whose program was built without basic-block counters.

    A profile that does not parse is not named here: reading the run reports it, with the
    line at fault."""
    names = []
    for name, content in files.items():
        try:
            profile = parse_rank_profile(content.decode("utf-8", errors="replace"), name)
        except InputError:
            continue
        if not profile.counters:
            names.append(name)
    return names


def _directory_profiles(directory: Path) -> list[RankProfile]:
    """Every rank's profile of the one run in ``directory``, checked to be complete."""
    if not directory.is_dir():
        raise InputError("no such profile directory", path=directory)
    files = sorted(p for p in directory.glob(PROFILE_GLOB) if _PROFILE_NAME.match(p.name))
    partial = sorted(p.name for p in directory.glob(PARTIAL_GLOB))
    if not files:
        hint = f" (only unfinished files: {', '.join(partial)})" if partial else ""
        raise InputError(
            f"no perfcast profiles ({PROFILE_GLOB}) here{hint}: the program must be built with "
            "'perfcast build', run with PERFCAST_PROFILE_DIR set to this directory, and exit "
            "normally (a crash, a signal or MPI_Abort writes no profile)",
            path=directory,
        )
    return check_run([read_rank_profile(p) for p in files], directory)


def check_run(profiles: Sequence[RankProfile], source: str | Path) -> list[RankProfile]:
    """``profiles`` sorted by rank, if they are every rank of one run; InputError naming
    ``source`` if ranks are missing or runs are mixed."""
    directory = Path(source)
    if not profiles:
        raise InputError("no perfcast profiles in this run", path=directory)
    profiles = sorted(profiles, key=lambda p: p.rank)
    first = profiles[0]
    for profile in profiles[1:]:
        if (profile.run, profile.ranks) != (first.run, first.ranks):
            raise InputError(
                f"profiles of different runs ({first.path.name}: run {first.run} of "
                f"{first.ranks} ranks, {profile.path.name}: run {profile.run} of "
                f"{profile.ranks} ranks): give every run its own PERFCAST_PROFILE_DIR",
                path=directory,
            )
    for profile, following in itertools.pairwise(profiles):
        if profile.rank == following.rank:
            raise InputError(
                f"{profile.path.name} and {following.path.name} are both rank {profile.rank}: "
                "a rank's profile was copied, so the run's mean over ranks would count it "
                "twice; keep one of them",
                path=directory,
            )
    if first.ranks < 1 or profiles[-1].rank >= first.ranks:
        raise InputError(
            f"{profiles[-1].path.name} is rank {profiles[-1].rank} of a run of {first.ranks} "
            "rank(s): not a profile the runtime wrote",
            path=directory,
        )
    # the ranks are distinct and below first.ranks: the first gaps, without listing them all
    # (a damaged 'ranks' line may claim 10^19)
    present = {p.rank for p in profiles}
    missing = [rank for rank in range(min(first.ranks, len(profiles) + 11)) if rank not in present]
    if len(profiles) < first.ranks:
        gaps = first.ranks - len(profiles)
        shown = ", ".join(map(str, missing[:10])) + (" ..." if gaps > 10 else "")
        raise InputError(
            f"rank(s) {shown} of {first.ranks} wrote no profile: the run crashed, was killed "
            "or called MPI_Abort on those ranks, so this run is not a complete measurement; "
            "fix the failure and run it again",
            path=directory,
        )
    return list(profiles)


class UnmatchedFilterWarning(UserWarning):
    """Filter entries that named no function of the measured program."""


SHOWN_UNMATCHED = 8
"""How many unmatched filter entries the note names; the rest are counted."""


def _warn_unmatched(runs: Sequence[Sequence[RankProfile]]) -> None:
    """One note for all ``runs``: the filter entries that matched no function.

    Every run of a campaign has the same program and filter, so a note per run would repeat
    one fact (60 times for LULESH's inlined kernels). The note is a summary; ``perfcast
    build --filter`` names every such function once, when it links the program.
    """
    unmatched: dict[str, set[str]] = {}
    affected = 0
    for profiles in runs:
        in_run = {name for profile in profiles for name in profile.unmatched_filter}
        affected += bool(in_run)
        if in_run:
            unmatched.setdefault(profiles[0].program, set()).update(in_run)
    if not unmatched:
        return
    parts = []
    for program, names in sorted(unmatched.items()):
        listed = name_list(sorted(names), shown=SHOWN_UNMATCHED)
        parts.append(f"{len(names)} in {program} ({listed})")
    warnings.warn(
        f"filter entries that match no function, so they were not measured (inlined into "
        f"their callers, or not in the program; perfcast build --filter lists them, and "
        f"--keep-inlined keeps them), in {affected} of {len(runs)} run(s): {'; '.join(parts)}",
        UnmatchedFilterWarning,
        stacklevel=3,
    )


def _run_rows(profiles: Sequence[RankProfile], point: Sequence[float]) -> Iterator[Row]:
    """Mean and max over ranks of every metric of every call path (absent counts as 0)."""
    callpaths: list[str] = []
    for profile in profiles:
        callpaths += [c for c in profile.callpaths if c not in callpaths]
    counters = all(p.counters for p in profiles)
    cpu_time = all(p.cpu_time for p in profiles)
    empty = CallPathRecord()
    for callpath in callpaths:
        per_rank = [p.callpaths.get(callpath, empty) for p in profiles]
        is_mpi = any(r.mpi for r in per_rank)
        for metric in METRICS:
            if metric.name == COMPUTATION_METRIC and (not counters or is_mpi):
                continue
            if metric.name.startswith(CPU_TIME_METRIC) and not cpu_time:
                continue
            if metric.name.startswith("mpi_") and not is_mpi:
                continue
            values = [r.values().get(metric.name, 0.0) for r in per_rank]
            yield callpath, metric.name, point, sum(values) / len(values)
            yield callpath, with_max(metric.name), point, max(values)


def _metrics() -> list[Metric]:
    return [m for base in METRICS for m in (base, Metric(with_max(base.name), base.unit))]


def read_profiles(directory: str | Path, point: Mapping[str, float] | None = None) -> Experiment:
    """One run's per-rank profiles as an Experiment at ``point`` (parameter values; none by
    default). InputError if ranks are missing, files are incomplete or runs are mixed."""
    return combine_runs([(point or {}, directory)])


RunSource = str | Path | Sequence[RankProfile]
"""A run: its profile directory, or its already parsed per-rank profiles."""


def combine_runs(runs: Iterable[tuple[Mapping[str, float], RunSource]]) -> Experiment:
    """Many runs, each ``(parameter values, profile directory or profiles)``, as one
    Experiment. Every run must give the same parameter names; runs at the same values
    become repetitions, in the order given.
    """
    runs = list(runs)
    if not runs:
        raise InputError("no runs given to combine")
    parameters = list(runs[0][0])
    rows: list[Row] = []
    checked: list[list[RankProfile]] = []
    for values, run in runs:
        name = str(run) if isinstance(run, str | Path) else _describe(run)
        if sorted(values) != sorted(parameters):
            raise InputError(
                f"this run has parameters {sorted(values)} but the first has {sorted(parameters)}",
                path=name,
            )
        point = [float(values[p]) for p in parameters]
        if isinstance(run, str | Path):
            profiles = _directory_profiles(Path(run))
        else:
            profiles = check_run(run, name)
        checked.append(profiles)
        rows += _run_rows(profiles, point)
    _warn_unmatched(checked)
    first = runs[0][1]
    source = str(first) if isinstance(first, str | Path) else _describe(first)
    return Experiment.from_rows(parameters, rows, _metrics(), source=source)


def _describe(profiles: Sequence[RankProfile]) -> str:
    return str(profiles[0].path.parent) if profiles else "<no profiles>"
