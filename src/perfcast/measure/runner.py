"""Executing a plan: jobs, backends, retries, and the progress line.

The loop in :func:`execute` is the same for every backend: hand the backend as many jobs
as it takes, wait for some to finish, store each one the moment it does, and put failed
ones back in the queue until they have used ``retries`` extra attempts. A backend
(:mod:`~perfcast.measure.local`, :mod:`~perfcast.measure.slurm`) only knows how to start
jobs, report the finished ones and clean up; how a failure is named is shared here, so a
crashed run reads the same whichever backend ran it.
"""

from __future__ import annotations

import abc
import math
import os
import re
import shlex
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from perfcast.errors import InputError
from perfcast.measure.design import PlannedRun
from perfcast.measure.profiles import parse_rank_profile, without_counters
from perfcast.measure.store import (
    CampaignStore,
    DiskFullError,
    InflightRun,
    RunRecord,
    disk_full_message,
    free_bytes,
)

PROFILE_DIR_VARIABLE = "PERFCAST_PROFILE_DIR"
"""Where the perfcast runtime writes one ``rank-N.pcprof`` per process (see
``measure/README.md``)."""
PROFILE_SUFFIX = ".pcprof"

TAIL_LINES = 40
"""How much of a run's stderr/stdout the store keeps: enough for MPI's abort notices and
a backtrace, small enough that a chatty program does not bloat the store."""
TAIL_BYTES = 8192

PROGRESS_INTERVAL = 10.0
"""Seconds between progress lines when stderr is not a terminal (logs, CI)."""

MISSING_COUNTERS = (
    "the program has no basic-block counters although [build] counters = true: it was not "
    "rebuilt (the build found it up to date from a build without counters); clean the build "
    "(e.g. make clean) and measure again with --resume --retry-failed"
)
"""Why a run of a campaign that asks for counters fails when its profiles have none.

Stored as ``ok``, such a run would read as a campaign without counts, and
``perfcast model --priors effort`` would quietly model every call path classically; the
usual cause is a ``make`` that found the binary of an earlier light build up to date."""

MISSING_CPU_TIME = (
    "the runs have no metric cpu_time, which [metrics] collect names: the runtime measures "
    "CPU time only with PERFCAST_CPU_TIME=1 in perfcast measure's environment; measure again "
    "with it (PERFCAST_CPU_TIME=1 perfcast measure --resume --retry-failed), or remove cpu_time "
    "from [metrics] collect"
)
"""Why a run fails whose campaign collects ``cpu_time`` while its ranks did not measure it.

Stored as ``ok``, every run would lack a metric the campaign declares, and this would only
show when the campaign is read; the first run tells."""

BUILD_FAILURES = (MISSING_COUNTERS, MISSING_CPU_TIME)
"""Failures of the build, not of the run: every run of the same binary repeats them. Such a
run is stored as failed without a retry, and :func:`execute` starts no further runs (the
runs already started finish and are stored), so nothing measured is lost and no time is
spent measuring runs that cannot be used; ``--resume`` runs the rest after the fix."""


@dataclass(frozen=True)
class Job:
    """One attempt of one planned run, ready for a backend."""

    run: PlannedRun
    attempt: int
    argv: tuple[str, ...]
    """The program and its arguments (the backend adds the MPI launcher)."""
    cwd: Path
    directory: Path
    """Private scratch directory of this attempt: profiles, stdout, stderr."""
    timeout: float
    expect_profiles: bool
    """The program was built by perfcast, so every rank must leave a profile."""
    mpirun_args: tuple[str, ...] = ()
    expect_counters: bool = False
    """The campaign asks for effort counters, so every profile must have them."""
    expect_cpu_time: bool = False
    """The campaign collects ``cpu_time``, so every profile must have measured it."""

    @property
    def key(self) -> str:
        return self.run.key

    @property
    def ranks(self) -> int:
        return self.run.ranks

    @property
    def profile_dir(self) -> Path:
        return self.directory / "profiles"

    @property
    def command(self) -> str:
        """The run as a user would type it (stored with the run)."""
        return f"mpirun -np {self.ranks} {shlex.join(self.argv)}"

    def retry(self) -> Job:
        return replace(self, attempt=self.attempt + 1)


