"""perfcast design --suggest and perfcast measure --until: the next runs ranked by what they
are worth to the prediction at the target per core-hour, and rounds of them."""

import math
import shutil

import numpy as np
import pytest
from campaign_helpers import copy_stencil, write_spec

from perfcast.cli import main
from perfcast.errors import InputError
from perfcast.experiment.experiment import Experiment
from perfcast.measure.design import ExperimentPlan
from perfcast.modeling import PMNFModeler
from perfcast.modeling.advice import series_at_least
from perfcast.modeling.worth import width_gain
from perfcast.report.summary import default_target
from perfcast.workflows.design import (
    Budget,
    Suggestion,
    Suggestions,
    TargetWidth,
    parse_width,
    rank_runs,
)


def _experiment(sizes, repetitions, truth, seed=1, noise=0.03):
    rng = np.random.default_rng(seed)
    rows = []
    for n, reps in zip(sizes, repetitions, strict=True):
        for _ in range(reps):
            value = truth(n) * (1 + noise * rng.standard_normal())
            rows.append(("main->kernel", "time", [n], value))
            other = 1e-4 * n * (1 + noise * rng.standard_normal())
            rows.append(("main->other", "time", [n], other))
    return Experiment.from_rows(["n"], rows)


def _seconds(point):
    return 1e-6 * point["n"] ** 2


def test_a_point_between_two_rival_shapes_ranks_first():
    # n^2 * log2(n) over 32..64: n^(7/3) and n^(7/4) log2(n)^2 fit as well, and part beyond
    experiment = _experiment([32, 40, 48, 56, 64], [5] * 5, lambda n: 1e-6 * n**2 * np.log2(n))
    models = PMNFModeler().fit(experiment)
    kernel = next(m for m in models if m.callpath == "main->kernel")
    assert kernel.uncertainty is not None and kernel.uncertainty.alternatives
    found = rank_runs(
        models, experiment, {"n": 256}, seconds=_seconds, grid={"n": [32, 40, 48, 56, 64, 128]}
    )
    first = found.suggestions[0]
    assert first.point == {"n": 128.0}
    assert first.reason.startswith("between rival shapes")
    assert first.callpaths[0] == "main->kernel"
    # measured points (5 repetitions each) are never between rivals: they agree there
    assert not any(s.reason.startswith("between") and s.point["n"] <= 64 for s in found.suggestions)
    per_hour = [s.worth / s.core_hours for s in found.suggestions]
    assert per_hour == sorted(per_hour, reverse=True)
    assert "between rival shapes" in found.table() and "n=128" in found.table()


def test_repeating_a_measured_point_rules_out_no_rival():
    """The adaptive-design benchmark repeated one measured point 200 times because the test
    there promised to rule out a rival; the refit moved both with the point's mean and the
    interval never narrowed. Only a new point can set rivals apart."""
    experiment = _experiment([32, 40, 48, 56, 64], [5] * 5, lambda n: 1e-6 * n**2 * np.log2(n))
    kernel = next(m for m in PMNFModeler().fit(experiment) if m.callpath == "main->kernel")
    points = {"n": np.array([64.0, 64.0, 128.0])}
    runs = np.array([1, 500, 3])
    again = width_gain(kernel, {"n": 256}, points, runs, measured=np.array([True, True, False]))
    assert again is not None
    assert again.rivals[0] == again.rivals[1] == 0.0
    assert again.rivals[2] > 0
    assert 0 < again.gain[0] <= again.gain[1] < again.width  # the fit's variance still narrows


def test_a_repetition_is_worth_what_it_does_to_the_mean_the_fit_weighs():
    """The fit weighs each point's mean alike, so a run at a measured point only makes that
    mean more precise: worth less with every run it already has (the adaptive-design
    benchmark repeated the cheap corner 200 times at a constant worth each), and more where
    the point sets the extrapolation (the largest value) than at the smallest."""
    experiment = _experiment([32, 40, 48, 56, 64], [3] * 5, lambda n: 1e-6 * n**2, noise=0.05)
    kernel = next(m for m in PMNFModeler().fit(experiment) if m.callpath == "main->kernel")
    points = {"n": np.array([32.0, 40.0, 48.0, 56.0, 64.0, 32.0])}
    measured = np.ones(6, dtype=bool)
    gain = width_gain(
        kernel,
        {"n": 256},
        points,
        np.ones(6),
        measured=measured,
        counts=np.array([3, 3, 3, 3, 3, 200]),
    )
    assert gain is not None
    assert 0 < gain.gain[5] < gain.gain[0] / 20  # the 201st run barely moves its mean
    assert gain.gain[4] > 2 * gain.gain[0]  # the largest n sets the extrapolation
    models = PMNFModeler().fit(experiment)
    found = rank_runs(models, experiment, {"n": 256}, seconds=lambda point: 1.0, count=10)
    repeats = [s.point["n"] for s in found.suggestions if s.reason.startswith("repetition")]
    assert repeats and repeats[0] == 64.0


