"""Caliper profiles with Adiak metadata: thicket's real test data in ../shared/data/caliper
(LULESH at 27..343 ranks, RAJAPerf at two sizes on two machines), and damaged copies."""

import json
import re
import shutil
from fractions import Fraction
from pathlib import Path

import pytest

from perfcast.cli import main
from perfcast.errors import InputError
from perfcast.experiment import read_experiment
from perfcast.experiment.calltree import SEPARATOR

CALIPER = Path(__file__).resolve().parents[2] / "shared" / "data" / "caliper"
LULESH = CALIPER / "mpi_scaling_cali"
RAJAPERF = CALIPER / "rajaperf"

pytestmark = pytest.mark.skipif(
    not LULESH.is_dir(), reason=f"shared Caliper data not found at {CALIPER}"
)


def lulesh_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "lulesh"
    shutil.copytree(LULESH, copy)
    for file in copy.iterdir():
        file.chmod(0o644)
    return copy


def test_lulesh_set_is_one_experiment_over_jobsize():
    experiment = read_experiment(LULESH, parameters="jobsize")
    assert experiment.parameters == ["jobsize"]
    assert sorted(experiment.coordinates().ravel()) == [27, 64, 125, 216, 343]
    # the region nesting is the call path; records outside every region are left out
    assert "main->lulesh.cycle->LagrangeLeapFrog->LagrangeNodal" in experiment.callpaths
    assert "MPI_Comm_split" in experiment.callpaths
    assert len(experiment.callpaths) == 45
    # Caliper's time statistics over ranks get perfcast's names; others keep theirs
    assert {"time_inclusive", "time_inclusive:max", "time"} <= set(experiment.metrics)
    assert "min#inclusive#sum#time.duration" in experiment.metrics
    assert experiment.metrics["time"].unit == "s"
    data = experiment.data.query("jobsize == 27")
    inclusive = data[data.metric == "time_inclusive"].set_index("callpath").value
    assert inclusive["main"] == pytest.approx(47.238297)


def test_exclusive_time_adds_up_to_the_inclusive_time_of_main():
    experiment = read_experiment(LULESH, parameters="jobsize")
    data = experiment.data.query("jobsize == 343")
    exclusive = data[data.metric == "time"].set_index("callpath").value
    inclusive = data[data.metric == "time_inclusive"].set_index("callpath").value
    in_main = [c == "main" or c.startswith("main" + SEPARATOR) for c in exclusive.index]
    under_main = exclusive[in_main]
    assert under_main.sum() == pytest.approx(inclusive["main"], rel=1e-6)
    assert (exclusive >= 0).all()


def test_the_error_without_parameters_lists_the_globals_that_vary():
    with pytest.raises(InputError) as caught:
        read_experiment(LULESH)
    message = str(caught.value)
    assert "--parameters" in message
    assert "jobsize (27, 64, 125, 216, 343)" in message
    assert "problem_size" in message  # among those that are the same in all


def test_a_parameter_no_file_has_is_named_with_the_globals_there_are():
    with pytest.raises(InputError) as caught:
        read_experiment(LULESH, parameters="nx")
    assert "no Adiak global 'nx'" in str(caught.value)
    assert "jobsize" in str(caught.value)


def test_an_alias_is_silent_and_a_setting_that_follows_the_parameter_is_reported():
    with pytest.warns(UserWarning, match=r"numhosts .*cannot be told apart"):
        experiment = read_experiment(LULESH, parameters=["jobsize"])
    assert "mpi.world.size" not in str(experiment)


