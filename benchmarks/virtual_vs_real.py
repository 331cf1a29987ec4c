"""A virtual campaign against a real one: is each call path's time on the SMPI backend, on a
platform calibrated from this machine, the time a real run measures here?

For every program the benchmark writes one perfcast.toml (p = 1, 2 x several sizes) and
measures it twice, as a user would, into two stores:

- real: ``PERFCAST_CPU_TIME=1 perfcast measure perfcast.toml`` (``--backend local``:
  ``perfcast build -- mpicc``, ``mpirun``), ``--real-repetitions`` runs per point, each call
  path's wall time and its CPU time (which other work on the machine does not stretch);
- virtual: ``perfcast measure perfcast.toml --backend smpi --platform local.xml``
  (``perfcast build --smpi -- smpicc``, ``smpirun`` on this machine as ``perfcast platform
  calibrate`` describes it, calibrated once per benchmark run), ``--virtual-repetitions``.

Per call path, point and store the value is the median over repetitions of the call path's
exclusive time (the mean over ranks of a run, as ``perfcast model`` reads it); error =
virtual / real - 1, against the real wall time and against the real CPU time. Call paths
are compute (no MPI call at their end) or MPI; call paths whose real median is below
``--floor`` are left out (a few microseconds of a tiny function are noise, not a test of
the clock), and so are MPI_Init and MPI_Finalize, which time Open MPI's start-up and
shut-down, a simulation has neither. Both builds compile with clang-16 (perfcast build),
so the compiler is no part of the error.

Programs: the bundled MPI examples, the Jacobi stencil (``src/perfcast/examples/stencil``,
``size`` = block edge) and sample sort (``examples/samplesort``, ``n`` = keys per rank).

    python3 benchmarks/virtual_vs_real.py --quick
    python3 benchmarks/virtual_vs_real.py --output benchmarks/results/virtual_vs_real.txt
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from perfcast.experiment.experiment import CALLPATH, METRIC, VALUE
from perfcast.measure.reader import read_sqlite

BENCHMARKS = Path(__file__).resolve().parent
REPO = BENCHMARKS.parent
PERFCAST = (sys.executable, "-m", "perfcast")
TARGET_ERROR = 0.10
RANKS = (1, 2)
CPU_TIME_VARIABLE = "PERFCAST_CPU_TIME"
START_AND_END = ("MPI_Init", "MPI_Finalize")
"""MPI calls that time the launcher (Open MPI's start-up and shut-down), not the program."""


@dataclass(frozen=True)
class Program:
    """A bundled example: its sources, the perfcast.toml body measuring it (``{sizes}`` and
    ``{repetitions}`` filled in per campaign) and its size parameter."""

    name: str
    source: Path
    spec: str
    size: str
    sizes: tuple[int, ...]
    quick_sizes: tuple[int, ...]


STENCIL = Program(
    "stencil",
    REPO / "src" / "perfcast" / "examples" / "stencil",
    """\
[app]
name = "stencil"
[build]
command = "make -s CC='{{perfcast_build}} mpicc'"
[run]
command = "./jacobi {{size}} 200"
repetitions = {repetitions}
timeout = 300
[parameters]
p = [1, 2]
size = [{sizes}]
""",
    "size",
    (256, 512, 1024),
    (512,),
)

SAMPLESORT = Program(
    "samplesort",
    REPO / "examples" / "samplesort",
    """\
[app]
name = "samplesort"
[build]
sources = ["samplesort.c"]
compiler = "mpicc"
flags = ["-O2"]
output = "samplesort"
[run]
command = "./samplesort {{n}}"
repetitions = {repetitions}
timeout = 300
[parameters]
p = [1, 2]
n = [{sizes}]
""",
    "n",
    (1_000_000, 4_000_000),
    (1_000_000,),
)


class StepFailed(Exception):
    """A perfcast command failed; the report names it and goes on with the next program."""


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    """Run ``command`` in ``cwd``; its wall seconds, or StepFailed with the end of its output."""
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-4:])
        raise StepFailed(f"{shlex.join(command)} exited {done.returncode}: {tail}")
    return time.perf_counter() - start


@dataclass(frozen=True)
class Row:
    """One call path at one point, real against virtual (medians over repetitions)."""

    program: str
    callpath: str
    ranks: int
    size: int
    real: float
    real_low: float
    real_high: float
    real_cpu: float | None
    """The real runs' median thread CPU time (PERFCAST_CPU_TIME=1): what a rank computed,
    whatever else ran on the machine meanwhile."""
    virtual: float

    @property
    def error(self) -> float:
        return self.virtual / self.real - 1

    @property
    def cpu_error(self) -> float | None:
        return None if not self.real_cpu else self.virtual / self.real_cpu - 1

    @property
    def is_mpi(self) -> bool:
        return self.callpath.rsplit("->", 1)[-1].startswith("MPI_")


