"""End-to-end taint analysis: small C, C++ and MPI programs built with DataFlowSanitizer.

Every test compiles and runs a real program and asserts the exact profile entries.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from perfcast import cli
from perfcast.errors import InputError, PerfcastError
from perfcast.modeling.prior import Prior
from perfcast.taint import (
    ArgvParameter,
    priors_from_profile,
    relevant_functions,
    taint_program,
)
from perfcast.taint.filter import HEADER as FILTER_HEADER
from perfcast.taint.profile_model import TaintProfile
from perfcast.taint.toolchain import find_toolchain

pytestmark = pytest.mark.slow

MPIRUN = "mpirun --allow-run-as-root --oversubscribe"


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return path


def loops(entry: dict) -> list[tuple[int, list[str], list]]:
    """(line, params, children) of a loop-nest tree, compactly."""
    return [(lp["line"], lp["params"], loops({"loops": lp["loops"]})) for lp in entry["loops"]]


C_PROGRAM = """\
#include <stdlib.h>
#include "perfcast.h"
struct Shape { int rows; int cols; };
static int square(int x) { return x * x; }
static int pick(int s) { int r; if (s > 10) r = 100; else r = 5; return r; }
static void fill(const struct Shape *shape, double *a) {
  for (int i = 0; i < shape->rows; i++)
    for (int j = 0; j < shape->cols; j++) a[i] += square(j);
}
static int scan(const int *limit) {
  int k = 0;
  while (1) { if (k >= *limit) break; k++; }
  for (int t = 0; t < 4; t++) k += t;
  return k;
}
int main(int argc, char **argv) {
  struct Shape shape;
  shape.rows = atoi(argv[1]);
  shape.cols = atoi(argv[3]); /* ./app ROWS --cols COLS */
  int iters = 3;
  perfcast_register(&iters, "iters");
  double *a = calloc(shape.rows, sizeof(double));
  for (int t = 0; t < iters; t++) fill(&shape, a);
  scan(&shape.cols);
  int q = pick(shape.rows);
  for (int i = 0; i < q; i++) a[0] += 1;
  return 0;
}
"""


@pytest.fixture(scope="module")
def c_profile(tmp_path_factory: pytest.TempPathFactory) -> TaintProfile:
    work = tmp_path_factory.mktemp("c")
    write(work, "app.c", C_PROGRAM)
    return taint_program(
        ["cc", "app.c", "-o", "app"],
        "./app 4 --cols 6",
        [ArgvParameter.parse("rows=argv:1"), ArgvParameter.parse("cols=flag:--cols")],
        cwd=work,
    )


@pytest.fixture(scope="module")
def c_json(c_profile: TaintProfile) -> dict:
    """The profile as ``perfcast taint`` writes it."""
    return c_profile.to_json()


def test_c_nested_loops_multiply_through_structs_pointers_and_calls(c_json: dict) -> None:
    fill = c_json["functions"]["fill"]
    assert loops(fill) == [(7, ["rows"], [(8, ["cols"], [])])]
    assert fill["dependency"] == "cols*rows"
    assert list(fill["callpaths"]) == ["main->fill"]


def test_c_sequential_loops_add_and_callee_composes_into_caller(c_json: dict) -> None:
    main = c_json["functions"]["main"]
    # iters loop around fill (cols*rows), then pick's result (control flow on rows).
    assert loops(main) == [(23, ["iters"], []), (26, ["rows"], [])]
    assert main["dependency"] == "cols*iters*rows"
    assert main["exclusive_dependency"] == "iters + rows"
    assert main["terms"] == [["cols", "iters", "rows"]]


def test_c_break_guard_is_an_exit_condition(c_json: dict) -> None:
    scan = c_json["functions"]["scan"]
    assert loops(scan) == [(12, ["cols"], []), (13, [], [])]
    assert scan["loops"][1]["constant_bounds"] is True
    assert scan["dependency"] == "cols"
    (branch,) = scan["branches"]
    assert branch["line"] == 12 and branch["params"] == ["cols"]
    assert branch["exits_loops_at"] == [12] and branch["in_loop"] is True
    assert branch["evaluated"] == 7 and branch["taken"] == 1


def test_c_static_pruning_and_coverage(c_json: dict) -> None:
    assert c_json["pruned"] == ["pick", "square"]
    assert c_json["relevant"] == ["fill", "main", "scan"]
    assert c_json["constant"] == []
    assert c_json["unused_parameters"] == []
    assert c_json["batches"] == [["rows", "cols", "iters"]]
    assert c_json["parameters"] == {
        "rows": {"source": "argv:1", "loops": 2, "functions": 2, "branches": 0, "mpi": []},
        "cols": {"source": "flag:--cols", "loops": 2, "functions": 2, "branches": 1, "mpi": []},
        "iters": {
            "source": "perfcast_register",
            "loops": 1,
            "functions": 1,
            "branches": 0,
            "mpi": [],
        },
    }


def test_priors_and_filter_from_profile(c_profile: TaintProfile, tmp_path: Path) -> None:
    priors = priors_from_profile(c_profile)
    # fill costs cols*rows per call and is called in the iters loop: its total multiplies.
    assert c_profile.functions["fill"].callpaths["main->fill"].visits == {frozenset({"iters"})}
    assert priors["main->fill"] == Prior(
        "taint",
        parameters=frozenset({"rows", "cols", "iters"}),
        multiplicative=(frozenset({"rows", "cols", "iters"}),),
    )
    assert priors["main->scan"].parameters == frozenset({"cols"})
    restricted = priors_from_profile(c_profile, parameters=["iters"])
    assert restricted["main->scan"] == Prior.constant("taint")
    assert restricted["main"].parameters == frozenset({"iters"})
    exclusive = priors_from_profile(c_profile, inclusive=False)
    assert exclusive["main"].multiplicative == (frozenset({"iters"}), frozenset({"rows"}))
    assert not exclusive["main"].allows_product(["iters", "rows"])
    assert relevant_functions(c_profile) == ["fill", "main", "scan"]


CONTROL_FLOW = """#include <stdlib.h>
/* LULESH's regElemSize: counts made inside a parameter-bound loop carry its label. */
static void count_regions(int num_elem, const int *region_of, int *region_size) {
  for (int i = 0; i < num_elem; i++) {
    int r = region_of[i];
    region_size[r]++;
  }
}
static void per_region(const int *region_size) {
  int fixed = 0;
  for (int i = 0; i < 3; i++) { fixed = 7; }
  for (int j = 0; j < region_size[0]; j++) {}
  for (int k = 0; k < fixed; k++) {}
}
int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  int *region_of = calloc(n, sizeof(int));
  int region_size[2] = {0, 0};
  count_regions(n, region_of, region_size);
  per_region(region_size);
  return 0;
}
"""


def test_control_flow_taint_reaches_values_counted_in_a_loop(tmp_path: Path) -> None:
    write(tmp_path, "regions.c", CONTROL_FLOW)
    profile = taint_program(
        ["gcc", "regions.c", "-o", "regions"],
        "./regions 5",
        [ArgvParameter.parse("size=argv:1")],
        cwd=tmp_path,
    ).to_json()
    per_region = profile["functions"]["per_region"]
    # The data-flow-only label of region_size[0] would be empty; fixed is set under a
    # constant loop, so it stays unlabelled.
    assert loops(per_region) == [(11, [], []), (12, ["size"], []), (13, [], [])]
    assert per_region["dependency"] == "size"


CXX_HEADER = """#pragma once
#include <cstddef>
#include <vector>
class Grid {
 public:
  explicit Grid(int n) : cells_(n * n), side_(n) {}
  std::size_t cells() const { return cells_.size(); }
  double total() const {
    double s = 0;
    for (std::size_t i = 0; i < cells(); i++) s += cells_[i];
    return s;
  }
  std::vector<double> cells_;
 private:
  int side_;
};
"""

CXX_PROGRAM = """#include <cstdlib>
#include <vector>
#include "grid.h"
#include "perfcast.h"
template <class T> T sum(const std::vector<T> &v) {
  T s = 0;
  for (const T &x : v) s += x;
  return s;
}
int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  int steps = atoi(argv[2]);
  perfcast_register(&steps, "steps");
  Grid grid(n);
  std::vector<int> history;
  for (int t = 0; t < steps; t++) history.push_back(t);
  double acc = 0;
  for (std::size_t k = 0; k < history.size(); k++) acc += grid.total();
  acc += sum(grid.cells_);
  for (int w : {1, 2, 3}) acc += w;
  return acc > 1e300;
}
"""


def test_cxx_templates_range_for_and_header_methods(tmp_path: Path) -> None:
    write(tmp_path, "grid.h", CXX_HEADER)
    write(tmp_path, "main.cpp", CXX_PROGRAM)
    profile = taint_program(
        ["g++", "-std=c++17", "main.cpp", "-o", "app"],
        "./app 3 4",
        [ArgvParameter.parse("n=argv:1")],
        cwd=tmp_path,
    ).to_json()
    functions = profile["functions"]
    assert loops(functions["Grid::total() const"]) == [(10, ["n"], [])]
    assert loops(functions["sum(const std::vector<T> &)"]) == [(7, ["n"], [])]
    main = functions["main"]
    # push_back under a steps loop labels the vector; its size() bounds the next loop.
    assert loops(main) == [(16, ["steps"], []), (18, ["steps"], []), (20, [], [])]
    assert main["loops"][2]["constant_bounds"] is True  # range over a braced list
    assert main["loops"][2]["executed"] is None  # ... has no condition to observe
    assert main["dependency"] == "n*steps"
    assert list(functions["Grid::total() const"]["callpaths"]) == ["main->Grid::total() const"]
    assert profile["pruned"] == ["Grid::Grid(int)", "Grid::cells() const"]


MPI_PROGRAM = """#include <mpi.h>
#include <stdlib.h>
static void exchange(int n, double *buf) {
  MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int p, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int n = atoi(argv[1]);
  int iters = atoi(argv[2]);
  double *buf = calloc(n * p, sizeof(double));
  for (int t = 0; t < iters; t++) {
    for (int i = 0; i < n * p; i++) buf[i] += i;
    exchange(n, buf);
  }
  int v = iters;            /* labelled on every rank ...                      */
  if (rank == 0) v = 2;     /* ... but the root sends a constant               */
  MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
  for (int i = 0; i < v; i++) buf[0] += 1;  /* received: no stale label        */
  MPI_Finalize();
  return 0;
}
"""


@pytest.mark.parametrize("processes", [2, 4])
def test_mpi_implicit_p_count_labels_and_receive_buffers(tmp_path: Path, processes: int) -> None:
    write(tmp_path, "ring.c", MPI_PROGRAM)
    taint = taint_program(
        ["mpicc", "ring.c", "-o", "ring"],
        f"{MPIRUN} -np {processes} ./ring 4 2",
        [ArgvParameter.parse("n=argv:1"), ArgvParameter.parse("iters=argv:2")],
        cwd=tmp_path,
    )
    profile = taint.to_json()
    functions = profile["functions"]
    assert profile["processes"] == processes
    allreduce = {"params": ["n", "p"], "calls": 2 * processes}  # iters=2 calls per rank
    assert functions["exchange"]["mpi"] == {"MPI_Allreduce": allreduce}
    assert functions["exchange"]["dependency"] == "n*p"
    assert functions["exchange"]["exclusive_dependency"] == "1"
    main = functions["main"]
    assert loops(main) == [(14, ["iters"], [(15, ["n", "p"], [])]), (21, [], [])]
    assert main["dependency"] == "iters*n*p"
    assert functions["MPI_Allreduce"]["callpaths"] == {
        "main->exchange->MPI_Allreduce": {
            "params": ["n", "p"],
            "dependency": "n*p",
            "terms": [["n", "p"]],
            "visits": "iters",  # called once per iteration of main's loop
            "visits_terms": [["iters"]],
        }
    }
    assert functions["MPI_Bcast"]["dependency"] == "p"
    assert functions["MPI_Comm_rank"]["dependency"] == "1"
    assert profile["parameters"]["p"]["source"] == "MPI_Comm_size"
    assert profile["parameters"]["p"]["mpi"] == ["MPI_Allreduce", "MPI_Bcast"]
    priors = priors_from_profile(taint)
    assert priors["main->MPI_Comm_rank"] == Prior.constant("taint")
    assert priors["main->exchange->MPI_Allreduce"].parameters == frozenset({"iters", "n", "p"})


MANY = 10
MANY_PROGRAM = (
    '#include "perfcast.h"\n'
    "int main(void) {\n"
    + "".join(f'  int v{i} = {i + 2}; perfcast_register(&v{i}, "p{i}");\n' for i in range(MANY))
    + "  long s = 0;\n"
    + "".join(f"  for (int i = 0; i < v{i}; i++) s += i;\n" for i in range(MANY - 1))
    + f"  for (int i = 0; i < v0; i++) for (int j = 0; j < v{MANY - 1}; j++) s += j;\n"
    + "  return s < 0;\n}\n"
)


def test_more_parameters_than_labels_run_in_batches_and_merge(tmp_path: Path) -> None:
    write(tmp_path, "many.c", MANY_PROGRAM)
    profile = taint_program(["cc", "many.c", "-o", "many"], "./many", cwd=tmp_path).to_json()
    assert profile["batches"] == [[f"p{i}" for i in range(8)], ["p8", "p9"]]
    main = profile["functions"]["main"]
    expected: list[tuple[int, list[str], list]] = [
        (4 + MANY + i, [f"p{i}"], []) for i in range(MANY - 1)
    ]
    expected.append((3 + 2 * MANY, ["p0"], [(3 + 2 * MANY, ["p9"], [])]))
    assert loops(main) == expected
    # p0 (first batch) and p9 (second batch) multiply in the nest.
    assert main["dependency"] == "p0*p9 + " + " + ".join(f"p{i}" for i in range(1, MANY - 1))
    assert all(profile["parameters"][f"p{i}"]["loops"] >= 1 for i in range(MANY))


def test_parameter_that_reaches_no_loop_is_reported(tmp_path: Path) -> None:
    write(
        tmp_path,
        "unused.c",
        """        #include <stdio.h>
        #include <stdlib.h>
        int main(int argc, char **argv) {
          int n = atoi(argv[1]);
          double scale = atof(argv[2]);
          double s = 0;
          for (int i = 0; i < n; i++) s += scale * i;
          printf("%f\\n", s);
          return 0;
        }
        """,
    )
    profile = taint_program(
        ["cc", "unused.c", "-o", "unused"],
        "./unused 3 0.5",
        [ArgvParameter.parse("n=argv:1"), ArgvParameter.parse("scale=argv:2")],
        cwd=tmp_path,
    ).to_json()
    assert profile["unused_parameters"] == ["scale"]
    assert profile["parameters"]["scale"]["loops"] == 0
    (warning,) = profile["warnings"]
    # Reaching nothing is no evidence of costing nothing: the summary says where the label
    # was last seen instead of advising to leave the parameter out.
    assert warning.startswith(
        "parameter scale reaches no loop condition, no branch and no MPI call in this run: "
        "its label was probably lost, last seen where atof read its value."
    )
    assert "perfcast design keeps scale at all its values" in warning
    assert profile["functions"]["main"]["dependency"] == "n"


def test_code_libclang_cannot_parse_names_file_and_line(tmp_path: Path) -> None:
    write(tmp_path, "broken.c", "int main(void) {\n  int x = ;\n  return 0;\n}\n")
    with pytest.raises(InputError) as caught:
        taint_program(["cc", "broken.c", "-o", "broken"], "./broken", cwd=tmp_path)
    assert caught.value.path == tmp_path / "broken.c"
    assert caught.value.line == 2
    assert "libclang cannot parse" in str(caught.value)


def test_binding_not_on_the_command_line_is_an_input_error(tmp_path: Path) -> None:
    """Under a wrapper script the command does not show the program's arguments, so only
    the run itself can tell that a position is missing (test_taint_precision.py has the
    checks made before the build)."""
    write(tmp_path, "one.c", "int main(int argc, char **argv) { return argc > 5; }\n")
    write(tmp_path, "run.sh", "./one 1\n")
    with pytest.raises(InputError, match=r"size \(argv:2\)"):
        taint_program(
            ["cc", "one.c", "-o", "one"],
            "sh run.sh",
            [ArgvParameter.parse("size=argv:2")],
            cwd=tmp_path,
        )


def test_bad_binding_syntax() -> None:
    with pytest.raises(InputError, match="argv:N"):
        ArgvParameter.parse("size=argv:zero")


def test_missing_clang_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    find_toolchain.cache_clear()
    monkeypatch.setenv("PATH", str(tmp_path))
    try:
        with pytest.raises(PerfcastError, match=r"clang-16 was not found.*libclang-rt-16-dev"):
            find_toolchain()
    finally:
        monkeypatch.setenv("PATH", os.environ["PATH"])
        find_toolchain.cache_clear()


def test_cli_one_off_form_writes_profile_and_filter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, "app.c", C_PROGRAM)
    monkeypatch.chdir(tmp_path)
    status = cli.main(
        [
            "taint",
            "-o",
            "profile.json",
            "--filter",
            "relevant.txt",
            "--run",
            "./app 2 --cols 3",
            "--param",
            "rows=argv:1",
            "--",
            "cc",
            "app.c",
            "-o",
            "app",
        ]
    )
    assert status == 0
    profile = json.loads((tmp_path / "profile.json").read_text())
    # cols is not marked here, so scan is constant and fill depends on rows alone.
    assert profile["functions"]["fill"]["dependency"] == "rows"
    assert profile["constant"] == ["scan"]
    assert (tmp_path / "relevant.txt").read_text() == f"{FILTER_HEADER}fill\nmain\n"
    assert "relevant" in capsys.readouterr().out
    assert cli.main(["taint", "-o", "x.json", "--run", "./app", "--", "cc", "gone.c"]) == 2
    assert "gone.c: source file of the compile command not found" in capsys.readouterr().err
