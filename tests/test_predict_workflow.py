"""The prediction workflow as a library call: the numbers and notes ``perfcast predict``
prints, with each note's check as data (:mod:`perfcast.workflows.predict`)."""

import re
from fractions import Fraction

import numpy as np
import pytest

from perfcast.cli import main
from perfcast.errors import InputError
from perfcast.experiment import Experiment
from perfcast.modeling import ModelSet, PMNFModeler
from perfcast.modeling.findings import Note
from perfcast.modeling.pmnf import Factor, Model, Term
from perfcast.modeling.provenance import Compilers, Provenance, SharedCores, SimulatedPlatform
from perfcast.workflows.predict import PredictRequest, predict

CALLEE = ("main->leapfrog", "time_inclusive")
NEGATIVE = ("main->halo", "time")


def model_file(tmp_path):
    """Fitted models of ``main`` (with intervals), a callee whose inclusive time outgrows
    main's and a model that goes below zero (both without intervals), and a provenance
    that names a compiler, a simulated platform and shared cores."""
    rng = np.random.default_rng(0)
    rows = [
        ("main", metric, (p, n), (2 + 0.5 * p * n) * (1 + 0.05 * rng.uniform(-1, 1)))
        for metric in ("time", "time_inclusive")
        for p in (4, 8, 16, 32, 64)
        for n in (10, 20, 30, 40, 50)
        for _ in range(5)
    ]
    fitted = PMNFModeler().fit(Experiment.from_rows(["p", "n"], rows))
    p2 = (Factor("p", Fraction(2), 0),)
    p1 = (Factor("p", Fraction(1), 0),)
    made = [Model(*CALLEE, 10.0, (Term(0.01, p2),)), Model(*NEGATIVE, 10.0, (Term(-1.0, p1),))]
    provenance = Provenance(
        {"p": (4.0, 64.0), "n": (10.0, 50.0)},
        SharedCores("p", {2: (4, 8)}, frozenset({("main", "time")})),
        SimulatedPlatform("virtual8", "cluster.xml"),
        Compilers("clang version 16.0.6", "gcc (Debian 12.2.0-14) 12.2.0"),
    )
    path = tmp_path / "models.json"
    ModelSet(["p", "n"], [*fitted, *made], provenance).save(path)
    return path


def columns(line):
    """The columns of a table line (two or more spaces apart; a point or a cell has one)."""
    return re.split(r"\s{2,}", line.strip())


def cell(text):
    """``12.5 [11.9, 13.1]`` -> (12.5, 11.9, 13.1); ``12.5`` -> (12.5, nan, nan)."""
    value, _, interval = text.partition(" [")
    low, high = interval.rstrip("]").split(", ") if interval else ("nan", "nan")
    return float(value), float(low), float(high)


def test_the_library_gets_what_perfcast_predict_prints(tmp_path, capsys):
    path = model_file(tmp_path)
    status = main(["predict", str(path), "p=64,4096", "n=30", "--full-names", "--level", "0.9"])
    printed = capsys.readouterr()
    assert status == 0

    request = PredictRequest(
        ModelSet.load(path), {"p": [64, 4096], "n": [30, 30]}, level=0.9, source=path
    )
    result = predict(request)

    table = printed.out.splitlines()
    assert columns(table[0]) == ["callpath", "metric", "p=64, n=30", "p=4096, n=30"]
    assert result.points == ({"p": 64.0, "n": 30.0}, {"p": 4096.0, "n": 30.0})
    assert len(table) == 1 + len(result.predictions) == 5
    for row, prediction in zip(table[1:], result.predictions, strict=True):
        callpath, metric, *shown = columns(row)
        assert (callpath, metric) == (prediction.callpath, prediction.metric)
        computed = zip(prediction.values, prediction.low, prediction.high, strict=True)
        for (value, low, high), (v, lo, hi) in zip(map(cell, shown), computed, strict=True):
            assert value == pytest.approx(v, rel=1e-5)
            assert np.allclose([low, high], [lo, hi], rtol=1e-3, equal_nan=True)
    assert printed.err.splitlines() == [f"note: {note.text}" for note in result.notes]


def test_a_library_user_sees_the_checks_as_data(tmp_path):
    result = predict(PredictRequest(ModelSet.load(model_file(tmp_path)), {"p": [4096], "n": [30]}))
    by_check: dict[str, list[Note]] = {}
    for note in result.notes:
        by_check.setdefault(note.check, []).append(note)
    (callee,) = by_check["callee-above-caller"]
    assert callee.models == (CALLEE, ("main", "time_inclusive"))
    (negative,) = by_check["negative"]
    assert negative.models == (NEGATIVE,) and "-4086 at p=4096, n=30" in negative.text
    assert by_check["shared-cores"][0].models == (("main", "time"),)
    assert {"compiler", "platform", "extrapolation", "interval", "no-interval"} <= set(by_check)
    assert "in the model set carry no uncertainty" in by_check["no-interval"][0].text

    only_main = predict(
        PredictRequest(
            ModelSet.load(model_file(tmp_path)), {"p": [64], "n": [30]}, ("time",), ("main",)
        )
    )
    assert [(p.callpath, p.metric) for p in only_main.predictions] == [("main", "time")]
    assert "negative" not in {note.check for note in only_main.notes}
    with pytest.raises(InputError, match="p=0 is outside the models' domain"):
        predict(PredictRequest(ModelSet.load(model_file(tmp_path)), {"p": [0], "n": [30]}))
    with pytest.raises(InputError, match="one value per point"):
        predict(PredictRequest(ModelSet.load(model_file(tmp_path)), {"p": [8, 16], "n": [30]}))
