"""Issue 25's evidence: the four applications of ``../shared/apps`` (LULESH, miniFE, NAS IS,
CoMD) through every stage a user runs, one row per application, one cell per stage.

Every stage is a real command line (``python3 -m perfcast ...`` in a subprocess, with a
timeout), run in a copy of the application in ``benchmarks/.apps-matrix-cache/APP/`` (the
shared sources are never changed, nor copied into the repository), in the order README.md
gives a user:

1. **taint**: ``perfcast taint perfcast.toml -- COMPILE COMMAND`` (the campaign form; a make
   project names its compile command after ``--``); figure: relevant functions and the
   parameters that reached code.
2. **measure**: ``perfcast measure perfcast.toml`` with ``[build] filter`` = the taint profile
   and ``keep_inlined = true`` (unfiltered where the taint stage gave no profile), a tiny
   design, two repetitions, ``PERFCAST_CPU_TIME=1``; figure: runs, call paths, seconds.
3. **counters**: the counting pass that same ``perfcast measure`` runs after the timing runs
   (a counting build in a copy, once per point, into ``APP.counts.sqlite``); figure: what
   perfcast said the pass cost.
4. **static**: ``perfcast static SOURCE --binary BIN --function KERNEL`` on one kernel, the
   binary the user's compiler built with ``-g``; figure: the kernel's model.
5. **simulate**: the program built by the user's compiler (``mpicc``/``mpicxx``: gcc here)
   and timed natively (MPI_Init to MPI_Finalize of the slowest rank, ``init_finalize_clock.c``,
   median of 3), against two traces at the same point: ``perfcast build --trace
   --user-compiler`` (that same gcc build, traced through its MPI calls) and ``perfcast build
   --trace`` (clang-16: whether perfcast noted the compiler is quoted), each one traced run
   and ``perfcast simulate TRACE --platform local.xml --native S`` on this machine calibrated
   (``perfcast platform calibrate``); figure: error = predicted / native - 1 for both.
6. **threshold**: ``perfcast build --trace --threshold APP.taint.json``: loops applied and
   refused (by reason, as ``perfcast build`` printed them), the traced run's time saved
   against the full trace and its prediction's error against the native run. A build that
   prints no verdict at all although the profile names parameter-dependent loops FAILS: the
   rule then silently applies to nothing.
7. **synthesis**: the trace build run at three rank counts (``PERFCAST_TRACE_CLOCK=cpu``:
   more ranks than cores), ``perfcast simulate T1 T2 T3 --synthesize P -o DIR --platform
   local.xml``; figure: the predicted time at P.
8. **smpi**: ``perfcast measure perfcast.toml --backend smpi --platform local.xml`` (the same
   spec and design, into its own store, no counting pass); figure: runs, seconds.

A cell reads ``works: FIGURE``, ``refused: REASON`` (perfcast's one-line ``error:``), ``FAILS:
LAST LINE`` (a traceback, a compiler error, a crash or a timeout; a traceback names its
innermost perfcast frame), or ``n/a: REASON`` where the application itself rules the stage
out. A stage that needs an earlier stage's output which is missing FAILS naming it; one
failure never stops the other stages. Problem sizes are tiny and native runs use at most 2
ranks (the machine's cores), so the run takes about half an hour on 2 shared cores.

Cells are cached in ``benchmarks/.apps-matrix-cache/results.json`` with the work they
made; ``--refresh`` starts from fresh copies, ``--stages`` reruns the named stages only::

    python3 benchmarks/apps_matrix.py --refresh --output benchmarks/results/apps_matrix.txt
    python3 benchmarks/apps_matrix.py --apps is --stages simulate threshold
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
APPS = Path(os.environ.get("PERFCAST_APPS", REPO.parent / "shared" / "apps"))
CACHE = HERE / ".apps-matrix-cache"
RESULTS = CACHE / "results.json"
CLOCK_SOURCE = HERE / "init_finalize_clock.c"
PERFCAST = f"{shlex.quote(sys.executable)} -m perfcast"
SOURCE = REPO / "src"
"""The perfcast under test: this checkout's, ahead of any installed one (every command's
PYTHONPATH starts with it)."""
MPIRUN = "mpirun --allow-run-as-root --oversubscribe"
STAGES = (
    "taint",
    "measure",
    "counters",
    "static",
    "simulate",
    "threshold",
    "synthesis",
    "smpi",
)
NATIVE_REPETITIONS = 3
TIMEOUT_S = {
    "taint": 900,
    "measure": 1200,
    "static": 600,
    "build": 900,
    "run": 300,
    "simulate": 600,
    "smpi": 900,
}


@dataclass(frozen=True)
class App:
    """One application: its sources, how its user builds and runs it, and the small points
    each stage runs at."""

    name: str
    source: str  # under ../shared/apps
    build: Callable[[str, str], str]  # (compiler prefix, optimisation flags) -> shell command
    executable: str  # relative to the copy
    spec_build: str  # the [build] table of perfcast.toml, filter and keep_inlined added
    run: str  # [run] command
    parameters: str  # [parameters] table
    taint_compile: tuple[str, ...]  # the compile command after `perfcast taint ... --`
    static: tuple[str, str, str]  # source, function, --cflags
    native: tuple[int, str]  # ranks, arguments of the native, traced and threshold runs
    synthesis: tuple[tuple[int, str], ...]  # (ranks, arguments) of the traced inputs
    synthesize: tuple[int, tuple[str, ...]]  # target p, extra flags (--grid)
    native_note: str = ""  # why the native point is what it is, where the app decides
    prepare: tuple[str, ...] = ()  # shell commands run once in every copy
    files: tuple[tuple[str, str], ...] = ()  # (name, text) written into every copy


LULESH_SOURCES = "lulesh.cc lulesh-comm.cc lulesh-viz.cc lulesh-util.cc lulesh-init.cc"
MINIFE_FLAGS = (
    "-DMINIFE_SCALAR=double -DMINIFE_LOCAL_ORDINAL=int -DMINIFE_GLOBAL_ORDINAL=int "
    "-DMINIFE_CSR_MATRIX -DHAVE_MPI -DMPICH_IGNORE_CXX_SEEK -DMINIFE_REPORT_RUSAGE "
    "-DMINIFE_INFO=1 -DMINIFE_KERNELS=0"
)
MINIFE_SOURCES = (
    "src/main.cpp utils/BoxPartition.cpp src/YAML_Doc.cpp src/YAML_Element.cpp "
    "utils/param_utils.cpp utils/utils.cpp utils/mytimer.cpp"
)
COMD_WRAPPER = """#!/bin/sh
# $1 is the compiler command (mpicc, or perfcast build ... -- mpicc), $2 the optimisation
# flags. CoMD writes $(CC) into a C string literal (CoMD_info.h), which a compiler command
# with spaces and quotes breaks: the command goes into a one-word wrapper script
printf '#!/bin/sh\\nexec %s "$@"\\n' "$1" > pcc
chmod +x pcc
make -s -C src-mpi CC="$PWD/pcc" OPTFLAGS="$2"
"""
IS_CLASS = "A"


def _lulesh_build(prefix: str, flags: str) -> str:
    return f"{prefix}mpicxx {flags} -DUSE_MPI=1 {LULESH_SOURCES} -o lulesh2.0"


def _minife_build(prefix: str, flags: str) -> str:
    return (
        f"make -s -C src CXX={shlex.quote(prefix + 'mpicxx')} CC={shlex.quote(prefix + 'mpicc')} "
        f"CFLAGS={shlex.quote(flags)}"
    )


def _comd_build(prefix: str, flags: str) -> str:
    return f"sh perfcast-cc.sh {shlex.quote(prefix + 'mpicc')} {shlex.quote(flags)}"


def _is_build(prefix: str, flags: str) -> str:
    return (
        f"make -s is CLASS={IS_CLASS} MPICC={shlex.quote(prefix + 'mpicc')} "
        f"CFLAGS={shlex.quote(flags)}"
    )


def _c_sources(directory: Path, relative: str) -> list[str]:
    """The C files of ``directory``, named as ``relative/NAME`` (none where it is absent)."""
    found = sorted(directory.glob("*.c")) if directory.is_dir() else []
    return [f"{relative}/{source.name}" for source in found]


def _comd_args(i: int, j: int, k: int, n: int, steps: int) -> str:
    return f"-i {i} -j {j} -k {k} -x {n} -y {n} -z {n} -N {steps}"


APPLICATIONS = {
    "lulesh": App(
        name="lulesh",
        source="lulesh",
        build=_lulesh_build,
        executable="lulesh2.0",
        spec_build=(
            f'sources = {json.dumps(LULESH_SOURCES.split())}\ncompiler = "mpicxx"\n'
            'flags = ["-O2", "-DUSE_MPI=1"]\noutput = "lulesh2.0"'
        ),
        run="./lulesh2.0 -s {size} -i 4 -q",
        parameters="p = [1, 8]\nsize = [4, 5, 6]",
        taint_compile=("mpicxx", "-O2", "-DUSE_MPI=1", *LULESH_SOURCES.split(), "-o", "lulesh2.0"),
        static=("lulesh.cc", "CalcKinematicsForElems", "-DUSE_MPI=1"),
        # ranks must be a cube: 1 is the only one within this machine's 2 cores
        native=(1, "-s 30 -i 30 -q"),
        native_note="ranks must be a cube and 8 exceed the 2 cores: no communication at p=1",
        # perfcast wants 3 or more ranks in every input trace: the cubes 8, 27, 64
        synthesis=((8, "-s 3 -i 4 -q"), (27, "-s 3 -i 4 -q"), (64, "-s 3 -i 4 -q")),
        synthesize=(512, ("--grid", "cube")),
    ),
    "minife": App(
        name="minife",
        source="minife/ref",
        build=_minife_build,
        executable="src/miniFE.x",
        spec_build='command = "' + _minife_build("{perfcast_build} ", "-O2") + '"',
        run="src/miniFE.x -nx {nx}",
        parameters="p = [1, 2]\nnx = [8, 12, 16]",
        taint_compile=(
            "mpicxx",
            "-O2",
            "-Isrc",
            "-Iutils",
            "-Ifem",
            *MINIFE_FLAGS.split(),
            *MINIFE_SOURCES.split(),
            "-o",
            "src/miniFE.x",
        ),
        static=("src/main.cpp", "waxpby", f"-Isrc -Iutils -Ifem {MINIFE_FLAGS}"),
        native=(2, "-nx 60"),
        # perfcast wants 3 or more ranks in every input trace
        synthesis=((3, "-nx 16"), (4, "-nx 16"), (6, "-nx 16")),
        synthesize=(16, ()),
        prepare=("cd src && ./generate_info_header mpicxx -O2 miniFE MINIFE",),
    ),
    "is": App(
        name="is",
        source="npb/NPB3.4-MPI",
        build=_is_build,
        executable=f"bin/is.{IS_CLASS}.x",
        spec_build='command = "' + _is_build("{perfcast_build} ", "-O2") + '"',
        run=f"bin/is.{IS_CLASS}.x",
        parameters="p = [1, 2, 4]",
        taint_compile=(
            "mpicc",
            "-O2",
            "-Icommon",
            "IS/is.c",
            "common/c_print_results.c",
            "common/c_timers.c",
            "-o",
            f"bin/is.{IS_CLASS}.x",
        ),
        static=("IS/is.c", "rank", "-Icommon"),
        native=(2, ""),
        # ranks a power of two, and perfcast wants 3 or more ranks in every input trace
        synthesis=((4, ""), (8, ""), (16, "")),
        synthesize=(64, ()),
        prepare=(
            "cp config/make.def.template config/make.def",
            "mkdir -p bin",
            "make -s -C sys",
            f"cd IS && ../sys/setparams is {IS_CLASS}",
        ),
    ),
    "comd": App(
        name="comd",
        source="comd",
        build=_comd_build,
        executable="bin/CoMD-mpi",
        spec_build='command = "' + _comd_build("{perfcast_build} ", "-O2") + '"',
        run="bin/CoMD-mpi -i {p} -j 1 -k 1 -x {n} -y {n} -z {n} -N 5",
        parameters="p = [1, 2]\nn = [8, 12, 16]",
        taint_compile=(
            "mpicc",
            "-std=c99",
            "-O2",
            "-DDOUBLE",
            "-DDO_MPI",
            *_c_sources(APPS / "comd" / "src-mpi", "src-mpi"),
            "-lm",
            "-o",
            "bin/CoMD-mpi",
        ),
        static=("src-mpi/ljForce.c", "ljForce", "-std=c99 -DDOUBLE -DDO_MPI"),
        native=(2, _comd_args(2, 1, 1, 24, 20)),
        # the rank grid is the user's -i -j -k: MPI_Dims_create's factorisation of each p
        # (x fastest in CoMD, the last dimension fastest in perfcast's grids); perfcast wants
        # a rank of every role (corner, edge, face, interior): 3 or more along each dimension
        synthesis=(
            (27, _comd_args(3, 3, 3, 24, 5)),
            (36, _comd_args(4, 3, 3, 24, 5)),
            (48, _comd_args(4, 4, 3, 24, 5)),
        ),
        synthesize=(64, ("--grid", "dims_create")),
        prepare=(
            "cp src-mpi/Makefile.vanilla src-mpi/Makefile",
            "mkdir -p bin",
            "cd src-mpi && ./generate_info_header CoMD-mpi mpicc '-O2' ''",
        ),
        files=(("perfcast-cc.sh", COMD_WRAPPER),),
    ),
}


# --- cells --------------------------------------------------------------------------------


@dataclass
class Cell:
    """One stage of one application: works, refused, FAILS or n/a, with its figure or reason."""

    kind: str
    text: str
    seconds: float = 0.0
    details: list[str] = field(default_factory=list)

    def shown(self) -> str:
        return f"{self.kind}: {self.text}"


class StageError(Exception):
    """A command of a stage did not work; carries the cell it becomes."""

    def __init__(self, kind: str, text: str) -> None:
        super().__init__(text)
        self.kind = kind
        self.text = text


TRACEBACK = "Traceback (most recent call last)"
COMPILER_ERROR = re.compile(r"\S+\.(c|cc|cpp|cxx|h|hpp):\d+:\d+: (fatal )?error: .*")
PERFCAST_ERROR = re.compile(r"^perfcast [\w ]+: error: (.*)$", re.MULTILINE)
BROKEN = ("could not replay", "Deadlock")
"""Words of a one-line error that reports perfcast's own output broken (a trace it wrote that
SimGrid cannot replay), a failure rather than a refusal."""
FRAME = re.compile(r'File "([^"]*/perfcast/[^"]+)", line (\d+), in (\w+)')


def _tail(text: str, lines: int = 2) -> str:
    """The last lines of ``text`` that are not Open MPI's framed notices."""
    kept, inside = [], False
    for line in text.splitlines():
        if line.startswith("-----"):
            inside = not inside
        elif not inside and line.strip():
            kept.append(line.strip())
    return " | ".join(kept[-lines:]) or "(no output)"


