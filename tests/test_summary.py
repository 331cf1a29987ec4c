"""`perfcast model`'s summary: hot spots, growth, warnings once, short names, --callpath
patterns, what a value is over ranks, and a full listing that is linear in the models."""

import itertools
import re
import shutil
from fractions import Fraction

import numpy as np
import pytest
from campaign_helpers import copy_stencil, write_spec

from perfcast.cli import main
from perfcast.errors import InputError
from perfcast.experiment import write_experiment
from perfcast.experiment.experiment import Experiment, Metric
from perfcast.experiment.names import function_name, select_callpaths, short_callpath
from perfcast.modeling.model_warnings import WITHIN_NOISE
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.pmnf import Factor, Model, Term
from perfcast.report import render_models
from perfcast.report.summary import describe_values, largest_point, render_summary

MAIN = "int main(int, char**)"
FORCE = f"{MAIN}->void CalcForceForNodes(Domain&)"
HOURGLASS = (
    f"{FORCE}->void CalcFBHourglassForceForElems<std::vector<double, std::allocator<double> > >"
    "(Domain&, double*, double*, double*, double*, double*, double*, double*, double, int, int)"
)
ALLREDUCE = f"{MAIN}->MPI_Allreduce"
TRUTHS = {
    MAIN: lambda p, size: 0.5,
    FORCE: lambda p, size: 1e-3 * size**2,
    HOURGLASS: lambda p, size: 1e-5 * size**3,
    ALLREDUCE: lambda p, size: 1e-3 * np.log2(p),
}
"""A LULESH-shaped tree: the force loop costs most at the largest point, the hourglass
kernel below it grows fastest (size^3), and a C++ signature of 150 characters."""


@pytest.fixture
def lulesh_like(tmp_path):
    """Two repetitions (+-1 %) at 5 x 5 points of time and visits; main's time and visits
    are constant, so both its models carry the same warning."""
    rows = []
    for (callpath, truth), p, size in itertools.product(
        TRUTHS.items(), (4, 8, 16, 32, 64), (10, 15, 20, 25, 30)
    ):
        for jitter in (0.99, 1.01):
            rows.append((callpath, "time", (p, size), truth(p, size) * jitter))
            visits = 1.0 if callpath == MAIN else 10.0 * size
            rows.append((callpath, "visits", (p, size), visits * jitter))
    experiment = Experiment.from_rows(["p", "size"], rows, [Metric("time", "s")])
    path = tmp_path / "lulesh_like.json"
    write_experiment(experiment, path)
    return path


def _row(output: str, name: str) -> list[str]:
    """The numbers of the first summary row that ends with ``name``."""
    line = next(line for line in output.splitlines() if line.endswith("  " + name))
    return line[: -len(name)].split()


def test_summary_ranks_cost_and_growth_with_models(lulesh_like, capsys):
    assert main(["model", str(lulesh_like)]) == 0
    out = capsys.readouterr().out
    costs = out[out.index("Costliest") : out.index("Fastest")]
    growth = out[out.index("Fastest") : out.index("Warnings")]
    assert "target: p=256, size=120 (p, size at 4x the largest measured value" in out
    # exclusive / inclusive and shares at p=64, size=30: 0.5 + 0.9 + 0.27 + 0.006 s
    first = costs.splitlines()[2]
    assert first.endswith("main->CalcForceForNodes")
    exclusive, _, share, _, inclusive, _, inclusive_share, _ = first.split()[:8]
    assert float(exclusive) == pytest.approx(0.9, rel=0.02)
    assert float(inclusive) == pytest.approx(1.17, rel=0.02)
    assert float(share) == pytest.approx(100 * 0.9 / 1.676, abs=0.5)
    assert float(inclusive_share) == pytest.approx(100 * 1.17 / 1.676, abs=0.5)
    main_row = _row(costs, "main")
    assert float(main_row[4]) == pytest.approx(1.676, rel=0.02)  # main includes everything
    assert "model: " in costs
    # the hourglass kernel grows by (120/30)^3 = 64 and is shown by its function names
    hourglass = "main->CalcForceForNodes->CalcFBHourglassForceForElems<...>"
    assert growth.splitlines()[2].split()[0] == "x64"
    assert growth.splitlines()[2].endswith(hourglass)
    assert "CalcFBHourglassForceForElems<std::vector" not in out  # the full name: --full
    assert "Left out: 0 of 4 call paths; 1 metric(s) not ranked (visits). --full lists" in out