def test_runs_that_differ_in_a_setting_at_one_point_are_refused_not_merged():
    lassen = RAJAPERF / "lassen"
    with pytest.raises(InputError) as caught:
        read_experiment(lassen, parameters="ProblemSizeRunParam")
    message = str(caught.value)
    assert "differ in 'tuning' (block_128, block_256)" in message
    assert "--where tuning=block_128" in message
    assert "ProblemSizeRunParam=1048576" in message  # the point, spelled as given
    kept = read_experiment(lassen, parameters="ProblemSizeRunParam", where=["tuning=block_128"])
    assert sorted(kept.coordinates().ravel()) == [1048576, 2097152]
    # ten repetitions at the smaller size, one at the larger
    data = kept.data.query("metric == 'time_inclusive'")
    per_point = data.groupby("ProblemSizeRunParam").repetition.max() + 1
    assert per_point.to_dict() == {1048576.0: 10, 2097152.0: 1}


def test_where_names_the_values_there_are_when_no_run_matches():
    with pytest.raises(InputError, match="tuning is block_128, block_256"):
        read_experiment(RAJAPERF / "lassen", parameters="ProblemSizeRunParam", where=["tuning=x"])


def test_a_text_global_is_not_a_parameter():
    with pytest.raises(InputError, match=r"'variant' is 'Base_Seq', not a number.*--where"):
        read_experiment(RAJAPERF / "quartz", parameters="variant")


def test_truncated_profile_is_named(tmp_path):
    copy = lulesh_copy(tmp_path)
    damaged = copy / "64_cores.cali"
    data = damaged.read_bytes()
    damaged.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError) as caught:
        read_experiment(copy, parameters="jobsize")
    assert "64_cores.cali" in str(caught.value)
    assert "damaged or cut short" in str(caught.value)


def test_a_byte_that_is_not_text_is_named(tmp_path):
    copy = lulesh_copy(tmp_path)
    (copy / "27_cores.cali").write_bytes(b"__rec=node,id=1\n\xff\xfe\x00garbage\n")
    with pytest.raises(InputError, match=r"27_cores.cali: not a readable Caliper profile"):
        read_experiment(copy, parameters="jobsize")


def test_a_value_of_the_wrong_type_is_named_with_its_attribute(tmp_path):
    copy = lulesh_copy(tmp_path)
    damaged = copy / "125_cores.cali"
    lines = damaged.read_text().splitlines(keepends=True)
    record = next(i for i, line in enumerate(lines) if line.startswith("__rec=ctx,ref=36="))
    lines[record] = re.sub(r",data=[0-9.]+=", ",data=fast=", lines[record])
    damaged.write_text("".join(lines))
    with pytest.raises(InputError) as caught:
        read_experiment(copy, parameters="jobsize")
    assert "125_cores.cali" in str(caught.value)
    assert "'min#inclusive#sum#time.duration' holds 'fast', not a number" in str(caught.value)


def test_a_missing_adiak_key_is_named(tmp_path):
    copy = lulesh_copy(tmp_path)
    damaged = copy / "216_cores.cali"
    damaged.write_text(damaged.read_text().replace("data=jobsize,", "data=job_size,"))
    with pytest.raises(InputError) as caught:
        read_experiment(copy, parameters="jobsize")
    assert "216_cores.cali: no Adiak global 'jobsize'" in str(caught.value)


def test_perfcast_model_reads_files_and_directories(capsys):
    files = sorted(str(path) for path in LULESH.glob("*.cali"))
    assert main(["model", *files, "--parameters", "jobsize", "--metric", "time"]) == 0
    printed = capsys.readouterr().out
    assert "over jobsize" in printed
    assert "over ranks (Caliper): time_inclusive is Caliper's mean over ranks" in printed
    assert main(["model", str(LULESH), "--parameters", "jobsize", "--style", "text"]) == 0
    assert "main->lulesh.cycle->TimeIncrement->MPI_Allreduce" in capsys.readouterr().out


def test_caliper_flags_on_other_input_are_refused(capsys):
    text = Path(__file__).parents[1] / "examples" / "data" / "relearn.txt"
    assert main(["model", str(text), "--parameters", "p"]) == 2
    assert "are for Caliper profiles, and this is text input" in capsys.readouterr().err
    assert main(["model", str(text), str(text)]) == 2
    assert "more than one input are for Caliper profiles" in capsys.readouterr().err
    assert main(["model", str(LULESH)]) == 2
    assert "name the runs' parameters" in capsys.readouterr().err


