"""Prediction by simulation against measured runs: is a SimGrid replay of one traced run as
long as the native run it predicts?

For every case (program x size x ranks) the benchmark

1. builds the program natively (``mpicc -O2``, no instrumentation) and measures its run time
   MPI_Init to MPI_Finalize -- the span a replay predicts -- with a preloaded PMPI clock
   (``init_finalize_clock.c`` beside this file; the slowest rank; median of
   ``--repetitions``), never more ranks than cores;
2. builds it with ``perfcast build --trace``, runs it once (trace s: process wall of the
   traced run, mpirun start-up included, since that is what tracing costs the user);
3. replays the trace with ``perfcast simulate TRACE --platform local.xml --json`` on this
   machine as calibrated once per benchmark run (``perfcast platform calibrate``): error =
   predicted / native - 1, slowdown = (trace s + simulate s) / native s (the paper's measure);
4. where a taint profile is at hand (programs whose sizes are run-time arguments: the
   examples; ``perfcast taint`` writes it from one small run), does the same with the
   threshold iteration rule (``perfcast build --trace --threshold PROFILE``) and reports the
   traced time it saved and how far its prediction moved from the full trace's.

Programs: the bundled MPI examples (the Jacobi stencil at three sizes and one latency-bound
run, sample sort at two sizes) and NAS IS (``../shared/apps/npb/NPB3.4-MPI``, classes S, W,
A; copied to a temporary directory, built with ``MPICC`` set to the compiler under test),
each at 1 and 2 ranks.
A step that fails (a build, a run, a replay) leaves its columns empty and is named in a
numbered note under the table; the other cases go on.

    python3 benchmarks/simulate_vs_measured.py --quick
    python3 benchmarks/simulate_vs_measured.py \\
        --output benchmarks/results/simulate_vs_measured.txt
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
REPO = BENCHMARKS.parent
STENCIL = REPO / "src" / "perfcast" / "examples" / "stencil"
SAMPLESORT = REPO / "examples" / "samplesort"
NPB = Path(os.environ.get("PERFCAST_NPB", REPO.parent / "shared" / "apps" / "npb" / "NPB3.4-MPI"))
CLOCK_SOURCE = BENCHMARKS / "init_finalize_clock.c"
SECONDS_FILE_VARIABLE = "PERFCAST_BENCH_SECONDS_FILE"
TRACE_DIR_VARIABLE = "PERFCAST_TRACE_DIR"
# No --oversubscribe: a case with more ranks than cores is skipped, not timed on shared cores.
MPIRUN = ("mpirun", "--allow-run-as-root")
PERFCAST = (sys.executable, "-m", "perfcast")
TARGET_ERROR = 0.10
COMMAND_TIMEOUT_S = 600
STENCIL_ITERATIONS = 200
RANKS = (1, 2)


class StepFailed(Exception):
    """A build, run or perfcast command of one case failed; the case's row says which."""


@dataclass(frozen=True)
class TaintRun:
    """How ``perfcast taint`` builds and runs a program once, at a small point, for the taint
    profile that tells the threshold rule which loops depend on which parameter."""

    sources: tuple[Path, ...]
    arguments: tuple[str, ...]
    parameters: tuple[str, ...]  # NAME=argv:N


@dataclass(frozen=True)
class Program:
    """One program to build: ``build(cc, directory)`` compiles it in ``directory`` with the
    C compiler command ``cc`` (mpicc, or mpicc behind perfcast build) and returns the
    executable. Programs whose parameters are run-time arguments have a ``taint`` run and
    so a threshold row; NAS IS fixes its sizes at compile time."""

    name: str
    build: Callable[[str, Path], Path]
    taint: TaintRun | None = None


@dataclass(frozen=True)
class Case:
    program: Program
    label: str
    arguments: tuple[str, ...]
    ranks: int


