"""The taint profile in a campaign: ``perfcast taint perfcast.toml``, the reduced experiment
design, the instrumentation filter, and algorithm switches through callees.

One small MPI program is tainted once (module fixture) and everything else is checked
against it with the real tools: the profile written by the campaign form, the design it
reduces, a ``perfcast build --filter`` of it whose profile records list exactly the
relevant functions, and a ``perfcast measure`` that runs only the reduced design.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from perfcast import cli
from perfcast.appspec import load_spec, parse_spec
from perfcast.errors import InputError
from perfcast.experiment import read_experiment
from perfcast.experiment.experiment import Experiment
from perfcast.experiment.points import parse_point
from perfcast.measure.campaign import measure
from perfcast.measure.design import plan_from_spec
from perfcast.measure.local import LocalBackend
from perfcast.measure.profiles import read_profiles, read_rank_profile
from perfcast.taint import instrumented_functions
from perfcast.taint.campaign import bindings_from_command, taint_point
from perfcast.taint.profile_model import TaintProfile, read_profile
from perfcast.taint.validity import algorithm_switch_warnings, match_profile

pytestmark = pytest.mark.slow

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]

APP = r"""
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))
static volatile double sink;
static volatile int block = 4;

NOINLINE static int block_size(void) { return block; }
NOINLINE static void scale(double *a, int n) { for (int i = 0; i < n; i++) a[i] *= 1.5; }
NOINLINE static void smooth(int m) { for (int i = 0; i < m; i++) sink += block_size(); }
NOINLINE static void pairs(int n, int k) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < k; j++) sink += i * j;
}
NOINLINE static void direct(int m) { for (int i = 0; i < m; i++) sink += i; }
NOINLINE static void blocked(int m) { for (int i = 0; i < m; i += block_size()) sink += i; }
NOINLINE static void never(int n) { for (int i = 0; i < n; i++) sink -= i; }

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int n = atoi(argv[1]), m = atoi(argv[2]), k = 1;
  unsigned seed = 1;
  for (int i = 3; i < argc; i++) {
    if (strncmp(argv[i], "--k=", 4) == 0) k = atoi(argv[i] + 4);
    if (strncmp(argv[i], "--seed=", 7) == 0) seed = (unsigned)atoi(argv[i] + 7);
  }
  if (seed == 0) seed = 1; /* seed's label reaches this branch, and no loop */
  srand(seed);
  double *a = calloc(n, sizeof(double));
  scale(a, n);
  smooth(m);
  pairs(n, k);
  if (m < 1000) direct(m); else blocked(m);
  if (n < 0) never(-n);
  double local = a[0] + rand() % 2, total;
  MPI_Allreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  free(a);
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
filter = "app.taint.json"

[run]
command = "./app {n} {m} --k={k} --seed={seed}"
repetitions = 1
timeout = 60

[parameters]
p = [1, 2]
n = [8, 16]
m = [10, 20]
k = [2, 3]
seed = [1, 2]
"""


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A campaign directory after ``perfcast taint perfcast.toml``."""
    work = tmp_path_factory.mktemp("campaign")
    (work / "app.c").write_text(textwrap.dedent(APP))
    (work / "perfcast.toml").write_text(SPEC)
    assert cli.main(["taint", str(work / "perfcast.toml")]) == 0
    return work


@pytest.fixture(scope="module")
def profile(campaign: Path) -> dict:
    return json.loads((campaign / "app.taint.json").read_text())


@pytest.fixture(scope="module")
def typed_profile(campaign: Path) -> TaintProfile:
    return read_profile(campaign / "app.taint.json")


def test_campaign_form_marks_the_spec_parameters_and_runs_a_small_point(
    campaign: Path, profile: dict
) -> None:
    assert profile["run"]["point"] == {"p": 2, "n": 8, "m": 10, "k": 2, "seed": 1}
    assert profile["run"]["command"] == "./app 8 10 --k=2 --seed=1"
    sources = {name: entry["source"] for name, entry in profile["parameters"].items()}
    assert sources == {
        "n": "argv:1",
        "m": "argv:2",
        "k": "flag:--k",
        "seed": "flag:--seed",
        "p": "MPI library database",
    }
    dependencies = {n: profile["functions"][n]["dependency"] for n in profile["relevant"]}
    assert dependencies == {
        "direct": "m",
        "main": "k*n + m + p",
        "pairs": "k*n",
        "scale": "n",
        "smooth": "m",
    }
    assert profile["pruned"] == ["block_size"]
    assert profile["not_executed"] == ["blocked", "never"]
    assert profile["unused_parameters"] == ["seed"]
    # The instrumented build went elsewhere: the campaign's executable was not written.
    assert not (campaign / "app").exists()


