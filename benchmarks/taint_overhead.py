"""Taint run vs native run: how much slower is the DataFlowSanitizer-instrumented program?

Builds each program twice from the same compile command -- natively, and through
``perfcast taint`` (rewritten sinks, control-flow taint, DataFlowSanitizer) -- then times
the run command of each (best of ``--repeat``) and prints the ratio. Programs: a C matmul,
a C++ vector code with getters, and the MPI Jacobi stencil of ``examples/stencil`` when
present (its time includes mpirun start-up, about 0.4 s here).

    python3 benchmarks/taint_overhead.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

from perfcast.taint import ArgvParameter, TaintOptions, taint_program

REPO = Path(__file__).resolve().parent.parent
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
    files: dict[str, str]  # file name -> text (copied from examples when empty)
    compile: list[str]
    run: str
    parameters: list[str]


def cases() -> list[Case]:
    found = [
        Case(
            "matmul (C)",
            {"matmul.c": MATMUL},
            ["cc", "-O2", "matmul.c"],
            "./{exe} 400",
            ["n=argv:1"],
        ),
        Case(
            "getters (C++)",
            {"getters.cpp": GETTERS},
            ["c++", "-O2", "getters.cpp"],
            "./{exe} 1000000 40",
            ["n=argv:1", "sweeps=argv:2"],
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
    return found


def best_time(command: str, cwd: Path, repeat: int, env: dict[str, str]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(command, shell=True, cwd=cwd, env=env, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return min(times)


def measure(case: Case, repeat: int) -> tuple[float, float]:
    work = Path(tempfile.mkdtemp(prefix="taint-overhead-"))
    try:
        for name, text in case.files.items():
            (work / name).write_text(textwrap.dedent(text))
        subprocess.run([*case.compile, "-o", "native"], cwd=work, check=True)
        taint_program(
            [*case.compile, "-o", "tainted"],
            case.run.format(exe="tainted"),
            [ArgvParameter.parse(p) for p in case.parameters],
            cwd=work,
            options=TaintOptions(work_dir=work / "taint"),
        )
        records = work / "records"
        records.mkdir()
        env = {**os.environ, "PERFCAST_TAINT_OUT": str(records), "PERFCAST_TAINT_DISCOVER": "1"}
        native = best_time(case.run.format(exe="native"), work, repeat, dict(os.environ))
        tainted = best_time(case.run.format(exe="tainted"), work, repeat, env)
        return native, tainted
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per binary (best is kept)")
    args = parser.parse_args()
    print(f"{'program':<22} {'native s':>9} {'taint s':>9} {'taint/native':>13}")
    for case in cases():
        native, tainted = measure(case, args.repeat)
        print(f"{case.name:<22} {native:>9.3f} {tainted:>9.3f} {tainted / native:>12.1f}x")


if __name__ == "__main__":
    main()