@dataclass(frozen=True)
class Prediction:
    """``perfcast simulate``'s answer for one trace on this machine, and the traced run's own
    MPI_Init-to-MPI_Finalize seconds (``traced``): next to the native time it tells the
    tracing overhead from the replay's error."""

    time: float
    compute: float
    communication: float
    traced: float


@dataclass
class Row:
    """One line of the table: a case predicted from the full trace or with the threshold
    rule. Empty fields are steps that failed (see the notes)."""

    case: Case
    rule: str  # "full" or "threshold"
    native: float | None = None
    trace: float | None = None
    simulate: float | None = None
    prediction: Prediction | None = None
    saved: float | None = None  # fraction of the full traced run's MPI_Init-to-Finalize saved
    against_full: float | None = None  # prediction / the full trace's prediction - 1
    notes: list[str] = field(default_factory=list)

    @property
    def error(self) -> float | None:
        if self.prediction is None or not self.native:
            return None
        return self.prediction.time / self.native - 1

    @property
    def slowdown(self) -> float | None:
        if self.trace is None or self.simulate is None or not self.native:
            return None
        return (self.trace + self.simulate) / self.native


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run ``command``; a failure becomes StepFailed carrying the command and the end of
    its output, so one broken case does not stop the others."""
    try:
        done = subprocess.run(
            command,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise StepFailed(f"{shlex.join(command)} ran past {COMMAND_TIMEOUT_S} s") from None
    if done.returncode != 0:
        tail = " | ".join(without_mpirun_notices(done.stdout + done.stderr)[-4:])
        raise StepFailed(f"{shlex.join(command)} exited {done.returncode}: {tail}")
    return done.stdout


def without_mpirun_notices(output: str) -> list[str]:
    """The program's own lines: Open MPI frames its notices ("Primary job terminated
    normally, but 1 process returned ...") between lines of dashes, and they would crowd
    out the program's message in the report."""
    lines, inside = [], False
    for line in output.splitlines():
        if line.startswith("-----"):
            inside = not inside
        elif not inside and line.strip():
            lines.append(line.strip())
    return lines


# --- programs -----------------------------------------------------------------------------


def build_stencil(cc: str, directory: Path) -> Path:
    for source in STENCIL.iterdir():
        if source.suffix in (".c", ".h") or source.name == "Makefile":
            shutil.copy(source, directory)
    run(["make", f"CC={cc}", "CFLAGS=-O2", "jacobi"], directory)
    return directory / "jacobi"


def build_samplesort(cc: str, directory: Path) -> Path:
    shutil.copy(SAMPLESORT / "samplesort.c", directory)
    run([*shlex.split(cc), "-O2", "samplesort.c", "-o", "samplesort"], directory)
    return directory / "samplesort"


def nas_is(problem_class: str) -> Program:
    def build(cc: str, directory: Path) -> Path:
        tree = directory / "NPB3.4-MPI"
        shutil.copytree(NPB, tree)
        shutil.copy(tree / "config" / "make.def.template", tree / "config" / "make.def")
        (tree / "bin").mkdir(exist_ok=True)
        run(["make", "is", f"CLASS={problem_class}", f"MPICC={cc}", "CFLAGS=-O2"], tree)
        return tree / "bin" / f"is.{problem_class}.x"

    return Program(f"IS.{problem_class}", build)


LATENCY_BOUND_STENCIL = (64, 20_000)
"""A small block swept many times: two halo exchanges and an allreduce every 16 us of
compute, so at 2 ranks about a fifth of the run is communication, which the other cases,
compute-bound, barely test."""


