"""Text and JSON writers: what they write reads back to the identical table.

That Extra-P itself reads these files is shown by ``benchmarks/extrap_roundtrip.py``
(it needs Extra-P's own virtual environment, so it is a benchmark, not a test).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from perfcast.errors import InputError, PerfcastError
from perfcast.experiment import Experiment, Metric, read_experiment, write_experiment

SHARED_FILES = [
    "text/one_parameter_6.txt",  # unnamed metric, 3 to 5 repetitions per point
    "text/mpa/gpr_test_data_1.txt",  # call paths with different metrics
    "text/mpa/relearn_data.txt",
    "text/three_parameter_3.txt",
    "json/input_10.JSON",  # 4 parameters, 625 points
    "json/new/input2.json",
    "jsonlines/matrix_4p.jsonl",
    "talpas/talpas_9.txt",
    "cubeset/simple_threaded",
    "cubeset/allowed_formats",
]


def assert_same_table(a: Experiment, b: Experiment) -> None:
    assert a.parameters == b.parameters
    keys = ["callpath", "metric", *a.parameters, "repetition"]
    left = a.data.sort_values(keys).reset_index(drop=True)
    right = b.data.sort_values(keys).reset_index(drop=True)
    pd.testing.assert_frame_equal(left, right, check_exact=True)


@pytest.mark.parametrize("suffix", [".txt", ".json"])
@pytest.mark.parametrize("name", SHARED_FILES)
def test_round_trip_of_shared_files(formats_dir, tmp_path, name, suffix):
    original = read_experiment(formats_dir / name)
    path = tmp_path / f"out{suffix}"
    write_experiment(original, path)
    again = read_experiment(path)
    assert_same_table(original, again)
    if suffix == ".json":
        assert again.callpaths == original.callpaths
        assert again.metrics == original.metrics  # units survive in JSON


def synthetic() -> Experiment:
    """Six parameters, fractional and large values, an unnamed metric after a named one,
    call paths with spaces, and different repetition counts per point."""
    rng = np.random.default_rng(7)
    names = ["p", "n", "s", "o", "t", "u"]
    rows = []
    for i in range(4):
        point = (2**i, 1000.5 * i, 1e-3 * (i + 1), 7, 1e12 + i, -i)
        for callpath in ("main", "main->solve step", "main->solve step->MPI_Allreduce"):
            for metric in ("time", ""):
                for _ in range(2 + i % 3):
                    rows.append((callpath, metric, point, float(rng.lognormal())))
    return Experiment.from_rows(names, rows, [Metric("time", "s")])


@pytest.mark.parametrize("suffix", [".txt", ".json"])
def test_round_trip_of_synthetic_experiment(tmp_path, suffix):
    original = synthetic()
    path = tmp_path / f"synthetic{suffix}"
    write_experiment(original, path)
    assert_same_table(original, read_experiment(path))


def test_text_layout(tmp_path):
    path = tmp_path / "out.txt"
    write_experiment(synthetic(), path)
    lines = path.read_text().splitlines()
    assert lines[0] == "PARAMETER p"
    assert lines[6] == "POINTS ( 1 0 0.001 7 1000000000000 0 )"
    # the unnamed metric comes first, before any METRIC line can shadow it
    first_metric = next(i for i, line in enumerate(lines) if line.startswith("METRIC"))
    assert lines[10] == "REGION main" and first_metric > 10 + 4
    assert lines[first_metric] == "METRIC time"


def test_json_layout_is_extrap_current_form(tmp_path):
    path = tmp_path / "out.json"
    write_experiment(synthetic(), path)
    document = json.loads(path.read_text())
    assert document["parameters"] == ["p", "n", "s", "o", "t", "u"]
    entry = document["measurements"]["main->solve step"]["time"][0]
    assert entry["point"] == [1, 0, 0.001, 7, 1000000000000, 0]
    assert len(entry["values"]) == 2
    assert document["units"] == {"time": "s"}


def test_text_writer_needs_every_point(tmp_path):
    rows = [("main", "time", (1,), 1.0), ("main", "time", (2,), 2.0), ("solve", "time", (1,), 3.0)]
    with pytest.raises(PerfcastError, match="'solve', metric 'time' has no measurement at"):
        write_experiment(Experiment.from_rows(["p"], rows), tmp_path / "out.txt")


def test_text_writer_rejects_parameter_names_with_spaces(tmp_path):
    experiment = Experiment.from_rows(["problem size"], [("main", "time", (1,), 1.0)])
    with pytest.raises(PerfcastError, match="'problem size' cannot be written"):
        write_experiment(experiment, tmp_path / "out.txt")


def test_json_writer_refuses_non_finite_values(tmp_path):
    experiment = Experiment.from_rows(["p"], [("main", "time", (1,), float("nan"))])
    with pytest.raises(InputError, match="NaN or infinite"):
        write_experiment(experiment, tmp_path / "out.json")


def test_output_format_choice(tmp_path):
    experiment = synthetic()
    write_experiment(experiment, tmp_path / "no_extension", format="json")
    assert_same_table(experiment, read_experiment(tmp_path / "no_extension", format="json"))
    with pytest.raises(PerfcastError, match="cannot tell the output format"):
        write_experiment(experiment, tmp_path / "out.csv")
    with pytest.raises(PerfcastError, match="cannot write the cube format"):
        write_experiment(experiment, tmp_path / "set", format="cube")
