"""One point of parameter values, ``p=4096,size=30``: what ``--at`` and ``--point`` read, and
the one spelling every message gives a point and a parameter value."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from perfcast.cli import main
from perfcast.errors import InputError
from perfcast.experiment import write_experiment
from perfcast.experiment.experiment import Experiment, Metric
from perfcast.experiment.points import format_point, format_value, parse_point
from perfcast.modeling.modelset import ModelSet
from perfcast.workflows.design import rank_runs


def test_a_point_is_one_value_per_parameter_separated_by_commas():
    point = parse_point(" p=4096, size = 30.5 ,", "--at", ["p", "size"])
    assert point == {"p": 4096, "size": 30.5}
    assert isinstance(point["p"], int)  # written into a run command as 4, not 4.0
    assert parse_point("", "--at", ["p"]) == {}


def test_format_point_is_read_back_by_parse_point():
    point = {"p": 2, "size": 16.0, "eps": 0.25}
    assert format_point(point) == "p=2, size=16, eps=0.25"
    assert parse_point(format_point(point), "--point") == point


@pytest.mark.parametrize(
    ("text", "parameters", "message"),
    [
        ("n:4", None, r"--x 'n:4': expected NAME=VALUE\[,NAME=VALUE\.\.\.\], got 'n:4'"),
        ("=4", None, "expected NAME=VALUE"),
        ("q=4", ["p", "size"], r"'q=4' is not NAME=VALUE over the parameters p, size \(e\.g\."),
        ("p=4", [], "--x needs parameters, and the models have none"),
        ("p=many", None, "--x 'p=many': 'many' is not a number"),
        ("p=nan", None, "p = nan is not a finite number"),
        ("p=inf", ["p"], "p = inf is not a finite number"),
        ("p=2,p=4", None, "'p' is given twice"),
    ],
)
def test_a_bad_point_names_the_flag_and_the_item(text, parameters, message):
    with pytest.raises(InputError, match=message):
        parse_point(text, "--x", parameters)


def test_format_value_writes_whole_numbers_whole_and_others_to_twelve_digits():
    assert [format_value(v) for v in (1e6, 4.0, -0.0, 2**53, 10**20)] == [
        "1000000",
        "4",
        "0",
        "9007199254740992",
        "1e+20",  # beyond 2^53 a float is no longer every whole number: read back as a float
    ]
    assert [format_value(v) for v in (0.25, 0.1 + 0.2, 1e-14, 4.0000000000001)] == [
        "0.25",
        "0.3",
        "1e-14",
        "4",
    ]
    assert format_value(np.float64(30.5)) == "30.5" and format_value(np.int64(64)) == "64"
    assert format_point(zip(["p", "n"], [4.0, 1e6], strict=True), separator=",") == "p=4,n=1000000"


def test_one_point_reads_the_same_in_model_predict_design_and_report(tmp_path, capsys):
    """``p=1e6`` once printed ``1e+06`` in the summary and ``1000000`` in a design."""
    rows = []
    for p, size in itertools.product((4, 8, 16, 32, 64), (10, 15, 20, 25, 30)):
        for jitter in (0.99, 1.01):
            rows.append(("main", "time", (p, size), 1e-3 * size**2 * jitter))
            rows.append(("main->halo", "time", (p, size), 1e-4 * np.log2(p) * jitter))
    experiment = Experiment.from_rows(["p", "size"], rows, [Metric("time", "s")])
    data, models = tmp_path / "data.json", tmp_path / "models.json"
    write_experiment(experiment, data)
    shown = "p=1000000, size=62.5"

    assert main(["model", str(data), "--at", "p=1e6,size=62.5", "-o", str(models)]) == 0
    assert f"target: {shown} " in capsys.readouterr().out
    assert main(["predict", str(models), "p=1e6", "size=62.5"]) == 0
    assert capsys.readouterr().out.splitlines()[0].rstrip().endswith(shown)
    suggestions = rank_runs(
        ModelSet.load(models), experiment, {"p": 1e6, "size": 62.5}, seconds=lambda _: 1.0
    )
    assert suggestions.text().startswith(f"target {shown}: ")
    page = tmp_path / "page.html"
    argv = ["report", str(models), str(models), "-o", str(page), "--at", "p=1e6,size=62.5"]
    assert main(argv) == 0
    assert f"compared at {shown} " in capsys.readouterr().out
