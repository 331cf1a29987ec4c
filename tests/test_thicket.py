"""thicket and hatchet both ways (perfcast.integrations.thicket), and the notebook views of
models (perfcast.modeling.views), on thicket's real LULESH Caliper set."""

import warnings
from pathlib import Path

import pytest

from perfcast.errors import InputError
from perfcast.experiment import read_experiment

thicket = pytest.importorskip(
    "thicket", reason="could not import thicket: pip install -e '.[thicket]'"
)
hatchet = pytest.importorskip(
    "hatchet", reason="could not import hatchet: pip install -e '.[thicket]'"
)

from perfcast.integrations.thicket import (  # noqa: E402 - after the optional imports
    add_model_columns,
    from_graphframes,
    from_thicket,
    model_thicket,
)

CALIPER = Path(__file__).resolve().parents[2] / "shared" / "data" / "caliper"
LULESH = CALIPER / "mpi_scaling_cali"
AVG = "Avg time/rank"


@pytest.fixture(scope="module")
def lulesh():
    if not LULESH.is_dir():
        pytest.skip(f"shared Caliper data not found at {CALIPER}")
    files = sorted(str(path) for path in LULESH.glob("*.cali"))
    return thicket.Thicket.from_caliperreader(files, disable_tqdm=True)


def test_a_thicket_is_the_experiment_the_caliper_reader_gives(lulesh):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numhosts changes with jobsize, as it should
        ours = read_experiment(LULESH, parameters="jobsize")
        theirs = from_thicket(lulesh, "jobsize", metrics=[AVG])
    assert theirs.parameters == ["jobsize"]
    assert sorted(theirs.callpaths) == sorted(ours.callpaths)
    mine = ours.data.query("metric == 'time_inclusive'").set_index(["callpath", "jobsize"]).value
    from_tk = theirs.data.set_index(["callpath", "jobsize"]).value
    assert from_tk.sort_index().to_numpy() == pytest.approx(mine.sort_index().to_numpy())


def test_a_missing_metadata_column_names_those_there_are(lulesh):
    with pytest.raises(InputError, match=r"no metadata column 'nx'.*jobsize"):
        from_thicket(lulesh, ["nx"])
    with pytest.raises(InputError, match=r"no metric 'flops'"):
        from_thicket(lulesh, "jobsize", metrics=["flops"])


def test_models_come_back_as_statsframe_columns_with_their_judgement(lulesh):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        models = model_thicket(lulesh, "jobsize", metrics=[AVG])
    added = add_model_columns(lulesh, models, target={"jobsize": 1000})
    assert f"{AVG}_perfcast-model" in added and f"{AVG}_perfcast-unfit" in added
    stats = lulesh.statsframe.dataframe
    by_name = stats.set_index("name")
    # every node of the statsframe got its model, joined on the node index
    assert stats[f"{AVG}_perfcast-model"].notna().all()
    allreduce = stats[stats["name"] == "MPI_Allreduce"]
    # a model the summary would set apart says so in the table, with the remedy
    assert allreduce[f"{AVG}_perfcast-unfit"].str.contains("poor fit").any()
    main_row = by_name.loc["main"]
    assert main_row[f"{AVG}_perfcast-lower"] <= main_row[f"{AVG}_perfcast-at_target"]
    assert main_row[f"{AVG}_perfcast-at_target"] <= main_row[f"{AVG}_perfcast-upper"]
    # joining again replaces the columns instead of duplicating them
    assert set(add_model_columns(lulesh, models)) < set(added)
    assert len(lulesh.statsframe.dataframe.columns) == len(set(lulesh.statsframe.dataframe.columns))


def literal(p: float, n: float) -> list[dict]:
    """A two-function call tree whose solve costs n^3/p exactly (a known truth)."""
    cost = 2e-9 * n**3 / p
    solve = {"frame": {"name": "solve"}, "metrics": {"time": cost, "time (inc)": cost}}
    return [
        {
            "frame": {"name": "main"},
            "metrics": {"time": 0.5, "time (inc)": 0.5 + cost},
            "children": [solve],
        }
    ]


