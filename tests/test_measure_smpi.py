"""``perfcast measure --backend smpi --platform cluster.xml``: a campaign on a virtual
cluster, run by a real smpirun on a described platform, stored like a real campaign."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from campaign_helpers import copy_stencil, write_spec

from perfcast.cli import main
from perfcast.errors import PerfcastError
from perfcast.measure.smpi import SmpiBackend, VirtualCluster
from perfcast.modeling.modelset import ModelSet
from perfcast.simulate.platform import PlatformSpec

SWEEP = "main->sweep"
ALLREDUCE = "main->global_residual->MPI_Allreduce"
RANKS = (2, 4, 8)

needs_simgrid = pytest.mark.skipif(
    shutil.which("smpirun") is None or shutil.which("smpicc") is None,
    reason="SimGrid (smpirun, smpicc) is not installed",
)

# weak scaling: every rank sweeps a 384 x 384 block whatever p is; the spec names mpicc,
# as for a real campaign, and the SMPI backend builds with smpicc instead
VIRTUAL_STENCIL = """\
[app]
name = "stencil"
[build]
command = "make -s CC='{perfcast_build} mpicc'"
[run]
command = "./jacobi {size} 100"
repetitions = 1
timeout = 60
[parameters]
p = [2, 4, 8]
size = 384
"""


def platform(directory: Path, nodes: int) -> Path:
    """A described flat cluster of one-core 1 Gflop/s nodes; a 100 us latency makes each
    Allreduce round cost far more than the noise of the ranks' measured compute bursts."""
    path = directory / f"cluster-{nodes}.xml"
    spec = PlatformSpec(name=f"virtual{nodes}", nodes=nodes, latency=1e-4, bandwidth=1e8)
    path.write_text(spec.to_xml())
    return path


@pytest.mark.slow
@needs_simgrid
def test_virtual_campaign_is_stored_and_modeled_like_a_real_one(tmp_path, capsys):
    spec = write_spec(copy_stencil(tmp_path), VIRTUAL_STENCIL)
    cluster = platform(tmp_path, 8)
    argv = ["measure", str(spec), "--backend", "smpi", "--platform", str(cluster)]
    assert main(argv) == 0
    store = spec.parent / "stencil.sqlite"
    with sqlite3.connect(store) as db:
        rows = db.execute(
            "SELECT key, status, backend, job, ranks, cores, command FROM runs ORDER BY ranks"
        ).fetchall()
    assert [row[:6] for row in rows] == [
        (f"p={p},size=384#0", "ok", "smpi", "platform virtual8", p, p) for p in RANKS
    ]
    for (*_, p, _cores, command), _ in zip(rows, RANKS, strict=True):
        assert command.startswith(f"smpirun -np {p} -platform {cluster} -hostfile ")
        assert "--cfg=smpi/host-speed:1Gf" in command and command.endswith("./jacobi 384 100")
    capsys.readouterr()

    models = tmp_path / "models.json"
    assert main(["model", str(store), "-o", str(models)]) == 0
    note = f"note: 3 of 3 runs in {store} ran on a virtual cluster (SimGrid SMPI, platform "
    assert note + "'virtual8'): their times are simulated" in capsys.readouterr().err
    saved = ModelSet.load(models)
    at = {p: saved.predict({"p": p}) for p in (2, 8)}
    # each rank sweeps the same block at every p; the Allreduce takes log2(p) rounds
    assert at[8][(SWEEP, "time")] == pytest.approx(at[2][(SWEEP, "time")], rel=0.3)
    assert at[8][(ALLREDUCE, "time")] > 1.5 * at[2][(ALLREDUCE, "time")]


@needs_simgrid
def test_a_platform_with_too_few_cores_is_refused_before_anything_runs(tmp_path, capsys):
    spec = write_spec(copy_stencil(tmp_path), VIRTUAL_STENCIL)
    small = platform(tmp_path, 4)
    argv = ["measure", str(spec), "--backend", "smpi", "--platform", str(small)]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert "virtual4" in error and "4 cores" in error and "runs 8 ranks" in error
    assert not (spec.parent / "stencil.sqlite").exists()
    assert not (spec.parent / "jacobi").exists()  # not even built


