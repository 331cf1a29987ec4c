"""`perfcast predict` through the real entry point: broadcasting, the shape of constant
models, points outside a model's domain, and the notes that keep a prediction from
misleading (extrapolation, shared cores, callees above their callers)."""

import gc
import json
import re
import shutil
import warnings
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from campaign_helpers import build_program, write_spec

from perfcast.cli import main
from perfcast.errors import InputError
from perfcast.experiment import Experiment
from perfcast.measure.local import available_cores
from perfcast.modeling import ModelSet, PMNFModeler
from perfcast.modeling.pmnf import Factor, Model, Term
from perfcast.modeling.provenance import Provenance, SharedCores

EXAMPLE = Path(__file__).parents[1] / "examples" / "data" / "relearn.txt"


def model(callpath, metric, constant, *terms):
    """``terms``: (coefficient, parameter, exponent, log exponent)."""
    return Model(
        callpath,
        metric,
        constant,
        tuple(Term(c, (Factor(p, Fraction(e), log),)) for c, p, e, log in terms),
    )


def save(tmp_path, models, provenance=None, parameters=("p", "size")):
    path = tmp_path / "models.json"
    ModelSet(list(parameters), models, provenance).save(path)
    return path


INTERVAL_NOTES = ("note: [low, high] is the", "carry no uncertainty")


def predict(capsys, *argv):
    """Exit status, table lines, note lines but those on prediction intervals (what the
    brackets mean, which models have none: see the tests of intervals below), so that each
    test sees the notes it is about."""
    status, table, notes = predict_all(capsys, *argv)
    return status, table, [n for n in notes if not any(text in n for text in INTERVAL_NOTES)]


def predict_all(capsys, *argv):
    """Exit status, table lines, every note line."""
    status = main(["predict", *map(str, argv)])
    captured = capsys.readouterr()
    return status, captured.out.splitlines(), captured.err.splitlines()


def test_a_single_value_is_used_at_every_point_and_constants_keep_the_shape(tmp_path, capsys):
    path = save(
        tmp_path,
        [
            model("main", "time", 2.0, (0.5, "p", 1, 0), (1.0, "size", 1, 0)),
            model("main->init", "time", 7.0),  # constant: crashed with IndexError
        ],
    )
    status, table, _ = predict(capsys, path, "p=64,512,4096", "size=30")
    assert status == 0
    assert table[0].split("  ")[-1].strip() == "p=4096, size=30"
    assert [float(v) for v in table[1].split()[-3:]] == [64.0, 288.0, 2080.0]
    assert [float(v) for v in table[2].split()[-3:]] == [7.0, 7.0, 7.0]
    status, table, _ = predict(capsys, path, "p=64,512,4096", "size=30,30,30")
    assert status == 0 and [float(v) for v in table[2].split()[-3:]] == [7.0, 7.0, 7.0]
    status, _, err = predict(capsys, path, "p=64,512,4096", "size=30,40")
    assert status == 2 and "p: 3, size: 2" in err[0]
    status, _, err = predict(capsys, path, "p=64,nan", "size=30")
    assert status == 2 and "not a finite number" in err[0]