def test_warnings_come_once_per_call_path_naming_the_metrics(lulesh_like, capsys):
    assert main(["model", str(lulesh_like), "--top", "4"]) == 0
    out = capsys.readouterr().out
    warning = WITHIN_NOISE
    listing = out[out.index("Warnings") :].splitlines()
    assert listing.count(f"  {warning}") == 1  # once, not once per metric
    assert listing[listing.index(f"  {warning}") + 1] == "    main [all metrics]"
    assert main(["model", str(lulesh_like), "--full"]) == 0
    assert capsys.readouterr().out.count(warning) == 2  # the full listing: once per model


def test_full_and_text_style_list_every_model_with_its_full_name(lulesh_like, capsys):
    assert main(["model", str(lulesh_like), "--full"]) == 0
    full = capsys.readouterr().out
    assert main(["model", str(lulesh_like), "--style", "text"]) == 0
    assert capsys.readouterr().out == full
    assert full.count("Callpath: ") == 4 and f"Callpath: {HOURGLASS}\n" in full
    assert full.count("  Metric: ") == 8


def test_at_sets_the_target_and_rejects_unknown_parameters(lulesh_like, capsys):
    assert main(["model", str(lulesh_like), "--at", "size=60"]) == 0
    out = capsys.readouterr().out
    assert "target: p=256, size=60 (p at 4x the largest measured value" in out
    growth = out[out.index("Fastest") :].splitlines()
    assert growth[2].split()[0] == "x8"  # (60/30)^3
    assert main(["model", str(lulesh_like), "--at", "ranks=64"]) == 2
    err = capsys.readouterr().err
    assert "--at 'ranks=64': 'ranks=64' is not NAME=VALUE over the parameters p, size" in err
    assert len(err.strip().splitlines()) == 1
    assert main(["model", str(lulesh_like), "--at", "p=many"]) == 2
    assert "'many' is not a number" in capsys.readouterr().err
    assert main(["model", str(lulesh_like), "--top", "0"]) == 2
    assert "--top 0: give the number of call paths to rank" in capsys.readouterr().err


def test_the_default_target_is_the_next_value_of_the_measured_series(tmp_path, capsys):
    """LULESH runs only on cubes of ranks: after 1, 8, 27 the default target is 125 (the
    next cube at or above 4x 27 = 108), as for ``perfcast design --suggest``, and the
    efficiency view predicts at the same point, also where ``--at`` names only some
    parameters; evenly spaced sizes keep 4x."""
    truths = {"main": lambda p, size: 0.5 + 0.01 * p, "main->force": lambda p, size: size**2}
    rows = [
        (callpath, "time", (p, size), truth(p, size) * jitter)
        for (callpath, truth), p, size, jitter in itertools.product(
            truths.items(),
            (1, 8, 27),
            (10, 15, 20, 25, 30),
            (0.99, 1.01),
        )
    ]
    path = tmp_path / "cubes.json"
    write_experiment(Experiment.from_rows(["p", "size"], rows, [Metric("time", "s")]), path)
    argv = ["model", str(path), "--ranks-parameter", "p", "--efficiency", "weak"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert (
        "target: p=125, size=120 (p, size at 4x the largest measured value, moved up to the "
        "next value of the measured series where the values form one;" in out
    )
    section = out[out.index("Speedup and parallel efficiency of main along p") :].splitlines()
    assert [line.split()[0] for line in section[2:-1]] == ["1", "8", "27", "125"]
    assert section[-1].startswith("  the largest single call path under it at p=125: ")
    assert main([*argv, "--at", "size=60"]) == 0
    out = capsys.readouterr().out
    assert "target: p=125, size=60 (p at 4x the largest measured value" in out
    assert "  the largest single call path under it at p=125: " in out


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("CalcFBHourglassForceForElems", [HOURGLASS]),  # the innermost function's name
        ("*Force*", [FORCE, HOURGLASS]),  # a glob over the innermost function
        ("main->CalcForceForNodes->*", [HOURGLASS]),  # with '->': the whole, short path
        ("main->CalcForceForNodes->CalcFBHourglassForceForElems", [HOURGLASS]),  # by frame
        (FORCE, [FORCE]),  # the exact call path still works
        ("MPI_Allreduce", [ALLREDUCE]),
    ],
)
def test_callpath_accepts_names_and_globs(lulesh_like, capsys, pattern, expected):
    assert main(["model", str(lulesh_like), "--callpath", pattern, "--full"]) == 0
    out = capsys.readouterr().out
    assert re.findall(r"^Callpath: (.*)$", out, re.MULTILINE) == expected


