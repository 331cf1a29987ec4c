"""A measurement campaign end to end: build, plan, run what is missing, store everything.

:func:`measure` is what ``perfcast measure`` calls. It is safe to call again on the same
store (``resume``): runs already stored are skipped, runs a killed perfcast left in flight
are stopped or collected by the backend, and the rest is measured. Failed runs are stored
with their reason and reported; ``retry_failed`` gives them another round. Resuming a
damaged store first recovers every run that can still be read (see
:mod:`~perfcast.measure.store`); a full file system under the store or its scratch area
stops the campaign with a message naming it, before anything is stored half.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

from perfcast.appspec import BUILD_PLACEHOLDER, AppSpec, expand
from perfcast.errors import InputError, PerfcastError
from perfcast.experiment.metrics import CPU_TIME_METRIC
from perfcast.measure import copies, overhead
from perfcast.measure.build import BUILD_RECORD_VARIABLE, compiler_note
from perfcast.measure.counting import (
    cost_note,
    counting_directory,
    counting_plan,
    counting_spec,
    counting_store,
    skip_reason,
)
from perfcast.measure.design import ExperimentPlan, plan_from_spec
from perfcast.measure.elf_symbols import ElfFile
from perfcast.measure.oversubscription import plan_note
from perfcast.measure.reader import read_sqlite
from perfcast.measure.runner import (
    LOW_SPACE_BYTES,
    Backend,
    ExecutionReport,
    Job,
    Progress,
    execute,
)
from perfcast.measure.store import (
    FAILED,
    BuildRecord,
    CampaignStore,
    DiskFullError,
    StoredRun,
    disk_full_message,
    free_bytes,
)

BUILD_LOG_LINES = 30
"""Lines of a failed build's output shown in the error."""


@dataclass
class CampaignResult:
    """How a call of :func:`measure` went, and what the store now holds."""

    store: Path
    planned: int
    """Runs in the plan."""
    already_stored: int
    """Runs that were in the store before this call and were not run again."""
    report: ExecutionReport
    failed: list[StoredRun]
    """Every failed run in the store (from this call or earlier ones)."""
    stored_ok: int
    counting: CampaignResult | None = None
    """The counting pass (:mod:`~perfcast.measure.counting`), where one ran."""
    notes: tuple[str, ...] = ()
    """What the user should know: the instrumentation's calibrated cost and the campaign's
    estimated overhead, the counting pass's cost, or why there was none."""
    counting_failed: bool = False
    """The counting pass stopped with an error (its note says which)."""

    @property
    def complete(self) -> bool:
        """Every run of both passes succeeded."""
        counting = self.counting is None or self.counting.complete
        return not self.failed and not self.counting_failed and counting

    def summary(self) -> str:
        lines = [
            f"{self.store}: {self.stored_ok} runs ok, {len(self.failed)} failed "
            f"({self.planned} planned, {self.already_stored} already stored, "
            f"{self.report.succeeded + len(self.report.failed)} run now, "
            f"{len(self.report.retried)} attempts retried)"
        ]
        if self.failed:
            lines.append("failed runs (use --resume --retry-failed to run them again):")
            for run in self.failed:
                lines.append(f"  {run.key}: {run.reason} [{run.attempts} attempt(s)]")
                last = [line for line in run.stderr_tail.splitlines() if _is_text(line)][-1:]
                if last:
                    lines.append(f"    stderr: {last[0].strip()[:200]}")
        if self.report.stopped is not None:
            lines.append(
                f"stopped early: {self.report.not_started} run(s) not started, since every "
                "run of this build fails the same way; --resume runs them after the fix"
            )
        if self.counting is not None:
            lines.append(self.counting.summary())
        lines += self.notes
        return "\n".join(lines)


def _is_text(line: str) -> bool:
    """Not a blank line or an MPI banner rule (``-----``)."""
    return any(c.isalnum() for c in line)


def scratch_directory(store: Path) -> Path:
    """Where runs write their profiles and output until they are stored (next to the
    store, so a cluster's compute nodes see it when the store is on a shared file system).
    Absolute: runs start in the app's directory (or a batch job's), where a relative
    ``--store`` given from elsewhere named another place and every profile was lost."""
    return store.absolute().with_name(store.name + ".runs")


