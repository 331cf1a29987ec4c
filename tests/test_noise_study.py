"""The noise study (benchmarks/noise_study.py) run as its users run it: a script, here on one
tiny generated program measured for real, its report and its measurement cache checked.

The benchmark is a script, not a package: the tests run it rather than import it. What it
relies on from the library (effort priors keep their exponents under noise, the noise
patterns) is tested in test_effort.py and test_synth.py."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perfcast.experiment import read_experiment
from perfcast.measure.store import OK, CampaignStore
from perfcast.synth.programs import read_truth

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "noise_study.py"
TINY = "--programs 1 --kernels 3 --ranks 2,3,4 --sizes 500,1000,1500 --repetitions 2 --seed 5"
"""One program of 3 kernels on a 3 x 3 grid, 2 repetitions: 22 runs per build."""

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("mpicxx") is None or shutil.which("clang-16") is None,
        reason="needs Open MPI and clang-16",
    ),
]


def noise_study(*arguments: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, str(BENCHMARK), *arguments], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("noise-study")


@pytest.fixture(scope="module")
def first(cache: Path) -> subprocess.CompletedProcess[str]:
    """The tiny study measured into an empty cache and reported."""
    return noise_study(
        *TINY.split(),
        "--injections",
        "2",
        "--cache",
        str(cache),
        "--output",
        str(cache / "report.txt"),
    )


def test_the_report_has_every_setting_the_targets_and_its_command(first, cache):
    report = (cache / "report.txt").read_text()
    assert first.stdout.strip() == report.strip()
    assert report.startswith(f"$ python3 benchmarks/noise_study.py {TINY} --injections 2")
    for setting in ("none (measured)", "uniform +2%", "normal +50%", "poisson +75%"):
        assert setting in report
    assert "exponential +75%" in report and "targets:" in report
    assert "waiting-time diagnosis" in report
    kernels = re.search(r"(\d+) computation and (\d+) communication call paths", report)
    assert kernels is not None and int(kernels[1]) + int(kernels[2]) >= 3
    # both builds: 9 training points and 2 at the test point, 2 repetitions each
    assert f"measurement: {2 * (9 * 2 + 2 * 2)} runs" in report


def test_time_comes_from_the_light_build_and_counts_from_the_counting_one(first, cache):
    (directory,) = (d for d in cache.iterdir() if d.is_dir())
    assert directory.name.startswith("bench00-")
    light = read_experiment(directory / "train-light.sqlite")
    assert {"time", "cpu_time"} <= set(light.metrics) and "basic_blocks" not in light.metrics
    assert (light.data["value"] > 0).all()
    counted = read_experiment(directory / "train.sqlite")
    assert {"basic_blocks", "mpi_bytes_sent"} <= set(counted.metrics)


def test_a_second_run_reuses_the_cache_and_measures_nothing(first, cache):
    (directory,) = (d for d in cache.iterdir() if d.is_dir())
    source = directory / "bench00.cpp"
    source.write_text(source.read_text() + "// built and measured")
    # other injections: the same programs and runs, so the same cache entry
    again = noise_study(*TINY.split(), "--injections", "1", "--cache", str(cache))
    assert "(0.0 min measured by this invocation)" in again.stdout
    assert [d for d in cache.iterdir() if d.is_dir()] == [directory]
    assert source.read_text().endswith("// built and measured")  # kept, not rewritten


VIRTUAL_TINY = (
    "--backend smpi --programs 1 --kernels 4 --ranks 4,8,16 --sizes 500,1000,1500 "
    "--repetitions 1 --seed 5"
)
"""The communication half on a simulated 32-host cluster: 4 communication kernels, a 3 x 3
grid and the test point p = 32, one repetition: 11 smpirun runs of a few seconds."""


@pytest.mark.skipif(shutil.which("smpirun") is None, reason="needs SimGrid's smpirun")
def test_the_virtual_study_counts_and_times_each_run_once_on_the_simulated_cluster(tmp_path):
    done = noise_study(*VIRTUAL_TINY.split(), "--injections", "1", "--cache", str(tmp_path))
    report = done.stdout
    kernels = re.search(r"(\d+) computation and (\d+) communication call paths", report)
    assert kernels is not None and (kernels[1], kernels[2]) == ("0", "4")
    assert "virtual cluster (SimGrid SMPI" in report and "smpi/allgather=rdb" in report
    assert "targets:" in report and "measurement: 11 runs" in report  # one build, not two
    (directory,) = (d for d in tmp_path.iterdir() if d.is_dir())
    assert sorted(p.name for p in directory.glob("*.toml")) == ["test.toml", "train.toml"]
    source = (directory / "bench00.cpp").read_text()
    assert "SMPI_SHARED_MALLOC" in source
    # every kernel starts from a barrier: no skew of the previous kernel is timed as its own
    loop = source[source.index("for (long r") :]
    calls = re.findall(r"^ {8}(?:kernel_\w+\(&frame\);|\{  /\* the matching side)", loop, re.M)
    barriers = re.findall(r"^ {8}MPI_Barrier\(MPI_COMM_WORLD\);.*\n {8}\S", loop, re.M)
    assert len(calls) == 4 and len(barriers) == 4
    with CampaignStore.open(directory / "train.sqlite") as store:
        runs = store.runs(OK)
    assert len(runs) == 9
    for run in runs:
        assert run.backend == "smpi" and run.job == "platform noise-study-cluster"
        assert run.ranks == run.point["p"] and run.command.startswith("smpirun -np")
    # counts and time from the same runs: every MPI call path's rank-mean bytes are exactly
    # what its generated message says, and its simulated time is positive
    data = read_experiment(directory / "train.sqlite").data
    assert "main->MPI_Barrier" in set(data["callpath"])
    truths = read_truth(directory / "bench00.truth.json")
    checked = 0
    for truth in truths.values():
        mine = data[data["callpath"] == truth.mpi_callpath]
        assert (mine[mine["metric"] == "time"]["value"] > 0).all()
        counted = mine[mine["metric"] == truth.bytes_metric]
        for _, row in counted.iterrows():
            expected = truth.exact_bytes({"p": row["p"], "n": row["n"]})
            assert row["value"] == pytest.approx(expected, rel=1e-9)
            checked += 1
    assert checked >= 9
