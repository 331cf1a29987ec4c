"""A prior never makes a model worse unnoticed: conflicts between prior fits and the
measurements (fit, visits) keep the better model and report both fits; a branch decided by
a parameter lets it reach the code, so the contention flag stays quiet."""

from __future__ import annotations

import itertools
import json
import shutil
import textwrap
from pathlib import Path

import pytest
from effort_helpers import fit_effort

from perfcast import cli
from perfcast.effort import DISAGREEMENT_WARNING
from perfcast.experiment import write_experiment
from perfcast.experiment.experiment import Experiment
from perfcast.modeling import PMNFModeler
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.prior import DerivedPriors, Prior
from perfcast.modeling.prior_conflicts import CONFLICT_GAP, CONFLICT_RATIO, resolve_conflict

P = (2, 4, 8, 16, 32)
N = (1000, 2000, 3000, 4000, 5000)
HALO = "main->halo"


def neighbours(p: float) -> float:
    """Rank mean of the neighbours of a 1-D decomposition: the ends have one."""
    return 2 - 2 / p


def halo_experiment(visits: bool = False) -> Experiment:
    rows = []
    for p, n, repetition in itertools.product(P, N, range(3)):
        jitter = 1 + 0.003 * ((repetition * 5 + p + n // 1000) % 3 - 1)
        rows.append((HALO, "time", (p, n), neighbours(p) * (2e-5 + 4e-9 * n) * jitter))
        if visits:
            rows.append((f"{HALO}->MPI_Isend", "visits", (p, n), 10 * neighbours(p)))
            rows.append((f"{HALO}->MPI_Isend", "time", (p, n), neighbours(p) * 1e-6 * jitter))
    return Experiment.from_rows(("p", "n"), rows)


def fits(experiment: Experiment, prior: Prior, callpath: str = HALO, metric: str = "time"):
    modeler = PMNFModeler()
    free = modeler.fit(experiment)
    constrained = modeler.fit(experiment, priors={callpath: prior})
    return constrained[(callpath, metric)], free[(callpath, metric)], free


def test_a_prior_that_cannot_follow_the_data_gives_way_to_the_black_box_model():
    """The halo exchange of issue 12.10: its taint prior allows n only, time follows the
    neighbour count, which depends on p."""
    prior = Prior("taint", parameters=frozenset({"n"}))
    constrained, free, _ = fits(halo_experiment(), prior)
    assert constrained.parameters == ("n",) and "p" in free.parameters
    kept, conflict = resolve_conflict(constrained, free, prior, source="taint")
    assert conflict is not None and not conflict.kept_prior
    assert "p" in kept.parameters and kept.text() == free.text()
    finding = conflict.finding()
    assert finding.stage == "conflict" and (finding.callpath, finding.metric) == (HALO, "time")
    warning = finding.message
    assert kept is free  # the fitted models are facts: neither is changed
    assert warning.startswith("taint prior conflicts with the measurements")
    assert f"SMAPE more than {CONFLICT_RATIO:g}x and {CONFLICT_GAP:g} points above" in warning
    assert f"taint-prior model: {constrained.text()}" in warning
    assert f"black-box model: {free.text()}" in warning


def test_a_prior_within_the_threshold_is_kept_silently():
    prior = Prior("taint", parameters=frozenset({"n", "p"}))
    constrained, free, _ = fits(halo_experiment(), prior)
    kept, conflict = resolve_conflict(constrained, free, prior, source="taint")
    assert conflict is None and kept is constrained and not kept.warnings


def test_contention_on_a_parameter_the_code_cannot_read_keeps_the_prior_model():
    prior = Prior("taint", parameters=frozenset({"n"}))
    constrained, free, _ = fits(halo_experiment(), prior)
    kept, conflict = resolve_conflict(constrained, free, prior, source="taint", unreachable={"p"})
    assert conflict is not None and conflict.kept_prior and kept is constrained
    assert "the taint-prior model is kept" in conflict.finding().message


def test_visits_that_use_a_ruled_out_parameter_refute_the_prior():
    experiment = halo_experiment(visits=True)
    callpath = f"{HALO}->MPI_Isend"
    prior = Prior("taint", parameters=frozenset({"n"}))
    constrained, free, free_set = fits(experiment, prior, callpath)
    visits = free_set[(callpath, "visits")]
    assert "p" in visits.parameters
    # even where p could not be read by the code, measured visits outrank the analysis
    kept, conflict = resolve_conflict(
        constrained, free, prior, source="taint", visits=visits, unreachable={"p"}
    )
    assert conflict is not None and not conflict.kept_prior
    assert "the measured visits depend on p" in conflict.finding().message
    assert kept.text() == free.text()


def test_effort_prior_that_misses_waiting_time_keeps_the_black_box_model():
    """Counts grow with n only; time also waits, growing with p: the time model keeps the
    measured p-dependence and names both fits."""
    rows = []
    for p, n, repetition in itertools.product(P, N, range(3)):
        rows.append(("main->compute", "basic_blocks", (p, n), 7.0 * n + 20))
        time = (3e-8 * n + 2e-6 * p * p) * (1 + 0.002 * (repetition - 1))
        rows.append(("main->compute", "time", (p, n), time))
    result, _ = fit_effort(Experiment.from_rows(("p", "n"), rows))
    model = result.models[("main->compute", "time")]
    assert model.prior is None and "p" in model.parameters
    notes = result.models.notes(("main->compute", "time"))
    (warning,) = [w for w in notes if DISAGREEMENT_WARNING in w]
    assert warning.startswith(f"[conflict] {DISAGREEMENT_WARNING}")
    assert "the black-box model is kept" in warning and "effort-prior model:" in warning
    # with taint proving the code cannot read p, the waiting is contention: effort stays
    proof = Unreachable({"main->compute": frozenset({"p"})})
    kept, _ = fit_effort(Experiment.from_rows(("p", "n"), rows), others=[proof])
    effort_model = kept.models[("main->compute", "time")]
    assert effort_model.prior is not None and effort_model.parameters == ("n",)
    notes = kept.models.notes(("main->compute", "time"))
    assert any("the effort-prior model is kept" in w for w in notes)


class Unreachable:
    """A source of no priors that only says which parameters each call path's code
    provably cannot read, as a taint profile does."""

    name = "taint"

    def __init__(self, unreachable: dict[str, frozenset[str]]):
        self.unreachable = unreachable

    def derive(self, experiment: Experiment) -> DerivedPriors:
        return DerivedPriors(self.name, unreachable=self.unreachable)


HALO_PROGRAM = """\
#include <mpi.h>
#include <stdlib.h>
static void halo(int n, double *buf, int rank, int p) {
  MPI_Request requests[4];
  int pending = 0;
  if (rank > 0)
    MPI_Isend(buf, n, MPI_DOUBLE, rank - 1, 0, MPI_COMM_WORLD, &requests[pending++]);
  if (rank < p - 1)
    MPI_Isend(buf + n, n, MPI_DOUBLE, rank + 1, 0, MPI_COMM_WORLD, &requests[pending++]);
  if (rank > 0)
    MPI_Irecv(buf + 2 * n, n, MPI_DOUBLE, rank - 1, 0, MPI_COMM_WORLD, &requests[pending++]);
  if (rank < p - 1)
    MPI_Irecv(buf + 3 * n, n, MPI_DOUBLE, rank + 1, 0, MPI_COMM_WORLD, &requests[pending++]);
  MPI_Waitall(pending, requests, MPI_STATUSES_IGNORE);
}
int main(int argc, char **argv) {
  int p, rank;
  MPI_Init(&argc, &argv);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int n = atoi(argv[1]);
  double *buf = calloc(4 * (size_t)n, sizeof(double));
  halo(n, buf, rank, p);
  MPI_Finalize();
  return 0;
}
"""


@pytest.fixture(scope="module")
def halo_profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("mpicc") is None:
        pytest.skip("needs Open MPI")
    from perfcast.taint import ArgvParameter, taint_program

    work = tmp_path_factory.mktemp("halo")
    (work / "halo.c").write_text(textwrap.dedent(HALO_PROGRAM))
    profile = taint_program(
        ["mpicc", "halo.c", "-o", "halo"],
        "mpirun --allow-run-as-root --oversubscribe -np 3 ./halo 8",
        [ArgvParameter.parse("n=argv:1")],
        cwd=work,
    )
    path = work / "profile.json"
    path.write_text(json.dumps(profile.to_json()))
    return path


@pytest.mark.slow
def test_halo_exchange_with_taint_keeps_its_p_dependence_and_no_contention_flag(
    halo_profile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 12.10 end to end: a real taint profile of a halo exchange whose neighbour
    count is decided by branches on p; times as the exchange costs them."""
    profile = json.loads(halo_profile.read_text())
    branches = profile["functions"]["halo"]["branches"]
    assert any("p" in b["params"] for b in branches)
    rows = []
    for p, n, repetition in itertools.product(P, N, range(3)):
        jitter = 1 + 0.003 * ((repetition * 5 + p) % 3 - 1)
        rows.append((HALO, "time", (p, n), neighbours(p) * (2e-5 + 4e-9 * n) * jitter))
        rows.append((f"{HALO}->MPI_Waitall", "time", (p, n), neighbours(p) * 3e-6 * jitter))
    data = tmp_path / "times.json"
    write_experiment(Experiment.from_rows(("p", "n"), rows), data)
    out = tmp_path / "models.json"
    assert cli.main(["model", str(data), "--taint", str(halo_profile), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "conflict with their taint prior" in err
    models = ModelSet.load(out)
    for callpath in (HALO, f"{HALO}->MPI_Waitall"):
        model = models[(callpath, "time")]
        assert "p" in model.parameters, (callpath, model.text())
        notes = models.notes((callpath, "time"))  # the findings survive the model file
        assert any("[conflict] taint prior conflicts with the measurements" in w for w in notes)
        assert not any("which the code cannot" in w for w in notes), notes
