"""Taint analysis as precise as the code (issue 18): each class of imprecision found against
perf-taint's expected results, reproduced by a small program with its expected
per-function parameter sets. Every test compiles and runs a real program with
DataFlowSanitizer."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from perfcast.cli import main
from perfcast.errors import InputError
from perfcast.experiment.experiment import Experiment
from perfcast.taint import ArgvParameter, TaintOptions, taint_program
from perfcast.taint.libdb import MPI_DATABASE
from perfcast.taint.priors import priors_from_profile
from perfcast.taint.profile_model import read_profile
from perfcast.taint.validity import algorithm_switch_warnings, match_profile

pytestmark = pytest.mark.slow

MPIRUN = "mpirun --allow-run-as-root --oversubscribe"


def loop_parameters(profile: dict, function: str) -> list[tuple[int, list[str]]]:
    return [(loop["line"], loop["params"]) for loop in profile["functions"][function]["loops"]]


REGISTERED = """\
#include <mpi.h>
#include <stdlib.h>
#include "perfcast.h"
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int ranks;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  int n = atoi(argv[1]);
  int cells = n * 2;
  perfcast_register(&ranks, "ranks");
  perfcast_register(&cells, "cells");
  long s = 0;
  for (int i = 0; i < ranks; i++) s += i;
  for (int i = 0; i < cells; i++) s += i;
  for (int i = 0; i < n; i++) s += i;
  MPI_Finalize();
  return s < 0;
}
"""


def test_registering_a_variable_makes_it_that_parameter_instead_of_adding_one(
    tmp_path: Path,
) -> None:
    """Class 2: ``ranks`` comes from MPI_Comm_size (label p) and ``cells`` from the size
    argument; registered, each is its own parameter and nothing else."""
    (tmp_path / "registered.c").write_text(textwrap.dedent(REGISTERED))
    profile = taint_program(
        ["mpicc", "registered.c", "-o", "registered"],
        f"{MPIRUN} -np 2 ./registered 5",
        [ArgvParameter.parse("size=argv:1")],
        cwd=tmp_path,
    ).to_json()
    assert loop_parameters(profile, "main") == [(13, ["ranks"]), (14, ["cells"]), (15, ["size"])]
    assert profile["functions"]["main"]["dependency"] == "cells + ranks + size"


ONE = "int main(int argc, char **argv) { return argc > 5; }\n"


@pytest.mark.parametrize(
    ("binding", "message"),
    [
        ("size=flag:-s", "the run command './one 1' has no -s, so the program would use its"),
        ("size=argv:2", "has 1 argument(s) after ./one, so there is no argument 2 to label"),
    ],
)
def test_a_binding_the_run_command_cannot_satisfy_is_refused_before_the_build(
    tmp_path: Path, binding: str, message: str
) -> None:
    """Class 5: a flag missing from the run command was reported only after the rewrite,
    build and run; the program's default value is what would have run, unlabelled."""
    (tmp_path / "one.c").write_text(ONE)
    with pytest.raises(InputError, match=re.escape(message)):
        taint_program(
            ["cc", "one.c", "-o", "one"], "./one 1", [ArgvParameter.parse(binding)], cwd=tmp_path
        )
    assert not (tmp_path / "one").exists()  # refused before anything was built


def test_a_run_that_marks_no_parameter_says_so(tmp_path: Path) -> None:
    """Class 5: without any marked parameter every function is constant; the profile must
    say why its table is empty."""
    (tmp_path / "loop.c").write_text(
        "int main(int argc, char **argv) {\n  long s = 0;\n"
        "  for (int i = 0; i < argc * 100; i++) s += i;\n  return s < 0;\n}\n"
    )
    profile = taint_program(["cc", "loop.c", "-o", "loop"], "./loop 3", cwd=tmp_path).to_json()
    assert profile["parameters"] == {}
    assert any("no parameter was marked in this run" in w for w in profile["warnings"])