def cases(quick: bool) -> list[Case]:
    stencil_taint = TaintRun(
        tuple(sorted(STENCIL.glob("*.[ch]"))), ("32", "4"), ("size=argv:1", "iterations=argv:2")
    )
    stencil = Program("stencil", build_stencil, stencil_taint)
    samplesort_taint = TaintRun((SAMPLESORT / "samplesort.c",), ("4096",), ("n=argv:1",))
    samplesort = Program("samplesort", build_samplesort, samplesort_taint)
    stencil_sizes = (512,) if quick else (512, 1024, 2048)
    samplesort_keys = (1_000_000,) if quick else (1_000_000, 4_000_000)
    classes = ("S",) if quick else ("S", "W", "A")
    found: list[Case] = []
    stencil_runs = [(size, STENCIL_ITERATIONS) for size in stencil_sizes]
    if not quick:
        stencil_runs.append(LATENCY_BOUND_STENCIL)
    for size, iterations in stencil_runs:
        label = f"stencil {size}, {iterations} it."
        found += [Case(stencil, label, (str(size), str(iterations)), ranks) for ranks in RANKS]
    for keys in samplesort_keys:
        label = f"samplesort n={keys // 1_000_000}M"
        found += [Case(samplesort, label, (str(keys),), ranks) for ranks in RANKS]
    for problem_class in classes:
        program = nas_is(problem_class)
        found += [Case(program, f"NAS IS class {problem_class}", (), ranks) for ranks in RANKS]
    return found


# --- measuring ----------------------------------------------------------------------------


def native_seconds(
    executable: Path, case: Case, clock: Path, repetitions: int, scratch: Path
) -> float:
    """Median MPI_Init-to-MPI_Finalize seconds of the slowest rank over ``repetitions``."""
    seconds_file = scratch / "native-seconds.txt"
    env = {**os.environ, SECONDS_FILE_VARIABLE: str(seconds_file)}
    command = [*MPIRUN, "-np", str(case.ranks), "-x", f"LD_PRELOAD={clock}"]
    command += ["-x", SECONDS_FILE_VARIABLE, str(executable), *case.arguments]
    samples = []
    for _ in range(repetitions):
        seconds_file.unlink(missing_ok=True)
        run(command, executable.parent, env)
        if not seconds_file.exists():
            raise StepFailed(f"{shlex.join(command)} wrote no time: did it call MPI_Finalize?")
        samples.append(float(seconds_file.read_text()))
    return statistics.median(samples)


def traced_run(executable: Path, case: Case, trace_dir: Path) -> float:
    """Process wall seconds of one traced run writing its trace to ``trace_dir``."""
    env = {**os.environ, TRACE_DIR_VARIABLE: str(trace_dir)}
    command = [*MPIRUN, "-np", str(case.ranks), "-x", TRACE_DIR_VARIABLE]
    command += [str(executable), *case.arguments]
    start = time.perf_counter()
    run(command, executable.parent, env)
    return time.perf_counter() - start


def simulate(trace_dir: Path, platform: Path) -> tuple[Prediction, float]:
    """The prediction on ``platform`` and the wall seconds ``perfcast simulate`` took."""
    command = [*PERFCAST, "simulate", str(trace_dir), "--platform", str(platform), "--json"]
    start = time.perf_counter()
    output = run(command, trace_dir.parent)
    seconds = time.perf_counter() - start
    try:
        answer = json.loads(output)
        entry = answer["platforms"][0]
        prediction = Prediction(
            float(entry["time"]),
            float(entry["compute"]),
            float(entry["communication"]),
            float(answer["trace_seconds"]),
        )
    except (ValueError, KeyError, IndexError, TypeError) as problem:
        raise StepFailed(
            f"{shlex.join(command)} printed no trace_seconds and platforms[0] with time, "
            f"compute and communication ({type(problem).__name__}: {problem}): {output[:200]!r}"
        ) from None
    return prediction, seconds


def taint_profile(program: Program, taint: TaintRun, scratch: Path) -> Path:
    """``program``'s taint profile from one small DataFlowSanitizer run (``perfcast taint``;
    the run is not timed, so it may share cores)."""
    directory = scratch / f"{program.name}-taint"
    directory.mkdir()
    for source in taint.sources:
        shutil.copy(source, directory)
    profile = directory / "profile.json"
    launch = [*MPIRUN, "--oversubscribe", "-np", "2", f"./{program.name}", *taint.arguments]
    command = [*PERFCAST, "taint", "-o", str(profile), "--run", shlex.join(launch)]
    for parameter in taint.parameters:
        command += ["--param", parameter]
    compiled = [s.name for s in taint.sources if s.suffix == ".c"]
    command += ["--", "mpicc", "-O2", *compiled, "-o", program.name, "-lm"]
    run(command, directory)
    return profile