def test_branch_records_the_callees_it_selects(profile: dict) -> None:
    switch = next(b for b in profile["functions"]["main"]["branches"] if b["params"] == ["m"])
    assert switch["calls"] == ["blocked", "direct"]
    assert (switch["evaluated"], switch["taken"]) == (2, 2)  # once on each of two ranks


def test_design_keeps_product_grids_lines_and_holds_unused_parameters(campaign: Path) -> None:
    spec = load_spec(campaign / "perfcast.toml")
    full = plan_from_spec(spec, campaign_profile=False)
    reduced = plan_from_spec(spec)  # the campaign's profile is found beside the store
    assert len(full.points) == 32
    assert {point_text(reduced.point(i)) for i in range(len(reduced.points))} == {
        "p=1 n=8 m=10 k=2 seed=1",  # the base point
        "p=2 n=8 m=10 k=2 seed=1",  # the line of p
        "p=1 n=8 m=20 k=2 seed=1",  # the line of m
        "p=1 n=16 m=10 k=2 seed=1",  # the (n, k) grid: pairs multiplies them
        "p=1 n=8 m=10 k=3 seed=1",
        "p=1 n=16 m=10 k=3 seed=1",
    }
    (note,) = reduced.notes
    assert note.startswith("taint profile app.taint.json: 32 -> 6 points (26 runs saved)")
    assert (
        "held at the base value, no function depends on them (their labels reached "
        "only branches that select no loop): seed=1" in note
    )
    assert "joint grids for the products k*n (main, pairs)" in note
    assert "varied one at a time, they multiply no other parameter: m, p" in note
    assert reduced.kind == "product grids"


