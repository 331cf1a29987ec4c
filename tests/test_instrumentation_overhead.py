"""Measurement that costs more than it measures (issue 25): ``perfcast measure`` calibrates
what one measured call costs, keeps it beside the store and estimates the campaign's
overhead; ``perfcast model`` sets apart a call path whose time is mostly instrumentation (a
tiny function called millions of times), with the filter change that fixes it, and ranks a
real kernel as before."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from campaign_helpers import write_spec

from perfcast.cli import main
from perfcast.errors import InputError
from perfcast.experiment import read_experiment
from perfcast.experiment.experiment import Experiment
from perfcast.measure.overhead import (
    Calibration,
    calibration_path,
    instrumentation_cost,
    read_calibration,
)
from perfcast.modeling.extrapolation import measurement_artifacts
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.provenance import Instrumentation, Provenance

PROGRAM = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static volatile long sink;
static volatile double field;

/* a helper of one addition: its measured time is perfcast's entry and exit */
__attribute__((noinline)) void tiny(long i) { sink += i; }

/* a kernel whose work dwarfs the instrumentation of its one call */
__attribute__((noinline)) void kernel(long n)
{
    for (long i = 0; i < n * 10000000; i++)
        field = field * 0.999999999 + 1e-9; /* volatile: every step runs */
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    long n = atol(argv[1]);
    for (long i = 0; i < n * 1000000; i++)
        tiny(i);
    kernel(n);
    MPI_Finalize();
    return 0;
}
"""

SPEC = """
[app]
name = "app"
[build]
sources = ["app.c"]
compiler = "mpicc"
flags = ["-O2"]
output = "app"
counting_pass = false
[run]
command = "./app {n}"
repetitions = 1
timeout = 60
[parameters]
n = [1, 2, 3, 4, 5]
"""


@pytest.mark.slow
def test_a_tiny_function_called_millions_of_times_is_set_apart_the_kernel_is_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "app.c").write_text(PROGRAM)
    spec = write_spec(tmp_path, SPEC)
    assert main(["measure", str(spec)]) == 0
    out = capsys.readouterr().out
    store = tmp_path / "app.sqlite"
    calibration = read_calibration(calibration_path(store))
    assert 0 < calibration.wall_ns < calibration.cpu_ns
    assert "calibration: perfcast's instrumentation costs" in out and "measured now" in out
    assert "instrumentation overhead (estimated: calibrated cost per call x the measured" in out
    assert "an uninstrumented run" in out

    saved = tmp_path / "models.json"
    assert main(["model", str(store), "--metric", "time", "-o", str(saved)]) == 0
    out, err = capsys.readouterr()
    assert "instrumentation dominates 1 call path(s)" in err and "main->tiny" in err
    ranked, _, apart = out.partition("Not ranked towards")
    costliest = ranked.partition("Costliest call paths")[2].partition("Fastest growing")[0]
    assert "kernel" in costliest and "tiny" not in costliest
    assert "tiny" in apart and apart.count("not ranked: instrumentation dominates") == 1
    assert "measure tiny inside its caller: delete it from the [build] filter" in apart
    # the model file keeps it, so perfcast predict reads the same verdict later
    models = ModelSet.load(saved)
    assert models.provenance is not None and models.provenance.instrumentation is not None
    assert set(models.provenance.instrumentation.dominated) == {"main->tiny"}
    by_path = {m.callpath: m for m in models if m.metric == "time"}
    assert measurement_artifacts(by_path["main->kernel"], models.provenance) == []
    (reason,) = measurement_artifacts(by_path["main->tiny"], models.provenance)
    assert reason.everywhere

    # a second campaign into the store reuses the calibration kept beside it
    assert main(["measure", str(spec), "--resume", "--no-build"]) == 0
    assert "(kept in" in capsys.readouterr().out
    again = instrumentation_cost(read_experiment(store), calibration)
    assert set(again.dominated) == {"main->tiny"}


def test_a_damaged_calibration_is_refused_naming_the_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "app.overhead.json"
    path.write_text(json.dumps({"format": "perfcast-overhead/1", "wall_ns": "fast"}))
    with pytest.raises(InputError, match="wall_ns must be a number of nanoseconds"):
        read_calibration(path)
    path.write_text(json.dumps({"format": "other"}))
    with pytest.raises(InputError, match="delete the file"):
        read_calibration(path)


def test_the_verdict_survives_the_model_file_even_without_measured_time() -> None:
    cost = Instrumentation(50.0, "wall", {"main->tiny": 0.8, "main->empty": math.inf})
    provenance = Provenance({"n": (1.0, 5.0)}, instrumentation=cost)
    read = Provenance.from_json(json.loads(json.dumps(provenance.to_json())), "m.json")
    assert read is not None and read.instrumentation == cost


def test_the_share_is_visits_times_the_cost_per_call_against_own_time() -> None:
    """1e6 visits x 50 ns = 0.05 s: most of a helper's 0.06 s, little of a kernel's 1 s;
    runs with CPU time pay the CPU clock's cost per call."""
    rows = []
    for n in (1.0, 2.0):
        rows += [
            ("main->tiny", "visits", [n], n * 1e6),
            ("main->tiny", "time", [n], n * 0.06),
            ("main->kernel", "visits", [n], 1.0),
            ("main->kernel", "time", [n], n * 1.0),
        ]
    experiment = Experiment.from_rows(["n"], rows)
    calibration = Calibration(50.0, 400.0, "here")
    cost = instrumentation_cost(experiment, calibration)
    assert cost.per_call_ns == 50.0 and cost.clocks == "wall"
    assert cost.dominated == {"main->tiny": pytest.approx(0.05 / 0.06)}
    with_cpu = Experiment.from_rows(["n"], [*rows, ("main->kernel", "cpu_time", [1.0], 1.0)])
    assert instrumentation_cost(with_cpu, calibration).per_call_ns == 400.0
