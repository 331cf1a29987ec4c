"""The Slurm backend: runs as job arrays (or in one allocation) with ``mpirun`` inside.

Every attempt gets a small shell script in its scratch directory that runs the program
under ``timeout`` and, when it is done, writes ``status`` (exit code, start and end time)
by renaming a temporary file — so a ``status`` file is always complete. perfcast submits
the scripts and collects each run the moment its ``status`` appears, while other jobs are
still queued or running.

Modes (``[slurm] mode``):

``array`` (default)
    One job array per rank count (array tasks share their resource request), one task
    per run; ``max_parallel`` caps how many tasks run at once.
``allocation``
    One job sized for the largest rank count that runs the scripts one after another:
    for clusters that limit the number of jobs, or when runs must share nodes' state.

A job that leaves the queue without writing ``status`` (cancelled, node failure, hit the
Slurm time limit) is reported as vanished and retried like any failed run. A job that
stays pending for a reason that needs a different request, not patience (more tasks than
the partition has, a time limit above the partition's, an invalid account:
:data:`UNSCHEDULABLE_REASONS`), is cancelled after :data:`UNSCHEDULABLE_GRACE` and its runs
fail with that reason, instead of waiting forever. Because runs
keep going on the cluster when perfcast is killed, a resumed campaign first collects what
finished meanwhile and reattaches to jobs still queued or running (their ids are in the
store), instead of submitting them again.
"""

from __future__ import annotations

import contextlib
import math
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from perfcast.appspec import SlurmSpec
from perfcast.errors import PerfcastError
from perfcast.measure.local import KILL_GRACE, mpirun_command, runtime_settings
from perfcast.measure.runner import PROFILE_DIR_VARIABLE, Backend, Job, finished_record
from perfcast.measure.store import InflightRun, RunRecord

POLL_INTERVAL = 1.0
"""Seconds between looks at the status files (and at ``squeue``)."""
VANISH_GRACE = 5.0
"""Seconds a job may be gone from ``squeue`` before its missing status counts as lost (a
shared file system can show the status file late)."""
TIME_LIMIT_MARGIN = 60.0
"""Seconds added to a run's timeout for Slurm's time limit: start-up and clean-up."""
UNSCHEDULABLE_REASONS = {
    "BadConstraints": "its constraints cannot be satisfied",
    "PartitionConfig": "it asks for more than the partition is configured to give",
    "PartitionNodeLimit": "it needs more nodes than the partition allows (or has up)",
    "PartitionTimeLimit": "its time limit exceeds the partition's",
    "InvalidAccount": "its account is invalid",
    "InvalidQOS": "its QOS is invalid",
    "AccountNotAllowed": "its account may not use the partition",
}
"""Pending reasons (``squeue %r``) that a changed request cures, not waiting: Slurm keeps
such a job queued forever. Reasons that pass with time (``Resources``, ``Priority``,
``ReqNodeNotAvail`` for nodes down or reserved, ``QOSGrp*`` limits) are not here."""
UNSCHEDULABLE_GRACE = 60.0
"""Seconds a job may pend for one of :data:`UNSCHEDULABLE_REASONS` before it is cancelled:
an administrator may be changing the partition, and ``PartitionNodeLimit`` also shows
while nodes are down."""
TIMEOUT_EXIT = 124
KILLED_EXIT = 128 + 9


@dataclass
class _Submitted:
    job: Job
    slurm_id: str
    """``123_4`` for array task 4 of job 123; ``123`` for a run inside an allocation."""
    gone_since: float | None = None
    stuck_since: float | None = None
    """When the job was first seen pending for one of :data:`UNSCHEDULABLE_REASONS`."""


