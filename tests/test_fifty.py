"""`perfcast model` without pandas and SciPy: the Experiment's arrays, the hand-written
F distribution, and the imports of a whole run (issue 14, item 8)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.special import fdtrc

from perfcast.errors import InputError
from perfcast.experiment import Experiment
from perfcast.experiment.experiment import CALLPATH, METRIC, REPETITION, VALUE, Metric
from perfcast.experiment.io import read_experiment
from perfcast.modeling.noise import f_survival
from perfcast.modeling.repetitions import RepetitionGrid

TEXT = """PARAMETER p
PARAMETER n
POINTS {points}

REGION main
METRIC time
{main}
REGION main -> solve
METRIC time
{solve}
REGION main->solve
METRIC bytes
{bytes}
"""


POINTS = [(p, n) for n in (10, 20, 40) for p in (1, 2, 4, 8, 16)]


def _data_lines(scale: float) -> str:
    return "\n".join(
        "DATA " + " ".join(f"{scale * p * n + 0.01 * r:.6g}" for r in range(3)) for p, n in POINTS
    )


@pytest.fixture
def text_file(tmp_path: Path) -> Path:
    path = tmp_path / "two.txt"
    path.write_text(
        TEXT.format(
            points=" ".join(f"( {p} {n} )" for p, n in POINTS),
            main=_data_lines(1.0),
            solve=_data_lines(0.5),
            bytes=_data_lines(8.0),
        )
    )
    return path


# -- the F distribution ----------------------------------------------------------------------


def test_f_survival_matches_scipy_on_the_whole_grid():
    """Every pair of degrees of freedom 1..200 (all four parities: finite sums in b and
    in a, the arctan base when both are odd) at f from 1e-6 to 1e6. Tolerance 1e-12
    absolute: the survival function is found by adding and subtracting terms of at most
    1, so it is exact to rounding in absolute terms; the noise test only compares it with
    a significance level."""
    dof = np.arange(1, 201)
    f = np.logspace(-6, 6, 7)
    d1, d2, x = np.meshgrid(dof, dof, f, indexing="ij")
    np.testing.assert_allclose(f_survival(x, d1, d2), fdtrc(d1, d2, x), rtol=0, atol=1e-12)


def test_f_survival_is_relatively_exact_where_it_only_adds():
    """With d1 even the sum has only positive terms: small p-values keep their digits."""
    d2 = np.arange(1, 60)
    for d1 in (2, 4, 10):
        ours, reference = f_survival(1e3, d1, d2), fdtrc(d1, d2, 1e3)
        np.testing.assert_allclose(ours, reference, rtol=1e-9)


def test_f_survival_edges_as_fdtrc():
    values = np.array([0.0, np.inf, np.nan, -1.0, 1.0])
    np.testing.assert_array_equal(np.isnan(f_survival(values, 3, 4)), np.isnan(fdtrc(3, 4, values)))
    np.testing.assert_allclose(f_survival(values, 3, 4)[[0, 1, 4]], fdtrc(3, 4, values[[0, 1, 4]]))
    with pytest.raises(ValueError, match="at least 1"):
        f_survival(np.array([1.0]), 0, 4)


def test_noise_test_degrees_of_freedom_are_whole():
    """f_survival is only exact for whole degrees of freedom; the noise test counts them
    (cells and repetitions), so it never needs a fallback for fractional ones."""
    from perfcast.modeling import noise

    seen: list[tuple[object, object]] = []
    original = noise.f_survival

    def spy(f, d1, d2):
        seen.append((d1, d2))
        return original(f, d1, d2)

    grid = RepetitionGrid(
        coordinates=np.array([[1.0], [2.0], [4.0], [8.0]]),
        values=np.array([[[1.0, 1.1, np.nan], [2.0, 2.2, 2.1], [4.1, 3.9, np.nan], [8, 8.2, 8.1]]]),
    )
    noise.f_survival = spy
    try:
        p = noise.parameter_p_values(grid)
    finally:
        noise.f_survival = original
    assert p.shape == (1, 1) and p[0, 0] < 0.01
    ((d1, d2),) = seen
    assert isinstance(d1, int) and np.asarray(d2).dtype.kind == "i"


# -- the Experiment's arrays -----------------------------------------------------------------


def test_reader_experiment_has_no_frame_until_data_is_read(text_file):
    experiment = read_experiment(text_file)
    assert "data" not in vars(experiment)
    assert experiment.callpaths == ["main", "main->solve"]
    assert list(experiment.metrics) == ["time", "bytes"]
    assert len(experiment) == 3 * len(POINTS) * 3
    assert experiment.coordinates().tolist() == sorted([float(p), float(n)] for p, n in POINTS)
    assert experiment.ranges() == {"p": (1.0, 16.0), "n": (10.0, 40.0)}
    assert "data" not in vars(experiment)
    data = experiment.data
    assert experiment.data is data  # built once
    assert list(data.columns) == [CALLPATH, METRIC, "p", "n", REPETITION, VALUE]
    assert isinstance(data.index, pd.RangeIndex)
    first = data.iloc[0]
    assert (first[CALLPATH], first[METRIC], first["p"], first["n"]) == ("main", "time", 1, 10)
    assert data[REPETITION].tolist()[:6] == [0, 1, 2, 0, 1, 2]
    # "main -> solve" and "main->solve" are one call path, whose two metrics keep their order
    solve = data[data[CALLPATH] == "main->solve"]
    assert solve[METRIC].unique().tolist() == ["time", "bytes"]


def test_restricted_keeps_the_codes_consistent_with_the_frame(text_file):
    experiment = read_experiment(text_file)
    only = experiment.restricted(callpaths=["main -> solve"], metrics=["bytes"])
    assert only.callpaths == ["main->solve"]
    assert list(only.metrics) == ["bytes"]
    assert only.columns.callpaths == ["main->solve"]
    assert only.columns.callpath.max() == 0 and only.columns.metric.max() == 0
    expected = experiment.data[
        (experiment.data[CALLPATH] == "main->solve") & (experiment.data[METRIC] == "bytes")
    ].reset_index(drop=True)
    pd.testing.assert_frame_equal(only.data, expected)
    assert experiment.restricted(metrics=["time", "bytes"]) is experiment
    with pytest.raises(InputError, match="no callpath"):
        experiment.restricted(callpaths=["nowhere"])


def test_frame_constructor_and_arrays_agree():
    """An Experiment built from a DataFrame (the Cube reader's way) gets the same codes
    as a reader's, and keeps the frame it was given."""
    frame = pd.DataFrame(
        {
            CALLPATH: ["b", "a", "b", "a"],
            METRIC: ["time"] * 4,
            "p": [1.0, 1.0, 2.0, 2.0],
            REPETITION: [0, 0, 0, 0],
            VALUE: [1.0, 2.0, 3.0, 4.0],
        }
    )
    experiment = Experiment(["p"], frame, [Metric("time", "s")])
    assert experiment.data is frame
    assert experiment.callpaths == ["b", "a"]
    assert experiment.columns.callpath.tolist() == [0, 1, 0, 1]
    assert experiment.metrics["time"].unit == "s"
    assert experiment.restricted(callpaths=["a"]).data[VALUE].tolist() == [2.0, 4.0]


def test_from_rows_numbers_repetitions_in_arrival_order():
    rows = [
        ("a -> b", "time", (1.0,), 1.0),
        ("a->b", "time", (1,), 2.0),
        ("a", "time", (1.0,), 3.0),
        ("a->b", "time", (2.0,), 4.0),
    ]
    experiment = Experiment.from_rows(["p"], rows)
    assert experiment.callpaths == ["a->b", "a"]
    assert experiment.data[REPETITION].tolist() == [0, 1, 0, 0]
    with pytest.raises(InputError, match="has 2 values"):
        Experiment.from_rows(["p"], [("a", "time", (1.0, 2.0), 1.0)])


def test_validate_names_the_first_bad_measurement():
    frame = pd.DataFrame(
        {CALLPATH: ["a", "b"], METRIC: ["time", "time"], "p": [1.0, 2.0], REPETITION: [0, 0]}
    ).assign(**{VALUE: [1.0, np.nan]})
    with pytest.raises(InputError, match=r"1 measurement.*call path 'b', metric 'time', p=2"):
        Experiment(["p"], frame).validate()


# -- the whole process -------------------------------------------------------------------------


def test_model_run_imports_neither_pandas_nor_scipy(text_file, tmp_path):
    """`perfcast model` on a text file: the modules that cost most of a run's start-up stay
    out of the process (checked in the process, after the models are written), and so do
    the stages it does not use: the measure stage (the campaign-store reader is a plug-in
    that detection of a text file never imports), taint, and the package-metadata scan."""
    output = tmp_path / "models.json"
    script = (
        "import sys, runpy\n"
        f"sys.argv = ['perfcast', 'model', {str(text_file)!r}, '--style', 'json', "
        f"'-o', {str(output)!r}]\n"
        "try:\n"
        "    runpy.run_module('perfcast', run_name='__main__')\n"
        "except SystemExit as stop:\n"
        "    assert not stop.code, stop.code\n"
        "unused = ('pandas', 'scipy', 'perfcast.measure', 'perfcast.taint', 'importlib.metadata')\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(unused))\n"
        "print('LOADED', loaded)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert "LOADED []" in result.stdout, result.stdout[-2000:] + result.stderr[-2000:]
    models = json.loads(output.read_text())["models"]
    assert {(m["callpath"], m["metric"]) for m in models} == {
        ("main", "time"),
        ("main->solve", "time"),
        ("main->solve", "bytes"),
    }