def test_points_outside_the_domain_are_named(tmp_path, capsys):
    measured_from_zero = Provenance({"p": (1.0, 64.0), "size": (0.0, 40.0)})
    path = save(
        tmp_path,
        [
            model("main", "time", 1.0, (2.0, "p", 1, 1)),
            model("main->fft", "time", 1.0, (3.0, "size", 1, 1)),
            model("main->grid", "time", 1.0, (1.0, "p", 40, 0)),
        ],
        measured_from_zero,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no raw NumPy RuntimeWarning either
        status, table, err = predict(capsys, path, "p=0,64", "size=30")
        assert status == 2 and table == []
        assert err == [
            f"perfcast predict: error: {path}: p=0 is outside the models' domain: PMNF "
            "models are defined for positive parameter values; the models were fitted on p "
            "from 1 to 64"
        ]
        status, _, err = predict(capsys, path, "p=-4", "size=30")
        assert status == 2 and "p=-4 is outside the models' domain" in err[0]
        status, _, err = predict(capsys, path, "p=4", "size=0")  # measured at 0, but log2(0)
        assert status == 2
        assert (
            "size=0 is outside the domain of the model of 'main->fft' (time): its factor "
            "size * log2(size) needs size > 0" in err[0]
        )
        status, _, err = predict(capsys, path, "p=1e9", "size=30")
        assert status == 2
        assert "the model of 'main->grid' (time) gives inf at p=1000000000" in err[0]


def test_far_extrapolation_says_by_how_much(tmp_path, capsys):
    path = save(
        tmp_path,
        [model("main", "time", 1.0, (1.0, "p", 1, 0))],
        Provenance({"p": (2.0, 64.0), "size": (10.0, 40.0)}),
    )
    status, _, notes = predict(capsys, path, "p=32,4096", "size=30")
    assert status == 0
    assert notes == [
        "note: p=4096 is 64x the largest measured p (64): an extrapolation, to be trusted less "
        "the farther it reaches"
    ]
    status, _, notes = predict(capsys, path, "p=32", "size=5")
    assert notes == ["note: size=5 is below the smallest measured size (10): an extrapolation"]
    status, _, notes = predict(capsys, path, "p=32", "size=30")
    assert status == 0 and notes == []


def test_negative_predictions_and_ranges_measured_below_zero(tmp_path, capsys):
    path = save(
        tmp_path,
        [model("main", "time", 10.0, (-1.0, "p", 1, 0))],
        Provenance({"p": (-4.0, 0.0), "size": (1.0, 2.0)}),
    )
    status, table, notes = predict(capsys, path, "p=-1,2", "size=1")
    assert status == 0 and [float(v) for v in table[1].split()[-2:]] == [11.0, 8.0]
    assert notes == [
        "note: p=2 is beyond the largest measured p (0): an extrapolation, to be trusted less "
        "the farther it reaches"
    ]
    status, _, notes = predict(capsys, path, "p=20", "size=1")
    assert notes[1] == (
        "note: time of main is predicted negative (-10 at p=20, size=1), which no measured "
        "quantity can be: the model does not hold there"
    )


def test_a_callee_above_its_caller_is_a_contradiction(tmp_path, capsys):
    path = save(
        tmp_path,
        [
            model("main", "time_inclusive", 100.0, (1.0, "p", 1, 0)),
            model("main->leapfrog", "time_inclusive", 10.0, (0.01, "p", 2, 0)),
            model("main", "time", 100.0, (1.0, "p", 1, 0)),  # exclusive: no order
            model("main->leapfrog", "time", 10.0, (0.01, "p", 2, 0)),
            model("main", "visits", 1.0),  # a callee may be visited more often
            model("main->leapfrog", "visits", 50.0, (1.0, "p", 1, 0)),
            # its caller main->solve has no model: compared with main
            model("main->solve->halo", "cpu_time_inclusive:max", 5000.0),
            model("main", "cpu_time_inclusive:max", 100.0, (1.0, "p", 1, 0)),
        ],
        Provenance({"p": (2.0, 64.0), "size": (10.0, 40.0)}),
    )
    status, _, notes = predict(capsys, path, "p=64,4096", "size=30")
    assert status == 0
    contradictions = [n for n in notes if "caller" in n]
    assert contradictions == [
        "note: time_inclusive of main->leapfrog is predicted at 167782 at p=4096, size=30, "
        "more than its caller main (4196), which an inclusive metric cannot be: at least one "
        "of the two models does not hold there",
        "note: cpu_time_inclusive:max of main->solve->halo is predicted at 5000 at p=64, "
        "size=30, more than its caller main (164), which an inclusive metric cannot be: at "
        "least one of the two models does not hold there",
    ]
    status, _, notes = predict(capsys, path, "p=64", "size=30", "--metric", "time_inclusive")
    assert not [n for n in notes if "caller" in n]  # 50.96 < 164 at the measured end


def test_models_on_shared_cores_are_named_and_old_files_still_read(tmp_path, capsys):
    models = [
        model("main", "time", 1.0, (1.0, "p", 1, 0)),
        model("main", "cpu_time", 1.0, (1.0, "size", 1, 0)),
    ]
    shared = SharedCores("p", {2: (3, 4)}, frozenset({("main", "time")}))
    path = save(tmp_path, models, Provenance({"p": (1.0, 4.0), "size": (1, 3)}, shared))
    status, _, notes = predict(capsys, path, "p=4", "size=3")
    assert status == 0
    assert notes == [
        "note: 1 predicted model (time of main) rests on wall time of runs with more ranks "
        "than cores (p = 3, 4 on 2 cores): its growth includes waiting for a core, so these "
        "predictions extrapolate the scheduler of that machine, not the program. Fit CPU time "
        "instead (metrics cpu_time and cpu_time_inclusive, measured with PERFCAST_CPU_TIME=1; "
        "effort priors fit it with --time-metric cpu_time), or measure where each rank has a "
        "core of its own (e.g. --backend slurm)"
    ]
    status, _, notes = predict(capsys, path, "p=4", "size=3", "--metric", "cpu_time")
    assert status == 0 and notes == []

    data = json.loads(path.read_text())
    del data["provenance"]  # as perfcast wrote it before the field existed
    path.write_text(json.dumps(data))
    status, table, notes = predict(capsys, path, "p=4", "size=3")
    assert status == 0 and len(table) == 3
    assert notes[0].startswith(f"note: {path} does not record the measured range")
    data["provenance"] = {"version": 99, "anything": ["a later perfcast wrote"]}
    path.write_text(json.dumps(data))
    status, table, _ = predict(capsys, path, "p=4", "size=3")
    assert status == 0 and len(table) == 3
    data["provenance"] = {"version": 1, "ranges": {"p": "wide"}}
    path.write_text(json.dumps(data))
    status, _, err = predict(capsys, path, "p=4", "size=3")
    assert status == 2 and "malformed 'provenance' object" in err[0]
    for hostile in ([1, 10**400], [8, 2], [1, float("nan")]):
        data["provenance"] = {"version": 1, "ranges": {"p": hostile}}
        path.write_text(json.dumps(data))
        status, _, err = predict(capsys, path, "p=4", "size=3")
        assert status == 2 and "provenance" in err[0] and str(path) in err[0]


def test_model_records_the_measured_range(tmp_path, capsys):
    out = tmp_path / "models.json"
    assert main(["model", str(EXAMPLE), "-o", str(out), "--callpath", "Initialization"]) == 0
    capsys.readouterr()
    provenance = json.loads(out.read_text())["provenance"]
    assert provenance == {
        "version": 1,
        "ranges": {"p": [32.0, 512.0], "n": [5000.0, 9000.0]},
    }
    status, _, notes = predict(capsys, out, "p=64,512,4096", "n=5000")
    assert status == 0
    assert notes == [
        "note: p=4096 is 8x the largest measured p (512): an extrapolation, to be trusted less "
        "the farther it reaches"
    ]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("mpicc") is None, reason="needs Open MPI")
