"""Parameters that steer the algorithm (issue 28): a branch that picks between loops of
different cost makes its parameter a cost parameter of the function, although it bounds no
loop. ``perfcast taint`` lists it in the function's dependency and says it switches
algorithms, ``perfcast design`` keeps all its values, and the modeler's prior allows it and
its finding says how to read the fit. A branch that guards cheap code only (``if (seed ==
0)``) still leaves its parameter held. The program is built and run with DataFlowSanitizer.
"""

from __future__ import annotations

import contextlib
import io
import json
import textwrap
from pathlib import Path

import pytest

from perfcast import cli
from perfcast.appspec import load_spec
from perfcast.experiment.experiment import Experiment
from perfcast.measure.design import plan_from_spec
from perfcast.taint.profile_model import TaintProfile, read_profile
from perfcast.taint.validity import algorithm_switch_warnings, match_profile

APP = r"""
#include <mpi.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))
static volatile double sink;

NOINLINE static void work(int n, int mode) {
  if (mode > 2) {
    for (int i = 0; i < n; i++) sink += i;
  } else {
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++) sink += i * j;
  }
}
NOINLINE static void linear(int n) { for (int i = 0; i < n; i++) sink += i; }
NOINLINE static void quadratic(int n) { for (int i = 0; i < n * n; i++) sink -= i; }
NOINLINE static unsigned fallback(void) { return 7; }

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int n = atoi(argv[1]), mode = atoi(argv[2]);
  unsigned seed = (unsigned)atoi(argv[3]);
  if (seed == 1) seed = fallback(); /* cheap code: seed changes no cost */
  srand(seed);
  work(n, mode);
  if (mode > 3) linear(n); else quadratic(n); /* a switch through calls with loops */
  sink += rand() % 2;
  MPI_Finalize();
  return 0;
}
"""

SPEC = """\
[app]
name = "app"

[build]
sources = ["app.c"]
compiler = "mpicc"
flags = ["-O1"]
output = "app"

[run]
command = "./app {n} {mode} {seed}"
repetitions = 1
timeout = 60

[parameters]
p = [1, 2]
n = [8, 16, 32]
mode = [1, 2, 3, 4]
seed = [1, 2]
"""


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The campaign directory after ``perfcast taint perfcast.toml``, and what it printed."""
    work = tmp_path_factory.mktemp("switches")
    (work / "app.c").write_text(textwrap.dedent(APP))
    (work / "perfcast.toml").write_text(SPEC)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert cli.main(["taint", str(work / "perfcast.toml")]) == 0
    return work, printed.getvalue()


@pytest.fixture(scope="module")
def typed_profile(campaign: tuple[Path, str]) -> TaintProfile:
    return read_profile(campaign[0] / "app.taint.json")


@pytest.mark.slow
def test_a_branch_choosing_loops_makes_its_parameter_a_cost_parameter(
    campaign: tuple[Path, str],
) -> None:
    work, _ = campaign
    profile = json.loads((work / "app.taint.json").read_text())
    assert profile["run"]["point"] == {"p": 2, "n": 8, "mode": 1, "seed": 1}
    functions = profile["functions"]
    # mode = 1 ran the O(n^2) side; mode multiplies the work under its branch.
    assert functions["work"]["params"] == ["mode", "n"]
    assert functions["work"]["dependency"] == "mode*n"
    (branch,) = functions["work"]["branches"]
    assert (branch["line"], branch["params"], branch["selects_work"]) == (9, ["mode"], True)
    # In main, the call chosen by mode is multiplied by mode, the cheap seed branch is not.
    assert functions["main"]["dependency"] == "mode*n"
    seed_branch = next(b for b in functions["main"]["branches"] if b["params"] == ["seed"])
    assert "selects_work" not in seed_branch
    assert seed_branch["calls"] == ["fallback"]  # a call, but of a function without loops
    assert profile["parameters"]["mode"]["switches"] == 2
    assert "switches" not in profile["parameters"]["seed"]
    assert profile["unused_parameters"] == ["seed"]


@pytest.mark.slow
def test_summary_says_mode_switches_algorithms_and_seed_is_held(
    campaign: tuple[Path, str],
) -> None:
    _, printed = campaign
    (line,) = [text for text in printed.splitlines() if text.startswith("algorithm switch:")]
    assert line.startswith(
        "algorithm switch: mode switches algorithms in main (branch at app.c:27), "
        "work (branch at app.c:9): the cost of the work it selects depends on mode, so mode "
        "stays in the model and perfcast design keeps all its values; one PMNF over mode "
        "may fit poorly: model each value of mode apart"
    )
    assert (
        "warning: parameter seed decides 1 branch(es), none of which selects a loop or a "
        "call of a function with loops" in printed
    )
    assert "perfcast design holds it at its base value" in printed


@pytest.mark.slow
def test_design_keeps_every_value_of_mode_and_holds_seed(campaign: tuple[Path, str]) -> None:
    work, _ = campaign
    reduced = plan_from_spec(load_spec(work / "perfcast.toml"))
    points = [reduced.point(i) for i in range(len(reduced.points))]
    assert {point["seed"] for point in points} == {1}
    # mode multiplies n: both sides of the branch (all four values) at every n.
    assert {(point["n"], point["mode"]) for point in points} == {
        (n, mode) for n in (8, 16, 32) for mode in (1, 2, 3, 4)
    }
    (note,) = reduced.notes
    assert "held at the base value, no function depends on them" in note and "seed=1" in note
    assert (
        "kept at all their values, they switch algorithms (a branch on them selects loops "
        "of different cost, varied with the parameters of that work): mode in main "
        "(app.c:27), work (app.c:9)" in note
    )


@pytest.mark.slow
def test_modeler_prior_allows_mode_and_the_finding_says_how_to_read_it(
    typed_profile: TaintProfile,
) -> None:
    rows = [
        (callpath, "time", (n, mode), 1.0)
        for callpath in ("main", "main->work", "main->linear", "main->quadratic")
        for n in (8, 16, 32)
        for mode in (1, 2, 3, 4)
    ]
    experiment = Experiment.from_rows(["n", "mode"], rows)
    match = match_profile(typed_profile, experiment)
    assert match.priors["main->work"].parameters == frozenset({"mode", "n"})
    assert match.priors["main"].parameters == frozenset({"mode", "n"})
    warnings = algorithm_switch_warnings(typed_profile, experiment, match)
    assert (
        "possible algorithm switch on mode: the branch at app.c:9 is decided by mode; it "
        "selects loops or calls of different cost, so the cost switches with mode: one PMNF "
        "over mode may fit poorly: model each value of mode apart, or read a break along "
        "mode as a regime change"
    ) in warnings["main->work"]
    assert any(
        "in main, decided by mode, selects whether quadratic runs; it selects loops" in w
        for w in warnings["main->quadratic"]
    )
