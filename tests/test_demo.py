"""`perfcast demo`, the README's main job: the stencil measured twice (light build for time,
counting build for effort, as the effort-prior method measures) and modeled."""

import shutil

import pytest

from perfcast.cli import main
from perfcast.experiment import read_experiment


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("mpicc") is None or shutil.which("clang-16") is None,
    reason="needs Open MPI and clang-16",
)
def test_demo_measures_time_light_and_counts_once(tmp_path, capsys):
    assert main(["demo", "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    timing = read_experiment(tmp_path / "timing" / "stencil.sqlite")
    counting = read_experiment(tmp_path / "counting" / "stencil.sqlite")
    assert "basic_blocks" not in timing.metrics and "basic_blocks" in counting.metrics
    assert timing.data["repetition"].nunique() == 2
    assert counting.data["repetition"].nunique() == 1
    assert "timing: " in out and "50 runs ok, 0 failed" in out
    assert "counting: " in out and "25 runs ok, 0 failed" in out
    effort = out.split("with effort priors: the counters fix the terms")[1]
    sweep = next(line for line in effort.splitlines() if "main->sweep " in line)
    assert "size^2 * iterations" in sweep and "iterations * size^(2)" in sweep  # expected, fitted
    assert "--priors effort --effort-counts" in out
