"""Every reader against every file of Extra-P's own test data, plus malformed input.

The expectations below (parameters, number of points, number of call paths, first call
path, metrics, number of values) were taken from Extra-P 4.2.5 reading the same files
(``benchmarks/extrap_roundtrip.py`` re-checks that agreement value by value). Files that
Extra-P rejects are rejected here too, with a message that says what is wrong and where.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from perfcast.errors import InputError, PerfcastError
from perfcast.experiment import read_experiment
from perfcast.experiment.io import FORMATS
from perfcast.experiment.io.cube import parse_run_directory

# (parameters, points, call paths, first call path, metrics, values incl. repetitions)
ACCEPTED = {
    "text/mpa/1_param_add.txt": (("p",), 5, 1, "main()", ("time",), 10),
    "text/mpa/1_param_base.txt": (("p",), 3, 1, "main()", ("time",), 6),
    "text/mpa/1_param_base2.txt": (("p",), 4, 1, "main()", ("time",), 8),
    "text/mpa/1_param_base3.txt": (("p",), 4, 1, "main()", ("time",), 8),
    "text/mpa/1_param_base4.txt": (("p",), 3, 1, "main()", ("time",), 6),
    "text/mpa/1_param_base5.txt": (("p",), 3, 1, "main()", ("time",), 6),
    "text/mpa/1_param_base6.txt": (("p",), 3, 1, "main()", ("time",), 6),
    "text/mpa/1_param_base7.txt": (("p",), 4, 1, "main()", ("time",), 8),
    "text/mpa/1_param_base8.txt": (("p",), 4, 1, "main()", ("time",), 8),
    "text/mpa/1_param_gpr.txt": (("p",), 6, 1, "main()", ("time",), 12),
    "text/mpa/2_param_add.txt": (("p", "n"), 9, 1, "main()", ("time",), 18),
    "text/mpa/2_param_add2.txt": (("p", "n"), 9, 3, "main()", ("time",), 54),
    "text/mpa/2_param_base.txt": (("p", "n"), 7, 1, "main()", ("time",), 14),
    "text/mpa/2_param_base2.txt": (("p", "n"), 7, 1, "main()", ("time",), 14),
    "text/mpa/2_param_base3.txt": (("p", "n"), 7, 1, "main()", ("time",), 14),
    "text/mpa/2_param_gpr.txt": (("p", "n"), 10, 1, "main()", ("time",), 20),
    "text/mpa/2_param_gpr2.txt": (("p", "n"), 10, 3, "main()", ("time",), 60),
    "text/mpa/3_param_add.txt": (("p", "n", "s"), 13, 1, "main()", ("time",), 26),
    "text/mpa/3_param_base.txt": (("p", "n", "s"), 10, 1, "main()", ("time",), 20),
    "text/mpa/3_param_gpr.txt": (("p", "n", "s"), 14, 1, "main()", ("time",), 28),
    "text/mpa/4_param_add.txt": (("p", "n", "s", "o"), 17, 1, "main()", ("time",), 34),
    "text/mpa/4_param_base.txt": (("p", "n", "s", "o"), 13, 1, "main()", ("time",), 26),
    "text/mpa/4_param_gpr.txt": (("p", "n", "s", "o"), 18, 1, "main()", ("time",), 36),
    "text/mpa/gpr_test_data_1.txt": (("x",), 4, 2, "compute", ("time", "maxtime"), 64),
    "text/mpa/gpr_test_data_2.txt": (("x",), 5, 2, "compute", ("time", "maxtime"), 80),
    "text/mpa/relearn_data.txt": (("p", "n"), 25, 14, "main()", ("time",), 700),
    "text/one_parameter_1.txt": (("x",), 5, 1, "compute", ("time",), 30),
    "text/one_parameter_2.txt": (("x",), 5, 15, "main", ("time",), 375),
    "text/one_parameter_3.txt": (("x",), 5, 1, "compute", ("time", "flops"), 50),
    "text/one_parameter_4.txt": (("x",), 5, 1, "compute", ("time", "flops"), 50),
    "text/one_parameter_5.txt": (("x",), 5, 2, "merge", ("time", "flops"), 100),
    "text/one_parameter_6.txt": (("p",), 5, 4, "met1", ("",), 89),
    "text/one_parameter_7.txt": (("p",), 5, 1, "met1", ("",), 25),
    "text/one_parameter_segmented_1.txt": (("p",), 10, 1, "main", ("runtime",), 50),
    "text/one_parameter_segmented_2.txt": (("p",), 10, 1, "main", ("runtime",), 50),
    "text/one_parameter_segmented_3.txt": (("p",), 10, 1, "main", ("runtime",), 50),
    "text/one_parameter_segmented_4.txt": (("p",), 10, 2, "main", ("runtime",), 100),
    "text/one_parameter_segmented_5.txt": (("p",), 9, 3, "met1", ("",), 79),
    "text/one_parameter_segmented_6.txt": (("p",), 10, 2, "met1+2", ("",), 52),
    "text/strong_scaling/one_parameter_1.txt": (("x",), 5, 1, "compute", ("time",), 30),
    "text/strong_scaling/one_parameter_2.txt": (("x",), 5, 15, "main", ("time",), 375),
    "text/strong_scaling/one_parameter_6.txt": (("p",), 5, 4, "met1", ("",), 89),
    "text/strong_scaling/two_parameter_1.txt": (("x", "y"), 25, 1, "reg", ("metr",), 125),
    "text/strong_scaling/two_parameter_2.txt": (("x", "y"), 25, 1, "reg", ("metr",), 125),
    "text/strong_scaling/two_parameter_7.txt": (("x", "y"), 25, 1, "reg", ("metr",), 125),
    "text/three_parameter_1.txt": (("x", "y", "z"), 125, 1, "reg", ("metr",), 625),
    "text/three_parameter_2.txt": (("x", "y", "z"), 125, 1, "reg", ("metr",), 625),
    "text/three_parameter_3.txt": (("x", "y", "z"), 125, 2, "merge", ("time",), 1250),
    "text/two_parameter_1.txt": (("x", "y"), 25, 1, "reg", ("metr",), 125),
    "text/two_parameter_2.txt": (("x", "y"), 25, 1, "reg", ("metr",), 125),
    "text/two_parameter_3.txt": (("x", "y"), 25, 2, "merge", ("time", "flops"), 500),
    "text/two_parameter_4.txt": (("p", "q"), 5, 4, "met1", ("",), 89),
    "text/two_parameter_5.txt": (("p", "s"), 25, 1, "main", ("",), 25),
    "text/two_parameter_6.txt": (("p", "s"), 25, 1, "main", ("",), 25),
    "text/two_parameter_7.txt": (("p", "s"), 25, 3, "main", ("",), 75),
    "text/two_parameter_segmented_1.txt": (("x", "y"), 60, 1, "reg", ("metr",), 300),
    "json/input_1.JSON": (("x",), 5, 1, "sweep", ("time",), 25),
    "json/input_10.JSON": (("x", "y", "z", "t"), 625, 1, "sweep", ("time",), 3125),
    "json/input_12.JSON": (("x", "y"), 25, 1, "sweep", ("time",), 125),
    "json/input_2.JSON": (("x",), 5, 1, "sweep", ("time", "flops"), 50),
    "json/input_3.JSON": (("x",), 5, 2, "sweep", ("time",), 50),
    "json/input_4.JSON": (("x",), 5, 2, "sweep", ("time", "flops"), 100),
    "json/input_5.JSON": (("x", "y"), 25, 1, "sweep", ("time",), 125),
    "json/input_6.JSON": (("x", "y"), 25, 1, "sweep", ("time", "flops"), 250),
    "json/input_7.JSON": (("x", "y"), 25, 2, "sweep", ("time",), 250),
    "json/input_8.JSON": (("x", "y"), 25, 2, "sweep", ("time", "flops"), 500),
    "json/input_9.JSON": (("x", "y", "z"), 125, 1, "sweep", ("time",), 625),
    "json/new/input1.json": (("x",), 5, 1, "sweep", ("time",), 25),
    "json/new/input2.json": (("x", "y"), 5, 2, "sweep", ("time", "visits"), 60),
    "jsonlines/band_matrix_2p.jsonl": (("x", "y"), 14, 1, "<root>", ("metr",), 70),
    "jsonlines/complete_matrix_2p.jsonl": (("x", "y"), 25, 1, "<root>", ("metr",), 125),
    "jsonlines/cross_matrix_2p.jsonl": (("x", "y"), 9, 1, "<root>", ("metr",), 45),
    "jsonlines/extended1.jsonl": (("x", "y"), 25, 1, "test", ("metr",), 125),
    "jsonlines/extended2.jsonl": (("x", "y"), 9, 1, "test", ("metr",), 45),
    "jsonlines/incomplete_matrix_2p.jsonl": (("x", "y"), 7, 1, "<root>", ("metr",), 35),
    "jsonlines/input_1.jsonl": (("x", "y"), 25, 1, "<root>", ("metr",), 125),
    "jsonlines/matrix_3p.jsonl": (("x", "y", "z"), 13, 1, "<root>", ("metr",), 15),
    "jsonlines/matrix_3p_bands.jsonl": (("x", "y", "z"), 17, 1, "<root>", ("metr",), 17),
    "jsonlines/matrix_3p_bands_incomplete.jsonl": (("x", "y", "z"), 18, 1, "<root>", ("metr",), 18),
    "jsonlines/matrix_4p.jsonl": (("a", "b", "c", "d"), 17, 1, "<root>", ("metr",), 20),
    "jsonlines/reduced.jsonl": (("x", "y"), 25, 1, "<root>", ("<default>",), 125),
    "jsonlines/sparse_matrix_2p.jsonl": (("x", "y"), 25, 1, "<root>", ("metr",), 125),
    "jsonlines/test1.jsonl": (("x", "y"), 25, 1, "<root>", ("metr",), 125),
    "jsonlines/test2.jsonl": (("p", "n"), 25, 1, "<root>", ("metr",), 125),
    "talpas/talpas_1.txt": (("x",), 5, 1, "compute", ("time",), 25),
    "talpas/talpas_2.txt": (("x", "y"), 25, 1, "compute", ("time",), 125),
    "talpas/talpas_3.txt": (("x", "y", "z"), 125, 1, "compute", ("time",), 125),
    "talpas/talpas_4.txt": (("p", "np", "pnp"), 125, 1, "compute", ("time",), 125),
    "talpas/talpas_5.txt": (("x", "y", "z", "t"), 625, 1, "compute", ("time",), 625),
    "talpas/talpas_6.txt": (("x",), 5, 2, "compute", ("time",), 50),
    "talpas/talpas_7.txt": (("x",), 5, 1, "compute", ("time", "flops"), 50),
    "talpas/talpas_8.txt": (("x",), 5, 2, "compute", ("time", "flops"), 100),
    "talpas/talpas_9.txt": (("x", "y"), 25, 2, "compute", ("time", "flops"), 500),
}

REJECTED = {
    "json/input_11.JSON": "call path 'sweep', metric 'time' has no measurement at 1 of the 5",
    "talpas/talpas_10_neg.txt": "call path 'compute', metric 'flops' has no measurement at 2",
}

CUBE_SETS = {
    # directory: (parameters, points, call paths, values per (call path, metric))
    "single_parameter": (["x"], 9, 4, 9),
    "multi_parameter": (["x", "y", "z"], 27, 4, 27),
    "allowed_formats": (["x", "y", "z"], 7, 4, 10),
    "extra_file": (["x"], 2, 4, 2),
    "extra_folder": (["x"], 2, 4, 2),
    "simple_threaded": (["f"], 5, 5, 20),
}
CUBE_REJECTED = {
    "negative_example": "same parameters in the same order",
    "negative_example2": "same parameters in the same order",
}


def measurement_files(root: Path) -> set[str]:
    return {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file()
        and "cubeset" not in p.parts
        and p.suffix.lower() in {".txt", ".json", ".jsonl"}
        and not p.name.startswith("LICENSE")
    }


def test_every_shared_file_is_covered(formats_dir):
    assert measurement_files(formats_dir) == set(ACCEPTED) | set(REJECTED)
    cube_sets = {p.name for p in (formats_dir / "cubeset").iterdir() if p.is_dir()}
    assert cube_sets == set(CUBE_SETS) | set(CUBE_REJECTED)


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_shared_file_loads_like_extrap(formats_dir, name):
    parameters, points, n_callpaths, first, metrics, n_values = ACCEPTED[name]
    exp = read_experiment(formats_dir / name)
    assert exp.parameters == list(parameters)
    assert len(exp.coordinates()) == points
    assert len(exp.callpaths) == n_callpaths
    assert exp.callpaths[0] == first
    assert list(exp.metrics) == list(metrics)
    assert len(exp) == n_values
    assert np.isfinite(exp.data["value"]).all()


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_incomplete_shared_files_are_rejected(formats_dir, name):
    with pytest.raises(InputError, match=REJECTED[name]) as error:
        read_experiment(formats_dir / name)
    assert error.value.path == formats_dir / name


# -- text: the spellings Extra-P accepts --------------------------------------------------


def test_text_values_and_repetitions(formats_dir):
    exp = read_experiment(formats_dir / "text/one_parameter_1.txt")
    at20 = exp.select("compute", "time").query("x == 20")
    assert at20["repetition"].tolist() == [0, 1, 2, 3, 4, 5]
    assert at20["value"].iloc[0] == 82.00848518948744
    assert at20["value"].iloc[-1] == 82.54252892405795


def test_text_plain_points_and_unnamed_metric(formats_dir):
    exp = read_experiment(formats_dir / "text/one_parameter_7.txt")  # POINTS 1000 2000 ...
    np.testing.assert_array_equal(exp.coordinates()[:, 0], [1000, 2000, 4000, 8000, 16000])
    assert list(exp.metrics) == [""]  # DATA before any METRIC, as in Extra-P
    assert exp.select("met1").query("p == 4000")["value"].tolist() == [4.1, 3.9, 4.3, 4.0, 4.1]


def test_text_several_parameters_per_line_and_ragged_repetitions(formats_dir):
    exp = read_experiment(formats_dir / "text/two_parameter_4.txt")  # PARAMETER p q
    assert exp.parameters == ["p", "q"]
    np.testing.assert_array_equal(exp.coordinates()[-1], [16000, 160])
    counts = exp.aggregate().set_index(["callpath", "p"])["repetitions"]
    assert counts[("met2", 16000)] == 4 and counts[("met4", 1000)] == 3


def test_text_tabs_comments_and_indented_regions(formats_dir):
    tabs = read_experiment(formats_dir / "text/two_parameter_segmented_1.txt")
    assert len(tabs.coordinates()) == 60
    relearn = read_experiment(formats_dir / "text/mpa/relearn_data.txt")
    assert "Update local trees" in relearn.callpaths  # "REGION       Update local trees"
    commented = read_experiment(formats_dir / "text/two_parameter_5.txt")  # "# formula: ..."
    assert commented.select("main").query("p == 2 and s == 10")["value"].tolist() == [10.84]


def test_text_multiple_regions_and_metrics(formats_dir):
    exp = read_experiment(formats_dir / "text/mpa/gpr_test_data_1.txt")
    assert set(exp.data.groupby(["callpath", "metric"]).groups) == {
        ("compute", "time"),
        ("scatter", "time"),
        ("scatter", "maxtime"),
    }
    assert exp.select("scatter", "maxtime").query("x == 50")["value"].tolist() == [
        160,
        165,
        167,
        155,
        170,
    ]


def write(tmp_path: Path, text: str, name: str = "exp.txt") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_text_any_number_of_parameters(tmp_path):
    names = ["a", "b", "c", "d", "e", "f"]
    points = [tuple(i + k for k in range(6)) for i in range(1, 4)]
    lines = ["PARAMETER " + " ".join(names)]
    lines += ["POINTS " + " ".join("( " + " ".join(map(str, p)) + " )" for p in points)]
    lines += ["REGION main", "METRIC time"] + [f"DATA {i} {i + 0.5}" for i in range(3)]
    exp = read_experiment(write(tmp_path, "\n".join(lines)))
    assert exp.parameters == names
    np.testing.assert_array_equal(exp.coordinates(), points)
    assert exp.select("main").query("f == 8")["value"].tolist() == [2.0, 2.5]


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("PARAMETER x\nPOINTS 1 2\nREGIN main\nDATA 1\nDATA 2\n", 3, "unknown keyword 'REGIN'"),
        (
            "PARAMETER x y\nPOINTS ( 1 2 ) ( 3 )\nREGION r\nDATA 1\nDATA 2\n",
            2,
            r"point \('3',\) has 1 value\(s\) but there are 2 parameters \(x, y\)",
        ),
        (
            "PARAMETER x\nPOINTS 1 2 3\nREGION r\nMETRIC time\nDATA 1\nDATA 2\nREGION s\n",
            5,
            "region 'r', metric 'time' has 2 DATA line.s. but 3 POINTS are declared",
        ),
        (
            "PARAMETER x\nPOINTS 1 2\nREGION r\nDATA 1\nDATA 2\nDATA 3\n",
            6,
            "more DATA lines than the 2 POINTS for region 'r'",
        ),
        (
            "PARAMETER x\nPOINTS ( 1 ) ( 2 )\nPOINTS ( 1 )\n",
            3,
            r"duplicate point \( 1 \), first given in line 2",
        ),
        ("PARAMETER x\nPOINTS 1 2\nREGION r\nDATA 1 fast\nDATA 2\n", 4, "'fast' is not a number"),
        ("PARAMETER x\nPOINTS 1 2\nREGION r\nDATA 1\nDATA 2 nan\n", 5, "only finite numbers"),
        ("PARAMETER x\nPOINTS 1 NaN\n", 2, "only finite numbers"),
        ("PARAMETER x y\nPOINTS 1 2\n", 2, "each point needs parentheses"),
        ("POINTS 1 2\n", 1, "POINTS before any PARAMETER"),
        ("PARAMETER x\nPOINTS 1 2\nDATA 1\n", 3, "DATA before any REGION"),
        (
            "PARAMETER x\nPOINTS 1\nREGION r\nDATA 1\nREGION r\nDATA 2\n",
            6,
            "already has data from line 4",
        ),
        ("PARAMETER x\nPOINTS 1\nREGION r\nDATA 1\nPOINTS 2\n", 5, "POINTS after DATA"),
        ("PARAMETER x\nPOINTS 1\nPARAMETER y\n", 3, "PARAMETER after POINTS"),
        ("PARAMETER x\nPOINTS\n", 2, "POINTS line without points"),
        ("PARAMETER x y\nPOINTS ( 1 2 ) 3\n", 2, "unexpected '3' outside the parentheses"),
    ],
)
def test_malformed_text_names_file_line_and_problem(tmp_path, text, line, message):
    path = write(tmp_path, text)
    with pytest.raises(InputError, match=message) as error:
        read_experiment(path)
    assert error.value.path == path
    assert error.value.line == line
    assert str(error.value).startswith(f"{path}:{line}: ")


def test_missing_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="no such file") as error:
        read_experiment(tmp_path / "nowhere.txt")
    assert error.value.path == tmp_path / "nowhere.txt"


def test_file_without_data_is_rejected(tmp_path):
    with pytest.raises(InputError, match="no DATA"):
        read_experiment(write(tmp_path, "PARAMETER x\nPOINTS 1 2\n"))


# -- JSON, JSON Lines, Talpas ---------------------------------------------------------------


def test_legacy_json_orders_parameters_by_id(formats_dir):
    exp = read_experiment(formats_dir / "json/input_12.JSON")  # parameters listed y (2), x (1)
    assert exp.parameters == ["x", "y"]
    first = exp.data.iloc[0]
    assert (first["x"], first["y"], first["value"]) == (4.0, 10.0, 25.5)


def test_current_json_values(formats_dir):
    exp = read_experiment(formats_dir / "json/new/input2.json")
    assert exp.callpaths == ["sweep", "sweep2"]
    assert exp.select("sweep", "time").query("x == 8")["value"].tolist() == [5.5] * 5
    assert sorted(exp.aggregate()["repetitions"].unique()) == [1, 5]


def test_jsonlines_defaults_and_value_lists(formats_dir):
    reduced = read_experiment(formats_dir / "jsonlines/reduced.jsonl")
    assert reduced.callpaths == ["<root>"] and list(reduced.metrics) == ["<default>"]
    lists = read_experiment(formats_dir / "jsonlines/extended2.jsonl")  # "value": [2, 2, ...]
    assert lists.select("test").query("x == 1 and y == 2")["value"].tolist() == [3.0] * 5


def test_talpas_values(formats_dir):
    exp = read_experiment(formats_dir / "talpas/talpas_8.txt")
    assert exp.select("compute", "time").query("x == 20")["value"].iloc[1] == 81.42023198759563


@pytest.mark.parametrize(
    ("name", "text", "line", "message"),
    [
        ("bad.json", '{"parameters": ["x"],\n "measurements": {\n}', 3, "not valid JSON"),
        (
            "nan.json",
            '{"parameters": ["x"], "measurements": {"m": {"t": [\n'
            '{"point": [1], "values": [1.0]},\n{"point": [2], "values": [NaN]}]}}}',
            3,
            "NaN is not a measured value",
        ),
        (
            "a.jsonl",
            '{"params": {"x": 1}, "value": 1}\n{"params": {"x": 2}}\n',
            2,
            "lacks the 'value'",
        ),
        (
            "b.jsonl",
            '{"params": {"x": 1}, "value": 1}\n{"params": {"x": 2, "y": 1}, "value": 1}\n',
            2,
            "differ",
        ),
        (
            "c.jsonl",
            '{"params": {"x": 1}, "value": 1}\n{"params": {"x": 2}, "value": "slow"}\n',
            2,
            "'slow' is not a number",
        ),
        (
            "d.jsonl",
            '{"params": {"x": 1}, "value": 1}\n{"params": {"x": 2}, "value": 1\n',
            2,
            "not a JSON record",
        ),
        ("t.txt", '{"parameters":{"x":1};"metric":"time";"value":1}\n', 1, "lacks the 'callpath'"),
    ],
)
def test_malformed_json_family_names_file_and_line(tmp_path, name, text, line, message):
    path = write(tmp_path, text, name)
    with pytest.raises(InputError, match=message) as error:
        read_experiment(path)
    assert (error.value.path, error.value.line) == (path, line)


def test_json_structure_errors_name_the_entry(tmp_path):
    document = {"parameters": ["x"], "measurements": {"main": {"time": [{"point": [1]}]}}}
    path = write(tmp_path, json.dumps(document), "e.json")
    with pytest.raises(
        InputError, match=r"measurements\['main'\]\['time'\]\[0\] lacks the entry 'values'"
    ):
        read_experiment(path)


# -- Cube profile sets ---------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(CUBE_SETS))
def test_cube_sets_load_like_extrap(formats_dir, name):
    parameters, points, n_callpaths, values = CUBE_SETS[name]
    exp = read_experiment(formats_dir / "cubeset" / name)
    assert exp.parameters == parameters
    assert len(exp.coordinates()) == points
    assert len(exp.callpaths) == n_callpaths
    assert exp.callpaths[0] == "main"
    assert exp.metrics["time"].unit == "s"
    assert len(exp.select("main", "time")) == values


@pytest.mark.parametrize("name", sorted(CUBE_REJECTED))
def test_cube_sets_with_inconsistent_names_are_rejected(formats_dir, name):
    with pytest.raises(InputError, match=CUBE_REJECTED[name]):
        read_experiment(formats_dir / "cubeset" / name)


def test_cube_values_are_exclusive_seconds(formats_dir):
    exp = read_experiment(formats_dir / "cubeset/single_parameter")
    assert exp.select("main->mat_mul", "time").query("x == 10")["value"].tolist() == [1.069e-06]
    assert exp.select("main", "visits")["value"].eq(1).all()


def test_cube_threads_are_repetitions_and_strong_scaling_sums(formats_dir):
    path = formats_dir / "cubeset/simple_threaded"
    weak = read_experiment(path)
    assert weak.select("main->foo", "time").query("f == 2")["value"].tolist() == [10.0, 0, 9.8, 0]
    assert "main->zero" in weak.select(metric="visits")["callpath"].tolist()
    strong = read_experiment(path, scaling="strong")
    assert strong.select("main->foo", "time").query("f == 2")["value"].tolist() == [19.8]


def test_cube_repetitions_from_files_and_run_directories(formats_dir):
    exp = read_experiment(formats_dir / "cubeset/allowed_formats")
    np.testing.assert_array_equal(
        exp.coordinates(),
        [
            [1, 1, 1],
            [1.1, 1.1, 1.1],
            [10, 1, 1],
            [20.5, 20.5, 1.5],
            [21.5, 21.5, 1.15],
            [22.5, 22.5, 1.25],
            [25, 25, 1],
        ],
    )
    reps = exp.aggregate().set_index(["callpath", "metric", "x"])["repetitions"]
    assert reps[("main", "time", 1.0)] == 2  # profile1.cubex + profile2.cubex
    assert reps[("main", "time", 10.0)] == 2  # mm.x10y1z1.r1 and x10y1z1
    assert reps[("main", "time", 25.0)] == 1


def test_cube_metric_selection(formats_dir):
    path = formats_dir / "cubeset/extra_file"
    everything = read_experiment(path, metrics=None)
    assert {"time", "visits", "PAPI_FP_OPS", "min_time"} <= set(everything.metrics)
    assert "bytes_put" not in everything.metrics  # declared, never measured
    assert list(read_experiment(path, metrics=["visits"]).metrics) == ["visits"]


@pytest.mark.parametrize(
    ("name", "parameters", "values"),
    [
        ("mm.x10y1z25.r1", ["x", "y", "z"], [10, 1, 25]),
        ("mm.x1.1y1.1z1.1", ["x", "y", "z"], [1.1, 1.1, 1.1]),
        ("mm.x20,5.y20,5.z1,5.r1", ["x", "y", "z"], [20.5, 20.5, 1.5]),
        ("mm.x21.5,y21,5,z1.15.r1", ["x", "y", "z"], [21.5, 21.5, 1.15]),
        ("mm.x25.y25.z1.r1", ["x", "y", "z"], [25, 25, 1]),
        ("x10y1z1", ["x", "y", "z"], [10, 1, 1]),
        ("lulesh.p8.size30.r2", ["p", "size"], [8, 30]),
    ],
)
def test_run_directory_names(name, parameters, values):
    assert parse_run_directory(name) == (parameters, values)


@pytest.mark.parametrize("name", ["mm.10x", "mm.xy", "mm.x1y", "mm.x1.2.3"])
def test_bad_run_directory_names(name):
    with pytest.raises(InputError, match="directory name"):
        parse_run_directory(name)


def test_cube_errors(tmp_path, formats_dir):
    with pytest.raises(InputError, match="no Cube profiles"):
        read_experiment(tmp_path)
    profile = formats_dir / "cubeset/single_parameter/mm.x10y1z1.r1/profile.cubex"
    for run in ("mm.x10y1.r1", "mm.x10y1.r2"):
        (tmp_path / run).mkdir()
        (tmp_path / run / "profile.cubex").symlink_to(profile)
    with pytest.raises(InputError, match="no parameter changes across the run directories"):
        read_experiment(tmp_path)
    (tmp_path / "mm.x10y1.r2" / "profile.cubex").unlink()
    (tmp_path / "mm.x10y1.r2" / "profile.cubex").write_bytes(b"not a tar archive")
    (tmp_path / "mm.x20y1.r1").mkdir()
    (tmp_path / "mm.x20y1.r1" / "profile.cubex").symlink_to(profile)
    with pytest.raises(InputError, match="cannot read the Cube profile") as error:
        read_experiment(tmp_path)
    assert error.value.path == tmp_path / "mm.x10y1.r2" / "profile.cubex"


# -- detection and registry ------------------------------------------------------------


def test_formats_are_registered():
    assert tuple(FORMATS) == ("text", "json", "jsonl", "talpas", "caliper", "cube", "sqlite")
    assert "sqlite" in FORMATS and len(FORMATS) == 7


@pytest.mark.parametrize(
    ("content", "name"),
    [
        ("PARAMETER x\nPOINTS 1 2\nREGION r\nDATA 1\nDATA 2\n", "text"),
        ('{"params": {"x": 1}, "value": 1}\n{"params": {"x": 2}, "value": 2}\n', "jsonl"),
        (
            '{"parameters":{"x":1};"metric":"m";"callpath":"c";"value":1}\n'
            '{"parameters":{"x":2};"metric":"m";"callpath":"c";"value":2}\n',
            "talpas",
        ),
        (
            '{\n "parameters": ["x"],\n "measurements": {"c": {"m": [{"point": [1], "values": [1]},'
            ' {"point": [2], "values": [2]}]}}}\n',
            "json",
        ),
    ],
)
def test_content_sniffing_without_a_telling_extension(tmp_path, content, name):
    exp = read_experiment(write(tmp_path, content, "measurements.dat"))
    np.testing.assert_array_equal(exp.coordinates()[:, 0], [1, 2])
    assert read_experiment(write(tmp_path, content, "m.dat"), format=name).parameters == ["x"]


def test_json_lines_in_a_json_file_are_read_as_json_lines(tmp_path):
    content = '{"params": {"x": 1}, "value": 1}\n{"params": {"x": 2}, "value": 2}\n'
    assert len(read_experiment(write(tmp_path, content, "lines.json"))) == 2


def test_unknown_content_and_options_are_clear_errors(tmp_path):
    with pytest.raises(InputError, match="cannot tell the file format"):
        read_experiment(write(tmp_path, "hello\n", "notes.dat"))
    with pytest.raises(PerfcastError, match="unknown file format 'csv'"):
        read_experiment(write(tmp_path, "x\n", "a.csv"), format="csv")
    path = write(tmp_path, "PARAMETER x\nPOINTS 1\nREGION r\nDATA 1\n")
    with pytest.raises(PerfcastError, match="text reader does not accept"):
        read_experiment(path, metrics=None)
    with pytest.raises(InputError, match="read from a directory"):
        read_experiment(path, format="cube")


def test_single_cube_profile_points_to_the_set(formats_dir):
    profile = formats_dir / "cubeset/single_parameter/mm.x10y1z1.r1/profile.cubex"
    with pytest.raises(InputError, match="cube format is read from a directory"):
        read_experiment(profile)


def test_legacy_json_errors(tmp_path):
    document: dict[str, Any] = {
        "parameters": [{"id": 1, "name": "x"}],
        "callpaths": [{"id": 1, "name": "main"}],
        "metrics": [{"id": 1, "name": "time"}],
        "coordinates": [
            {"id": 1, "parameter_value_pairs": [{"parameter_id": 1, "parameter_value": 4}]}
        ],
        "measurements": [{"coordinate_id": 1, "callpath_id": 2, "metric_id": 1, "value": 1.0}],
    }
    path = write(tmp_path, json.dumps(document), "legacy.json")
    with pytest.raises(InputError, match=r"measurements\[0\] refers to the unknown id 2"):
        read_experiment(path)
    document["measurements"][0]["callpath_id"] = 1
    document["coordinates"][0]["parameter_value_pairs"][0]["parameter_id"] = 3
    path.write_text(json.dumps(document))
    with pytest.raises(InputError, match=r"gives parameter ids \[3\], expected \[1\]"):
        read_experiment(path)