def test_callpath_without_match_suggests_function_names(lulesh_like, capsys):
    assert main(["model", str(lulesh_like), "--callpath", "CalcForce"]) == 2
    err = capsys.readouterr().err
    assert "--callpath 'CalcForce' matches no call path of the 4 measured" in err
    assert "close function names: CalcForceForNodes" in err


@pytest.mark.parametrize(
    ("frame", "name"),
    [
        ("void CalcForceForNodes(Domain&)", "CalcForceForNodes"),
        ("int main(int, char**)", "main"),
        ("MPI_Allreduce", "MPI_Allreduce"),
        ("void ns::Grid<double, 3>::update(double const*, int) const", "ns::Grid<...>::update"),
        ("std::vector<int, std::allocator<int> >::operator[](unsigned long)", None),
        ("std::ostream& operator<<(std::ostream&, Foo const&)", "operator<<"),
        ("static double* (anonymous namespace)::helper(int)", "(anonymous namespace)::helper"),
    ],
)
def test_function_names_of_cpp_signatures(frame, name):
    expected = "std::vector<...>::operator[]" if name is None else name
    assert function_name(frame) == expected


def test_long_call_paths_keep_root_and_innermost_frames():
    frames = [MAIN, *(f"void Level{i}Kernel(Domain&, double*, int)" for i in range(8))]
    callpath = "->".join(frames)
    short = short_callpath(callpath, width=60)
    assert short.startswith("main->...->") and short.endswith("Level6Kernel->Level7Kernel")
    assert len(short) <= 60
    assert short_callpath(f"{MAIN}->MPI_Allreduce") == "main->MPI_Allreduce"


def test_select_callpaths_matches_qualified_names_and_keeps_order():
    paths = ["main", "main->void ns::Grid<int>::update(int)", "main->update", "main->other"]
    assert select_callpaths(["update"], paths) == paths[1:3]
    assert select_callpaths(["other", "main"], paths) == ["main", "main->other"]
    with pytest.raises(InputError, match="matches no call path"):
        select_callpaths(["missing"], paths)


def _constant(callpath: str, metric: str, value: float) -> Model:
    return Model(callpath, metric, value)


def test_inclusive_metrics_give_exclusive_values_by_difference():
    models = ModelSet(
        ["p"],
        [
            _constant("main", "time_inclusive", 10.0),
            _constant("main->a", "time_inclusive", 6.0),
            _constant("main->b", "time_inclusive", 3.0),
        ],
    )
    out = render_summary(models, np.array([[2.0], [4.0]]), units={"time_inclusive": "s"})
    assert "share of the total 10 s" in out
    assert _row(out, "main")[:4] == ["1", "s", "10.0", "%"]  # 10 - 6 - 3 of its own
    assert _row(out, "main->a")[4:8] == ["6", "s", "60.0", "%"]


def test_maxima_over_ranks_are_not_summed_over_the_call_tree():
    models = ModelSet(
        ["p"],
        [
            _constant("main", "time:max", 1.0),
            Model("main->a", "time:max", 0.0, (Term(2.0, (Factor("p", Fraction(1)),)),)),
        ],
    )
    measured = np.array([[2.0], [4.0], [8.0], [16.0], [32.0]])  # five values: fit to rank
    out = render_summary(models, measured, metrics=["time:max"])
    assert "the maximum over ranks (no sums over the call tree or shares" in out
    assert _row(out, "main->a") == ["64"]
    growth = out[out.index("Fastest") :].splitlines()
    assert growth[2].split()[0] == "x4" and growth[2].endswith("main->a")


