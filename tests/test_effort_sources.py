"""Time from a light build, counts from a counting build (``perfcast model --effort-counts``),
and the guard that keeps a counting campaign from storing runs without counts."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from campaign_helpers import PROGRAM, stencil_with_counters, write_spec
from effort_helpers import fit_effort

from perfcast.appspec import load_spec
from perfcast.cli import main
from perfcast.effort.combine import combine_sources
from perfcast.errors import InputError
from perfcast.experiment import read_experiment
from perfcast.experiment.experiment import Experiment, Metric
from perfcast.experiment.metrics import CPU_TIME_METRIC
from perfcast.measure.campaign import measure
from perfcast.measure.local import LocalBackend
from perfcast.measure.runner import MISSING_COUNTERS
from perfcast.modeling import ModelSet
from perfcast.taint.profile_model import FORMAT

SIZES = (64, 128, 192, 256)
KERNEL = "main->kernel"
SEND = "main->MPI_Send"


def _time(sizes=SIZES, *, counters: bool = False, scale: float = 1e-9) -> Experiment:
    """A light campaign: time of a size^2 kernel and of a send (optionally with counts of
    its own, as if it had been measured with a counting build)."""
    rows = []
    for p in (1, 2, 3):
        for size in sizes:
            rows.append((KERNEL, "time", (p, size), scale * size**2))
            rows.append((SEND, "time", (p, size), 1e-6 + 1e-9 * size))
            if counters:
                rows.append((KERNEL, "basic_blocks", (p, size), 7.0))
    return Experiment.from_rows(("p", "size"), rows, [Metric("time", "s")], source="light.sqlite")


def _counts(sizes=SIZES, *, parameters=("p", "size"), callpaths=(KERNEL, SEND)) -> Experiment:
    """A counting campaign: exact counts, and the 3.4x slower time of the counting build."""
    rows = []
    for p in (1, 2, 3):
        for size in sizes:
            point = (p, size) if parameters[0] == "p" else (size, p)
            if KERNEL in callpaths:
                rows.append((KERNEL, "basic_blocks", point, size**2 + 2.0 * size + 3))
                rows.append((KERNEL, "basic_blocks:max", point, size**2 + 2.0 * size + 3))
                rows.append((KERNEL, "time", point, 3.4e-9 * size**2))
            if SEND in callpaths:
                rows.append((SEND, "mpi_bytes_sent", point, 8.0 * size))
                rows.append((SEND, "mpi_bytes_received", point, 8.0 * size))
    metrics = [Metric("time", "s"), Metric("mpi_bytes_sent", "bytes")]
    return Experiment.from_rows(parameters, rows, metrics, source="counters.sqlite")


def _metrics_by_source(experiment: Experiment) -> dict[str, set[float]]:
    """metric -> the set of values the combined experiment has for it at KERNEL."""
    data = experiment.data
    return {
        str(metric): set(group["value"])
        for metric, group in data[data["callpath"] == KERNEL].groupby("metric")
    }


def test_counters_come_from_the_counts_and_everything_else_from_the_time():
    combined = combine_sources(_time(), _counts())
    assert combined.notes == []
    experiment = combined.experiment
    assert experiment.parameters == ["p", "size"]
    assert set(experiment.data["metric"]) == {
        "time",
        "basic_blocks",
        "basic_blocks:max",
        "mpi_bytes_sent",
        "mpi_bytes_received",
    }
    values = _metrics_by_source(experiment)
    assert values["time"] == {1e-9 * s**2 for s in SIZES}  # the light build's, not 3.4e-9
    assert values["basic_blocks"] == {s**2 + 2.0 * s + 3 for s in SIZES}
    assert experiment.metrics["mpi_bytes_sent"].unit == "bytes"
    assert experiment.metrics["time"].unit == "s"
    # the effort modeler reads it like a single campaign with counters
    result, _ = fit_effort(experiment)
    kernel = result.models[(KERNEL, "time")]
    assert kernel.prior is not None and kernel.prior.startswith("effort")
    assert kernel.leading_exponents()["size"] == (Fraction(2), 0)


def test_time_campaigns_own_counters_are_dropped_with_a_note():
    combined = combine_sources(_time(counters=True), _counts())
    assert 7.0 not in _metrics_by_source(combined.experiment)["basic_blocks"]
    assert len(combined.notes) == 1
    assert "light.sqlite: its own counters (basic_blocks) are dropped" in combined.notes[0]
    assert "counters.sqlite" in combined.notes[0]


def test_parameters_in_another_order_are_aligned_to_the_time_campaign():
    combined = combine_sources(_time(), _counts(parameters=("size", "p")))
    assert combined.experiment.parameters == ["p", "size"]
    assert _metrics_by_source(combined.experiment)["basic_blocks"] == {
        s**2 + 2.0 * s + 3 for s in SIZES
    }


def test_different_parameters_are_an_error_naming_the_counts_file():
    rows = [(KERNEL, "basic_blocks", (n,), float(n)) for n in SIZES]
    counts = Experiment.from_rows(("n",), rows, source="counters.sqlite")
    with pytest.raises(InputError) as error:
        combine_sources(_time(), counts)
    assert str(error.value.path) == "counters.sqlite"
    assert "['n']" in str(error.value) and "['p', 'size']" in str(error.value)


def test_counts_without_counters_are_an_error_saying_how_to_build():
    with pytest.raises(InputError) as error:
        combine_sources(_time(), _time())
    assert str(error.value.path) == "light.sqlite"
    assert "[build] counters = true" in str(error.value)
    assert "perfcast build --counters" in str(error.value)


def test_swapped_inputs_are_an_error():
    counts_only = _counts().restricted(metrics=["basic_blocks", "mpi_bytes_sent"])
    with pytest.raises(InputError, match="nothing but effort counters"):
        combine_sources(counts_only, _counts())


def test_call_paths_timed_but_never_counted_get_a_note():
    combined = combine_sources(_time(), _counts(callpaths=(KERNEL,)))
    assert len(combined.notes) == 1
    assert f"1 call path(s) timed in light.sqlite were never counted ({SEND})" in (
        combined.notes[0].replace(" in counters.sqlite", "")
    )
    _, derived = fit_effort(combined.experiment)
    assert SEND not in derived.effort_priors and KERNEL in derived.effort_priors


def test_time_points_beyond_the_counted_range_get_a_note():
    # counted on fewer points inside the timed range: no note, the counts interpolate
    assert combine_sources(_time(), _counts(sizes=(64, 128, 256))).notes == []
    # timed beyond the counted range: the priors extrapolate the counts, and a note says so
    combined = combine_sources(_time(sizes=(*SIZES, 512)), _counts())
    assert len(combined.notes) == 1
    note = combined.notes[0]
    assert note.startswith("size is timed over 64..512 in light.sqlite but counted over only")
    assert "64..256 in counters.sqlite" in note and "extrapolate" in note


def test_effort_counts_needs_effort_priors(tmp_path, capsys):
    counts = tmp_path / "counters.jsonl"
    light = str(tmp_path / "light.jsonl")
    assert main(["model", light, "--priors", "none", "--effort-counts", str(counts)]) == 2
    error = capsys.readouterr().err
    assert str(counts) in error and "add effort to --priors" in error


# -- the real thing: a light and a counting campaign of the stencil ---------------------------

needs_mpi = pytest.mark.skipif(shutil.which("mpicc") is None, reason="needs Open MPI")


@pytest.fixture(scope="module")
def stencil_campaigns(tmp_path_factory) -> tuple[Path, Path]:
    """The stencil measured twice: light (2 repetitions), counting (1 repetition); the two
    stores. With CPU time (``PERFCAST_CPU_TIME=1``), as the README tells a user on a machine
    whose ranks share cores: p = 3 on 2 cores, under a loaded test run, put waiting for a
    core into the wall time and the light / counting comparison below failed now and then."""
    directory = tmp_path_factory.mktemp("sources")
    counting = stencil_with_counters(directory / "counting", repetitions=1)
    light = stencil_with_counters(directory / "light", repetitions=2)
    text = light.read_text().replace("counters = true", "counters = false")
    light.write_text(
        text.replace(', "basic_blocks", "mpi_bytes_sent", "mpi_bytes_received"', ', "cpu_time"')
    )
    own = counting.read_text().replace('collect = ["time",', 'collect = ["time", "cpu_time",')
    counting.write_text(own)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PERFCAST_CPU_TIME", "1")
        for spec in (light, counting):
            assert main(["measure", str(spec)]) == 0
    return light.parent / "stencil.sqlite", counting.parent / "stencil.sqlite"


def _sweep_time(argv: list[str], output: Path) -> tuple[float, float]:
    """``perfcast model ... --metric cpu_time -o output``: the sweep's CPU time model's
    effort prior checked; its size^2 coefficient and its value at the largest size."""
    metric = ["--metric", CPU_TIME_METRIC]
    assert main([*argv, *metric, "--callpath", "main->sweep", "-o", str(output)]) == 0
    sweep = ModelSet.load(output)[("main->sweep", CPU_TIME_METRIC)]
    assert sweep.prior is not None and sweep.prior.startswith("effort")
    assert sweep.leading_exponents()["size"] == (Fraction(2), 0)
    assert "p" not in sweep.parameters
    leading = sweep.leading_term()
    assert leading is not None
    return leading.coefficient, float(sweep.evaluate({"size": max(SIZES)}))


@pytest.mark.slow
@needs_mpi
def test_light_time_with_counts_of_the_counting_build(stencil_campaigns, tmp_path, capsys):
    light, counting = stencil_campaigns
    argv = ["model", str(light), "--priors", "effort", "--effort-counts", str(counting)]
    light_coefficient, light_time = _sweep_time(argv, tmp_path / "light.json")
    out, err = capsys.readouterr()
    assert "main->sweep  [computation]" in out
    assert "effort (basic_blocks)" in out and "size^(2)" in out
    assert "note: " in err  # p = 3 on 2 cores, at least
    # the counting build's own CPU time, as measured: one repetition a point is too few to
    # model reliably (its fit can conflict with the prior on 2 shared cores), and the claim
    # is about the time itself, not about a model of it
    rows = read_experiment(counting).select("main->sweep", CPU_TIME_METRIC)
    largest = rows[rows["size"] == max(SIZES)]["value"]
    assert len(largest) > 0
    counting_time = float(np.median(largest))
    print(
        f"sweep's time at size {max(SIZES)}, light / counting build: "
        f"{light_time / counting_time:.3f} (size^2 coefficient {light_coefficient:.3g})",
        file=sys.stderr,
    )
    # the counting build's ~3.4x instrumentation overhead is not in the light time model
    assert light_time / counting_time < 0.6


@pytest.mark.slow
@needs_mpi
def test_effort_counts_work_with_taint(stencil_campaigns, tmp_path, capsys):
    """--taint fits on the same combined measurements: the sweep keeps its effort prior."""
    light, counting = stencil_campaigns
    profile = tmp_path / "taint.json"
    functions = {  # what `perfcast taint` finds in the stencil, reduced to two functions
        "main": _tainted("jacobi.c", "main", []),
        "sweep": _tainted("grid.c", "main->sweep", [["size"]]),
    }
    parameters: dict[str, dict] = {"p": {}, "size": {}}
    text = {"format": FORMAT, "parameters": parameters, "functions": functions}
    profile.write_text(json.dumps({**text, "pruned": [], "constant": []}))
    argv = ["model", str(light), "--priors", "effort", "--effort-counts", str(counting)]
    assert main([*argv, "--taint", str(profile), "-o", str(tmp_path / "m.json")]) == 0
    out = capsys.readouterr().out
    assert "main->sweep  [computation]" in out
    assert "also under priors: time:max of 2 call path(s)" in out
    saved = ModelSet.load(tmp_path / "m.json")
    sweep = saved[("main->sweep", "time")]
    assert sweep.prior is not None and sweep.prior.startswith("effort")
    assert sweep.leading_exponents()["size"] == (Fraction(2), 0)
    assert ("main->sweep", "basic_blocks") in saved
    # what effort leaves black-box gets the taint prior: the maximum over ranks of time
    sweep_max = saved[("main->sweep", "time:max")]
    assert sweep_max.prior is not None and sweep_max.prior.startswith("taint")
    assert "p" not in sweep_max.parameters


def _tainted(file: str, callpath: str, terms: list[list[str]]) -> dict[str, Any]:
    """A function of a taint profile: the parameters its code depends on."""
    entry = {"terms": terms, "exclusive_terms": terms, "visits_terms": []}
    return {"file": file, "terms": terms, "callpaths": {callpath: entry}}


@pytest.mark.slow
@needs_mpi
def test_effort_counts_from_a_light_campaign_are_an_error(stencil_campaigns, capsys):
    light, _ = stencil_campaigns
    argv = ["model", str(light), "--priors", "effort", "--effort-counts", str(light)]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert f"{light}: no effort counters" in error and "[build] counters = true" in error


# -- the guard: a counting campaign whose program was built without counters ------------------


@pytest.mark.slow
@needs_mpi
def test_a_counting_campaign_of_a_program_built_without_counters_stops(tmp_path, capsys):
    """The light binary is up to date, the build command does not rebuild it: the first run
    fails with the fix, the rest are not started, and --resume runs them after a rebuild."""
    source = tmp_path / "prog.c"
    source.write_text(PROGRAM)
    build = [sys.executable, "-m", "perfcast", "build"]
    compile_ = ["--", "mpicc", "-O1", str(source), "-o", str(tmp_path / "prog")]
    subprocess.run([*build, *compile_], check=True, capture_output=True)
    spec_path = write_spec(
        tmp_path,
        """
        [app]
        name = "prog"
        [build]
        command = "true"
        counters = true
        [run]
        command = "./prog {n}"
        repetitions = 2
        retries = 2
        [parameters]
        p = [1, 2]
        n = [1, 2]
        """,
    )
    spec = load_spec(spec_path)
    result = measure(spec, LocalBackend())
    assert result.planned == 8 and result.stored_ok == 0
    assert [run.reason for run in result.failed] == [MISSING_COUNTERS]
    assert result.failed[0].attempts == 1  # a rebuild, not a retry, fixes it
    assert result.report.not_started == 7
    summary = result.summary()
    assert "no basic-block counters although [build] counters = true" in summary
    assert "make clean" in summary and "7 run(s) not started" in summary
    # the fix: rebuild with counters, then resume and retry the failed run
    subprocess.run([*build, "--counters", *compile_], check=True, capture_output=True)
    result = measure(spec, LocalBackend(), resume=True, retry_failed=True)
    assert result.stored_ok == 8 and not result.failed
    counted = read_experiment(spec.store)
    assert "basic_blocks" in set(counted.data["metric"])
