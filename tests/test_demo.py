"""`perfcast demo`, the README's main job: the stencil measured by one campaign (light build
for time, then its counting pass for effort, as the effort-prior method measures) and
modeled."""

import functools
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import numpy as np
import pytest

from perfcast.cli import main
from perfcast.cli.demo import ITERATIONS, RANKS, SIZES, advice, demo_models
from perfcast.experiment import read_experiment
from perfcast.measure.counting import counting_store
from perfcast.measure.store import CampaignStore, RunRecord
from perfcast.modeling import ModelSet

REPO = Path(__file__).resolve().parents[1]


def _profile(rank: int, run: str, size: int, iterations: int, seconds: float, counts: bool):
    """One rank's profile of a Jacobi-like program: ``sweep`` touches ``size^2`` points per
    iteration, the halo exchange sends two rows of ``size`` doubles; ``seconds`` scales the
    time (noise, the counting build's overhead)."""
    ns = seconds * 1e9
    sweep, halo = 2.0 * size**2 * iterations, 40.0 * size * iterations + 2e3 * iterations
    blocks = 3 * size**2 * iterations + 7 * iterations if counts else 0
    halo_bytes = 16 * size * iterations
    lines = [
        "perfcast-profile 2",
        f"rank {rank}",
        f"ranks {RANKS}",
        f"run {run}",
        "program ./jacobi",
        "clock CLOCK_MONOTONIC ns",
        "cpu-clock 0 CLOCK_THREAD_CPUTIME_ID ns",
        f"counters {int(counts)} 40",
        "functions 2 2 all",
        "threads 1",
        "thread 0",
        "outside 0",
        f"node 1 0 1 {int(ns * (sweep + halo + 5e4))} {int(ns * 5e4)} 0 0 "
        f"{12 * iterations if counts else 0} main",
        f"node 2 1 {iterations} {int(ns * sweep)} {int(ns * sweep)} 0 0 {blocks} sweep",
        f"node 3 1 {iterations} {int(ns * halo)} {int(ns * halo)} 0 0 0 MPI_Sendrecv",
        f"mpi 3 {RANKS} {iterations} {halo_bytes} {halo_bytes}",
        "end",
    ]
    return "\n".join(lines).encode()


def _store(path: Path, *, counts: bool, repetitions: int, rng: np.random.Generator) -> None:
    """A campaign store over the demo's grid, as ``perfcast measure`` writes one: the
    timing runs (noisy, no counters) or the counting pass (counters, inflated time)."""
    with CampaignStore.create_or_open(
        path, name="stencil", parameters=["p", "size", "iterations"]
    ) as store:
        for size in SIZES:
            for iterations in ITERATIONS:
                for repetition in range(repetitions):
                    run = f"{rng.integers(2**63):016x}"
                    scale = 1e-9 * (3.4 if counts else 1.0 + 0.05 * rng.random())
                    profiles = {
                        f"rank-{rank}.pcprof": _profile(rank, run, size, iterations, scale, counts)
                        for rank in range(RANKS)
                    }
                    store.record(
                        RunRecord(
                            key=f"p={RANKS},size={size},iterations={iterations}#{repetition}",
                            point={"p": RANKS, "size": size, "iterations": iterations},
                            repetition=repetition,
                            command=f"mpirun -np {RANKS} ./jacobi {size} {iterations}",
                            exit_code=0,
                            reason=None,
                            started=1.0,
                            finished=2.0,
                            profiles=profiles,
                            ranks=RANKS,
                            cores=RANKS,
                        )
                    )


