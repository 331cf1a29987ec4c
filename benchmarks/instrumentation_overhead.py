"""What perfcast's measurement costs: run time of instrumented builds as ratios to native.

Two examples, built with clang-16 -O2 unless the build's name starts with gcc
(``examples/getters``: LULESH-shaped C++ with tiny getters and per-element functions in
another file; ``examples/stencil``: the Jacobi stencil). Builds compared:

    native            no instrumentation
    hooks (empty)     -finstrument-functions-after-inlining with hooks that return at once:
                      the floor of the alternative to XRay, whatever a filter would do
    full              perfcast build: every function measured
    filtered          perfcast build --filter: only the time-step kernels (and main)
    counters          perfcast build --counters: every function, plus basic-block counts
    counters,filtered perfcast build --counters --filter
    gcc native        the same wrapper with its own compiler (gcc): the program the user runs
    gcc hooks (empty) gcc -finstrument-functions with hooks that return at once: the floor
                      of measuring the gcc build itself (issue 25); gcc inserts the hooks
                      before inlining, so inlined getters keep theirs
    full +cpu         the full build run with PERFCAST_CPU_TIME=1 (the thread's CPU clock
                      read at every entry and exit, next to wall time)
    filtered +cpu     the filtered build run with PERFCAST_CPU_TIME=1

Each build runs directly (an MPI singleton, one rank) at two iteration counts; the cost per
iteration is the difference of the two run times divided by the difference of the counts,
which removes start-up (MPI_Init alone takes ~0.3 s here) from the comparison. Times are
CPU seconds (user + system) of the process, the minimum over the repetitions, which are
interleaved across builds so that load from other users of the machine hits all alike.

    python3 benchmarks/instrumentation_overhead.py --quick
    python3 benchmarks/instrumentation_overhead.py \\
        --output benchmarks/results/instrumentation_overhead.txt
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from perfcast.measure.build import BuildOptions, wrap

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
CLANG_CC, CLANG_CXX = "clang-16", "clang++-16"
FLAGS = ("-O2",)
EMPTY_HOOKS = """
void __cyg_profile_func_enter(void *function, void *site) { (void)function; (void)site; }
void __cyg_profile_func_exit(void *function, void *site) { (void)function; (void)site; }
"""


@dataclass(frozen=True)
class Program:
    name: str
    wrapper: str  # mpicc or mpicxx
    sources: tuple[str, ...]
    arguments: tuple[str, ...]  # before the iteration count
    iterations: tuple[int, int]  # short and long run
    kernels: tuple[str, ...]  # the filter


PROGRAMS = (
    Program(
        "getters",
        "mpicxx",
        ("getters/getters.cpp", "getters/elem.cpp"),
        ("36",),
        (4, 124),
        ("LagrangeLeapFrog", "CalcForceForNodes"),
    ),
    Program(
        "stencil",
        "mpicc",
        ("stencil/jacobi.c", "stencil/grid.c", "stencil/halo.c"),
        ("768",),
        (20, 1020),
        ("sweep", "exchange_halo", "global_residual"),
    ),
)

BUILDS = (
    "native",
    "hooks (empty)",
    "full",
    "filtered",
    "counters",
    "counters,filtered",
    "gcc native",
    "gcc hooks (empty)",
)
GCC = "gcc"
"""Prefix of the builds compiled by the MPI wrapper's own compiler instead of clang-16."""
CPU_TIME = {"PERFCAST_CPU_TIME": "1"}
VARIANTS = {
    **{kind: (kind, {}) for kind in BUILDS},
    "full +cpu": ("full", CPU_TIME),
    "filtered +cpu": ("filtered", CPU_TIME),
}
"""What is run: a build and the runtime settings of the run."""