SOURCES_STENCIL = """\
[app]
name = "stencil"
[build]
sources = ["jacobi.c", "grid.c", "halo.c"]
compiler = "mpicc"
flags = ["-O2", "-lm"]
output = "jacobi"
[run]
command = "./jacobi 64 10"
repetitions = 1
[parameters]
p = [1, 2]
"""


@pytest.mark.slow
@needs_simgrid
def test_a_sources_build_names_mpicc_and_is_built_with_smpicc(tmp_path, capsys):
    spec = write_spec(copy_stencil(tmp_path), SOURCES_STENCIL)
    argv = ["measure", str(spec), "--backend", "smpi", "--platform", str(platform(tmp_path, 2))]
    assert main(argv) == 0
    assert "perfcast build --smpi -- smpicc -O2 -lm jacobi.c" in capsys.readouterr().err
    with sqlite3.connect(spec.parent / "stencil.sqlite") as db:
        assert db.execute("SELECT count(*) FROM runs WHERE status = 'ok'").fetchone() == (2,)


@pytest.mark.slow
@needs_simgrid
def test_an_executable_left_by_a_real_build_is_refused_before_it_runs(tmp_path, capsys):
    app = copy_stencil(tmp_path)
    subprocess.run(["make", "-s", "CC=mpicc"], cwd=app, check=True, capture_output=True)
    spec = write_spec(app, VIRTUAL_STENCIL)  # make finds jacobi up to date
    argv = ["measure", str(spec), "--backend", "smpi", "--platform", str(platform(tmp_path, 8))]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert "jacobi is an executable for mpirun" in error and "make clean" in error
    with sqlite3.connect(app / "stencil.sqlite") as db:
        assert db.execute("SELECT count(*) FROM runs").fetchone() == (0,)
        assert db.execute("SELECT count(*) FROM inflight").fetchone() == (0,)


def test_smpi_and_platform_go_together(tmp_path, capsys):
    spec = write_spec(copy_stencil(tmp_path), VIRTUAL_STENCIL)
    assert main(["measure", str(spec), "--backend", "smpi"]) == 2
    assert "--backend smpi needs --platform" in capsys.readouterr().err
    cluster = platform(tmp_path, 8)
    assert main(["measure", str(spec), "--platform", str(cluster)]) == 2
    assert "add --backend smpi" in capsys.readouterr().err
    assert not (spec.parent / "stencil.sqlite").exists()


def test_missing_smpirun_names_the_package(tmp_path):
    cluster = VirtualCluster(path=tmp_path / "c.xml", name="c", hosts=("node-0",))
    with pytest.raises(PerfcastError, match="libsimgrid-dev"):
        SmpiBackend(cluster, smpirun="perfcast-no-such-smpirun")


@pytest.mark.slow
@needs_simgrid
def test_a_store_mixing_real_and_virtual_runs_is_named_by_perfcast_model(tmp_path, capsys):
    """Two real runs (mpirun, p = 1, 2) and two virtual ones in one store: the models would
    describe neither machine, and perfcast model says so."""
    app = copy_stencil(tmp_path)
    real = write_spec(app, VIRTUAL_STENCIL.replace("p = [2, 4, 8]", "p = [1, 2]"))
    assert main(["measure", str(real)]) == 0
    subprocess.run(["make", "-s", "clean"], cwd=app, check=True)  # an mpirun build
    virtual = write_spec(app, VIRTUAL_STENCIL.replace("p = [2, 4, 8]", "p = [4, 8]"))
    cluster = platform(tmp_path, 8)
    argv = ["measure", str(virtual), "--backend", "smpi", "--platform", str(cluster)]
    assert main([*argv, "--resume"]) == 0  # a user adding virtual points to a real store
    capsys.readouterr()
    store = app / "stencil.sqlite"
    assert main(["model", str(store)]) == 0
    error = capsys.readouterr().err
    assert f"2 of 4 runs in {store} ran on a virtual cluster" in error
    assert "the other 2 runs are real, and a model fitted to both describes neither" in error