# --- the benchmark ------------------------------------------------------------------------


class Benchmark:
    """Builds each program once per kind (native, traced, traced with the threshold rule),
    then measures and predicts every case, keeping going past failed steps."""

    def __init__(self, scratch: Path, repetitions: int, native_compiler: str | None) -> None:
        self.scratch = scratch
        self.native_compiler = native_compiler
        self.repetitions = repetitions
        self.builds: dict[tuple[str, str], Path | StepFailed] = {}
        self.profiles: dict[str, Path | StepFailed] = {}
        self.platform: Path | StepFailed | None = None
        self.calibrate_seconds: float | None = None

    def compiler(self, program: Program, kind: str) -> str:
        """The C compiler command of build ``kind``: plain mpicc, mpicc behind ``perfcast
        build --trace``, or that with the threshold rule and ``program``'s taint profile."""
        if kind == "native":
            native = ["mpicc"]
            if self.native_compiler is not None:
                native = ["env", f"OMPI_CC={self.native_compiler}", *native]
            return shlex.join(native)
        wrapper = [*PERFCAST, "build", "--trace"]
        if kind == "threshold":
            wrapper += ["--threshold", str(self.taint_profile(program))]
        return shlex.join([*wrapper, "--", "mpicc"])

    def taint_profile(self, program: Program) -> Path:
        if program.name not in self.profiles:
            if program.taint is None:
                raise StepFailed(f"{program.name} has no taint run")
            try:
                self.profiles[program.name] = taint_profile(program, program.taint, self.scratch)
            except StepFailed as failure:
                self.profiles[program.name] = failure
        profile = self.profiles[program.name]
        if isinstance(profile, StepFailed):
            raise StepFailed(f"no taint profile: {profile}")
        return profile

    def executable(self, program: Program, kind: str) -> Path:
        key = (program.name, kind)
        if key not in self.builds:
            directory = self.scratch / f"{program.name}-{kind}"
            directory.mkdir()
            try:
                self.builds[key] = program.build(self.compiler(program, kind), directory)
            except StepFailed as failure:
                self.builds[key] = failure
        built = self.builds[key]
        if isinstance(built, StepFailed):
            raise StepFailed(f"{kind} build failed: {built}")
        return built

    def prepare(self, clock_source: Path) -> Path:
        """Compile the PMPI clock and calibrate this machine (once per benchmark run)."""
        clock = self.scratch / "init_finalize_clock.so"
        run(["mpicc", "-O2", "-shared", "-fPIC", str(clock_source), "-o", str(clock)], self.scratch)
        platform = self.scratch / "local.xml"
        start = time.perf_counter()
        try:
            run([*PERFCAST, "platform", "calibrate", "-o", str(platform)], self.scratch)
            self.platform = platform
            self.calibrate_seconds = time.perf_counter() - start
        except StepFailed as failure:
            self.platform = failure
        return clock

    def predict(self, row: Row, kind: str, index: int) -> None:
        """Trace the case with build ``kind`` and, where a platform exists, replay it."""
        executable = self.executable(row.case.program, kind)
        trace_dir = self.scratch / f"trace-{index}-{kind}"
        row.trace = traced_run(executable, row.case, trace_dir)
        if isinstance(self.platform, Path):
            row.prediction, row.simulate = simulate(trace_dir, self.platform)

    def measure(self, case: Case, clock: Path, index: int) -> list[Row]:
        full = Row(case, "full")
        rows = [full]
        try:
            executable = self.executable(case.program, "native")
            full.native = native_seconds(executable, case, clock, self.repetitions, self.scratch)
        except StepFailed as failure:
            full.notes.append(f"native: {failure}")
            return rows
        try:
            self.predict(full, "trace", index)
        except StepFailed as failure:
            full.notes.append(str(failure))
        if case.program.taint is not None:
            threshold = Row(case, "threshold", native=full.native)
            rows.append(threshold)
            try:
                self.predict(threshold, "threshold", index)
            except StepFailed as failure:
                threshold.notes.append(str(failure))
            ruled, whole = threshold.prediction, full.prediction
            if ruled is not None and whole is not None and whole.traced and whole.time:
                threshold.saved = 1 - ruled.traced / whole.traced
                threshold.against_full = ruled.time / whole.time - 1
        return rows