LOW_SPACE_BYTES = 256 * 1024
"""Free bytes below which a file system counts as full: a run that failed while its scratch
area had less than this failed for want of space, not for a fault of its own."""


class Backend(abc.ABC):
    """Starts jobs and reports them when they finish."""

    name: str
    smpi: bool = False
    """The backend runs programs under SimGrid SMPI, so the campaign builds them with
    ``perfcast build --smpi`` and SimGrid's compiler wrappers."""
    announce: Callable[[Job, dict[str, Any]], None] | None = None
    """Set by :func:`execute`: records a job as in flight. A backend that can call it before
    it starts the job's processes does, with what finds those processes again (a token in
    their environment, the host), so a perfcast killed between starting a run and learning
    its process id still leaves a trace that lets ``--resume`` stop the orphan."""

    @abc.abstractmethod
    def submit(self, jobs: Sequence[Job]) -> list[tuple[Job, dict[str, Any]]]:
        """Start as many of ``jobs`` (in order) as the backend takes now; return each started
        job with the handle the store keeps to find it again after a crash."""

    @abc.abstractmethod
    def wait(self) -> list[RunRecord]:
        """Block until at least one started job finishes; return the finished ones."""

    @abc.abstractmethod
    def running(self) -> int:
        """Jobs started and not yet reported."""

    @abc.abstractmethod
    def recover(self, inflight: Sequence[InflightRun], jobs: dict[str, Job]) -> list[Job]:
        """After a crash: reattach to or clean up runs a previous perfcast left in flight.

        ``jobs`` maps their keys to fresh jobs. Returns the jobs the backend is now
        watching again (they will come out of :meth:`wait`); the others must be rerun.
        """

    def shutdown(self) -> None:  # noqa: B027 - optional hook
        """Stop everything still running (on Ctrl-C)."""

    def launcher_arguments_problem(self, arguments: Sequence[str]) -> str | None:
        """Why this backend's launcher cannot take ``[run] mpirun_args`` (None: it can).

        Asked before anything is built or run. The key holds options for ``mpirun`` (Open
        MPI's), which the local backend passes as they are; a backend with another launcher
        says which of them it refuses rather than start runs that all fail."""
        return None

    def cores_for(self, ranks: int) -> int | None:
        """The cores a run of ``ranks`` ranks has to itself (None: the backend cannot tell).

        Stored with every run: with fewer cores than ranks, ranks wait for a core, and the
        time measured at that point includes the waiting (MPI time most, since a collective
        waits for every rank that is descheduled); see :mod:`~perfcast.measure.oversubscription`.
        """
        return None


# -- naming failures ---------------------------------------------------------------------------

_RANK_SIGNAL = re.compile(r"signal (\d+) \(([^)]+)\)")


def failure_reason(
    job: Job,
    exit_code: int | None,
    *,
    timed_out: bool,
    profiles: dict[str, bytes],
    stderr_tail: str,
) -> str | None:
    """Why an attempt failed, in words a user can act on (None: it succeeded)."""
    if timed_out:
        return (
            f"timed out after {job.timeout:g} s (run.timeout); the run and all its ranks "
            "were killed"
        )
    if exit_code is not None and exit_code < 0:
        return f"killed by signal {_signal_name(-exit_code)}"
    if exit_code:
        reason = f"exit status {exit_code}"
        died = _RANK_SIGNAL.search(stderr_tail)
        if died:
            reason += f"; a rank died of signal {died.group(1)} ({died.group(2)})"
        elif "MPI_ABORT" in stderr_tail or "MPI_Abort" in stderr_tail:
            reason += "; the program called MPI_Abort"
        return reason
    if exit_code is None:
        return "the run vanished without an exit status (cancelled or lost)"
    if job.expect_profiles and len(profiles) < job.ranks:
        return (
            f"only {len(profiles)} of {job.ranks} rank profiles were written; a rank exited "
            "without finishing (perfcast writes profiles at exit)"
        )
    if job.expect_counters and without_counters(profiles):
        return MISSING_COUNTERS
    if job.expect_cpu_time and _without_cpu_time(profiles):
        return MISSING_CPU_TIME
    return None