class SlurmBackend(Backend):
    """Submits jobs with ``sbatch`` and watches them with ``squeue``."""

    name = "slurm"

    def __init__(
        self,
        settings: SlurmSpec,
        batch_directory: Path,
        *,
        job_name: str = "perfcast",
        poll_interval: float = POLL_INTERVAL,
        unschedulable_grace: float = UNSCHEDULABLE_GRACE,
    ):
        for tool in ("sbatch", "squeue", "scancel"):
            if shutil.which(tool) is None:
                raise PerfcastError(
                    f"{tool!r} is not on PATH; --backend slurm needs the Slurm client tools "
                    "(Debian: slurm-client) and a cluster to talk to"
                )
        self.settings = settings
        self.batch_directory = batch_directory
        self.job_name = job_name
        self.poll_interval = poll_interval
        self.unschedulable_grace = unschedulable_grace
        self._running: list[_Submitted] = []
        self._slurm_jobs: set[str] = set()
        self._batches = 0

    # -- submitting ------------------------------------------------------------------------

    def submit(self, jobs: Sequence[Job]) -> list[tuple[Job, dict[str, Any]]]:
        for job in jobs:
            _write_run_script(job)
        started: list[tuple[Job, str]] = []
        if self.settings.mode == "allocation":
            started += self._submit_allocation(list(jobs))
        else:
            by_ranks: dict[int, list[Job]] = {}
            for job in jobs:
                by_ranks.setdefault(job.ranks, []).append(job)
            for group in by_ranks.values():
                started += self._submit_array(group)
        for job, slurm_id in started:
            self._running.append(_Submitted(job, slurm_id))
        return [
            (job, {"job": slurm_id, "directory": str(job.directory)}) for job, slurm_id in started
        ]

    def _submit_array(self, jobs: list[Job]) -> list[tuple[Job, str]]:
        batch = self._new_batch()
        manifest = batch / "runs"
        manifest.write_text("".join(f"{job.directory / 'run.sh'}\n" for job in jobs))
        script = batch / "array.sh"
        script.write_text(
            "#!/bin/bash\n"
            "# one perfcast run per array task: line SLURM_ARRAY_TASK_ID+1 of the manifest\n"
            f'exec bash "$(sed -n "$((SLURM_ARRAY_TASK_ID + 1))p" {shlex.quote(str(manifest))})"\n'
        )
        limit = f"%{self.settings.max_parallel}" if self.settings.max_parallel else ""
        job_id = self._sbatch(
            script,
            batch,
            [
                f"--array=0-{len(jobs) - 1}{limit}",
                f"--ntasks={jobs[0].ranks}",
                f"--time={_minutes(max(j.timeout for j in jobs) + TIME_LIMIT_MARGIN)}",
                f"--output={batch / 'slurm-%A_%a.out'}",
            ],
        )
        return [(job, f"{job_id}_{index}") for index, job in enumerate(jobs)]

    def _submit_allocation(self, jobs: list[Job]) -> list[tuple[Job, str]]:
        batch = self._new_batch()
        script = batch / "allocation.sh"
        runs = "".join(f"bash {shlex.quote(str(job.directory / 'run.sh'))}\n" for job in jobs)
        script.write_text("#!/bin/bash\n# perfcast runs, one after another\n" + runs)
        total = sum(job.timeout + TIME_LIMIT_MARGIN for job in jobs)
        job_id = self._sbatch(
            script,
            batch,
            [
                f"--ntasks={max(job.ranks for job in jobs)}",
                f"--time={_minutes(total)}",
                f"--output={batch / 'slurm-%j.out'}",
            ],
        )
        return [(job, job_id) for job in jobs]

    def _new_batch(self) -> Path:
        self._batches += 1
        batch = self.batch_directory / f"batch-{os.getpid()}-{self._batches}"
        batch.mkdir(parents=True, exist_ok=True)
        return batch

    def _sbatch(self, script: Path, batch: Path, options: list[str]) -> str:
        command = ["sbatch", "--parsable", f"--job-name={self.job_name}", f"--chdir={batch}"]
        if self.settings.partition:
            command.append(f"--partition={self.settings.partition}")
        if self.settings.account:
            command.append(f"--account={self.settings.account}")
        command += [*options, *self.settings.sbatch_args, str(script)]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise PerfcastError(
                f"sbatch failed (exit status {result.returncode}): "
                f"{(result.stderr or result.stdout).strip()}\n  command: {shlex.join(command)}"
            )
        job_id = result.stdout.strip().split(";")[0]
        self._slurm_jobs.add(job_id)
        return job_id

    # -- collecting ------------------------------------------------------------------------

    def running(self) -> int:
        return len(self._running)

    def wait(self) -> list[RunRecord]:
        while True:
            finished = self._collect()
            if finished:
                return finished
            time.sleep(self.poll_interval)

    def _collect(self) -> list[RunRecord]:
        finished = []
        queued: dict[str, str] | None = None
        now = time.time()
        for entry in list(self._running):
            status = _read_status(entry.job.directory)
            unschedulable = None
            if status is None:
                if queued is None:
                    queued = self._queued()
                if _in_queue(entry.slurm_id, queued):
                    entry.gone_since = None
                    unschedulable = self._unschedulable(entry, queued, now)
                    if unschedulable is None:
                        continue
                else:
                    entry.gone_since = entry.gone_since or now
                    if now - entry.gone_since < VANISH_GRACE:
                        continue
                code: int | None = None
                started = finished_at = now
                timed_out = False
            else:
                code, started, finished_at = status
                timed_out = code in (TIMEOUT_EXIT, KILLED_EXIT) and (
                    finished_at - started >= entry.job.timeout
                )
            self._running.remove(entry)
            record = finished_record(
                entry.job,
                code,
                started=started,
                finished=finished_at,
                timed_out=timed_out,
                backend=self.name,
                job_id=entry.slurm_id,
                cores=self.cores_for(entry.job.ranks),
            )
            if unschedulable is not None:
                record = replace(record, reason=unschedulable)
            if record.ok:
                shutil.rmtree(entry.job.directory, ignore_errors=True)
            finished.append(record)
        return finished

    def _unschedulable(self, entry: _Submitted, queued: dict[str, str], now: float) -> str | None:
        """The failure reason of a job pending too long for a reason no wait cures (and
        the job cancelled); ``None`` while it may still start."""
        pending = _queue_reason(entry.slurm_id, queued)
        if pending not in UNSCHEDULABLE_REASONS:
            entry.stuck_since = None
            return None
        entry.stuck_since = entry.stuck_since or now
        if now - entry.stuck_since < self.unschedulable_grace:
            return None
        with contextlib.suppress(OSError):
            subprocess.run(["scancel", entry.slurm_id], capture_output=True)
        partition = (
            f"partition {self.settings.partition!r}"
            if self.settings.partition
            else ("the default partition")
        )
        return (
            f"Slurm cannot start it: pending with reason {pending} for "
            f"{now - entry.stuck_since:.0f} s ({UNSCHEDULABLE_REASONS[pending]}; "
            f"{entry.job.ranks} tasks on {partition}); cancelled. Choose rank counts the "
            "partition can give, or another partition or account in [slurm]"
        )

    def _queued(self) -> dict[str, str]:
        """This user's queued or running jobs and array tasks (``123``, ``123_4``), each
        with its pending reason (``None`` for running jobs)."""
        result = subprocess.run(
            ["squeue", "--noheader", "--array", "--me", "--format=%i %r"],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise PerfcastError(f"squeue failed: {(result.stderr or result.stdout).strip()}")
        queued = {}
        for line in result.stdout.splitlines():
            job, _, reason = line.strip().partition(" ")
            if job:
                queued[job] = reason.strip()
        return queued

    # -- crashes and interrupts ------------------------------------------------------------

    def recover(self, inflight: Sequence[InflightRun], jobs: dict[str, Job]) -> list[Job]:
        """Reattach to runs that finished or are still queued since perfcast was killed."""
        queued = self._queued()
        recovered = []
        for entry in inflight:
            slurm_id = entry.handle.get("job")
            job = jobs.get(entry.key)
            if job is None or not isinstance(slurm_id, str):
                continue
            job = replace(job, attempt=entry.attempt)
            alive = _in_queue(slurm_id, queued)
            if alive or _read_status(job.directory) is not None:
                self._running.append(_Submitted(job, slurm_id))
                self._slurm_jobs.add(slurm_id.split("_")[0])
                recovered.append(job)
        return recovered

    def cores_for(self, ranks: int) -> int:
        """One core per rank: every run's job asks Slurm for ``--ntasks`` = its ranks (an
        ``allocation`` is sized for the largest run, and its runs go one at a time), and
        Slurm gives each task a CPU of its own (unless ``sbatch_args`` says otherwise, as
        ``--overcommit`` does)."""
        return ranks

    def shutdown(self) -> None:
        if self._slurm_jobs:
            with contextlib.suppress(OSError):
                subprocess.run(["scancel", *sorted(self._slurm_jobs)], capture_output=True)
        self._running.clear()


def _in_queue(slurm_id: str, queued: dict[str, str]) -> bool:
    return slurm_id in queued or slurm_id.split("_")[0] in queued


def _queue_reason(slurm_id: str, queued: dict[str, str]) -> str:
    """The pending reason of an array task or job (a pending array shows as ``123_[0-4]``
    in some Slurm versions, so the whole job's entry counts too)."""
    if slurm_id in queued:
        return queued[slurm_id]
    base = slurm_id.split("_")[0]
    for job, reason in queued.items():
        if job == base or job.startswith(base + "_["):
            return reason
    return ""


def _minutes(seconds: float) -> int:
    return max(1, math.ceil(seconds / 60))


def _write_run_script(job: Job) -> None:
    """``run.sh``: the run under ``timeout``, then an atomically written ``status``."""
    if job.directory.exists():
        shutil.rmtree(job.directory)
    job.profile_dir.mkdir(parents=True)
    directory = shlex.quote(str(job.directory))
    # inside an allocation the ranks are the allocation's slots: no oversubscription
    command = shlex.join(mpirun_command(job, cores=job.ranks))
    # the runtime's settings as perfcast saw them, whatever sbatch --export passes on
    settings = "".join(
        f"export {name}={shlex.quote(value)}\n" for name, value in runtime_settings().items()
    )
    (job.directory / "run.sh").write_text(
        "#!/bin/bash\n"
        f"# perfcast run {job.key}, attempt {job.attempt}\n"
        f"cd {shlex.quote(str(job.cwd))} || exit 1\n"
        f"export {PROFILE_DIR_VARIABLE}={shlex.quote(str(job.profile_dir))}\n"
        f"{settings}"
        "start=$(date +%s.%N)\n"
        f"timeout --kill-after={KILL_GRACE:g} {job.timeout:g} {command} "
        f"</dev/null >{directory}/stdout 2>{directory}/stderr\n"
        "code=$?\n"
        "end=$(date +%s.%N)\n"
        f'echo "$code $start $end" > {directory}/status.tmp\n'
        f"mv {directory}/status.tmp {directory}/status\n"
    )


def _read_status(directory: Path) -> tuple[int, float, float] | None:
    try:
        fields = (directory / "status").read_text().split()
        return int(fields[0]), float(fields[1]), float(fields[2])
    except (OSError, ValueError, IndexError):
        return None
