"""Taint run vs native run: how much slower is the DataFlowSanitizer-instrumented program?

Builds each program twice from the same compile command -- natively, and through
``perfcast taint`` (rewritten sinks, control-flow taint, DataFlowSanitizer) -- then runs
the run command of each (best of ``--repeat``) and prints the ratios of wall time and of
CPU time (user + system of the children: under load the wall time is the noisier). The
tainted program runs in the environment the taint run gives it: the parameters marked
(``$PERFCAST_TAINT_ARGV``), so labels propagate as they do in ``perfcast taint``.

Programs: a C matmul, a C++ vector code with getters, the MPI Jacobi stencil of
``examples/stencil`` when present (its time includes mpirun start-up), and LULESH 2.0 in one
process from ``../shared/apps`` when present (sizes of issue 18: ``-s 15 -i 100``).

Timings depend on the machine's load, printed with them. Instruction counts do not: where
valgrind is installed, each program also runs a smaller input under callgrind, and the ratio
of the instructions executed (whole process, start-up included) is printed too. For LULESH
the whole-process ratio understates the cost of the steps (MPI_Init and dynamic linking
are most of the native run of ``-s 8 -i 10``), so it also runs ``-i 1`` and prints the ratio
of the difference: the instructions of nine time steps, without start-up.

    python3 benchmarks/taint_overhead.py [--repeat 3] [--output FILE] [--no-callgrind]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from perfcast.taint import ArgvParameter, TaintOptions, taint_program
from perfcast.taint.params import runtime_spec

REPO = Path(__file__).resolve().parent.parent
APPS = Path(os.environ.get("PERFCAST_APPS", REPO.parent / "shared" / "apps"))
MPIRUN = "mpirun --allow-run-as-root --oversubscribe"

MATMUL = """\
#include <stdlib.h>
#include <stdio.h>
static void matmul(int n, const double *a, const double *b, double *c) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      double s = 0;
      for (int k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
      c[i * n + j] = s;
    }
}
int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  double *a = malloc(sizeof(double) * n * n), *b = malloc(sizeof(double) * n * n);
  double *c = malloc(sizeof(double) * n * n);
  for (int i = 0; i < n * n; i++) { a[i] = i % 7; b[i] = i % 5; }
  matmul(n, a, b, c);
  printf("%f\\n", c[n * n - 1]);
  return 0;
}
"""

GETTERS = """\
#include <cstdio>
#include <cstdlib>
#include <vector>
class Mesh {
 public:
  explicit Mesh(int n) : x_(n), y_(n) {}
  std::size_t size() const { return x_.size(); }
  double &x(std::size_t i) { return x_[i]; }
  double y(std::size_t i) const { return y_[i]; }
 private:
  std::vector<double> x_, y_;
};
static void relax(Mesh &m, int sweeps) {
  for (int s = 0; s < sweeps; s++)
    for (std::size_t i = 0; i < m.size(); i++) m.x(i) = 0.5 * (m.x(i) + m.y(i)) + s;
}
int main(int argc, char **argv) {
  Mesh m(atoi(argv[1]));
  relax(m, atoi(argv[2]));
  std::printf("%f\\n", m.x(0));
  return 0;
}
"""


@dataclass
class Case:
    name: str
    files: dict[str, str]  # file name -> text
    compile: list[str]
    run: str
    parameters: list[str]
    small_run: str | None = None  # the run under callgrind; None: not counted (mpirun)
    start_run: str | None = None  # small_run cut to one step: subtracted, leaves the steps


@dataclass(frozen=True)
class Measured:
    native_wall: float
    tainted_wall: float
    native_cpu: float
    tainted_cpu: float
    native_instructions: int | None
    tainted_instructions: int | None
    native_step_instructions: int | None = None  # small_run minus start_run
    tainted_step_instructions: int | None = None


def cases() -> list[Case]:
    found = [
        Case(
            "matmul (C)",
            {"matmul.c": MATMUL},
            ["cc", "-O2", "matmul.c"],
            "./{exe} 400",
            ["n=argv:1"],
            "./{exe} 120",
        ),
        Case(
            "getters (C++)",
            {"getters.cpp": GETTERS},
            ["c++", "-O2", "getters.cpp"],
            "./{exe} 1000000 40",
            ["n=argv:1", "sweeps=argv:2"],
            "./{exe} 100000 4",
        ),
    ]
    stencil = REPO / "examples" / "stencil"
    if (stencil / "jacobi.c").exists():
        sources = sorted(p.name for p in stencil.glob("*.[ch]"))
        found.append(
            Case(
                "stencil (MPI, -np 2)",
                {name: (stencil / name).read_text() for name in sources},
                ["mpicc", "-O2", *[s for s in sources if s.endswith(".c")], "-lm"],
                f"{MPIRUN} -np 2 ./{{exe}} 512 200",
                ["size=argv:1", "iterations=argv:2"],
            )
        )
    lulesh = APPS / "lulesh"
    if (lulesh / "lulesh.cc").exists():
        sources = ["lulesh.cc", "lulesh-comm.cc", "lulesh-init.cc", "lulesh-util.cc"]
        sources.append("lulesh-viz.cc")
        found.append(
            Case(
                "LULESH (1 process)",
                {p.name: p.read_text() for p in lulesh.iterdir() if p.suffix in {".cc", ".h"}},
                ["mpicxx", "-DUSE_MPI=1", "-O2", *sources],
                "./{exe} -s 15 -i 100 -r 11 -b 1 -c 1 -q",
                [f"{n}=flag:-{n[0]}" for n in ("size", "iterations", "regions", "balance", "cost")],
                "./{exe} -s 8 -i 10 -r 11 -b 1 -c 1 -q",
                "./{exe} -s 8 -i 1 -r 11 -b 1 -c 1 -q",
            )
        )
    return found


def best_time(command: str, cwd: Path, repeat: int, env: dict[str, str]) -> tuple[float, float]:
    """Best wall time and best CPU time (user + system of the command and its children)."""
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, shell=True, cwd=cwd, env=env, check=True, capture_output=True)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return min(walls), min(cpus)


def instructions(command: str, cwd: Path, env: Mapping[str, str]) -> int:
    """Instructions the whole process executes (callgrind's total, start-up included)."""
    result = subprocess.run(
        f"valgrind --tool=callgrind --callgrind-out-file=/dev/null {command}",
        shell=True,
        cwd=cwd,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    found = re.search(r"Collected : (\d+)", result.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count from callgrind: {result.stderr[-400:]}")
    return int(found.group(1))


def measure(case: Case, repeat: int, callgrind: bool) -> Measured:
    work = Path(tempfile.mkdtemp(prefix="taint-overhead-"))
    try:
        for name, text in case.files.items():
            (work / name).write_text(textwrap.dedent(text))
        subprocess.run([*case.compile, "-o", "native"], cwd=work, check=True)
        parameters = [ArgvParameter.parse(p) for p in case.parameters]
        taint_program(
            [*case.compile, "-o", "tainted"],
            case.run.format(exe="tainted"),
            parameters,
            cwd=work,
            options=TaintOptions(work_dir=work / "taint"),
        )
        records = work / "records"
        records.mkdir()
        env = {
            **os.environ,
            "PERFCAST_TAINT_OUT": str(records),
            "PERFCAST_TAINT_PARAMS": ",".join(p.name for p in parameters),
            "PERFCAST_TAINT_DISCOVER": "1",
            "PERFCAST_TAINT_ARGV": runtime_spec(parameters),
        }
        native = best_time(case.run.format(exe="native"), work, repeat, dict(os.environ))
        tainted = best_time(case.run.format(exe="tainted"), work, repeat, env)
        counts: tuple[int | None, int | None] = (None, None)
        steps: tuple[int | None, int | None] = (None, None)
        if callgrind and case.small_run is not None:
            native_count = instructions(case.small_run.format(exe="native"), work, os.environ)
            tainted_count = instructions(case.small_run.format(exe="tainted"), work, env)
            counts = (native_count, tainted_count)
            if case.start_run is not None:
                steps = (
                    native_count
                    - instructions(case.start_run.format(exe="native"), work, os.environ),
                    tainted_count - instructions(case.start_run.format(exe="tainted"), work, env),
                )
        return Measured(native[0], tainted[0], native[1], tainted[1], *counts, *steps)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per binary (best is kept)")
    parser.add_argument("--output", type=Path, help="also write the report here")
    parser.add_argument(
        "--no-callgrind", action="store_true", help="skip the instruction counts (valgrind)"
    )
    args = parser.parse_args()
    callgrind = not args.no_callgrind and shutil.which("valgrind") is not None
    lines = [
        "$ python3 benchmarks/taint_overhead.py " + " ".join(sys.argv[1:]),
        "load average (1, 5, 15 min) before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()),
        f"{'program':<22} {'native s':>9} {'taint s':>9} {'wall':>6} "
        f"{'native cpu':>11} {'taint cpu':>10} {'cpu':>6} {'instructions (callgrind)':>26} "
        f"{'of the steps':>19}",
    ]
    print("\n".join(lines), flush=True)
    for case in cases():
        m = measure(case, args.repeat, callgrind)
        native, tainted = m.native_instructions, m.tainted_instructions
        counted = f"{tainted / native:>5.1f}x of {native:.2e}" if native and tainted else "-"
        native_steps, tainted_steps = m.native_step_instructions, m.tainted_step_instructions
        per_step = (
            f"{tainted_steps / native_steps:>5.1f}x of {native_steps:.2e}"
            if native_steps and tainted_steps
            else "-"
        )
        line = (
            f"{case.name:<22} {m.native_wall:>9.3f} {m.tainted_wall:>9.3f} "
            f"{m.tainted_wall / m.native_wall:>5.1f}x {m.native_cpu:>11.3f} {m.tainted_cpu:>10.3f} "
            f"{m.tainted_cpu / m.native_cpu:>5.1f}x {counted:>26} {per_step:>19}"
        )
        print(line, flush=True)
        lines.append(line)
    lines.append("load average (1, 5, 15 min) after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    lines.append(
        "instructions: the smaller input of each case (matmul 120, getters 100000 4, LULESH "
        "-s 8 -i 10), whole process; the stencil runs under mpirun and is not counted; "
        "of the steps: LULESH -s 8 -i 10 minus -s 8 -i 1 (nine time steps, no start-up)"
    )
    print("\n".join(lines[-2:]))
    if args.output:
        args.output.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