# --- the report ---------------------------------------------------------------------------

COLUMNS = (
    ("case", 26, "<"),
    ("ranks", 5, ">"),
    ("rule", 9, "<"),
    ("native s", 9, ">"),
    ("pred. s", 9, ">"),
    ("comp. s", 9, ">"),
    ("comm. s", 9, ">"),
    ("traced s", 9, ">"),
    ("error %", 8, ">"),
    ("trace s", 8, ">"),
    ("sim. s", 7, ">"),
    ("slowdown", 9, ">"),
    ("saved %", 8, ">"),
    ("vs full %", 9, ">"),
)


def number(value: float | None, form: str) -> str:
    return "-" if value is None else format(value, form)


def table(rows: list[Row]) -> list[str]:
    def line(cells: list[str]) -> str:
        return " ".join(
            f"{c:{align}{width}}" for c, (_, width, align) in zip(cells, COLUMNS, strict=True)
        )

    lines = [line([name for name, _, _ in COLUMNS]), "-" * len(line([""] * len(COLUMNS)))]
    notes: list[str] = []
    for row in rows:
        p = row.prediction
        cells = [
            row.case.label,
            str(row.case.ranks),
            row.rule,
            number(row.native, ".3f"),
            number(None if p is None else p.time, ".3f"),
            number(None if p is None else p.compute, ".3f"),
            number(None if p is None else p.communication, ".3f"),
            number(None if p is None else p.traced, ".3f"),
            number(None if row.error is None else 100 * row.error, "+.1f"),
            number(row.trace, ".2f"),
            number(row.simulate, ".2f"),
            number(row.slowdown, ".1f"),
            number(None if row.saved is None else 100 * row.saved, ".0f"),
            number(None if row.against_full is None else 100 * row.against_full, "+.1f"),
        ]
        marks = []
        for note in row.notes:
            marks.append(f"[{len(notes) + 1}]")
            notes.append(
                f"{marks[-1]} {row.case.label}, {row.case.ranks} rank(s), {row.rule}: {note}"
            )
        cells[0] = " ".join([row.case.label, *marks])
        lines.append(line(cells))
    return [*lines, *(["", *notes] if notes else [])]


def summary(rows: list[Row]) -> list[str]:
    lines = []
    for rule in ("full", "threshold"):
        errors = [abs(r.error) for r in rows if r.rule == rule and r.error is not None]
        slowdowns = [r.slowdown for r in rows if r.rule == rule and r.slowdown is not None]
        if not errors:
            continue
        within = sum(e <= TARGET_ERROR for e in errors)
        lines.append(
            f"{rule} trace: mean |error| {100 * statistics.mean(errors):.1f} %, max "
            f"{100 * max(errors):.1f} %, {within}/{len(errors)} cases within the "
            f"{100 * TARGET_ERROR:.0f} % target; median slowdown "
            f"{statistics.median(slowdowns):.1f}x"
        )
    saved = [r.saved for r in rows if r.saved is not None]
    if saved:
        lines.append(
            f"threshold rule: median trace time saved {100 * statistics.median(saved):.0f} %"
        )
    return lines


