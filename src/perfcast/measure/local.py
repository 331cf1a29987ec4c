"""The local backend: runs on this machine with ``mpirun``.

Each run is started in a session of its own. Open MPI puts every rank into its own
process group (inside mpirun's session), so killing mpirun's group alone can leave ranks
running; on a timeout the backend therefore sends SIGTERM to mpirun (which forwards it to
its ranks) and, after :data:`KILL_GRACE` seconds, SIGKILL to every process left in the
session. A run is stored as in flight *before* mpirun starts, with this host's name and a
random token that mpirun finds in its environment (:data:`RUN_TOKEN_VARIABLE`; its ranks
inherit it); once mpirun runs, the session id and the leader's start time are added. A
campaign resumed after perfcast itself was killed — even between starting mpirun and
learning its process id — thus finds that run's processes (by session, and by token) and
stops them before measuring the run again: an orphan left running would share the cores
with the new run and inflate its time. Processes are listed, read and signalled through
psutil (its start times and pid-reuse checks, on Linux and macOS alike), not by parsing
``/proc`` by hand.

Fault injection: with ``PERFCAST_TEST_KILL_AFTER_SPAWN=1`` in its environment perfcast
SIGKILLs itself right after starting the first mpirun, before it records the session —
the window the token covers (tests/test_store_durability.py uses it).

Runs go one at a time by default: runs that share the machine disturb each other's
timings.

Each run is stored with the cores it had (:meth:`LocalBackend.cores_for`): the cores of
perfcast's affinity mask, divided among the ``parallel`` runs the backend keeps going at
once. A run at a rank count above that waited for cores; with ``--parallel 2`` on 8 cores,
a run has 4 (its fair share while the other slot is busy, as it is until the campaign's
last runs).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psutil

from perfcast.errors import PerfcastError
from perfcast.measure.runner import PROFILE_DIR_VARIABLE, Backend, Job, finished_record
from perfcast.measure.store import DiskFullError, InflightRun, RunRecord, disk_full_message

KILL_GRACE = 5.0
"""Seconds between SIGTERM and SIGKILL when a run is stopped."""
POLL_INTERVAL = 0.05
"""Seconds between checks of running processes."""
RUNTIME_VARIABLES = ("PERFCAST_CPU_TIME", "PERFCAST_FILTER")
"""Settings of the measurement runtime (``measure/README.md``) that reach every rank when
set in perfcast's environment (mpirun ``-x``; exported in a Slurm run script)."""
RUN_TOKEN_VARIABLE = "PERFCAST_RUN_TOKEN"
"""Environment variable that marks every process of one run (a fresh random token per
attempt), so the processes can be found after perfcast died without knowing their ids."""
KILL_AFTER_SPAWN_VARIABLE = "PERFCAST_TEST_KILL_AFTER_SPAWN"
"""Fault injection for tests: perfcast SIGKILLs itself right after starting mpirun."""
ORPHAN_WAIT = 10.0
"""Seconds :meth:`LocalBackend.recover` waits for the processes it killed to be gone."""