def test_design_cli_prints_runs_before_and_after(
    campaign: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = str(campaign / "perfcast.toml")
    assert cli.main(["design", spec]) == 0
    out = capsys.readouterr().out
    assert "using the campaign's taint profile" in out
    assert "saves 26 of 32 points of the full factorial design (26 runs)" in out
    assert cli.main(["design", spec, "--no-taint"]) == 0
    assert "taint profile" not in capsys.readouterr().out
    assert cli.main(["design", spec, "--taint", str(campaign / "perfcast.toml")]) == 2
    assert "not JSON" in capsys.readouterr().err


def test_additive_parameters_get_lines(tmp_path: Path, profile: dict) -> None:
    """Only m and p vary: they never multiply, so the full grid becomes two lines."""
    spec_text = SPEC.replace("k = [2, 3]", "k = 2").replace("n = [8, 16]", "n = 8")
    spec_text = spec_text.replace("m = [10, 20]", "m = [10, 20, 40]").replace(
        "p = [1, 2]", "p = [1, 2, 4]"
    )
    spec = parse_spec(spec_text, tmp_path / "perfcast.toml")
    (tmp_path / "app.taint.json").write_text(json.dumps(profile))
    plan = plan_from_spec(spec)
    assert plan.kind == "lines"
    assert len(plan.points) == 5  # 18 points of the full grid; seed held
    assert plan.notes[0].startswith("taint profile app.taint.json: 18 -> 5 points")


def test_filtered_build_measures_exactly_the_relevant_functions(
    campaign: Path, typed_profile: TaintProfile, tmp_path: Path
) -> None:
    expected = set(instrumented_functions(typed_profile))
    assert expected == {"blocked", "direct", "main", "never", "pairs", "scale", "smooth"}
    measured: dict[str, set[str]] = {}
    for name, extra in (("filtered", ["--filter", str(campaign / "app.taint.json")]), ("all", [])):
        build = ["build", *extra, "--", "mpicc", "-O1", str(campaign / "app.c")]
        assert cli.main([*build, "-o", str(tmp_path / name)]) == 0
        out = tmp_path / f"{name}-run"
        subprocess.run(
            [*MPIRUN, "-np", "2", "-x", "PERFCAST_PROFILE_DIR", str(tmp_path / name), "8", "10"],
            check=True,
            capture_output=True,
            env={**os.environ, "PERFCAST_PROFILE_DIR": str(out)},
        )
        frames = {
            frame
            for callpath in read_profiles(out).callpaths
            for frame in callpath.split("->")
            if not frame.startswith("MPI_")
        }
        measured[name] = frames
        if name == "filtered":
            rank = read_rank_profile(out / "rank-0.pcprof")
            assert rank.functions_measured == len(expected)  # all of them are in the binary
            assert rank.unmatched_filter == []
    # Every executed relevant function, and nothing else; unfiltered, the getter shows up.
    assert measured["filtered"] == {"direct", "main", "pairs", "scale", "smooth"}
    assert measured["all"] == measured["filtered"] | {"block_size"}


def test_measure_runs_only_the_reduced_design(campaign: Path) -> None:
    spec = load_spec(campaign / "perfcast.toml")
    shown = io.StringIO()
    result = measure(spec, LocalBackend(), store_path=campaign / "app.sqlite", stream=shown)
    assert result.planned == 6 and result.stored_ok == 6 and not result.failed
    assert "plan: " in shown.getvalue() and "taint" in shown.getvalue()  # why the grid shrank
    experiment = read_experiment(campaign / "app.sqlite")
    # [build] filter names the profile: the measured program recorded the relevant functions.
    frames = {f for c in experiment.callpaths for f in c.split("->") if not f.startswith("MPI_")}
    assert frames == {"direct", "main", "pairs", "scale", "smooth"}


def test_branch_in_a_caller_flags_the_callees_it_selects(typed_profile: TaintProfile) -> None:
    """Paper C2: ``if (m < 1000) direct(m); else blocked(m);`` in main."""
    rows = [
        (callpath, "time", (n, m), 1.0)
        for callpath in ("main", "main->scale", "main->direct", "main->direct->MPI_Barrier")
        for n in (8, 16)
        for m in (10, 20, 40)
    ]
    experiment = Experiment.from_rows(["n", "m"], rows)
    match = match_profile(typed_profile, experiment)
    warnings = algorithm_switch_warnings(typed_profile, experiment, match)
    selects = "in main, decided by m, selects whether direct runs"
    assert any(selects in w for w in warnings["main->direct"])
    assert any(selects in w for w in warnings["main->direct->MPI_Barrier"])
    assert not any("selects whether" in w for w in warnings.get("main->scale", []))
    # main's own branch on m is flagged as before (the branch selects code inside main),
    # as one that selects work: direct and blocked have loops.
    assert any(
        "is decided by m; it selects loops or calls of different cost" in w
        for w in warnings["main"]
    )


def test_bindings_from_the_run_command() -> None:
    found = bindings_from_command(
        "./app {n} -s {size} --it={iters} --x{p} pre{m}", ["n", "size", "iters", "p", "m"]
    )
    assert [p.describe() for p in found.parameters] == ["argv:1", "argv:3", "flag:--it"]
    (note,) = found.notes  # p is labelled by MPI_Comm_size anyway; m cannot be labelled
    assert "parameter m arrives inside the argument 'pre{m}'" in note


def test_taint_point_and_bad_points(campaign: Path) -> None:
    spec = load_spec(campaign / "perfcast.toml")
    assert taint_point(spec, parse_point("n=16,k=3", "--point")) == {
        "p": 2,
        "n": 16,
        "m": 10,
        "k": 3,
        "seed": 1,
    }
    with pytest.raises(InputError, match="names 'size', which is not a parameter"):
        taint_point(spec, {"size": 4})
    with pytest.raises(InputError, match="expected NAME=VALUE"):
        parse_point("n:4", "--point")


def test_build_script_specs_need_the_compile_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "perfcast.toml"
    spec.write_text(SPEC.replace('sources = ["app.c"]', 'command = "make"'))
    assert cli.main(["taint", str(spec)]) == 2
    assert "give it after '--'" in capsys.readouterr().err
    assert cli.main(["taint", str(spec), "--param", "n=argv:1"]) == 2
    assert "--param belongs to the one-off form" in capsys.readouterr().err


def point_text(point: dict[str, float]) -> str:
    return " ".join(f"{name}={value:g}" for name, value in point.items())


def test_priors_bound_totals_over_visits(typed_profile: TaintProfile) -> None:
    """block_size is constant per call (pruned statically) but called in smooth's m loop:
    its measured total depends on m, and so may its model."""
    rows = [
        (callpath, "time", (n, m), 1.0)
        for callpath in ("main", "main->smooth", "main->smooth->block_size", "main->scale")
        for n in (8, 16)
        for m in (10, 20)
    ]
    match = match_profile(typed_profile, Experiment.from_rows(["n", "m"], rows))
    assert match.priors["main->smooth->block_size"].parameters == frozenset({"m"})
    assert match.priors["main->scale"].parameters == frozenset({"n"})
    assert match.unmatched == []
    # Exclusive metrics: main's own loops are constant, but direct is not measured here
    # (inlined or filtered out), so main's exclusive cost includes direct's m loop.
    experiment = Experiment.from_rows(["n", "m"], rows)
    exclusive = match_profile(typed_profile, experiment, inclusive=False)
    assert exclusive.priors["main"].parameters == frozenset({"m", "n"})
    assert any("main: pairs, direct" in note for note in exclusive.notes())