def _without_cpu_time(profiles: dict[str, bytes]) -> bool:
    """Whether a profile of the run was written by ranks that did not measure CPU time (a
    profile that does not parse is left to the reader, which names the line at fault)."""
    for name, content in profiles.items():
        try:
            profile = parse_rank_profile(content.decode("utf-8", errors="replace"), name)
        except InputError:
            continue
        if not profile.cpu_time:
            return True
    return False


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def read_tail(path: Path) -> str:
    """The last :data:`TAIL_LINES` lines (at most :data:`TAIL_BYTES`) of a file."""
    try:
        with open(path, "rb") as file:
            file.seek(0, os.SEEK_END)
            size = file.tell()
            file.seek(max(0, size - TAIL_BYTES))
            data = file.read()
    except OSError:
        return ""
    lines = data.decode("utf-8", errors="replace").splitlines()
    return "\n".join(lines[-TAIL_LINES:])


def collect_profiles(directory: Path) -> dict[str, bytes]:
    """The complete per-rank profile files of a run (temporary files are not profiles)."""
    if not directory.is_dir():
        return {}
    return {
        path.name: path.read_bytes()
        for path in sorted(directory.glob(f"*{PROFILE_SUFFIX}"))
        if not path.name.startswith(".")
    }


def finished_record(
    job: Job,
    exit_code: int | None,
    *,
    started: float,
    finished: float,
    timed_out: bool,
    backend: str,
    job_id: str | None = None,
    cores: int | None = None,
) -> RunRecord:
    """Read an attempt's directory into the record the store keeps (``cores``: what
    :meth:`Backend.cores_for` says the run had)."""
    stderr_tail = read_tail(job.directory / "stderr")
    profiles = collect_profiles(job.profile_dir)
    return RunRecord(
        key=job.key,
        point=dict(job.run.point),
        repetition=job.run.repetition,
        command=job.command,
        exit_code=exit_code,
        reason=failure_reason(
            job, exit_code, timed_out=timed_out, profiles=profiles, stderr_tail=stderr_tail
        ),
        started=started,
        finished=finished,
        attempt=job.attempt,
        stderr_tail=stderr_tail,
        stdout_tail=read_tail(job.directory / "stdout"),
        backend=backend,
        job=job_id,
        profiles=profiles,
        ranks=job.ranks,
        cores=cores,
    )


# -- progress --------------------------------------------------------------------------------


@dataclass
class Progress:
    """``measure: 12/40 runs, 1 failed, 2 retried, ETA 3m12s`` on stderr.

    On a terminal the line updates in place; elsewhere a line is printed at most every
    :data:`PROGRESS_INTERVAL` seconds, and always at the end.

    Hand-written rather than tqdm or ``rich.progress``, for the second case: a campaign
    runs for hours under CI, ``nohup`` or a pipe, where tqdm writes every redraw into the
    log as ``\\r``-separated text on one line and rich prints nothing until the campaign
    ends; either would need this plain-line fallback beside it.
    """

    total: int
    stream: IO[str] | None = field(default_factory=lambda: sys.stderr)
    done: int = 0
    failed: int = 0
    retried: int = 0
    started: float = field(default_factory=time.monotonic)
    _last: float = 0.0
    _shown: tuple[int, int, int] = (-1, -1, -1)

    def update(self, *, done: int = 0, failed: int = 0, retried: int = 0) -> None:
        self.done += done
        self.failed += failed
        self.retried += retried
        self._show(final=False)

    def finish(self) -> None:
        self._show(final=True)

    def line(self) -> str:
        parts = [f"measure: {self.done}/{self.total} runs"]
        if self.failed:
            parts.append(f"{self.failed} failed")
        if self.retried:
            parts.append(f"{self.retried} retried")
        remaining = self.total - self.done
        if self.done and remaining:
            elapsed = time.monotonic() - self.started
            parts.append(f"ETA {_clock(elapsed / self.done * remaining)}")
        elif not remaining:
            parts.append(f"took {_clock(time.monotonic() - self.started)}")
        return ", ".join(parts)

    def _show(self, *, final: bool) -> None:
        if self.stream is None:
            return
        tty = self.stream.isatty()
        now = time.monotonic()
        if not tty and not final and now - self._last < PROGRESS_INTERVAL:
            return
        line = self.line()
        state = (self.done, self.failed, self.retried)
        if final and not tty and state == self._shown:
            return  # the last line printed already said it
        self._last = now
        self._shown = state
        end = "\n" if final or not tty else ""
        self.stream.write(("\r\x1b[K" if tty else "") + line + end)
        self.stream.flush()