def available_cores() -> int:
    """Cores this process may use (the affinity mask, which containers narrow)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def runtime_settings(environment: Mapping[str, str] | None = None) -> dict[str, str]:
    """The :data:`RUNTIME_VARIABLES` set in ``environment`` (default: this process's)."""
    environment = os.environ if environment is None else environment
    return {v: environment[v] for v in RUNTIME_VARIABLES if v in environment}


def mpirun_command(
    job: Job,
    *,
    mpirun: str = "mpirun",
    cores: int | None = None,
    forward: Sequence[str] = (),
    environment: Mapping[str, str] | None = None,
) -> list[str]:
    """``mpirun [--allow-run-as-root] [--oversubscribe] -np P [-x VAR] ... program args``.

    ``--oversubscribe`` only when the ranks exceed the cores, so Open MPI's own check that
    a job fits stays on for runs that should fit. The profile directory and the runtime
    settings set in ``environment`` (default: this process's) are forwarded; an unset
    variable is not, since mpirun warns about it.
    """
    command = [mpirun]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-run-as-root")
    if job.ranks > (cores or available_cores()):
        command.append("--oversubscribe")
    command += ["-np", str(job.ranks)]
    for variable in (PROFILE_DIR_VARIABLE, *runtime_settings(environment), *forward):
        command += ["-x", variable]
    return [*command, *job.mpirun_args, *job.argv]


@dataclass
class _Running:
    job: Job
    process: subprocess.Popen
    started: float
    deadline: float


class LocalBackend(Backend):
    """Runs jobs with mpirun on this machine, ``parallel`` at a time."""

    name = "local"

    def __init__(
        self, *, parallel: int = 1, mpirun: str = "mpirun", kill_grace: float = KILL_GRACE
    ):
        if shutil.which(mpirun) is None:
            raise PerfcastError(
                f"{mpirun!r} is not on PATH; install Open MPI (Debian: openmpi-bin "
                "libopenmpi-dev) or run with --backend slurm"
            )
        self.parallel = parallel
        self.mpirun = mpirun
        self.kill_grace = kill_grace
        self.cores = available_cores()
        self._running: list[_Running] = []

    def cores_for(self, ranks: int) -> int:
        """This machine's cores divided among the ``parallel`` runs at once, at least one
        (with more parallel runs than cores a run gets less than a core; the store counts
        whole cores, so such runs are only recorded as oversubscribed from 2 ranks on)."""
        return max(1, self.cores // self.parallel)

    def submit(self, jobs: Sequence[Job]) -> list[tuple[Job, dict[str, Any]]]:
        started = []
        for job in jobs[: max(0, self.parallel - len(self._running))]:
            started.append((job, self._start(job)))
        return started

    def command(self, job: Job) -> list[str]:
        """The launcher line of ``job`` (a subclass runs it under another launcher)."""
        return mpirun_command(job, mpirun=self.mpirun, cores=self.cores)

    def _prepare(self, job: Job) -> None:
        """Write what the launcher reads from the run's fresh scratch directory (nothing
        for mpirun; a host file for smpirun)."""

    def _start(self, job: Job) -> dict[str, Any]:
        handle: dict[str, Any] = {"host": socket.gethostname(), "token": uuid.uuid4().hex}
        if self.announce is not None:
            self.announce(job, handle)
        env = dict(
            os.environ,
            **{PROFILE_DIR_VARIABLE: str(job.profile_dir), RUN_TOKEN_VARIABLE: handle["token"]},
        )
        command = self.command(job)
        try:
            if job.directory.exists():
                shutil.rmtree(job.directory)
            job.profile_dir.mkdir(parents=True)
            self._prepare(job)
            with (
                open(job.directory / "stdout", "wb") as out,
                open(job.directory / "stderr", "wb") as err,
            ):
                process = subprocess.Popen(
                    command,
                    cwd=job.cwd,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                )
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise DiskFullError(
                    disk_full_message(
                        job.directory, "the runs' scratch area", f"run {job.key} was not started"
                    )
                ) from None
            raise PerfcastError(f"cannot start {command[0]}: {exc}") from None
        if os.environ.get(KILL_AFTER_SPAWN_VARIABLE) == "1":
            os.kill(os.getpid(), signal.SIGKILL)
        now = time.time()
        self._running.append(_Running(job, process, now, time.monotonic() + job.timeout))
        return {**handle, "session": process.pid, "start_time": _start_time(process.pid)}

    def running(self) -> int:
        return len(self._running)

    def wait(self) -> list[RunRecord]:
        while True:
            finished = []
            for entry in list(self._running):
                code = entry.process.poll()
                timed_out = code is None and time.monotonic() > entry.deadline
                if timed_out:
                    code = self._stop(entry.process)
                if code is None:
                    continue
                self._running.remove(entry)
                # ranks of a run whose mpirun already exited must not outlive it
                kill_session(entry.process.pid, signal.SIGKILL)
                record = finished_record(
                    entry.job,
                    code,
                    started=entry.started,
                    finished=time.time(),
                    timed_out=timed_out,
                    backend=self.name,
                    cores=self.cores_for(entry.job.ranks),
                )
                if record.ok:  # everything is in the record; failures keep their files
                    shutil.rmtree(entry.job.directory, ignore_errors=True)
                finished.append(record)
            if finished:
                return finished
            time.sleep(POLL_INTERVAL)

    def _stop(self, process: subprocess.Popen) -> int:
        """SIGTERM to mpirun, then SIGKILL to everything in its session."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(self.kill_grace)
        kill_session(process.pid, signal.SIGKILL)
        return process.wait()

    def recover(self, inflight: Sequence[InflightRun], jobs: dict[str, Job]) -> list[Job]:
        """Stop what a killed perfcast left running; all of it is measured again.

        Each run's processes are found by its session and by the token in their
        environment (a run recorded before its mpirun's id was known has only the token),
        and the backend waits until they are gone, so no orphan shares the cores with the
        runs measured next. Runs started on another host cannot be stopped from here.
        """
        host = socket.gethostname()
        elsewhere = sorted(
            {str(e.handle["host"]) for e in inflight if e.handle.get("host", host) != host}
        )
        if elsewhere:
            raise PerfcastError(
                f"runs of this campaign were in flight on host {elsewhere[0]} when perfcast "
                f"stopped; resume there (this host, {host}, cannot stop their processes)"
            )
        deadline = time.monotonic() + ORPHAN_WAIT
        while True:
            killed = 0
            for entry in inflight:
                killed += _kill_run(entry.handle)
            if not killed or time.monotonic() > deadline:
                return []
            time.sleep(POLL_INTERVAL)

    def shutdown(self) -> None:
        for entry in self._running:
            self._stop(entry.process)
        self._running.clear()


def _kill_run(handle: Mapping[str, Any]) -> int:
    """SIGKILL every live process of the run ``handle`` describes; how many there were."""
    count = 0
    session = handle.get("session")
    if isinstance(session, int):
        count += kill_session(session, signal.SIGKILL, since=handle.get("start_time"))
    token = handle.get("token")
    if isinstance(token, str):
        for pid in processes_with_token(token):
            with contextlib.suppress(psutil.Error, ProcessLookupError, PermissionError):
                process = psutil.Process(pid)
                since = process.create_time()
                count += kill_session(os.getsid(pid), signal.SIGKILL, since=since)
                process.kill()
                count += 1
    return count


def processes_with_token(token: str) -> list[int]:
    """Live processes whose environment carries ``token`` as :data:`RUN_TOKEN_VARIABLE`."""
    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if process.environ().get(RUN_TOKEN_VARIABLE) == token and _live(process):
                found.append(process.pid)
    return found


def _live(process: psutil.Process) -> bool:
    """Whether ``process`` still runs: a zombie has exited and only waits to be reaped."""
    return process.status() != psutil.STATUS_ZOMBIE


def _start_time(pid: int) -> float | None:
    """When ``pid`` started (seconds since the epoch, as psutil counts), or None."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def kill_session(session: int, sig: int, *, since: float | None = None) -> int:
    """Send ``sig`` to every live process of a session; returns how many there were.

    By session rather than psutil's ``children(recursive=True)``: ranks whose mpirun died
    (perfcast killed, mpirun crashed) are re-parented to init and drop out of the process
    tree, but keep mpirun's session. ``since`` (a start time, as :func:`_start_time`
    gives) skips processes that started before the session's leader did — a recycled
    session id belongs to somebody else.
    """
    count = 0
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error, ProcessLookupError, PermissionError):
            if os.getsid(process.pid) != session or not _live(process):
                continue
            if since is not None and process.create_time() < since:
                continue
            process.send_signal(sig)
            count += 1
    return count