def sh(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    subprocess.run(command, cwd=cwd, env={**os.environ, **(env or {})}, check=True)


def compile_step(
    command: list[str], cwd: Path, options: BuildOptions | None, *, gcc: bool = False
) -> None:
    """Run one compile command, through perfcast build's wrapper unless ``options`` is None
    (the same :func:`wrap` the ``perfcast build`` command runs); ``gcc``: with the MPI
    wrapper's own compiler."""
    if options is None:
        sh(command, cwd, {} if gcc else {"OMPI_CC": CLANG_CC, "OMPI_CXX": CLANG_CXX})
    else:
        wrapped = wrap(command, options)
        sh(wrapped.argv, cwd, wrapped.env)


def build(program: Program, kind: str, directory: Path) -> Path:
    """Compile every source separately, then link, as a Makefile would."""
    work = directory / f"{program.name}-{kind.replace(' ', '_').replace(',', '+')}"
    work.mkdir()
    options: BuildOptions | None = None
    extra: list[str] = []
    link_extra: list[str] = []
    gcc = kind.startswith(GCC)
    if kind.endswith("hooks (empty)"):
        (work / "hooks.c").write_text(EMPTY_HOOKS)
        sh([GCC if gcc else CLANG_CC, "-O2", "-c", "hooks.c", "-o", "hooks.o"], work)
        extra = ["-finstrument-functions" if gcc else "-finstrument-functions-after-inlining"]
        link_extra = ["hooks.o"]
    elif kind not in ("native", "gcc native"):
        filter_file = None
        if "filtered" in kind:
            filter_file = work / "filter.txt"
            filter_file.write_text("\n".join(program.kernels) + "\n")
        options = BuildOptions(counters="counters" in kind, filter_file=filter_file)
    objects = []
    for source in program.sources:
        obj = Path(source).with_suffix(".o").name
        command = [program.wrapper, *FLAGS, *extra, "-c", str(EXAMPLES / source), "-o", obj]
        compile_step(command, work, options, gcc=gcc)
        objects.append(obj)
    link = [program.wrapper, *FLAGS, *objects, *link_extra, "-o", "app", "-lm"]
    compile_step(link, work, options, gcc=gcc)
    return work / "app"


def run_once(binary: Path, arguments: list[str], profile: Path, settings: dict[str, str]) -> float:
    """CPU seconds (user + system, so the CPU clock's system calls count) of one run: less
    disturbed than wall time by the other processes sharing the machine."""
    env = {**os.environ, **settings, "PERFCAST_PROFILE_DIR": str(profile)}
    child = subprocess.Popen([str(binary), *arguments], env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise subprocess.CalledProcessError(child.returncode, child.args)
    return usage.ru_utime + usage.ru_stime


def measure(repetitions: int, directory: Path) -> dict[tuple[str, str], float]:
    """Seconds per iteration of every (program, variant)."""
    binaries = {(p.name, k): build(p, k, directory) for p in PROGRAMS for k in BUILDS}
    best: dict[tuple[str, str, int], float] = {}
    for _ in range(repetitions):
        for program in PROGRAMS:
            for kind, (built, settings) in VARIANTS.items():
                for count in program.iterations:
                    key = (program.name, kind, count)
                    arguments = [*program.arguments, str(count)]
                    profile = directory / "profiles" / f"{program.name}-{len(best)}"
                    binary = binaries[program.name, built]
                    seconds = run_once(binary, arguments, profile, settings)
                    best[key] = min(best.get(key, float("inf")), seconds)
    per_iteration = {}
    for program in PROGRAMS:
        short, long = program.iterations
        for kind in VARIANTS:
            delta = best[program.name, kind, long] - best[program.name, kind, short]
            per_iteration[program.name, kind] = delta / (long - short)
    return per_iteration


def table(per_iteration: dict[tuple[str, str], float]) -> str:
    lines = [
        f"{'build':<20}" + "".join(f"{p.name + ' (x native)':>22}" for p in PROGRAMS),
        "-" * (20 + 22 * len(PROGRAMS)),
    ]
    for kind in VARIANTS:
        cells = "".join(
            f"{per_iteration[p.name, kind] / per_iteration[p.name, 'native']:>22.3f}"
            for p in PROGRAMS
        )
        lines.append(f"{kind:<20}{cells}")
    lines.append("")
    for p in PROGRAMS:
        native = per_iteration[p.name, "native"] * 1e3
        lines.append(
            f"{p.name}: {shlex.join([p.wrapper, *FLAGS])}, arguments {' '.join(p.arguments)} "
            f"ITERATIONS, {native:.2f} ms per native iteration; filter: {', '.join(p.kernels)}"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="2 repetitions")
    parser.add_argument("--output", type=Path, help="also write the report here")
    args = parser.parse_args()
    repetitions = 2 if args.quick else args.repetitions
    with tempfile.TemporaryDirectory(prefix="perfcast-overhead-") as scratch:
        per_iteration = measure(repetitions, Path(scratch))
    command = "python3 benchmarks/instrumentation_overhead.py " + " ".join(sys.argv[1:])
    report = (
        f"$ {command.strip()}\n"
        f"CPU time per iteration as a ratio to native, best of {repetitions} interleaved runs, "
        f"one rank, {os.cpu_count()} cores (shared)\n\n{table(per_iteration)}\n"
    )
    print(report)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