def test_a_parameter_with_three_values_gets_new_values_first():
    experiment = _experiment([16, 32, 64], [3] * 3, lambda n: 1e-6 * n**2)
    models = PMNFModeler().fit(experiment)
    found = rank_runs(models, experiment, {"n": 512}, seconds=_seconds, count=3)
    assert any(w.few == ("n",) for w in found.widths)
    assert not found.reached(10.0)  # too few values: no width counts
    first = found.suggestions[0]
    assert first.first and first.reason.startswith("new value of n: it has 3 values")
    assert first.point["n"] in (128.0, 256.0)  # the series 16, 32, 64 continued


def test_a_point_with_one_repetition_gets_a_repetition():
    sizes = [16, 32, 48, 64, 80]
    experiment = _experiment(sizes, [3, 3, 1, 3, 3], lambda n: 1e-6 * n**2, noise=0.1)
    models = PMNFModeler().fit(experiment)
    found = rank_runs(
        models, experiment, {"n": 80}, seconds=_seconds, count=50, stored={(48.0,): 1}
    )
    again = next(s for s in found.suggestions if s.point == {"n": 48.0} and s.first_repetition)
    assert again.reason == "repetition: 1 of the 3 the noise test needs at a point"
    assert again.runs == 2 and again.first_repetition == 1


def test_a_plan_of_suggested_points_runs_only_the_new_repetitions():
    plan = ExperimentPlan(("n",), ((16.0,), (32.0,)), 3, point_repetitions=(3, 1))
    assert [run.key for run in plan.runs()] == ["n=16#0", "n=32#0", "n=16#1", "n=16#2"]


def test_counts_and_budgets_are_bounded_before_work_starts():
    experiment = _experiment([16, 32, 64], [3] * 3, lambda n: 1e-6 * n**2)
    models = PMNFModeler().fit(experiment)
    with pytest.raises(InputError, match="from 1 to 1000"):
        rank_runs(models, experiment, {"n": 512}, seconds=_seconds, count=1001)
    assert Budget.parse("core-hours=5,wall=2h") == Budget(5.0, 7200.0)
    assert parse_width("width=0.2") == 0.2
    for bad in ("core-hours=nan", "wall=-1h", "core-hours=1e99", "cpu=3", "wall=2x"):
        with pytest.raises(InputError, match="--budget"):
            Budget.parse(bad)
    for bad in ("width=0", "0.2", "width=inf"):
        with pytest.raises(InputError, match="--until"):
            parse_width(bad)


def test_cli_refuses_until_without_a_budget_and_suggest_without_a_store(tmp_path, capsys):
    spec = write_spec(
        tmp_path,
        """
        [app]
        name = "toy"
        [run]
        command = "./toy {n}"
        [parameters]
        n = [1, 2, 3]
        """,
    )
    assert main(["measure", str(spec), "--until", "width=0.2"]) == 2
    assert "--until needs --budget" in capsys.readouterr().err
    assert main(["design", str(spec), "--suggest", "3"]) == 2
    assert "no campaign store" in capsys.readouterr().err
    assert main(["design", str(spec), "--at", "n=8"]) == 2
    assert "add --suggest" in capsys.readouterr().err
    assert main(["design", str(spec), "--metric", "cpu_time"]) == 2
    assert "--metric choose what --suggest ranks runs for" in capsys.readouterr().err
    assert main(["measure", str(spec), "--metric", "cpu_time"]) == 2
    assert "--metric belong to --until" in capsys.readouterr().err


needs_mpi = pytest.mark.skipif(
    shutil.which("mpicc") is None or shutil.which("clang-16") is None,
    reason="needs Open MPI and clang-16",
)

TINY_STENCIL = """
[app]
name = "stencil"
[build]
command = "make -s CC='{perfcast_build} mpicc'"
counting_pass = false
[run]
command = "./jacobi {size} 20"
repetitions = 2
timeout = 60
[parameters]
p = [2]
size = [32, 64, 128]
"""