def test_a_campaign_beyond_the_cores_marks_its_wall_time_models(tmp_path, capsys):
    build_program(tmp_path)
    cores = available_cores()
    over, further = cores + 1, cores + 2
    spec = write_spec(
        tmp_path,
        f"""
        [app]
        name = "shared"
        [run]
        command = "./prog {{n}}"
        repetitions = 1
        [parameters]
        p = [1, {over}, {further}]
        n = [1, 2, 3]
        """,
    )
    assert main(["measure", str(spec)]) == 0
    store = tmp_path / "shared.sqlite"
    out = tmp_path / "models.json"
    capsys.readouterr()
    assert main(["model", str(store), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    cores_text = f"{cores} core" if cores == 1 else f"{cores} cores"
    assert (
        f"note: 1 model (run_time of shared) rests on wall time of runs with more ranks than "
        f"cores (p = {over}, {further} on {cores_text})" in err
    )
    shared = json.loads(out.read_text())["provenance"]["shared_cores"]
    assert shared == {
        "ranks_parameter": "p",
        "ranks_on": {str(cores): [over, further]},
        "models": [["shared", "run_time"]],
    }
    status, table, notes = predict(capsys, out, f"p={further},4096", "n=3")
    assert status == 0 and table[1].startswith("shared")
    assert any("1 predicted model (run_time of shared) rests on wall time" in n for n in notes)
    assert any(f"p=4096 is {4096 / further:,.0f}x the largest measured p" in n for n in notes)


def test_callpath_takes_a_function_name_or_a_glob(tmp_path, capsys):
    """The same selection as `perfcast model --callpath`: a user copies a function name from
    the summary, not a full C++ signature with its return type."""
    signature = "void CalcForceForNodes(Domain &)"
    path = save(
        tmp_path,
        [
            model("main", "time", 1.0, (1.0, "p", 1, 0)),
            model(f"main->{signature}", "time", 2.0),
            model("main->CalcQForElems", "time", 3.0),
        ],
    )
    status, table, _ = predict(capsys, path, "p=64", "size=1", "--callpath", "CalcForceForNodes")
    assert status == 0 and [row.split("  ")[0] for row in table[1:]] == ["main->CalcForceForNodes"]
    argv = ("p=64", "size=1", "--callpath", "CalcForceForNodes", "--full-names")
    status, table, _ = predict(capsys, path, *argv)
    assert status == 0 and [row.split("  ")[0] for row in table[1:]] == [f"main->{signature}"]
    status, table, _ = predict(capsys, path, "p=64", "size=1", "--callpath", "*Calc*")
    assert status == 0 and len(table) == 3
    status, _, err = predict(capsys, path, "p=64", "size=1", "--callpath", "CalcForce")
    assert status == 2 and "CalcForceForNodes" in err[0].split("close function names:")[1]


def fitted(tmp_path, noise=0.05, seed=0):
    """A model file fitted to ``2 + 0.5 p n`` with uniform +-``noise``, 5 repetitions."""
    rng = np.random.default_rng(seed)
    rows = [
        ("main", "time", (p, n), (2 + 0.5 * p * n) * (1 + noise * rng.uniform(-1, 1)))
        for p in (4, 8, 16, 32, 64)
        for n in (10, 20, 30, 40, 50)
        for _ in range(5)
    ]
    models = PMNFModeler().fit(Experiment.from_rows(["p", "n"], rows))
    path = tmp_path / "fitted.json"
    models.with_provenance(Provenance({"p": (4.0, 64.0), "n": (10.0, 50.0)})).save(path)
    return path


def intervals(row):
    """(value, low, high) of every cell of a table row."""
    return [tuple(map(float, cell)) for cell in re.findall(r"(\S+) \[(\S+), (\S+)\]", row)]


def test_each_value_is_printed_with_its_prediction_interval(tmp_path, capsys):
    path = fitted(tmp_path)
    status, table, notes = predict_all(capsys, path, "p=16,512", "n=30")
    assert status == 0
    (inside, low, high), beyond = intervals(table[1])
    assert low < inside < high and beyond[1] < beyond[0] < beyond[2]
    assert 0.01 < (high - low) / 2 / inside < 0.2  # about two standard deviations of +-5 %
    assert notes[0].startswith("note: [low, high] is the 95 % prediction interval of one new")
    assert "p=512 is 8x the largest measured p (64)" in notes[1]
    status, table, notes = predict_all(capsys, path, "p=16,512", "n=30", "--level", "0.5")
    assert status == 0 and notes[0].startswith("note: [low, high] is the 50 % prediction")
    (same, narrow_low, narrow_high), _ = intervals(table[1])
    assert same == inside and low < narrow_low < inside < narrow_high < high
    for bad in ("1", "0", "ninety", "nan"):
        with pytest.raises(SystemExit) as exit_:
            main(["predict", str(path), "p=16", "n=30", "--level", bad])
        assert exit_.value.code == 2
        assert "is not a probability between 0 and 1" in capsys.readouterr().err


def test_models_without_uncertainty_are_printed_without_an_interval(tmp_path, capsys):
    """Model files written before perfcast stored the fit's uncertainty, and models imported
    from Extra-P, have none: their values stand alone and a note says why."""
    path = save(tmp_path, [model("main", "time", 2.0, (0.5, "p", 1, 0)), model("init", "time", 7)])
    status, table, notes = predict_all(capsys, path, "p=64", "size=1")
    assert status == 0
    assert [row.split()[-1] for row in table[1:]] == ["34", "7"]
    assert notes[0] == (
        f"note: 2 model(s) in {path} carry no uncertainty (time of main, time of init): no "
        "prediction interval; models written before perfcast stored it, or imported from "
        "Extra-P, have none: fit them again with `perfcast model ... -o`"
    )
    assert not any("[low, high]" in n for n in notes)


def test_reading_and_writing_a_model_file_leave_the_cycle_collector_as_they_found_it(tmp_path):
    """The model file is built and read with Python's cycle collector paused (millions of
    acyclic dictionaries; ``ModelSet._collection_paused``): a caller's collector must come
    back on after a good file, after a malformed one, and stay off where the caller had it
    off."""
    path = save(tmp_path, [model("main", "time", 1.0, (2.0, "p", 1, 1))])
    loaded = ModelSet.load(path).get(("main", "time"))
    assert loaded is not None and loaded.evaluate({"p": 4.0, "size": 1.0}) == 17.0
    assert gc.isenabled()
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"perfcast_models": 1, "parameters": ["p"], "models": [{}]}))
    with pytest.raises(InputError, match=r"broken\.json"):
        ModelSet.load(broken)
    assert gc.isenabled()
    gc.disable()
    try:
        ModelSet.load(path).save(tmp_path / "again.json")
        assert not gc.isenabled()
    finally:
        gc.enable()