def test_graphframes_with_two_parameters_give_multi_parameter_models():
    frames = [
        (hatchet.GraphFrame.from_literal(literal(p, n)), {"p": p, "n": n})
        for p in (2, 4, 8, 16, 32)
        for n in (16, 32, 48, 64, 80)
    ]
    experiment = from_graphframes(frames, metrics=["time"])
    assert experiment.parameters == ["p", "n"]
    assert len(experiment.coordinates()) == 25
    from perfcast.workflows.model import ModelRequest, model_campaign

    models = model_campaign(ModelRequest(experiment, priors=())).models
    solve = models[("main->solve", "time")]
    (term,) = solve.terms
    exponents = {factor.parameter: factor.exponent for factor in term.factors}
    assert exponents == {"n": 3, "p": -1}, solve.text()
    table = models.to_dataframe({"p": 1024, "n": 80})
    row = table.set_index("callpath").loc["main->solve"]
    assert row["at_target"] == pytest.approx(2e-9 * 80**3 / 1024, rel=0.05)


def test_graphframes_must_share_their_parameters():
    one = hatchet.GraphFrame.from_literal(literal(2, 16))
    with pytest.raises(InputError, match="the same parameters"):
        from_graphframes([(one, {"p": 2}), (one, {"p": 4, "n": 16})])


def test_notebook_views_show_formula_notes_and_plot(lulesh, tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        experiment = read_experiment(LULESH, parameters="jobsize")
        models = model_thicket(lulesh, "jobsize", metrics=[AVG])
    html = models._repr_html_()
    assert "<table>" in html and "45 models over jobsize" in html and "poor fit" in html
    model = models[("main->lulesh.cycle->TimeIncrement->MPI_Allreduce", AVG)]
    assert model._repr_latex_().startswith("$$")
    timed = model_thicket(lulesh, "jobsize", metrics=[AVG])
    assert len(timed) == len(models)
    from perfcast.workflows.model import ModelRequest, model_campaign

    time_models = model_campaign(ModelRequest(experiment, priors=(), metrics=("time",))).models
    ax = time_models[("main", "time")].plot("jobsize", experiment=experiment)
    ax.figure.savefig(tmp_path / "main.png")
    assert (tmp_path / "main.png").stat().st_size > 1000
    assert len(ax.collections) >= 2  # the interval band and the measured points


@pytest.mark.slow
def test_the_caliper_example_runs_as_a_script(tmp_path):
    """examples/caliper_lulesh.py, as the README tells a user to run it."""
    import subprocess
    import sys

    example = Path(__file__).parents[1] / "examples" / "caliper_lulesh.py"
    done = subprocess.run(
        [sys.executable, str(example), str(LULESH), str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "CalcHourglassControlForElems" in done.stdout
    assert "models set apart" in done.stdout
    assert (tmp_path / "caliper_lulesh.png").stat().st_size > 1000


def test_perfcast_measurements_become_a_thicket_and_come_back_the_same():
    from perfcast.experiment.experiment import Experiment
    from perfcast.integrations.thicket import thicket_literals, to_thicket

    rows = []
    for p in (2, 4, 8):
        for n in (16, 32, 64):
            for repetition in range(3):
                noise = 1 + 0.01 * repetition
                rows.append(("main", "time", (p, n), 0.5 * noise))
                rows.append(("main->solve", "time", (p, n), 1e-6 * n**3 / p * noise))
                rows.append(("main->solve", "time:max", (p, n), 1.2e-6 * n**3 / p * noise))
    experiment = Experiment.from_rows(["p", "n"], rows)
    literals = thicket_literals(experiment)
    assert len(literals) == 9 and literals[0][1] == {"p": 2.0, "n": 16.0}
    (main,) = literals[0][0]
    solve = main["children"][0]["metrics"]
    # the inclusive value adds the subtree; a maximum over ranks does not add up
    assert main["metrics"]["time (inc)"] == pytest.approx(0.5 * 1.01 + solve["time"])
    assert "time:max (inc)" not in main["metrics"]
    tk = to_thicket(experiment, metrics=["time"])
    assert sorted(tk.metadata.columns) == ["n", "p"] and len(tk.metadata) == 9
    back = from_thicket(tk, ["p", "n"], metrics=["time"])
    medians = experiment.aggregate().query("metric == 'time'").set_index(["callpath", "p", "n"])
    returned = back.data.set_index(["callpath", "p", "n"]).value
    assert returned.sort_index().to_numpy() == pytest.approx(
        medians.value.loc[returned.index].sort_index().to_numpy()
    )