def _judge(label: str, command: str, done: subprocess.CompletedProcess[str]) -> StageError:
    """What a failed command becomes: a refusal where perfcast said why in one line, a
    failure (traceback, compiler error, crash) otherwise."""
    output = done.stdout + done.stderr
    if TRACEBACK in output:
        last = output[output.rindex(TRACEBACK) :].strip().splitlines()[-1]
        frames = FRAME.findall(output[output.rindex(TRACEBACK) :])
        where = ""
        if frames:
            path, line, function = frames[-1]
            where = f" (at {path[path.rindex('/perfcast/') + 1 :]}:{line} in {function})"
        return StageError("FAILS", f"{label}: traceback: {last}{where}")
    compiler = COMPILER_ERROR.search(output)
    message = PERFCAST_ERROR.findall(output)
    if compiler is not None:
        return StageError("FAILS", f"{label}: compiler error: {compiler.group(0)[:300]}")
    if message and any(sign in message[-1] for sign in BROKEN):
        return StageError("FAILS", f"{label}: {message[-1][:400]}")
    if message and done.returncode == 2:
        return StageError("refused", f"{label}: {message[-1][:400]}")
    return StageError("FAILS", f"{label}: exit {done.returncode}: {_tail(output)[:400]}")


def shell(
    label: str,
    command: str,
    cwd: Path,
    timeout: int,
    env: dict[str, str] | None = None,
    log: Path | None = None,
) -> str:
    """Run ``command`` in a shell; its output, or a :class:`StageError`. The output goes to
    ``log`` too, so a cell's full story stays in the cache."""
    started = time.perf_counter()
    try:
        done = subprocess.run(
            command,
            shell=True,
            cwd=cwd,
            env={**os.environ, **(env or {}), "PYTHONPATH": _pythonpath()},
            capture_output=True,
            text=True,
            timeout=timeout,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired as expired:
        out = expired.stdout or ""
        text = out.decode(errors="replace") if isinstance(out, bytes) else out
        if log is not None:
            log.write_text(f"$ {command}\n(timed out after {timeout} s)\n{text}")
        raise StageError("FAILS", f"{label}: ran past its {timeout} s timeout") from None
    if log is not None:
        log.write_text(
            f"$ {command}\n(exit {done.returncode}, {time.perf_counter() - started:.1f} s)\n"
            f"{done.stdout}\n--- stderr\n{done.stderr}"
        )
    if done.returncode != 0:
        raise _judge(label, command, done)
    return done.stdout + done.stderr


def _pythonpath() -> str:
    return os.pathsep.join(filter(None, [str(SOURCE), os.environ.get("PYTHONPATH")]))


def _commit() -> str:
    done = subprocess.run(
        ["git", "-C", str(REPO), "log", "-1", "--format=%h %s"], capture_output=True, text=True
    )
    return done.stdout.strip()[:80] or "unknown commit"


# --- one application ----------------------------------------------------------------------


class AppRun:
    """The copies, builds and traces of one application, made once and shared by stages."""

    def __init__(self, app: App, platform: Path | StageError, clock: Path | StageError) -> None:
        self.app = app
        self.root = CACHE / app.name
        self.platform = platform
        self.cluster = CACHE / "cluster.xml"
        self.clock = clock
        self.memo: dict[str, object] = {}

    # copies --------------------------------------------------------------------------------

    def copy(self, kind: str) -> Path:
        """A copy of the application's sources for one kind of build (made once)."""
        directory = self.root / kind
        if (directory / ".prepared").is_file():
            return directory
        shutil.rmtree(directory, ignore_errors=True)
        shutil.copytree(APPS / self.app.source, directory)
        for path in [directory, *directory.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)  # the shared tree is read-only
        for name, text in self.app.files:
            (directory / name).write_text(text)
        for command in self.app.prepare:
            shell(f"prepare ({command})", command, directory, 120, log=None)
        (directory / ".prepared").write_text("")
        return directory

    def log(self, name: str) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        return self.root / f"{name}.log"

    def spec(self, filtered: bool) -> Path:
        """The campaign's perfcast.toml in the campaign copy."""
        directory = self.copy("campaign")
        build = self.app.spec_build
        if filtered:
            build += f'\nfilter = "{self.app.name}.taint.json"\nkeep_inlined = true'
        text = (
            f'[app]\nname = "{self.app.name}"\nstore = "{self.app.name}.sqlite"\n\n'
            f"[build]\n{build}\n\n"
            f'[run]\ncommand = "{self.app.run}"\nrepetitions = 2\ntimeout = 300\n\n'
            f"[parameters]\n{self.app.parameters}\n"
        )
        spec = directory / "perfcast.toml"
        spec.write_text(text)
        return spec

    @property
    def profile(self) -> Path:
        return self.root / "campaign" / f"{self.app.name}.taint.json"

    # builds --------------------------------------------------------------------------------

    def built(self, kind: str) -> tuple[Path, str]:
        """The executable of build ``kind`` (native: the user's compiler; trace; threshold)
        and what its build printed; a failed build fails every stage that needs it."""
        key = f"build-{kind}"
        if key not in self.memo:
            try:
                self.memo[key] = self._build(kind)
            except StageError as failure:
                self.memo[key] = failure
        made = self.memo[key]
        if isinstance(made, StageError):
            raise StageError(made.kind, f"{kind} build: {made.text}")
        assert isinstance(made, tuple)
        return made

    def _build(self, kind: str) -> tuple[Path, str]:
        directory = self.copy(kind)
        executable = directory / self.app.executable
        record = directory / ".build-output"
        if executable.is_file() and record.is_file():
            return executable, record.read_text()
        if kind == "native":
            prefix = ""
        elif kind == "trace":
            prefix = f"{PERFCAST} build --trace -- "
        elif kind == "user-trace":
            prefix = f"{PERFCAST} build --trace --user-compiler -- "
        elif kind == "profile":  # threshold_coverage.py: the profile's functions, each timed
            if not self.profile.is_file():
                raise StageError("FAILS", "no taint profile (the taint stage made none)")
            profile = shlex.quote(str(self.profile))
            prefix = f"{PERFCAST} build --filter {profile} --keep-inlined -- "
        else:
            if not self.profile.is_file():
                raise StageError("FAILS", "no taint profile (the taint stage made none)")
            prefix = f"{PERFCAST} build --trace --threshold {shlex.quote(str(self.profile))} -- "
        command = self.app.build(prefix, "-O2 -g")
        output = shell(f"{kind} build", command, directory, TIMEOUT_S["build"], log=self.log(kind))
        if not executable.is_file():
            raise StageError("FAILS", f"{kind} build made no {self.app.executable}")
        record.write_text(output)
        return executable, output

    # runs ----------------------------------------------------------------------------------

    def native_seconds(self) -> float:
        """MPI_Init to MPI_Finalize of the slowest rank, median of the native runs."""
        if "native" in self.memo:
            return float(self.memo["native"])  # type: ignore[arg-type]
        executable, _ = self.built("native")
        if isinstance(self.clock, StageError):
            raise self.clock
        ranks, arguments = self.app.native
        seconds_file = self.root / "native-seconds.txt"
        command = (
            f"{MPIRUN} -np {ranks} -x LD_PRELOAD={self.clock} -x PERFCAST_BENCH_SECONDS_FILE "
            f"{executable} {arguments}"
        )
        samples = []
        for _ in range(NATIVE_REPETITIONS):
            seconds_file.unlink(missing_ok=True)
            shell(
                "native run",
                command,
                executable.parent,
                TIMEOUT_S["run"],
                env={"PERFCAST_BENCH_SECONDS_FILE": str(seconds_file)},
                log=self.log("native-run"),
            )
            if not seconds_file.is_file():
                raise StageError("FAILS", "the native run wrote no time (no MPI_Finalize?)")
            samples.append(float(seconds_file.read_text()))
        self.memo["native"] = statistics.median(samples)
        return statistics.median(samples)

    def trace(self, kind: str, ranks: int, arguments: str, name: str, cpu: bool = False) -> Path:
        """One traced run of build ``kind`` into ``traces/NAME`` (fresh each time)."""
        executable, _ = self.built(kind)
        directory = self.root / "traces" / name
        shutil.rmtree(directory, ignore_errors=True)
        directory.parent.mkdir(parents=True, exist_ok=True)
        env = {"PERFCAST_TRACE_DIR": str(directory)}
        passed = "-x PERFCAST_TRACE_DIR"
        if cpu:
            env["PERFCAST_TRACE_CLOCK"] = "cpu"
            passed += " -x PERFCAST_TRACE_CLOCK"
        command = f"{MPIRUN} -np {ranks} {passed} {executable} {arguments}"
        shell(
            f"traced run ({kind}, p={ranks})",
            command,
            executable.parent,
            TIMEOUT_S["run"],
            env=env,
            log=self.log(f"run-{name}"),
        )
        return directory

    def simulate(self, trace: Path, native: float | None, name: str) -> dict:
        if isinstance(self.platform, StageError):
            raise StageError("FAILS", f"no platform: {self.platform.text}")
        command = f"{PERFCAST} simulate {trace} --platform {self.platform} --json"
        if native is not None:
            command += f" --native {native:.6f}"
        output = shell(
            "perfcast simulate", command, self.root, TIMEOUT_S["simulate"], log=self.log(name)
        )
        return _json_in(output)


def _json_in(output: str) -> dict:
    """The JSON object a ``--json`` command printed (warnings may precede it)."""
    start = output.find("{")
    try:
        answer = json.JSONDecoder().raw_decode(output[start:])[0]
    except ValueError:
        raise StageError("FAILS", f"printed no JSON: {_tail(output)[:200]}") from None
    if not isinstance(answer, dict):
        raise StageError("FAILS", "printed JSON that is not an object")
    return answer


# --- the stages ---------------------------------------------------------------------------


def stage_taint(run: AppRun) -> Cell:
    spec = run.spec(filtered=False)
    command = f"{PERFCAST} taint perfcast.toml -- {shlex.join(run.app.taint_compile)}"
    run.profile.unlink(missing_ok=True)
    output = shell("perfcast taint", command, spec.parent, TIMEOUT_S["taint"], log=run.log("taint"))
    profile = json.loads(run.profile.read_text())
    relevant = len(profile.get("relevant") or [])
    reached = [
        name
        for name, coverage in (profile.get("parameters") or {}).items()
        if isinstance(coverage, dict) and (coverage.get("loops") or coverage.get("functions"))
    ]
    lost = [line for line in output.splitlines() if "lost" in line or "reaches no" in line]
    text = (
        f"{relevant} relevant functions; parameters reaching code: {', '.join(reached) or 'none'}"
    )
    if lost:
        text += f"; {lost[0].strip()[:160]}"
    return Cell("works", text)


MEASURE_KEY = "measure-output"


def stage_measure(run: AppRun) -> Cell:
    filtered = run.profile.is_file()
    spec = run.spec(filtered=filtered)
    for stale in spec.parent.glob(f"{run.app.name}.*sqlite*"):
        if stale.is_dir():
            shutil.rmtree(stale)
        elif not stale.name.startswith(f"{run.app.name}-smpi"):
            stale.unlink()
    started = time.perf_counter()
    env = {"PERFCAST_CPU_TIME": "1"}
    try:
        output = shell(
            "perfcast measure",
            f"{PERFCAST} measure perfcast.toml",
            spec.parent,
            TIMEOUT_S["measure"],
            env=env,
            log=run.log("measure"),
        )
    except StageError as failure:
        run.memo[MEASURE_KEY] = failure
        raise
    seconds = time.perf_counter() - started
    run.memo[MEASURE_KEY] = output
    how = "filtered by the taint profile, keep_inlined" if filtered else "UNFILTERED (no profile)"
    summary = _runs(output)
    return Cell("works", f"{summary}, {how}, {seconds:.0f} s with the counting pass")


RUNS = re.compile(r"(\d+ runs ok, \d+ failed)")


def _runs(output: str) -> str:
    """What perfcast measure said of its runs (``12 runs ok, 0 failed``)."""
    found = RUNS.findall(output)
    return found[0] if found else _tail(output, 1)[:160]


def _line(output: str, words: tuple[str, ...]) -> str | None:
    for line in output.splitlines():
        if all(word in line for word in words):
            return line.strip()
    return None


def stage_counters(run: AppRun) -> Cell:
    log = run.log("measure")
    if not log.is_file():
        raise StageError("FAILS", "no perfcast measure output (the measure stage did not run)")
    measured = log.read_text()
    counts = run.root / "campaign" / f"{run.app.name}.counts.sqlite"
    note = _line(measured, ("counting pass",))
    if not counts.is_file():
        failed = run.memo.get(MEASURE_KEY)
        reason = note or _line(measured, ("counting",))
        if reason is None and isinstance(failed, StageError):
            reason = f"perfcast measure failed before the counting pass ({failed.text[:200]})"
        raise StageError("FAILS", (reason or "no counts store written")[:300])
    return Cell("works", (note or "counts written, no cost note")[:220])


def stage_static(run: AppRun) -> Cell:
    executable, _ = run.built("native")
    directory = run.root / "native"
    source, function, cflags = run.app.static
    model = run.root / "static" / f"{function}.py"
    model.parent.mkdir(parents=True, exist_ok=True)
    model.unlink(missing_ok=True)
    command = (
        f"{PERFCAST} static {source} --binary {executable} -o {model} "
        f"--cflags {shlex.quote(cflags)} --function {function}"
    )
    output = shell(
        "perfcast static", command, directory, TIMEOUT_S["static"], log=run.log("static")
    )
    summary = model.with_suffix(".json")
    formula = (
        _static_formula(json.loads(summary.read_text()), function) if summary.is_file() else ""
    )
    skipped = [line.strip() for line in output.splitlines() if "skipp" in line.lower()]
    text = f"{function} in {source}: {formula or _tail(output, 1)[:200]}"
    if skipped:
        text += f"; {len(skipped)} skipped ({skipped[0][:120]})"
    return Cell("works", text)


def _static_formula(summary: dict, function: str) -> str:
    """The function's instruction-count formula in a static model's JSON summary, with the
    number of loops and branches the polyhedral model could not count."""
    for entry in summary.get("functions") or []:
        if isinstance(entry, dict) and entry.get("name") == function:
            formula = str(entry.get("instructions", "?"))
            if len(formula) > 140:
                formula = formula[:140] + " ..."
            outside = sum("outside the polyhedral model" in w for w in entry.get("warnings", []))
            return f"instructions = {formula} ({outside} loops/branches outside the model)"
    return ""


COMPILER_NOTE = re.compile(r"perfcast build: note: (.*)")


def stage_simulate(run: AppRun) -> Cell:
    native = run.native_seconds()
    ranks, arguments = run.app.native
    user = run.simulate(
        run.trace("user-trace", ranks, arguments, f"user-p{ranks}"), native, "simulate-user"
    )
    predicted = float(user["platforms"][0]["time"])
    _, printed = run.built("trace")
    clang = run.simulate(run.trace("trace", ranks, arguments, f"full-p{ranks}"), native, "simulate")
    clang_predicted = float(clang["platforms"][0]["time"])
    traced = float(clang["trace_seconds"])
    run.memo["full"] = (clang_predicted, traced)
    note = COMPILER_NOTE.search(printed)
    slowdown = clang.get("slowdown")
    text = (
        f"p={ranks}{' (' + run.app.native_note + ')' if run.app.native_note else ''}: "
        f"native {native:.3f} s ({_compiler(run)}); trace of that build (--user-compiler): "
        f"predicted {predicted:.3f} s, error {100 * (predicted / native - 1):+.1f} %; "
        f"trace of the clang-16 build: predicted {clang_predicted:.3f} s, error "
        f"{100 * (clang_predicted / native - 1):+.1f} %, traced run {traced:.3f} s"
        + (f", slowdown {slowdown:.1f}x" if isinstance(slowdown, float) else "")
        + ("; compiler note: yes" if note else "; no compiler note")
    )
    return Cell("works", text)


def _compiler(run: AppRun) -> str:
    """The compiler behind the wrapper the native build used."""
    wrapper = "mpicxx" if "mpicxx" in run.app.build("", "") else "mpicc"
    done = subprocess.run([wrapper, "--showme:command"], capture_output=True, text=True)
    return f"{wrapper} = {done.stdout.strip() or '?'}"


VERDICT = re.compile(
    r"threshold: (?P<file>\S+?):(?P<line>\d+): (?P<kind>.+?) loop over (?P<params>.*?): "
    r"(?P<verdict>threshold rule applied|not applied: (?P<reason>.*))$"
)


def _reason_label(sentence: str) -> str:
    """The short label of a refusal sentence (perfcast.csource.verdicts' Reason)."""
    if str(SOURCE) not in sys.path:
        sys.path.insert(0, str(SOURCE))  # the perfcast under test, as its commands run
    try:
        from perfcast.csource.verdicts import WORDING
    except ImportError:  # another layout of the package: the sentence's start
        return sentence[:50]
    best = ""
    for reason, template in WORDING.items():
        pattern = ".*?".join(re.escape(part) for part in re.split(r"\{[^}]*\}", template))
        if re.search(pattern, sentence) and len(pattern) > len(best):
            best, label = pattern, reason.value
    return label if best else sentence[:50]


def stage_threshold(run: AppRun) -> Cell:
    _, printed = run.built("threshold")
    verdicts = [match for match in map(VERDICT.search, printed.splitlines()) if match]
    applied = [v for v in verdicts if v.group("reason") is None]
    refused = Counter(_reason_label(v.group("reason")) for v in verdicts if v.group("reason"))
    loops = (
        f"{len(applied)} loops applied, {sum(refused.values())} refused"
        + (" (" + "; ".join(f"{n} {label}" for label, n in refused.most_common(3)) + ")")
        if refused
        else f"{len(applied)} loops applied, 0 refused"
    )
    silent = not verdicts and _profile_loops(run.profile) > 0
    if silent:
        loops = (
            f"perfcast build printed no verdict on any of the profile's "
            f"{_profile_loops(run.profile)} parameter-dependent loops (none applied)"
        )
    native = run.native_seconds()
    ranks, arguments = run.app.native
    trace = run.trace("threshold", ranks, arguments, f"threshold-p{ranks}")
    answer = run.simulate(trace, native, "simulate-threshold")
    predicted = float(answer["platforms"][0]["time"])
    traced = float(answer["trace_seconds"])
    text = f"{loops}; predicted {predicted:.3f} s, error {100 * (predicted / native - 1):+.1f} %"
    full = run.memo.get("full")
    if isinstance(full, tuple):
        full_predicted, full_traced = full
        text += (
            f", traced {traced:.3f} s vs full trace {full_traced:.3f} s "
            f"(saved {100 * (1 - traced / full_traced):.0f} %, "
            f"{100 * (predicted / full_predicted - 1):+.1f} % vs full prediction)"
        )
    else:
        text += f", traced {traced:.3f} s (no full trace to compare)"
    cell = Cell("FAILS" if silent else "works", text)
    prefix = str(run.root / "threshold") + "/"
    cell.details = [f"applied: {v.group(0).replace(prefix, '')}" for v in applied]
    examples: dict[str, str] = {}
    for v in verdicts:
        if v.group("reason"):
            examples.setdefault(_reason_label(v.group("reason")), v.group(0).replace(prefix, ""))
    cell.details += [
        f"refused ({n}x {label}), e.g. {examples[label]}" for label, n in refused.most_common()
    ]
    return cell


def _profile_loops(profile: Path) -> int:
    """The parameter-dependent loops a taint profile names, nested ones included."""

    def count(loops: list) -> int:
        return sum(bool(loop.get("params")) + count(loop.get("loops") or []) for loop in loops)

    functions = json.loads(profile.read_text()).get("functions") or {}
    return sum(count(entry.get("loops") or []) for entry in functions.values())


def stage_synthesis(run: AppRun) -> Cell:
    inputs = []
    for ranks, arguments in run.app.synthesis:
        inputs.append(run.trace("trace", ranks, arguments, f"synth-p{ranks}", cpu=True))
    target, flags = run.app.synthesize
    output = run.root / "traces" / f"synthesized-p{target}"
    shutil.rmtree(output, ignore_errors=True)
    if isinstance(run.platform, StageError):
        raise StageError("FAILS", f"no platform: {run.platform.text}")
    command = (
        f"{PERFCAST} simulate {' '.join(str(p) for p in inputs)} --synthesize {target} "
        f"-o {output} {shlex.join(flags)} --platform {run.cluster} --json"
    )
    printed = shell(
        "perfcast simulate --synthesize",
        command,
        run.root,
        TIMEOUT_S["simulate"],
        log=run.log("synthesis"),
    )
    answer = _json_in(printed)
    platforms = answer.get("platforms") or []
    traced = ",".join(str(r) for r, _ in run.app.synthesis)
    if platforms:
        predicted = float(platforms[0]["time"])
        return Cell(
            "works",
            f"p={traced} -> {target}{' ' + ' '.join(flags) if flags else ''}: "
            f"predicted {predicted:.3f} s (compute {float(platforms[0]['compute']):.3f} s)",
        )
    return Cell("works", f"p={traced} -> {target}: trace written, no prediction printed")


def stage_smpi(run: AppRun) -> Cell:
    if isinstance(run.platform, StageError):
        raise StageError("FAILS", f"no platform: {run.platform.text}")
    spec = run.spec(filtered=run.profile.is_file())
    store = spec.parent / f"{run.app.name}-smpi.sqlite"
    for stale in spec.parent.glob(f"{run.app.name}-smpi.sqlite*"):
        if stale.is_dir():
            shutil.rmtree(stale)
        else:
            stale.unlink()
    started = time.perf_counter()
    output = shell(
        "perfcast measure --backend smpi",
        f"{PERFCAST} measure perfcast.toml --backend smpi --platform {run.cluster} "
        f"--store {store} --no-counting-pass",
        spec.parent,
        TIMEOUT_S["smpi"],
        log=run.log("smpi"),
    )
    seconds = time.perf_counter() - started
    return Cell("works", f"{_runs(output)} on {run.cluster.name}, {seconds:.0f} s")


STAGE_FUNCTIONS: dict[str, Callable[[AppRun], Cell]] = {
    "taint": stage_taint,
    "measure": stage_measure,
    "counters": stage_counters,
    "static": stage_static,
    "simulate": stage_simulate,
    "threshold": stage_threshold,
    "synthesis": stage_synthesis,
    "smpi": stage_smpi,
}


# --- the benchmark ------------------------------------------------------------------------


CLUSTER_NODES = 512


def machine_setup() -> tuple[Path | StageError, Path | StageError, float | None]:
    """This machine as a SimGrid platform, a cluster of its cores for the synthesised traces
    and the SMPI campaigns, and the PMPI clock, all made once and cached."""
    CACHE.mkdir(parents=True, exist_ok=True)
    cluster = CACHE / "cluster.xml"
    if not cluster.is_file():
        shell(
            "perfcast platform describe",
            f"{PERFCAST} platform describe -o {cluster} --name cluster --nodes {CLUSTER_NODES}",
            CACHE,
            120,
        )
    local = CACHE / "local.xml"
    platform: Path | StageError = local
    seconds = None
    if not local.is_file():
        started = time.perf_counter()
        try:
            shell(
                "perfcast platform calibrate",
                f"{PERFCAST} platform calibrate -o {local}",
                CACHE,
                600,
                log=CACHE / "calibrate.log",
            )
            seconds = time.perf_counter() - started
        except StageError as failure:
            platform = failure
    library = CACHE / "init_finalize_clock.so"
    clock: Path | StageError = library
    if not library.is_file():
        try:
            shell(
                "PMPI clock build",
                f"mpicc -O2 -shared -fPIC {CLOCK_SOURCE} -o {library}",
                CACHE,
                120,
            )
        except StageError as failure:
            clock = failure
    return platform, clock, seconds


def run_app(app: App, stages: list[str], cached: dict[str, dict], setup: tuple) -> dict[str, dict]:
    platform, clock, _ = setup
    run = AppRun(app, platform, clock)
    cells = dict(cached)
    for stage in STAGES:
        if stage not in stages and stage in cells:
            continue
        started = time.perf_counter()
        try:
            cell = STAGE_FUNCTIONS[stage](run)
        except StageError as failure:
            cell = Cell(failure.kind, failure.text)
        except Exception as problem:  # a bug of this script: its own cell, the rest go on
            cell = Cell("FAILS", f"benchmark script: {type(problem).__name__}: {problem}")
        cell.seconds = time.perf_counter() - started
        cells[stage] = {
            "kind": cell.kind,
            "text": cell.text.replace(str(REPO) + "/", "").replace(sys.executable, "python3"),
            "seconds": cell.seconds,
            "details": cell.details,
        }
        print(
            f"  {app.name} {stage}: {cell.kind} ({cell.seconds:.0f} s)", file=sys.stderr, flush=True
        )
        RESULTS.write_text(json.dumps({**_load(), app.name: cells}, indent=1))
    return cells


def _load() -> dict[str, dict[str, dict]]:
    if RESULTS.is_file():
        loaded = json.loads(RESULTS.read_text())
        if isinstance(loaded, dict):
            return loaded
    return {}


def report(results: dict[str, dict[str, dict]], apps: list[str], header: list[str]) -> list[str]:
    lines = [*header, ""]
    counts = Counter(results[a][s]["kind"] for a in apps for s in STAGES if s in results[a])
    lines.append(
        "cells: " + ", ".join(f"{counts[k]} {k}" for k in ("works", "refused", "FAILS", "n/a"))
    )
    lines.append("")
    width = max(len(s) for s in STAGES)
    for name in apps:
        cells = results[name]
        total = sum(float(c.get("seconds", 0)) for c in cells.values())
        lines.append(f"## {name} ({APPLICATIONS[name].source}; stages took {total:.0f} s)")
        for stage in STAGES:
            cell = cells.get(stage)
            if cell is None:
                lines.append(f"  {stage:<{width}}  (not run)")
                continue
            lines.append(
                f"  {stage:<{width}}  {cell['kind']}: {cell['text']}  [{cell['seconds']:.0f} s]"
            )
        lines.append("")
    lines.append(
        "threshold rule, loops as perfcast build printed them (applied; refused by reason):"
    )
    for name in apps:
        details = results[name].get("threshold", {}).get("details") or []
        lines.append(f"  {name}:" + ("" if details else " none"))
        lines += [f"    {line}" for line in details]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--apps", nargs="+", choices=sorted(APPLICATIONS), default=list(APPLICATIONS)
    )
    parser.add_argument("--stages", nargs="+", choices=STAGES, help="rerun only these stages")
    parser.add_argument("--refresh", action="store_true", help="fresh copies, every stage again")
    parser.add_argument("--output", type=Path, help="also write the report to this file")
    args = parser.parse_args(argv)
    if not APPS.is_dir():
        print(f"apps_matrix: no applications at {APPS} (set PERFCAST_APPS)", file=sys.stderr)
        return 2
    load_before = os.getloadavg()
    started = time.perf_counter()
    if args.refresh:
        for name in args.apps:
            shutil.rmtree(CACHE / name, ignore_errors=True)
        for platform in ("local.xml", "cluster.xml"):
            (CACHE / platform).unlink(missing_ok=True)
    setup = machine_setup()
    results = {} if args.refresh else _load()
    for name in args.apps:
        stages = list(STAGES) if args.refresh or args.stages is None else args.stages
        if not args.refresh and args.stages is None:
            stages = [s for s in STAGES if s not in results.get(name, {})]
        results[name] = run_app(APPLICATIONS[name], stages, results.get(name, {}), setup)
        RESULTS.write_text(json.dumps(results, indent=1))
    elapsed = time.perf_counter() - started
    load_after = os.getloadavg()
    command = shlex.join(
        ["python3", "benchmarks/apps_matrix.py", *(argv if argv is not None else sys.argv[1:])]
    )
    wrappers = {
        w: subprocess.run([w, "--showme:command"], capture_output=True, text=True).stdout.strip()
        for w in ("mpicc", "mpicxx")
    }
    reused = "every stage run" if args.refresh else "cells not rerun come from the cache"
    header = [
        f"$ {command}",
        "",
        __doc__.split("\n\n")[0].replace("\n", " "),
        f"this run: {elapsed:.0f} s wall ({reused}); {os.cpu_count()} cores; 1-minute load "
        f"average {load_before[0]:.2f} before, {load_after[0]:.2f} after (other work on the "
        "machine slows native and traced runs)",
        f"perfcast: {SOURCE.relative_to(REPO)} of this checkout ({_commit()})",
        f"user's compilers: mpicc = {wrappers['mpicc']}, mpicxx = {wrappers['mpicxx']}; "
        "perfcast build compiles with clang-16",
        "platforms: this machine (perfcast platform calibrate"
        + (f", {setup[2]:.1f} s" if setup[2] is not None else ", cached")
        + ("" if isinstance(setup[0], Path) else f", FAILED: {setup[0].text}")
        + f") for simulate and threshold; cluster.xml (perfcast platform describe --nodes "
        f"{CLUSTER_NODES}, cores as fast as this machine's) for synthesis and smpi",
        "cell figures: simulate/threshold error = predicted / native - 1 (native: the user's "
        "compiler, median of 3); threshold saved = 1 - traced / full traced (MPI_Init to "
        "MPI_Finalize); [N s] = the stage's wall time",
    ]
    for name in args.apps:
        app = APPLICATIONS[name]
        ranks, arguments = app.native
        header.append(
            f"{name}: campaign `{app.run}` over {app.parameters.replace(chr(10), ', ')}, 2 "
            f"repetitions; native/trace p={ranks} `{arguments}`; synthesis from "
            + ", ".join(f"p={r} `{a}`" for r, a in app.synthesis)
        )
    text = "\n".join(report(results, args.apps, header)) + "\n"
    print(text)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