SMPI_WRAPPERS = {"mpicc": "smpicc", "mpicxx": "smpicxx", "mpic++": "smpicxx", "mpiCC": "smpicxx"}
"""The SimGrid wrapper that replaces a spec's MPI compiler wrapper when the campaign runs on
a virtual cluster, so one perfcast.toml serves real and virtual campaigns."""
_WRAPPED_COMPILER = re.compile(
    r"(\{"
    + BUILD_PLACEHOLDER
    + r"\}\s+)("
    + "|".join(map(re.escape, SMPI_WRAPPERS))
    + r")(?=[\s'\"]|$)"
)
"""``{perfcast_build} mpicc`` in a build command: the compiler the placeholder wraps."""


def perfcast_build_prefix(spec: AppSpec, *, smpi: bool = False) -> list[str]:
    """``python -m perfcast build [--counters] [--filter F [--keep-inlined]] [--smpi] --``"""
    prefix = [sys.executable, "-m", "perfcast", "build"]
    if smpi:
        prefix.append("--smpi")
    if spec.build is not None and spec.build.counters:
        prefix.append("--counters")
    if spec.build is not None and spec.build.filter is not None:
        prefix += ["--filter", str(spec.build.filter)]
        if spec.build.keep_inlined:
            prefix.append("--keep-inlined")
    return [*prefix, "--"]


def build_program(
    spec: AppSpec, stream: IO[str] | None = None, *, smpi: bool = False
) -> list[BuildRecord]:
    """Build the program through ``perfcast build`` as ``[build]`` says; with ``smpi``, for
    SimGrid SMPI (``perfcast build --smpi``, the MPI wrapper replaced by SimGrid's).

    Returns what each link reported of its compilers (:data:`BUILD_RECORD_VARIABLE`; a
    make may link several programs), and says on ``stream`` where the program measured is
    not built by the user's own compiler (:func:`~perfcast.measure.build.compiler_note`):
    the build's output is shown only when it fails.
    """
    build = spec.build
    if build is None:
        return []
    prefix = perfcast_build_prefix(spec, smpi=smpi)
    if build.command is not None:
        template = build.command
        if smpi:
            template = _WRAPPED_COMPILER.sub(
                lambda found: found.group(1) + SMPI_WRAPPERS[found.group(2)], template
            )
        command: str | list[str] = template.replace(
            "{" + BUILD_PLACEHOLDER + "}", shlex.join(prefix)
        )
        shown = command
    else:
        assert build.output is not None
        compiler = SMPI_WRAPPERS.get(build.compiler, build.compiler) if smpi else build.compiler
        command = [*prefix, compiler, *build.flags, *build.sources, "-o", build.output]
        shown = shlex.join(command)
    if stream is not None:
        print(f"build: {shown}", file=stream, flush=True)
    with tempfile.TemporaryDirectory(prefix="perfcast-build-") as scratch:
        records = Path(scratch) / "builds.jsonl"
        try:
            result = subprocess.run(
                command,
                shell=isinstance(command, str),
                cwd=spec.directory,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                env={**os.environ, BUILD_RECORD_VARIABLE: str(records)},
            )
        except OSError as exc:
            raise PerfcastError(f"cannot run the build in {spec.directory}: {exc}") from None
        if result.returncode != 0:
            output = (result.stdout + result.stderr).strip().splitlines()[-BUILD_LOG_LINES:]
            raise PerfcastError(
                f"the build failed (exit status {result.returncode}) in {spec.directory}:\n"
                f"  {shown}\n" + "\n".join("  | " + line for line in output)
            )
        lines = records.read_text(encoding="utf-8").splitlines() if records.is_file() else []
    built = [BuildRecord(**json.loads(line)) for line in lines]
    notes = dict.fromkeys(note for note in map(compiler_note, built) if note is not None)
    for note in notes if stream is not None else ():
        print(f"build: note: {note}", file=stream, flush=True)
    return built