def per_run(
    store: Path, size: str, sizes: tuple[int, ...], metric: str = "time"
) -> dict[tuple[str, int, int], list[float]]:
    """Every (call path, p, size)'s exclusive ``metric``, one value per run, from a campaign
    store (a campaign of one size has no size column: the store keeps varying parameters
    only)."""
    data = read_sqlite(store).data
    times = data[data[METRIC] == metric]
    if size not in times:
        times = times.assign(**{size: sizes[0]})
    found: dict[tuple[str, int, int], list[float]] = {}
    for (callpath, ranks, value), group in times.groupby([CALLPATH, "p", size]):
        key = (str(callpath), int(cast(float, ranks)), int(cast(float, value)))
        found[key] = [float(v) for v in group[VALUE]]
    return found


def campaign(program: Program, scratch: Path, sizes: tuple[int, ...], repetitions: int) -> Path:
    """A fresh copy of ``program`` with its perfcast.toml; the spec's path."""
    directory = scratch / program.name
    shutil.copytree(program.source, directory, ignore=shutil.ignore_patterns("*.o", "jacobi"))
    spec = directory / "perfcast.toml"
    body = program.spec.format(sizes=", ".join(map(str, sizes)), repetitions=repetitions)
    spec.write_text(body)
    return spec


def compare(
    program: Program, scratch: Path, platform: Path, args: argparse.Namespace
) -> tuple[list[Row], list[str]]:
    """Measure ``program`` for real and on the virtual cluster; the rows and the campaigns'
    wall times."""
    sizes = program.quick_sizes if args.quick else program.sizes
    real_spec = campaign(program, scratch / "real", sizes, args.real_repetitions)
    virtual_spec = campaign(program, scratch / "virtual", sizes, args.virtual_repetitions)
    real_store = real_spec.parent / "real.sqlite"
    virtual_store = virtual_spec.parent / "virtual.sqlite"
    real_command = [*PERFCAST, "measure", str(real_spec), "--store", str(real_store)]
    real_s = run(real_command, scratch, {**os.environ, CPU_TIME_VARIABLE: "1"})
    smpi = ["--backend", "smpi", "--platform", str(platform)]
    virtual_command = [*PERFCAST, "measure", str(virtual_spec), "--store", str(virtual_store)]
    virtual_s = run([*virtual_command, *smpi], scratch)
    real = per_run(real_store, program.size, sizes)
    real_cpu = per_run(real_store, program.size, sizes, "cpu_time")
    virtual = per_run(virtual_store, program.size, sizes)
    rows = []
    for key in sorted(real.keys() & virtual.keys()):
        callpath, ranks, size = key
        measured = statistics.median(real[key])
        if callpath.rsplit("->", 1)[-1] in START_AND_END or measured < args.floor:
            continue
        rows.append(
            Row(
                program.name,
                callpath,
                ranks,
                size,
                measured,
                min(real[key]),
                max(real[key]),
                statistics.median(real_cpu[key]) if key in real_cpu else None,
                statistics.median(virtual[key]),
            )
        )
    walls = [
        f"{program.name}: real campaign {real_s:.0f} s ({args.real_repetitions} runs per "
        f"point), virtual campaign {virtual_s:.0f} s ({args.virtual_repetitions} runs per "
        "point), builds included"
    ]
    return rows, walls


def milliseconds(seconds: float) -> str:
    return f"{1e3 * seconds:.3f}"


def table(rows: list[Row]) -> list[str]:
    width = max([len(row.callpath) for row in rows] + [9])
    head = (
        f"{'program':<10} {'call path':<{width}} {'p':>2} {'size':>8} {'real ms':>9} "
        f"{'virtual ms':>10} {'error %':>8} {'real cpu ms':>11} {'vs cpu %':>8}  real range ms"
    )
    lines = [head, "-" * len(head)]
    for row in rows:
        cpu = "-" if row.real_cpu is None else milliseconds(row.real_cpu)
        cpu_error = "-" if row.cpu_error is None else f"{100 * row.cpu_error:+.1f}"
        lines.append(
            f"{row.program:<10} {row.callpath:<{width}} {row.ranks:>2} {row.size:>8} "
            f"{milliseconds(row.real):>9} {milliseconds(row.virtual):>10} "
            f"{100 * row.error:>+8.1f} {cpu:>11} {cpu_error:>8}  "
            f"{milliseconds(row.real_low)}-{milliseconds(row.real_high)}"
        )
    return lines


LONG = 1e-3
"""Seconds: compute call paths at least this long (real median) get a summary of their own.
The virtual clock reads the thread's CPU time at every entry and exit (236 ns a read here,
docs/smpi-backend.md), and SMPI charges that to the burst: a function of a few
microseconds called 200 times (the stencil's exchange_halo, 0.14 ms in all) gains 0.1 ms,
while a millisecond call path gains a few percent at most."""