@needs_mpi
@pytest.mark.slow
def test_until_stops_on_the_budget_then_on_the_interval_and_resumes(tmp_path, capsys):
    app = copy_stencil(tmp_path)
    spec = write_spec(app, TINY_STENCIL)
    store = app / "stencil.sqlite"
    # the design's 6 runs alone spend more than this budget: no round follows
    argv = ["measure", str(spec), "--until", "width=0.5", "--budget", "core-hours=0.0001"]
    assert main([*argv, "--at", "size=4096"]) == 0
    out = capsys.readouterr().out
    assert "6 runs ok" in out and "0 round(s)" in out and "stopped: budget spent" in out
    # suggestions for the same store, as a table with reasons and costs
    assert main(["design", str(spec), "--suggest", "4", "--at", "size=4096"]) == 0
    out = capsys.readouterr().out
    assert "core-hours" in out and "rank" in out and "size=" in out
    # a wide enough width is reached at once; --resume continues the same store
    argv = ["measure", str(spec), "--resume", "--until", "width=100", "--budget", "wall=5m"]
    assert main([*argv, "--at", "size=64"]) == 0
    out = capsys.readouterr().out
    assert "stopped: target reached" in out and "0 round(s)" in out
    # a width no run reaches within a small budget: rounds of suggested runs, then the budget
    argv = ["measure", str(spec), "--resume", "--until", "width=0.001", "--per-round", "2"]
    assert main([*argv, "--budget", "core-hours=0.002", "--at", "size=4096"]) == 0
    captured = capsys.readouterr()
    assert "round 1: " in captured.err
    # the budget ends it, or the widest interval stops narrowing first (rounds of cheap
    # repetitions of the MPI calls' noisy times)
    stopped = next(line for line in captured.out.splitlines() if "stopped: " in line)
    assert "stopped: budget spent" in stopped or "stopped: the intervals stopped" in stopped, (
        stopped
    )
    from perfcast.measure.store import CampaignStore

    with CampaignStore.open(store) as opened:
        assert len(opened.runs()) > 6


def test_until_stops_when_the_widest_interval_stops_narrowing():
    """Ranked per core-hour, suggestions turn to cheap repetitions once the model settles:
    three rounds that narrow the widest interval by less than a tenth end the loop."""
    from perfcast.workflows.design import STALL_ROUNDS, _stalled

    assert STALL_ROUNDS == 3
    assert not _stalled([1.0, 0.9, 0.85])  # too few rounds to tell
    assert not _stalled([1.0, 0.9, 0.85, 0.8])  # a fifth narrower: going on pays
    assert _stalled([1.0, 0.99, 0.98, 0.97])
    assert _stalled([0.5, 0.2, 0.2, 0.2, 0.2])  # narrowed at first, then flat
    assert not _stalled([math.inf, 0.3, 0.3, 0.3])  # an interval that did not count yet


def test_the_runs_name_the_call_paths_they_help_by_their_numbers():
    """A run's "helps" column gives the widths table's numbers (``all`` for every one), not
    the call paths again: on LULESH a row of them ran to 500 characters."""
    long = "main->LagrangeLeapFrog->LagrangeElements->CalcQForElems->"
    widths = tuple(
        TargetWidth(f"{long}Kernel{i}", 2.0 - i / 10, 1.9 - i / 10, 2.1 - i / 10) for i in range(3)
    )
    point = {"p": 1.0, "size": 9.0}
    some = Suggestion(point, 3, 0, 5.0, 0.001, 0.5, "new point", (widths[0].callpath,))
    every = Suggestion(
        point, 1, 3, 1.0, 0.0003, 0.1, "repetition", tuple(w.callpath for w in widths)
    )
    text = Suggestions({"p": 8.0, "size": 32.0}, "time", widths, (some, every)).text()
    lines = text.splitlines()
    assert lines[1].split()[0] == "#" and lines[2].split()[0] == "1"
    ranked = [line for line in lines if line.lstrip().startswith(("1 ", "2 "))][-2:]
    assert ranked[0].rstrip().endswith(" 1") and ranked[1].rstrip().endswith(" all")
    assert all(long not in line for line in ranked)


def test_the_default_target_is_a_run_the_measured_series_allows():
    """4x LULESH's largest cube of ranks (27) is 108, a run it refuses; the suggestions are
    for the next cube, 125. A series of powers of two or evenly spaced sizes keeps 4x, and
    values that form no series keep it too."""
    assert series_at_least(np.array([1.0, 8.0, 27.0]), 108.0) == 125.0
    assert series_at_least(np.array([64.0, 128.0, 256.0]), 1024.0) == 1024.0
    assert series_at_least(np.array([10.0, 20.0, 30.0]), 120.0) == 120.0
    assert series_at_least(np.array([3.0, 7.0, 30.0]), 120.0) is None
    assert series_at_least(np.array([2.0, 4.0]), 16.0) is None
    rows = [
        ("main", "time", [p, s], 1.0 + p * s) for p in (1.0, 8.0, 27.0) for s in (3.0, 7.0, 30.0)
    ]
    coordinates = Experiment.from_rows(["p", "size"], rows).coordinates()
    assert default_target(["p", "size"], coordinates) == {"p": 125.0, "size": 120.0}