def make_jobs(spec: AppSpec, plan: ExperimentPlan, scratch: Path, skip: set[str]) -> list[Job]:
    """A first attempt for every run of the plan not in ``skip``."""
    jobs = []
    for run in plan.runs():
        if run.key in skip:
            continue
        argv = tuple(shlex.split(expand(spec.run.command, run.point)))
        jobs.append(
            Job(
                run=run,
                attempt=1,
                argv=argv,
                cwd=spec.directory,
                directory=scratch / re.sub(r"[^A-Za-z0-9_.=-]+", "_", run.key),
                timeout=spec.run.timeout,
                expect_profiles=spec.build is not None,
                expect_counters=spec.build is not None and spec.build.counters,
                expect_cpu_time=spec.build is not None
                and any(metric.startswith(CPU_TIME_METRIC) for metric in spec.metrics),
                mpirun_args=spec.run.mpirun_args,
            )
        )
    return jobs


def check_space(store: Path) -> None:
    """Refuse to start with the store's or the scratch area's file system (nearly) full:
    every run would fail for want of space, not for anything the program did."""
    for path, what in (
        (store, "the campaign store"),
        (scratch_directory(store), "the runs' scratch area"),
    ):
        free = free_bytes(path)
        if free is not None and free < LOW_SPACE_BYTES:
            raise DiskFullError(disk_full_message(path, what, "no run was started"))


CPU_TIME_OVERHEAD = (
    "PERFCAST_CPU_TIME=1 with unfiltered instrumentation: reading the thread CPU clock at "
    "every instrumented call costs about 4x the run time; build with a taint filter "
    '([build] filter = "taint-profile.json", or PERFCAST_FILTER) so only the functions '
    "that matter are measured"
)


def cpu_time_overhead_warning(spec: AppSpec) -> str | None:
    """The warning for CPU time measured at every function of an unfiltered build (None:
    CPU time is off, the build is filtered, or perfcast does not build the program)."""
    if os.environ.get("PERFCAST_CPU_TIME") != "1" or spec.build is None:
        return None
    if spec.build.filter is not None or os.environ.get("PERFCAST_FILTER"):
        return None
    return CPU_TIME_OVERHEAD


def check_program(spec: AppSpec, jobs: Sequence[Job], smpi: bool | None = None) -> None:
    """Fail early, with the fix, when the run command's program is missing, or (``smpi``
    not None: the program was not built now) was built for the other kind of backend."""
    if not jobs:
        return
    program = jobs[0].argv[0] if jobs[0].argv else ""
    if "/" in program:
        path = spec.directory / program
        if not path.exists():
            raise InputError(
                f"the run command's program {program} does not exist in {spec.directory}; "
                "check [build] output and [run] command",
                path=spec.path,
            )
        if smpi is not None:
            _check_built_for(path, smpi, spec)
    elif shutil.which(program) is None:
        raise InputError(
            f"the run command's program {program!r} is not on PATH; write ./{program} for a "
            "program in the app directory",
            path=spec.path,
        )


def _check_built_for(program: Path, smpi: bool, spec: AppSpec) -> None:
    """Refuse a program built for SimGrid (``perfcast build --smpi`` links libsimgrid) on
    a real backend, or one built for MPI on ``--backend smpi``: with ``--no-build`` after a
    campaign on the other kind, every run crashed (exit 139) without a hint why."""
    try:
        libraries = ElfFile(program).needed_libraries()
    except InputError:
        return  # a script or another format: the runs will say what it is
    simulated = any(name.startswith("libsimgrid") for name in libraries)
    if simulated == smpi:
        return
    built, wanted = ("for SimGrid (SMPI)", "a real") if simulated else ("for MPI", "the smpi")
    raise InputError(
        f"the program {program.name} was built {built}, but this campaign runs on {wanted} "
        "backend: build it again for this backend (leave out --no-build)",
        path=spec.path,
    )


