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

import pytest

from perfcast.cli import main
from perfcast.experiment import read_experiment

REPO = Path(__file__).resolve().parents[1]


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