def test_the_demos_models_are_what_perfcast_model_gives_with_and_without_priors_named(
    tmp_path, capsys
):
    """The demo prints the models of its store and advises ``perfcast model STORE``:
    that command, and ``--priors effort`` too, give the same models, their effort priors
    made from the counting pass beside the store."""
    store = tmp_path / "stencil.sqlite"
    rng = np.random.default_rng(3)
    _store(store, counts=False, repetitions=2, rng=rng)
    _store(counting_store(store), counts=True, repetitions=1, rng=rng)
    shown = demo_models(store)
    assert shown.counts == counting_store(store) and shown.priors == ("effort",)
    sweep = shown.models[("main->sweep", "time")]
    assert sweep.prior is not None and sweep.prior.startswith("effort")
    assert ("main->sweep", "basic_blocks") in shown.models  # the counts are modeled, exactly

    told = advice(store)
    assert told.startswith(f"try: perfcast model {store}   ")
    assert "finds stencil.counts.sqlite beside it" in told
    command = told.removeprefix("try: perfcast ").split("   ")[0].split()
    demo = {(m.callpath, m.metric): m.text() for m in shown.models}
    for named in ([], ["--priors", "effort"]):
        saved = tmp_path / f"models{len(named)}.json"
        assert main([*command, *named, "--metric", "time", "-o", str(saved)]) == 0
        assert "stencil.counts.sqlite" in capsys.readouterr().err  # where the counts came from
        assert {(m.callpath, m.metric): m.text() for m in ModelSet.load(saved)} == demo, named
    # without --metric, the advice's own command: the same time models among the others
    saved = tmp_path / "every.json"
    assert main([*command, "-o", str(saved)]) == 0
    every = {(m.callpath, m.metric): m.text() for m in ModelSet.load(saved)}
    assert {k: every[k] for k in demo if k[1] == "time"} == {
        k: v for k, v in demo.items() if k[1] == "time"
    }


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("mpicc") is None or shutil.which("clang-16") is None,
    reason="needs Open MPI and clang-16",
)
def test_demo_measures_time_light_and_counts_once(tmp_path, capsys):
    assert main(["demo", "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    timing = read_experiment(tmp_path / "stencil" / "stencil.sqlite")
    counting = read_experiment(tmp_path / "stencil" / "stencil.counts.sqlite")
    blocks = "basic_blocks"
    assert blocks not in set(timing.data["metric"]) and blocks in set(counting.data["metric"])
    assert timing.data["repetition"].nunique() == 2
    assert counting.data["repetition"].nunique() == 1
    assert "stencil.sqlite: 50 runs ok, 0 failed" in out
    assert "stencil.counts.sqlite: 25 runs ok, 0 failed" in out
    assert "counting pass: 25 runs" in out
    # the first table is what perfcast model prints by default: priors from the counts
    by_default = out.split("as perfcast model gives them: the counters fix the terms")[1]
    sweep = next(line for line in by_default.splitlines() if "main->sweep " in line)
    assert "size^2 * iterations" in sweep and "iterations * size^(2)" in sweep  # expected, fitted
    assert "try: perfcast model" in out and "finds stencil.counts.sqlite beside it" in out
    report = tmp_path / "report.html"
    assert f"report: {report}" in out
    page = report.read_text()
    assert "main-\\u003esweep" in page  # the call paths, escaped as the page's data


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("mpicc") is None or shutil.which("clang-16") is None,
    reason="needs Open MPI and clang-16",
)
def test_demo_runs_from_an_installed_wheel_outside_the_checkout(tmp_path):
    """The wheel carries everything the demo reads (the stencil's sources, the runtime):
    built from a copy of the sources, installed into a fresh environment, run elsewhere."""
    source = tmp_path / "source"
    shutil.copytree(
        REPO / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(source)]
    subprocess.run(build, check=True, capture_output=True)
    (wheel,) = wheels.glob("perfcast-*.whl")
    # numpy, pandas, ... from this interpreter; perfcast only from the wheel
    environment = tmp_path / "venv"
    venv.create(environment, system_site_packages=True, with_pip=False)
    python = environment / "bin" / "python"
    install = [*pip, "--python", str(python), "install", "--no-deps", "--no-index"]
    install += ["--ignore-installed", str(wheel)]  # the checkout's editable install is visible
    subprocess.run(install, check=True, capture_output=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    isolated = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    run = functools.partial(
        subprocess.run, cwd=elsewhere, env=isolated, capture_output=True, text=True
    )
    where = run([python, "-c", "import perfcast; print(perfcast.__file__)"], check=True)
    assert Path(where.stdout.strip()).is_relative_to(environment), where.stdout
    demo = run([environment / "bin" / "perfcast", "demo"], timeout=900)
    assert demo.returncode == 0, demo.stderr
    assert f"the Jacobi stencil ({environment}" in demo.stdout
    assert "stencil.sqlite: 50 runs ok, 0 failed" in demo.stdout
    assert "measured in a temporary directory" in demo.stdout
    assert "report: perfcast-demo.html" in demo.stdout  # the page's script and style too
    assert "perfcast-data" in (elsewhere / "perfcast-demo.html").read_text()