def measure(
    spec: AppSpec,
    backend: Backend,
    *,
    store_path: Path | None = None,
    resume: bool = False,
    retry_failed: bool = False,
    build: bool = True,
    design: str | None = None,
    stream: IO[str] | None = None,
    counting_pass: bool = True,
    plan: ExperimentPlan | None = None,
) -> CampaignResult:
    """Run the campaign ``spec`` describes into its store, then (``counting_pass``, where
    :func:`~perfcast.measure.counting.skip_reason` allows) its counting pass into
    ``app.counts.sqlite``; see the module docstring. ``plan`` replaces the plan of the
    spec's design: the runs a round of ``perfcast measure --until`` chose
    (:mod:`perfcast.workflows.design`), measured by the same engine into the same store."""
    store_path = Path(store_path or spec.store)
    problem = backend.launcher_arguments_problem(spec.run.mpirun_args)
    if problem is not None:
        raise InputError(problem, path=spec.path)
    # a given plan is a round of ``--until``: its campaign's first call said how it is set
    # up, and saying it again every round buries the rounds' own lines
    setup = stream if plan is None else None
    if plan is None:
        plan = plan_from_spec(spec, design)
    if stream is not None:
        # the plan may differ from the spec's grid (a taint profile reduced it): say why;
        # and runs with more ranks than cores measure waiting: say so before they run
        shared = plan_note((run.ranks for run in plan.runs()), backend.cores_for)
        for note in [*plan.notes, *([shared] if shared else [])]:
            print(f"plan: {note}", file=stream, flush=True)
    skipped: str | None = ""
    if counting_pass:
        skipped = skip_reason(spec, store_path, virtual=backend.smpi)
    counts_path = counting_store(store_path)
    stores = [store_path, *([counts_path] if skipped is None else [])]
    if not resume:
        _refuse_stored_runs(stores)
    overhead = cpu_time_overhead_warning(spec) if setup is not None else None
    if overhead:
        print(f"warning: {overhead}", file=setup, flush=True)
    if setup is not None and skipped is None:
        print(
            f"plan: then a counting pass: the same build with counters, once per point, "
            f"into {counts_path} (the exact counts of the effort priors; "
            "[build] counting_pass = false turns it off)",
            file=setup,
            flush=True,
        )
    timed = _in_smpi_copy(spec, build, setup) if backend.smpi else spec
    result = _campaign(timed, backend, plan, store_path, resume, retry_failed, build, stream)
    result = replace(result, notes=_overhead_notes(spec, backend, store_path))
    if skipped:
        return replace(result, notes=(*result.notes, f"no counting pass: {skipped}"))
    if skipped is not None:
        return result
    if result.report.stopped is not None:
        return replace(
            result, notes=(*result.notes, "no counting pass: the timing build's runs failed")
        )
    if not build and not counting_directory(store_path).is_dir():
        return replace(
            result,
            notes=(
                *result.notes,
                f"no counting pass: --no-build, and no counting build in "
                f"{counting_directory(store_path)} from an earlier perfcast measure",
            ),
        )
    spec_of_counts = counting_spec(spec, store_path)
    try:
        if build:
            copies.copy_app(spec, store_path, copies.COUNTING)
        counted = _campaign(
            spec_of_counts,
            backend,
            counting_plan(plan),
            counts_path,
            resume,
            retry_failed,
            build,
            stream,
        )
    except PerfcastError as exc:
        return replace(
            result,
            notes=(
                *result.notes,
                f"the counting pass failed, the timing campaign in {store_path} is kept: "
                f"{exc}\nfix it and continue with --resume (perfcast model fits the timing "
                "campaign meanwhile, without effort priors)",
            ),
            counting_failed=True,
        )
    cost = cost_note(store_path, counts_path)
    return replace(result, counting=counted, notes=(*result.notes, *([cost] if cost else [])))


def _overhead_notes(spec: AppSpec, backend: Backend, store: Path) -> tuple[str, ...]:
    """The instrumentation's cost per call (calibrated once, kept beside the store) and the
    campaign's overhead estimated from it (:mod:`~perfcast.measure.overhead`). None for a
    program perfcast does not build, nor on a virtual cluster, whose clock is simulated."""
    if spec.build is None or backend.smpi:
        return ()
    try:
        calibration, said = overhead.calibrated(store)
    except PerfcastError as exc:
        return (f"no instrumentation calibration: {exc}",)
    try:
        with warnings.catch_warnings():  # lost profiles: perfcast model reports them
            warnings.simplefilter("ignore")
            experiment = read_sqlite(store)
    except PerfcastError:
        return (said,)  # no run left profiles: the summary above says why
    estimate = overhead.campaign_note(experiment, calibration)
    return (said, *([estimate] if estimate else []))