def test_largest_point_of_a_cross_design_is_the_end_of_the_longest_arm():
    cross = np.array([[4, 10], [8, 10], [16, 10], [32, 10], [4, 20], [4, 40]], dtype=float)
    assert largest_point(["p", "size"], cross) == {"p": 32.0, "size": 10.0}
    grid = np.array(list(itertools.product((4, 8), (10, 20))), dtype=float)
    assert largest_point(["p", "size"], grid) == {"p": 8.0, "size": 20.0}


def test_values_say_which_summary_over_ranks_each_format_has():
    common = {"aggregation": "median", "median_estimator": "huber"}
    sqlite = " ".join(describe_values("sqlite", ["time", "time:max"], **common))
    assert "mean over a run's ranks" in sqlite and "NAME:max the slowest rank" in sqlite
    cube = " ".join(describe_values("cube", ["time"], **common))
    assert "a typical rank; Extra-P models the mean over ranks" in cube
    strong = " ".join(describe_values("cube", ["time"], scaling="strong", **common))
    assert "the sum over a profile's processes" in strong and "typical rank" not in strong
    totals = " ".join(describe_values("sqlite", ["time"], scaling="strong", **common))
    assert "--scaling strong multiplies every value by p" in totals
    text = " ".join(describe_values("text", ["time"], aggregation="mean", median_estimator="huber"))
    assert "does not say how ranks were summarised" in text and "the mean of a point" in text


class _CountingModelSet(ModelSet):
    """Counts passes over the models: rendering must not rescan them per call path."""

    passes = 0

    def __iter__(self):
        type(self).passes += 1
        return super().__iter__()


def test_full_listing_passes_over_the_models_a_fixed_number_of_times():
    models = [_constant(f"main->f{i}", metric, 1.0) for i in range(200) for metric in "ab"]
    few = _CountingModelSet(["p"], models[:20])
    many = _CountingModelSet(["p"], models)
    _CountingModelSet.passes = 0
    render_models(few, "text")
    passes_few = _CountingModelSet.passes
    _CountingModelSet.passes = 0
    text = render_models(many, "text")
    assert _CountingModelSet.passes == passes_few  # was one pass per call path
    assert text.count("Callpath: ") == 200 and text.count("Metric: ") == 400
    _CountingModelSet.passes = 0
    render_summary(many, np.array([[2.0], [4.0]]), metrics=["a"])
    assert _CountingModelSet.passes <= passes_few + 4


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("mpicc") is None or shutil.which("clang-16") is None,
    reason="needs Open MPI and clang-16",
)
def test_campaign_summary_says_ranks_are_averaged_and_max_is_the_slowest(tmp_path, capsys):
    app = copy_stencil(tmp_path)
    spec = write_spec(
        app,
        """
        [app]
        name = "stencil"
        [build]
        command = "make -s CC='{perfcast_build} mpicc'"
        [run]
        command = "./jacobi {size} 2"
        repetitions = 1
        timeout = 60
        [parameters]
        p = [1, 2, 3]
        size = [16, 32, 48]
        """,
    )
    assert main(["measure", str(spec)]) == 0
    capsys.readouterr()
    store = str(app / "stencil.sqlite")
    assert main(["model", store, "--metric", "time", "--metric", "time:max"]) == 0
    out = capsys.readouterr().out
    assert "Values over ranks (perfcast's runtime): NAME is the mean over a run's ranks" in out
    assert "NAME:max the slowest rank" in out
    assert "time [s], by exclusive value" in out and "time:max [s], the maximum over ranks" in out
    assert main(["model", store, "--callpath", "sweep", "--metric", "visits", "--full"]) == 0
    assert re.findall(r"^Callpath: (.*)$", capsys.readouterr().out, re.MULTILINE) == ["main->sweep"]