def _clock(seconds: float) -> str:
    seconds = max(0, math.ceil(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


# -- the loop ---------------------------------------------------------------------------------


@dataclass
class ExecutionReport:
    """What happened: runs stored as successful and as failed, retried attempts, and
    whether a build failure (:data:`BUILD_FAILURES`) stopped the execution early."""

    succeeded: int = 0
    failed: list[RunRecord] = field(default_factory=list)
    retried: list[RunRecord] = field(default_factory=list)
    stopped: str | None = None
    """The build failure that stopped starting runs (None: every job was started)."""
    not_started: int = 0
    """Jobs never started because of ``stopped``."""


def execute(
    jobs: Iterable[Job],
    backend: Backend,
    store: CampaignStore,
    *,
    retries: int,
    progress: Progress | None = None,
    recovered: Sequence[Job] = (),
) -> ExecutionReport:
    """Run ``jobs`` (plus ``recovered`` ones the backend already watches) to completion.

    Every finished attempt goes to the store at once: a success or a final failure as the
    run, a failure with attempts left as an attempt (and the job is queued again, first).
    A build failure (:data:`BUILD_FAILURES`) is stored as the run's final failure and stops
    the start of further jobs; those already started finish and are stored.
    """
    queue = deque(jobs)
    report = ExecutionReport()
    progress = progress or Progress(len(queue) + len(recovered), stream=None)
    by_key = {job.key: job for job in [*queue, *recovered]}
    backend.announce = lambda job, handle: store.mark_inflight(
        job.key, job.attempt, backend.name, handle
    )
    try:
        while (queue and report.stopped is None) or backend.running():
            if queue and report.stopped is None:
                started = backend.submit(list(queue))
                for job, handle in started:
                    store.mark_inflight(job.key, job.attempt, backend.name, handle)
                for _ in started:
                    queue.popleft()
            if not backend.running():
                continue
            for record in backend.wait():
                job = by_key[record.key]
                if not record.ok and _out_of_space(job.directory):
                    # not the run's fault: it stays in flight, and --resume measures it again
                    raise DiskFullError(
                        disk_full_message(
                            job.directory,
                            "the runs' scratch area",
                            f"run {job.key} could not write its results, so it is not stored "
                            "and is measured again",
                        )
                    )
                if record.ok:
                    store.record(record)
                    report.succeeded += 1
                    progress.update(done=1)
                elif record.reason in BUILD_FAILURES:
                    store.record(record)
                    report.failed.append(record)
                    report.stopped = record.reason
                    progress.update(done=1, failed=1)
                elif record.attempt <= retries:
                    store.record_attempt(record)
                    report.retried.append(record)
                    retry = job.retry()
                    by_key[retry.key] = retry
                    queue.appendleft(retry)
                    progress.update(retried=1)
                else:
                    store.record(record)
                    report.failed.append(record)
                    progress.update(done=1, failed=1)
    except BaseException:
        backend.shutdown()
        raise
    report.not_started = len(queue)
    progress.finish()
    return report


def _out_of_space(directory: Path) -> bool:
    free = free_bytes(directory)
    return free is not None and free < LOW_SPACE_BYTES