CONTROL_FLOW = """\
#include <stdlib.h>
static void count_regions(int num_elem, const int *region_of, int *region_size) {
  for (int i = 0; i < num_elem; i++) {
    int r = region_of[i];
    region_size[r]++;
  }
}
static void per_region(const int *region_size) {
  for (int j = 0; j < region_size[0]; j++) {}
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


@pytest.mark.parametrize("control_flow", [True, False])
def test_control_flow_taint_can_be_turned_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, control_flow: bool
) -> None:
    """Class 5: region_size[r]++ runs under the size-bound loop; with control-flow taint
    the count carries size, with data flow only (--no-control-flow) it carries nothing."""
    (tmp_path / "regions.c").write_text(CONTROL_FLOW)
    monkeypatch.chdir(tmp_path)
    argv = ["taint", "-o", str(tmp_path / "profile.json"), "--run", "./regions 5"]
    argv += ["--param", "size=argv:1", *([] if control_flow else ["--no-control-flow"])]
    assert main([*argv, "--", "cc", "regions.c", "-o", "regions"]) == 0
    profile = json.loads((tmp_path / "profile.json").read_text())
    assert loop_parameters(profile, "per_region") == [(9, ["size"] if control_flow else [])]
    assert loop_parameters(profile, "count_regions") == [(3, ["size"])]  # data flow
    assert profile["run"].get("control_flow", True) is control_flow


SENDER = """\
#include <mpi.h>
static void send_one(int rank) {
  int x = rank;
  if (rank == 0) MPI_Send(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
  else if (rank == 1) MPI_Recv(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  send_one(rank);
  MPI_Finalize();
  return 0;
}
"""


def test_another_mpi_database_changes_what_point_to_point_depends_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Class 5: perf-taint's view (MPI_Send and MPI_Recv depend on p) from a database the
    user passes, without editing the installed mpi.json."""
    (tmp_path / "sender.c").write_text(SENDER)
    monkeypatch.chdir(tmp_path)
    database = json.loads(MPI_DATABASE.read_text())
    for routine in ("MPI_Send", "MPI_Recv"):
        database["routines"][routine]["p"] = True
    (tmp_path / "perf-taint-like.json").write_text(json.dumps(database))
    dependencies = {}
    for name, extra in (("ours", []), ("theirs", ["--mpi-database", "perf-taint-like.json"])):
        output = tmp_path / f"{name}.json"
        argv = ["taint", "-o", str(output), "--run", f"{MPIRUN} -np 2 ./sender", *extra]
        assert main([*argv, "--", "mpicc", "sender.c", "-o", "sender"]) == 0
        profile = json.loads(output.read_text())
        dependencies[name] = profile["functions"]["MPI_Send"]["dependency"]
        assert profile["run"].get("library_database") == (extra[1] if extra else None)
    assert dependencies == {"ours": "1", "theirs": "p"}


POSITION = """\
#include <mpi.h>
#include <stdlib.h>
static long boundary(int rank, int size, int n) {
  long s = 0;
  int last = rank == size - 1;
  if (last) { for (int i = 0; i < n; i++) s += i; }
  if (n > 100) { for (int i = 0; i < n; i++) s -= i; }
  for (int i = rank * n; i < (rank + 1) * n; i++) s += i;
  return s;
}
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long s = boundary(rank, size, atoi(argv[1]));
  MPI_Finalize();
  return s == 42;
}
"""


def test_branches_decided_by_the_ranks_position_are_no_algorithm_switch(tmp_path: Path) -> None:
    """Class 6: ``if (rank == size - 1)`` tells the last rank from the others in every run
    (LULESH's ``if (colLoc == tp - 1)``); ``if (n > 100)`` may switch code between runs.
    The rank's position also stays off the loop whose bounds it offsets."""
    (tmp_path / "position.c").write_text(POSITION)
    typed = taint_program(
        ["mpicc", "position.c", "-o", "position"],
        f"{MPIRUN} -np 2 ./position 8",
        [ArgvParameter.parse("size=argv:1")],
        cwd=tmp_path,
    )
    profile = typed.to_json()
    branches = {b["line"]: b for b in profile["functions"]["boundary"]["branches"]}
    assert branches[6]["params"] == ["p"] and branches[6].get("position") is True
    assert branches[7]["params"] == ["size"] and "position" not in branches[7]
    # the loop under n > 100 did not run at n = 8; the last one is offset by rank * n
    assert loop_parameters(profile, "boundary") == [(6, ["size"]), (7, []), (8, ["size"])]
    assert set(profile["parameters"]) == {"p", "size"}  # the rank is no parameter

    rows = [("main->boundary", "time", (p, n), 1.0) for p in (2, 4, 8) for n in (50, 100, 200)]
    experiment = Experiment.from_rows(["p", "size"], rows)
    warnings = algorithm_switch_warnings(typed, experiment, match_profile(typed, experiment))
    assert [w for w in warnings["main->boundary"] if "possible algorithm switch" in w] == [
        "possible algorithm switch on size: the branch at position.c:7 is decided by size; it "
        "selects loops or calls of different cost, so the cost switches with size: one PMNF "
        "over size may fit poorly: model each value of size apart, or read a break along size "
        "as a regime change"
    ]


WHOLE_OBJECT_CXX = """\
#include <cstdlib>
#include <vector>
class Domain {
 public:
  void allocate(int n) { m_grad.resize(n); }
  void set_regions(int r) { m_num = r; }
  int num() const { return m_num; }
  std::vector<double> m_grad;
  int m_num = 0;
};
static long sweep(const Domain &d) {
  long s = 0;
  for (int r = 0; r < d.num(); r++) s += r;
  return s;
}
static long gradients(const Domain &d) {
  long s = 0;
  for (std::size_t i = 0; i < d.m_grad.size(); i++) s += (long)i;
  return s;
}
int main(int argc, char **argv) {
  int size = atoi(argv[1]);
  int regions = atoi(argv[2]);
  Domain d;
  d.set_regions(regions);
  if (size != 0) d.allocate(size);
  std::vector<int> v;
  if (size > 1) v.push_back(1);
  long s = sweep(d) + gradients(d);
  for (std::size_t i = 0; i < v.size(); i++) s += i;
  return s < 0;
}
"""

WHOLE_OBJECT_C = """\
#include <stdlib.h>
struct mesh { int regions; int cells; int refined; int counted; };
static void set_cells(struct mesh *m, int n) { m->cells = n; }
static void refine(struct mesh *m) { m->refined = 4; }
static void count_one(struct mesh *m) { m->counted++; }
static long loop_to(int bound) {
  long s = 0;
  for (int r = 0; r < bound; r++) s += r;
  return s;
}
static long per_region(const struct mesh *m) { return loop_to(m->regions); }
static long per_refinement(const struct mesh *m) { return loop_to(m->refined); }
static long per_count(const struct mesh *m) { return loop_to(m->counted); }
int main(int argc, char **argv) {
  int size = atoi(argv[1]);
  struct mesh m = {atoi(argv[2]), 0, 0, 0};
  if (size != 0) set_cells(&m, size);
  if (size > 2) refine(&m);
  for (int i = 0; i < size; i++) count_one(&m);
  return (per_region(&m) + per_refinement(&m) + per_count(&m)) < 0;
}
"""


def dependencies(profile: dict, *functions: str) -> dict[str, str]:
    return {name: profile["functions"][name]["dependency"] for name in functions}


@pytest.mark.parametrize("control_flow", [True, False])
def test_a_member_call_under_a_branch_taints_what_the_callee_writes_not_the_whole_object(
    tmp_path: Path, control_flow: bool
) -> None:
    """Class 1 (LULESH's ``domain.AllocateGradients`` under ``if (numElem != 0)``): the
    branch reaches the vectors ``allocate`` resizes, not ``m_num``, so the loop over
    ``d.num()`` depends on regions only (it was ``regions*size``). ``v.push_back`` runs in
    libstdc++, which the analysis cannot see: under ``if (size > 1)`` it still gives the
    whole of ``v``, its size included, the branch's label."""
    (tmp_path / "domain.cc").write_text(WHOLE_OBJECT_CXX)
    profile = taint_program(
        ["c++", "domain.cc", "-o", "domain"],
        "./domain 4 3",
        [ArgvParameter.parse("size=argv:1"), ArgvParameter.parse("regions=argv:2")],
        cwd=tmp_path,
        options=TaintOptions(control_flow=control_flow),
    ).to_json()
    assert dependencies(profile, "sweep(Domain const&)", "gradients(Domain const&)", "main") == {
        "sweep(Domain const&)": "regions",
        "gradients(Domain const&)": "size",  # resize(n): data flow into the vector's end
        "main": "regions + size",
    }
    main_loop = "size" if control_flow else "1"  # the loop over v.size() (push_back)
    assert profile["functions"]["main"]["exclusive_dependency"] == main_loop


@pytest.mark.parametrize("control_flow", [True, False])
def test_a_callee_called_under_a_branch_inherits_it_in_what_it_writes(
    tmp_path: Path, control_flow: bool
) -> None:
    """Class 1 in C: ``set_cells(&m, size)`` under ``if (size != 0)`` no longer gives every
    field of ``m`` size; ``refine(&m)`` under ``if (size > 2)`` stores a constant and
    ``count_one(&m)`` counts the iterations of a size loop: only control flow, handed into
    the callee, ties those fields to size."""
    (tmp_path / "mesh.c").write_text(WHOLE_OBJECT_C)
    profile = taint_program(
        ["cc", "mesh.c", "-o", "mesh"],
        "./mesh 4 3",
        [ArgvParameter.parse("size=argv:1"), ArgvParameter.parse("regions=argv:2")],
        cwd=tmp_path,
        options=TaintOptions(control_flow=control_flow),
    ).to_json()
    by_control = "size" if control_flow else "1"
    assert dependencies(profile, "per_region", "per_refinement", "per_count") == {
        "per_region": "regions",
        "per_refinement": by_control,
        "per_count": by_control,
    }
    assert {"set_cells", "refine", "count_one"} <= set(profile["pruned"])  # no frame


CALL_SITES = """\
#include <stdlib.h>
static long work(int n) {
  long s = 0;
  for (int i = 0; i < n; i++) s += i;
  return s;
}
static long nested(int k, int n) {
  long s = 0;
  for (int i = 0; i < k; i++) s += work(n);
  return s;
}
int main(int argc, char **argv) {
  int x1 = atoi(argv[1]), x2 = atoi(argv[2]);
  int k = atoi(argv[3]), m = atoi(argv[4]), n = atoi(argv[5]);
  long s = work(x1);
  s += work(x2);
  s += nested(k, n) + nested(m, n);
  return s < 0;
}
"""


@pytest.mark.parametrize("control_flow", [True, False])
def test_two_calls_from_one_place_add_instead_of_multiplying(
    tmp_path: Path, control_flow: bool
) -> None:
    """Class 3: ``work(x1); work(x2);`` costs ``x1 + x2`` (was ``x1*x2``) and
    ``nested(k, n) + nested(m, n)`` costs ``k*n + m*n`` (was ``k*m*n``). Each call site is a
    context of its own; call paths, which measurements cannot split by call site, add the
    sites' dependencies and visits."""
    (tmp_path / "sites.c").write_text(CALL_SITES)
    names = ("x1", "x2", "k", "m", "n")
    profile = taint_program(
        ["cc", "sites.c", "-o", "sites"],
        "./sites 3 4 2 3 5",
        [ArgvParameter.parse(f"{name}=argv:{i}") for i, name in enumerate(names, start=1)],
        cwd=tmp_path,
        options=TaintOptions(control_flow=control_flow),
    ).to_json()
    assert dependencies(profile, "work", "nested", "main") == {
        "work": "n + x1 + x2",
        "nested": "k*n + m*n",
        "main": "k*n + m*n + x1 + x2",
    }
    work = profile["functions"]["work"]["callpaths"]
    assert (work["main->work"]["dependency"], work["main->work"]["visits"]) == ("x1 + x2", "1")
    assert (work["main->nested->work"]["dependency"], work["main->nested->work"]["visits"]) == (
        "n",
        "k + m",
    )
    assert profile["functions"]["nested"]["exclusive_dependency"] == "k + m"


TWO_REDUCTIONS = """\
#include <mpi.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int a = atoi(argv[1]), b = atoi(argv[2]);
  double *x = calloc(a + b, sizeof(double)), *y = calloc(a + b, sizeof(double));
  MPI_Allreduce(x, y, a, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(x, y, b, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
"""


def test_two_calls_of_a_library_routine_from_one_place_add(tmp_path: Path) -> None:
    """Class 3 for library routines: an Allreduce of ``a`` values and one of ``b`` values
    cost ``a*p + b*p``, not ``a*b*p``."""
    (tmp_path / "reduce.c").write_text(TWO_REDUCTIONS)
    profile = taint_program(
        ["mpicc", "reduce.c", "-o", "reduce"],
        f"{MPIRUN} -np 2 ./reduce 3 4",
        [ArgvParameter.parse("a=argv:1"), ArgvParameter.parse("b=argv:2")],
        cwd=tmp_path,
    ).to_json()
    allreduce = profile["functions"]["MPI_Allreduce"]
    assert allreduce["dependency"] == "a*p + b*p"
    assert allreduce["callpaths"]["main->MPI_Allreduce"]["dependency"] == "a*p + b*p"
    assert profile["functions"]["main"]["dependency"] == "a*p + b*p"


HELPER_A = """\
#include <stdlib.h>
static long helper(int n) {
  long s = 0;
  for (int i = 0; i < n; i++) s += i;
  return s;
}
extern long (*const other_helper)(int);
int main(int argc, char **argv) {
  long s = helper(atoi(argv[1]));
  return (s + other_helper(atoi(argv[2]))) < 0;
}
"""

HELPER_B = """\
static long helper(int m) {
  long s = 0;
  for (int j = 0; j < m; j++) s += 2 * j;
  return s;
}
long (*const other_helper)(int) = helper;
"""


def test_same_named_static_functions_of_two_files_stay_two(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Class 4: ``static long helper(int)`` of a.c loops over ``n``, that of b.c over ``m``.
    The profile keeps two entries with their own parameters (``helper [a.c]``, ``helper
    [b.c]``) and warns; measurements print both as ``main->helper``, whose prior is their
    sum, and the filter names the symbol once."""
    (tmp_path / "a.c").write_text(HELPER_A)
    (tmp_path / "b.c").write_text(HELPER_B)
    monkeypatch.chdir(tmp_path)
    argv = ["taint", "-o", "profile.json", "--filter", "relevant.txt", "--run", "./two 3 5"]
    argv += ["--param", "n=argv:1", "--param", "m=argv:2"]
    assert main([*argv, "--", "cc", "a.c", "b.c", "-o", "two"]) == 0
    profile = json.loads((tmp_path / "profile.json").read_text())
    helpers = {k: v for k, v in profile["functions"].items() if k.startswith("helper")}
    assert {k: v["params"] for k, v in helpers.items()} == {
        "helper [a.c]": ["n"],
        "helper [b.c]": ["m"],
    }
    assert list(helpers["helper [a.c]"]["callpaths"]) == ["main->helper [a.c]"]
    assert list(helpers["helper [b.c]"]["callpaths"]) == ["main->helper [b.c]"]
    warning = (
        "2 functions are named helper (a.c:2, b.c:1): the profile keeps them apart as "
        "helper [a.c], helper [b.c]; measurements name each helper, so a measured call path "
        "through helper gets their dependencies added"
    )
    assert warning in profile["warnings"]
    shown = capsys.readouterr().out
    assert re.search(r"^  helper \[a\.c\] +n$", shown, re.M)
    assert re.search(r"^  helper \[b\.c\] +m$", shown, re.M)
    assert f"warning: {warning}" in shown
    assert (tmp_path / "relevant.txt").read_text().splitlines()[1:] == ["helper", "main"]

    typed = read_profile(tmp_path / "profile.json")
    prior = priors_from_profile(typed)["main->helper"]
    assert prior.multiplicative == (frozenset({"m"}), frozenset({"n"}))
    rows = [("main->helper", "time", (n, m), 1.0) for n in (2, 4, 8) for m in (2, 4, 8)]
    match = match_profile(typed, Experiment.from_rows(["n", "m"], rows))
    assert match.priors["main->helper"] == prior
    assert match.functions["main->helper"] == ["helper [a.c]", "helper [b.c]"]
    assert match.by_function == [] and match.unmatched == []