def summary(rows: list[Row]) -> list[str]:
    compute = [row for row in rows if not row.is_mpi]
    long = [row for row in compute if row.real >= LONG]
    lines = []
    for kind, errors in (
        ("compute call paths against real time", [row.error for row in compute]),
        (
            f"compute call paths of {1e3 * LONG:g} ms or more against real time",
            [row.error for row in long],
        ),
        ("compute call paths against real CPU time", [row.cpu_error for row in compute]),
        ("MPI call paths against real time", [row.error for row in rows if row.is_mpi]),
    ):
        known = [abs(error) for error in errors if error is not None]
        if not known:
            continue
        within = sum(error <= TARGET_ERROR for error in known)
        lines.append(
            f"{kind}: median |error| {100 * statistics.median(known):.1f} % over "
            f"{len(known)} (call path, p, size), max {100 * max(known):.1f} %, {within} "
            f"within the {100 * TARGET_ERROR:.0f} % target"
        )
    return lines


WHY_MPI_MISSES = """\
Why MPI call paths miss: at p = 2 an MPI call's time is mostly one rank waiting for the
other to finish its compute (the real range column: the same call differs several times
between runs), so it measures the ranks' imbalance and whatever else the machine runs,
not the network; a virtual rank's wait is the difference of two measured bursts. At
p = 1 the calls cost real microseconds (an Alltoallv to itself copies the keys) and none
in the simulation. MPI call paths test the platform and the imbalance; compute call paths
test the clock."""

WHY_LOAD_MATTERS = """\
Load: a real run shares the 2 cores with every other process, so its call paths' wall
times grow with the load; its CPU times (real cpu ms) do not. SMPI charges a burst its
thread CPU time (smpi_bench_end: xbt_os_threadtimer, SimGrid 3.32), and perfcast's SMPI
clock (perfcast_rt.c, perfcast_now) extrapolates within a burst with the same thread CPU
clock, so the virtual times do not grow with the load either: on a busy machine compare
them with the real CPU times; on an idle one real wall and CPU times agree."""


def header(arguments: list[str], args: argparse.Namespace, loads: tuple[float, float]) -> list[str]:
    command = shlex.join(["python3", "benchmarks/virtual_vs_real.py", *arguments])
    return [
        f"$ {command}",
        f"real: perfcast measure (--backend local, mpirun), {args.real_repetitions} runs per "
        f"point; virtual: perfcast measure --backend smpi --platform local.xml (perfcast "
        f"platform calibrate), {args.virtual_repetitions} runs per point; {os.cpu_count()} "
        "cores",
        "value: a call path's exclusive time, mean over ranks, median over runs; error = "
        "virtual / real - 1; vs cpu = virtual / the real runs' CPU time (PERFCAST_CPU_TIME=1) "
        f"- 1; call paths below {1e3 * args.floor:g} ms real and MPI_Init, MPI_Finalize (the "
        "launcher's start-up and shut-down) left out",
        f"1-minute load average {loads[0]:.2f} before, {loads[1]:.2f} after (other work on "
        "the machine slows real runs and stretches the bursts a virtual run measures)",
        "",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one size per program")
    parser.add_argument("--real-repetitions", type=int, default=7)
    parser.add_argument("--virtual-repetitions", type=int, default=3)
    parser.add_argument(
        "--floor", type=float, default=1e-4, help="seconds: shorter call paths are left out"
    )
    parser.add_argument("--output", type=Path, help="also write the report here")
    args = parser.parse_args()
    for tool in ("mpicc", "mpirun", "smpicc", "smpirun", "make"):
        if shutil.which(tool) is None:
            print(f"virtual_vs_real: {tool} not found", file=sys.stderr)
            return 2
    load_before = os.getloadavg()[0]
    rows: list[Row] = []
    notes: list[str] = []
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="perfcast-virtual-vs-real-") as scratch:
        platform = Path(scratch) / "local.xml"
        try:
            calibrate_s = run([*PERFCAST, "platform", "calibrate", "-o", str(platform)], REPO)
        except StepFailed as failure:
            print(f"virtual_vs_real: calibration failed: {failure}", file=sys.stderr)
            return 1
        notes.append(f"perfcast platform calibrate took {calibrate_s:.1f} s")
        for program in (STENCIL, SAMPLESORT):
            try:
                found, walls = compare(program, Path(scratch), platform, args)
            except StepFailed as failure:
                failures.append(f"{program.name} failed: {failure}")
                continue
            rows += found
            notes += walls
            print(f"  measured {program.name}", file=sys.stderr, flush=True)
        loads = (load_before, os.getloadavg()[0])
        lines = [*header(sys.argv[1:], args, loads), *table(rows), "", *summary(rows)]
        lines += ["", *notes, *failures, "", WHY_MPI_MISSES, "", WHY_LOAD_MATTERS]
    report = "\n".join(lines).replace(scratch, "$SCRATCH") + "\n"
    print(report)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(report)
    return 0 if rows and not failures else 1


if __name__ == "__main__":
    sys.exit(main())