def native_compiler(bench: Benchmark) -> str:
    """The compiler the native builds ran, as mpicc reports it."""
    if bench.native_compiler is not None:
        return bench.native_compiler
    shown = subprocess.run(["mpicc", "--showme:command"], capture_output=True, text=True)
    return shown.stdout.strip() or "its default compiler"


def header(
    arguments: list[str], repetitions: int, bench: Benchmark, loads: tuple[float, float]
) -> list[str]:
    command = shlex.join(["python3", "benchmarks/simulate_vs_measured.py", *arguments])
    calibrated = (
        f"; platform calibrate took {bench.calibrate_seconds:.1f} s"
        if bench.calibrate_seconds is not None
        else ""
    )
    compilers = (
        "perfcast build --trace compiles with clang-16 (XRay): the compilers' difference is "
        "part of the error (the default --native-compiler clang-16 takes it out)"
    )
    return [
        f"$ {command}",
        *([compilers] if bench.native_compiler is None else []),
        f"native: mpicc ({native_compiler(bench)}) -O2, MPI_Init to MPI_Finalize of the "
        f"slowest rank, median of {repetitions}; {os.cpu_count()} cores, never more ranks "
        "than cores",
        f"1-minute load average {loads[0]:.2f} before, {loads[1]:.2f} after: other work on "
        "the machine slows native and traced runs, not always the same cases",
        f"predicted: perfcast simulate on this machine (perfcast platform calibrate)"
        f"{calibrated}; error = predicted / native - 1",
        "traced s: the traced run's MPI_Init to MPI_Finalize; trace s: wall of the traced "
        "mpirun; slowdown = (trace s + sim. s) / native s",
        "threshold rows: saved % = the traced run's MPI_Init-to-MPI_Finalize time the rule "
        "saved against the full trace (mpirun start-up, in trace s, it cannot save); "
        "vs full % = their prediction against the full trace's",
        "",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one size per program, class S")
    parser.add_argument(
        "--repetitions", type=int, default=5, help="native runs per case (at least 3; --quick: 3)"
    )
    parser.add_argument("--output", type=Path, help="also write the report here")
    parser.add_argument(
        "--native-compiler",
        metavar="CC",
        default="clang-16",
        help="C compiler under mpicc for the native builds (OMPI_CC; default clang-16, the "
        "compiler perfcast build --trace uses, so that the error is the prediction's own; "
        "'default' keeps mpicc's own compiler, whose difference then adds to the error)",
    )
    args = parser.parse_args()
    repetitions = max(3, 3 if args.quick else args.repetitions)
    for tool in ("mpicc", "mpirun", "make"):
        if shutil.which(tool) is None:
            print(
                f"simulate_vs_measured: {tool} not found (install Open MPI and make)",
                file=sys.stderr,
            )
            return 2
    if not NPB.is_dir():
        print(f"simulate_vs_measured: no NAS tree at {NPB} (set PERFCAST_NPB)", file=sys.stderr)
        return 2
    cores = os.cpu_count() or 1
    rows: list[Row] = []
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="perfcast-simulate-vs-measured-") as scratch:
        compiler = None if args.native_compiler == "default" else args.native_compiler
        bench = Benchmark(Path(scratch), repetitions, compiler)
        clock = bench.prepare(CLOCK_SOURCE)
        for index, case in enumerate(cases(args.quick)):
            if case.ranks > cores:
                continue
            rows.extend(bench.measure(case, clock, index))
            print(f"  measured {case.label}, {case.ranks} rank(s)", file=sys.stderr, flush=True)
        loads = (load_before, os.getloadavg()[0])
        lines = [*header(sys.argv[1:], repetitions, bench, loads), *table(rows), ""]
        lines += summary(rows)
        if isinstance(bench.platform, StepFailed):
            lines.append(f"calibration failed: {bench.platform}")
    # the temporary directory and the interpreter's path differ from run to run
    report = "\n".join(lines).replace(scratch, "$SCRATCH").replace(sys.executable, "python3")
    report += "\n"
    print(report)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(report)
    complete = not any(row.notes for row in rows)
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