def test_efficiency_views_measured_and_modeled(capsys):
    argv = ["model", str(LULESH), "--parameters", "jobsize", "--ranks-parameter", "jobsize"]
    assert main([*argv, "--metric", "time", "--efficiency", "weak", "--at", "jobsize=1000"]) == 0
    printed = capsys.readouterr().out
    section = printed[printed.index("Speedup and parallel efficiency of main along jobsize") :]
    lines = section.splitlines()
    # weak scaling against 27 ranks: the measured inclusive time of main, 47.24 s
    assert lines[2].split()[:4] == ["27", "47.24", "1", "100.0%"]
    assert lines[3].split()[:2] == ["64", "55.11"]  # efficiency 47.24 / 55.11
    assert lines[3].split()[3] == "85.7%"
    assert lines[-2].split()[0] == "1000" and "model, 95 % interval" in lines[-2]
    assert lines[-1].startswith("  the largest single call path under it at jobsize=1000: ")
    assert "CalcHourglassControlForElems" in lines[-1]
    assert main([*argv, "--efficiency", "strong", "--subtree", "nowhere"]) == 2
    assert "--subtree 'nowhere'" in capsys.readouterr().err


def test_speedup_and_efficiency_of_a_known_strong_scaling():
    from perfcast.modeling.efficiency import scaling_from_data, views

    # perfect strong scaling halves the time with twice the ranks
    points = scaling_from_data({4: 8.0, 8: 4.0, 16: 2.5}, "strong")
    assert [round(p.speedup, 3) for p in points] == [1, 2, 3.2]
    assert [round(p.efficiency, 3) for p in points] == [1, 1, 0.8]
    assert views("weak", (4, 8.0), 16, 10.0) == pytest.approx((3.2, 0.8))
    with pytest.raises(InputError, match="choose one of strong, weak"):
        views("linear", (4, 8.0), 16, 10.0)


def test_report_reads_caliper_profiles_and_draws_the_efficiency_view(tmp_path, capsys):
    page = tmp_path / "lulesh.html"
    argv = ["report", str(LULESH), "--parameters", "jobsize", "-o", str(page)]
    assert main([*argv, "--ranks-parameter", "jobsize", "--efficiency", "weak"]) == 0
    text = page.read_text()
    start = text.index('id="perfcast-data">') + len('id="perfcast-data">')
    efficiency = json.loads(text[start : text.index("</script>", start)])["efficiency"]
    assert efficiency["heading"].startswith("Speedup and parallel efficiency of main along jobsize")
    rows = efficiency["rows"]
    # the default target: 4x 343 ranks is 1372, moved up to the next cube of the series
    assert [row["ranks"] for row in rows] == [27, 64, 125, 216, 343, 1728]
    assert rows[1]["efficiency"] == pytest.approx(47.238297 / 55.109814, rel=1e-3)
    assert [row["measured"] for row in rows] == [True] * 5 + [False]
    capsys.readouterr()
    assert main(["report", str(LULESH), "-o", str(tmp_path / "x.html")]) == 2
    assert "name the runs' parameters" in capsys.readouterr().err


def test_subtree_sums_and_maxima_of_exclusive_models():
    from perfcast.modeling.efficiency import subtree_largest, subtree_value
    from perfcast.modeling.modelset import ModelSet
    from perfcast.modeling.pmnf import Factor, Model, Term

    def model(callpath: str, constant: float, slope: float) -> Model:
        return Model(callpath, "time", constant, (Term(slope, (Factor("p", Fraction(1)),)),))

    models = ModelSet(
        ["p"],
        [model("main", 1, 0), model("main->a", 0, 2), model("main->b", 5, 0), model("x", 9, 9)],
    )
    value, low, high = subtree_value(models, "main", "time", {"p": 4})
    assert value == 1 + 8 + 5  # the inclusive value of main: its subtree, not x
    assert low != low and high != high  # models without uncertainty: no interval (nan)
    assert subtree_value(models, "main", "time", {"p": 4}, how="max")[0] == 8
    assert subtree_largest(models, "main", "time", {"p": 1})[0] == "main->b"
    with pytest.raises(InputError, match="no model of time at or below 'y'"):
        subtree_value(models, "y", "time", {"p": 4})


