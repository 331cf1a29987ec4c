"""``perfcast model --taint``: a real taint profile of a small C program restricts the models
of measurements that carry a false dependency, and flags contention and algorithm switches.
"""

from __future__ import annotations

import math
import textwrap
from itertools import product
from pathlib import Path

import pytest

from perfcast import cli
from perfcast.errors import InputError
from perfcast.experiment import write_experiment
from perfcast.experiment.experiment import Experiment
from perfcast.modeling.modelset import ModelSet
from perfcast.taint import ArgvParameter, taint_program
from perfcast.taint.profile_model import read_profile
from perfcast.taint.validity import match_profile, normalise_callpath, without_arguments

pytestmark = pytest.mark.slow

PROGRAM = """\
#include <stdlib.h>
static double setup(void) {          /* fixed work: the code cannot depend on n or t */
  double s = 0;
  for (int i = 0; i < 100; i++) s += i;
  return s;
}
static double compute(int n) {       /* n work; a data branch with mixed outcomes */
  double s = 0;
  int *a = calloc(n, sizeof(int));
  for (int i = 0; i < n; i++) {
    a[i] = i % 3;
    if (a[i] == 0) s += 1;
  }
  free(a);
  return s;
}
static double spread(int t) {
  double s = 0;
  for (int i = 0; i < t; i++) s += i;
  return s;
}
static double fast(int n) { double s = 0; for (int i = 0; i < n; i++) s += i; return s; }
static double slow(int n) {
  double s = 0;
  for (int i = 0; i < n; i++) for (int j = 0; j < n; j++) s += j;
  return s;
}
static double choose(int n) {        /* the algorithm depends on n */
  double r;
  if (n > 100) r = fast(n); else r = slow(n);
  return r;
}
int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  int t = atoi(argv[2]);
  double s = setup() + compute(n) + spread(t) + choose(n);
  return s < 0;
}
"""

N_VALUES = (10, 20, 40, 80, 160)
T_VALUES = (1, 2, 4, 8, 16)


@pytest.fixture(scope="module")
def profile_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("app")
    (work / "app.c").write_text(textwrap.dedent(PROGRAM))
    profile = taint_program(
        ["cc", "app.c", "-o", "app"],
        "./app 10 3",
        [ArgvParameter.parse("n=argv:1"), ArgvParameter.parse("t=argv:2")],
        cwd=work,
    )
    path = work / "profile.json"
    profile.save(path)
    return path


def measurements() -> Experiment:
    """Times as a contended machine measures them: setup and compute slow down with the
    thread count t, although their code never reads t (paper C1)."""
    rows = []
    for n, t, repetition in product(N_VALUES, T_VALUES, range(3)):
        jitter = 1 + 0.002 * ((repetition * 7 + n + t) % 5 - 2)
        contention = 1 + 0.3 * math.log2(t)
        values = {
            "main->setup()": 0.5 * contention,
            "main->compute(int)": 1e-3 * n * contention,
            "main->spread(int)": 2e-3 * t,
            "main->choose(int)": 1e-4 * n * n if n <= 100 else 1e-3 * n,
            "main->log_progress": 0.01,
        }
        for callpath, value in values.items():
            rows.append((callpath, "time", [n, t], value * jitter))
    return Experiment.from_rows(["n", "t"], rows)


def run_model(
    tmp_path: Path,
    experiment: Experiment,
    *options: str,
) -> tuple[int, ModelSet | None]:
    data = tmp_path / "times.json"
    write_experiment(experiment, data)
    out = tmp_path / "models.json"
    status = cli.main(["model", str(data), "-o", str(out), *options])
    models = ModelSet.load(out) if status == 0 else None
    return status, models


def test_frames_lose_argument_lists_and_qualifiers() -> None:
    assert without_arguments("sweep(double*, int)") == "sweep"
    assert without_arguments("Grid::cells() const") == "Grid::cells"
    assert without_arguments("operator()(int)") == "operator()"
    assert without_arguments("MPI_Allreduce") == "MPI_Allreduce"
    assert (
        normalise_callpath("main->solve(int, int)->MPI_Allreduce") == "main->solve->MPI_Allreduce"
    )