def _in_smpi_copy(spec: AppSpec, build: bool, stream: IO[str] | None) -> AppSpec:
    """``spec`` built and run in ``app.smpi/`` (:mod:`~perfcast.measure.copies`): the SMPI
    build is a shared object for smpirun, and in the app directory it would replace the
    user's program (or find it up to date and fail). The copy goes beside the spec's own
    store whatever ``--store`` says: the program depends on the app, not on the store, so
    a second virtual campaign into another store finds it with ``--no-build``. With
    ``--no-build``, that copy where there is one, else the program the user built in the
    app directory (``perfcast build --smpi``)."""
    if spec.build is None:
        return spec
    directory = copies.copy_directory(spec.store, copies.SMPI)
    if build:
        copies.copy_app(spec, spec.store, copies.SMPI)
    elif not directory.is_dir():
        return spec
    if stream is not None:
        print(
            f"build: the virtual cluster's program is built and run in {directory}, a copy "
            f"of the app directory: the program in {spec.directory} stays as it is",
            file=stream,
            flush=True,
        )
    return replace(spec, directory=directory)


def _refuse_stored_runs(stores: Sequence[Path]) -> None:
    """Refuse to start a new campaign over one that a store already holds."""
    for path in stores:
        if not path.exists():
            continue
        with CampaignStore.open(path) as existing:
            stored = sum(existing.counts().values())
        if stored:
            raise PerfcastError(
                f"{path} already holds {stored} runs; pass --resume to continue that "
                "campaign, or remove the file (or choose another with --store) to start over"
            )


def _campaign(
    spec: AppSpec,
    backend: Backend,
    plan: ExperimentPlan,
    store_path: Path,
    resume: bool,
    retry_failed: bool,
    build: bool,
    stream: IO[str] | None,
) -> CampaignResult:
    """Build ``spec``'s program and run what ``plan`` lists and the store lacks."""
    store = CampaignStore.create_or_open(
        store_path,
        name=spec.name,
        parameters=[p.name for p in spec.parameters],
        metrics=list(spec.metrics),
        spec_path=str(spec.path),
        spec_text=spec.path.read_text(encoding="utf-8") if spec.path.is_file() else None,
        recover=resume,
    )
    try:
        if store.recovery is not None and stream is not None:
            print(f"store: {store.recovery.summary()}", file=stream, flush=True)
        check_space(store_path)
        if build:
            store.record_builds(build_program(spec, stream, smpi=backend.smpi))
        skip = store.finished_keys()
        if retry_failed:
            skip -= store.finished_keys(FAILED)
        planned = plan.runs()
        already = sum(1 for run in planned if run.key in skip)
        scratch = scratch_directory(store_path)
        jobs = make_jobs(spec, plan, scratch, skip)
        check_program(spec, jobs, smpi=None if build else backend.smpi)
        recovered = _recover(store, backend, jobs)
        watched = {job.key for job in recovered}
        fresh = [job for job in jobs if job.key not in watched]
        progress = Progress(len(jobs), stream=stream)
        report = execute(
            fresh,
            backend,
            store,
            retries=spec.run.retries,
            progress=progress,
            recovered=recovered,
        )
        counts = store.counts()
        return CampaignResult(
            store=store_path,
            planned=len(planned),
            already_stored=already,
            report=report,
            failed=store.runs(FAILED),
            stored_ok=counts["ok"],
        )
    finally:
        store.close()


def _recover(store: CampaignStore, backend: Backend, jobs: list[Job]) -> list[Job]:
    """Hand runs a killed perfcast left in flight back to their backend."""
    inflight = store.inflight()
    if not inflight:
        return []
    others = sorted({entry.backend for entry in inflight} - {backend.name})
    if others:
        raise PerfcastError(
            f"{store.path}: runs of this campaign are still in flight on the {others[0]} "
            f"backend; resume with --backend {others[0]}"
        )
    by_key = {job.key: job for job in jobs}
    recovered = backend.recover(inflight, by_key)
    watched = {job.key for job in recovered}
    for entry in inflight:
        if entry.key not in watched:
            store.forget_inflight(entry.key)
    return recovered