def split_profile(jobsize: int, scale: float) -> dict:
    """A profile in Caliper's json-split form, two ranks, as cali-query writes it for the
    hatchet-region-profile configuration (the layout of hatchet's own test data): exclusive
    time per rank and region, the region tree in nodes, the globals at the top level."""
    rows = []
    for rank in (0, 1):
        for node, base in ((0, 0.5), (1, 2.0), (2, 3.0)):
            rows.append([node, rank, base * scale * (1 + rank), node])
    return {
        "data": [*rows, [9, 0, 0.01, None]],
        "columns": ["Node order", "mpi.rank", "time", "path"],
        "column_metadata": [
            {"is_value": True, "attribute.alias": "Node order"},
            {"is_value": True},
            {"is_value": True, "attribute.alias": "time", "attribute.unit": "sec"},
            {"is_value": False},
        ],
        "nodes": [
            {"label": "main", "column": "path"},
            {"label": "solve", "column": "path", "parent": 0},
            {"label": "exchange", "column": "path", "parent": 1},
        ],
        "jobsize": str(jobsize),
        "elapsed_time": f"{scale * 5.5:.6f}",
        "cluster": "quartz",
        "cali.channel": "hatchet-region-profile",
    }


def test_json_split_profiles_are_read_with_format_caliper(tmp_path, capsys):
    files = []
    for jobsize in (1, 2, 4, 8, 16):
        for repetition in (0, 1):
            file = tmp_path / f"run-{jobsize}-{repetition}.json"
            file.write_text(json.dumps(split_profile(jobsize, jobsize * (1 + 0.01 * repetition))))
            files.append(file)
    experiment = read_experiment(files, "caliper", parameters="jobsize")
    assert sorted(experiment.callpaths) == ["main", "main->solve", "main->solve->exchange"]
    data = experiment.data.query("jobsize == 4 and repetition == 0").set_index(
        ["callpath", "metric"]
    )
    # the mean over the two ranks, and the slowest rank as time:max
    assert data.value[("main->solve", "time")] == pytest.approx(2.0 * 4 * 1.5)
    assert data.value[("main->solve", "time:max")] == pytest.approx(2.0 * 4 * 2)
    assert experiment.metrics["time"].unit == "s"
    # elapsed_time differs between repetitions: a measured result, not a setting
    assert main(["model", *map(str, files), "--format", "caliper", "--parameters", "jobsize"]) == 0
    assert "main->solve" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.pop("nodes"), "the lists data, columns, column_metadata and nodes"),
        (lambda d: d["nodes"][1].update(parent=2), "parent 2 is not an earlier node's index"),
        (lambda d: d["data"][0].__setitem__(3, 7), "path 7 is no node's index"),
        (lambda d: d["data"][0].__setitem__(2, "fast"), "'time' holds 'fast', not a number"),
        (lambda d: d["data"].append([1]), "does not have 4 values"),
    ],
)
def test_damaged_json_split_profiles_are_named(tmp_path, edit, message):
    document = split_profile(1, 1.0)
    edit(document)
    file = tmp_path / "damaged.json"
    file.write_text(json.dumps(document))
    with pytest.raises(InputError) as caught:
        read_experiment([file], "caliper", parameters="jobsize")
    assert "damaged.json" in str(caught.value) and message in str(caught.value)


def test_a_json_split_profile_read_as_extrap_json_says_which_format_it_is(tmp_path, capsys):
    file = tmp_path / "run.json"
    file.write_text(json.dumps(split_profile(1, 1.0)))
    assert main(["model", str(file)]) == 2
    assert "json-split form, not Extra-P's JSON: read it with --format caliper" in (
        capsys.readouterr().err
    )