def test_profile_matches_measured_call_paths(profile_path: Path) -> None:
    profile = read_profile(profile_path)
    match = match_profile(profile, measurements())
    assert match.priors["main->setup()"].parameters == frozenset()
    assert match.priors["main->compute(int)"].parameters == frozenset({"n"})
    assert match.priors["main->spread(int)"].parameters == frozenset({"t"})
    assert match.unmatched == ["main->log_progress"]
    assert match.by_function == []
    assert any("modeled without prior: main->log_progress" in n for n in match.notes())


def test_taint_prior_excludes_the_false_parameter(
    profile_path: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, models = run_model(tmp_path, measurements(), "--taint", str(profile_path))
    assert status == 0 and models is not None
    captured = capsys.readouterr()
    assert "modeled without prior: main->log_progress" in captured.err
    setup = models["main->setup()", "time"]
    compute = models["main->compute(int)", "time"]
    assert setup.terms == () and setup.prior == "taint: constant"
    assert compute.parameters == ("n",)
    assert models["main->spread(int)", "time"].parameters == ("t",)
    # The black-box fit saw t in both; the warning says why the prior overrules it.
    # (findings of the taint stage, kept beside the models in the file)
    setup_notes = models.notes(("main->setup()", "time"))
    compute_notes = models.notes(("main->compute(int)", "time"))
    assert any("[taint] depends on t, which the code cannot" in w for w in setup_notes)
    assert any("[taint] depends on t, which the code cannot" in w for w in compute_notes)
    choose = models.notes(("main->choose(int)", "time"))
    assert any("possible algorithm switch on n" in w for w in choose)
    # compute's branch has mixed outcomes per iteration: no switch.
    assert not any("algorithm switch" in w for w in compute_notes)
    assert "depends on t, which the code cannot" in captured.out  # in the summary's warnings


def test_check_mode_keeps_black_box_models_and_flags_them(
    profile_path: Path, tmp_path: Path
) -> None:
    status, models = run_model(
        tmp_path, measurements(), "--taint", str(profile_path), "--taint-mode", "check"
    )
    assert status == 0 and models is not None
    setup = models["main->setup()", "time"]
    assert "t" in setup.parameters and setup.prior is None
    notes = models.notes(("main->setup()", "time"))
    assert any("depends on t, which the code cannot: contention or noise" in w for w in notes)
    assert not any(
        "which the code cannot" in w for w in models.notes(("main->spread(int)", "time"))
    )


def test_parameter_mismatch_is_named(
    profile_path: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    profile = read_profile(profile_path)
    renamed = measurements().data.rename(columns={"t": "threads"})
    extra = Experiment(["n", "threads"], renamed)
    with pytest.raises(InputError, match=r"parameters \['threads'\] were not marked"):
        match_profile(profile, extra)
    status, _ = run_model(tmp_path, extra, "--taint", str(profile_path))
    assert status == 2
    assert "profile.json: experiment parameters ['threads']" in capsys.readouterr().err

    data = measurements().data
    only_n = Experiment(["n"], data[data["t"] == 1].drop(columns="t"))
    match = match_profile(profile, only_n)
    assert match.dropped_parameters == ["t"]
    assert match.priors["main->spread(int)"].parameters == frozenset()
    assert any("['t'] are not parameters of the experiment" in n for n in match.notes())


def test_other_call_sites_match_by_function_and_bad_profiles_are_input_errors(
    profile_path: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    profile = read_profile(profile_path)
    data = measurements().data.replace({"main->compute(int)": "main->driver(int)->compute(int)"})
    match = match_profile(profile, Experiment(["n", "t"], data))
    assert match.by_function == ["main->driver(int)->compute(int)"]
    assert match.priors["main->driver(int)->compute(int)"].parameters == frozenset({"n"})
    assert any("matched by function name: main->driver->compute" in n for n in match.notes())

    for text, message in (("{not json", "not JSON"), ("[1, 2]", "not a perfcast taint profile")):
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        status, _ = run_model(tmp_path, measurements(), "--taint", str(bad))
        err = capsys.readouterr().err
        assert status == 2 and "bad.json" in err and message in err
