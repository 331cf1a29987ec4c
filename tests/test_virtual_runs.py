"""Real and virtual runs are two machines: a store holding both is modeled one machine at a
time, and a model of virtual runs says, down to ``perfcast predict``, which platform it
describes (issue 16, item 4)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from campaign_helpers import copy_stencil, write_spec

from perfcast.cli import main
from perfcast.errors import InputError
from perfcast.measure.store import OK, StoredRun
from perfcast.measure.virtual import Platform, platform_of, select_runs
from perfcast.modeling.modelset import ModelSet
from perfcast.simulate.platform import PlatformSpec

STORE = Path("app.sqlite")


def run(key: str, backend: str = "local", job: str | None = None, command: str = "") -> StoredRun:
    return StoredRun(
        id=hash(key) & 0xFFFF, key=key, point={"p": 1.0}, repetition=0, command=command,
        status=OK, exit_code=0, reason=None, stderr_tail="", seconds=1.0, attempts=1,
        ranks=1, cores=1, backend=backend, job=job,
    )  # fmt: skip


def virtual(key: str, platform: str) -> StoredRun:
    command = f"smpirun -np 4 -platform /data/{platform}.xml -hostfile hosts ./app 10"
    return run(key, "smpi", f"platform {platform}", command)


def test_the_platform_of_a_virtual_run_is_its_job_and_the_file_its_smpirun_line_named():
    assert platform_of(virtual("a", "big")) == Platform("big", "/data/big.xml")
    assert platform_of(run("b")) is None
    assert platform_of(run("c", "smpi", None, "smpirun 'unbalanced")) == Platform("unnamed", None)


def test_a_mixed_store_is_read_as_its_real_runs_and_names_the_virtual_ones_kept_apart():
    runs = [run("r1"), run("r2"), virtual("v1", "big"), virtual("v2", "big"), virtual("v3", "big")]
    chosen = select_runs(runs, None, STORE)
    assert [r.key for r in chosen.runs] == ["r1", "r2"] and chosen.platform is None
    assert chosen.left_out == {"big": 3}
    note = chosen.note(STORE)
    assert note is not None and "3 of the 5 runs in app.sqlite are virtual runs on " in note
    assert "platform 'big', kept apart" in note and "--runs big" in note

    simulated = select_runs(runs, "virtual", STORE)
    assert [r.key for r in simulated.runs] == ["v1", "v2", "v3"]
    assert simulated.platform == Platform("big", "/data/big.xml")
    note = simulated.note(STORE)
    assert note is not None and "platform 'big', /data/big.xml" in note
    assert "2 of the 5 runs in app.sqlite are real runs, kept apart" in note
    assert select_runs(runs, "big", STORE).runs == simulated.runs


def test_a_store_of_virtual_runs_only_is_read_as_them_and_two_platforms_never_together():
    only = [virtual("v1", "big"), virtual("v2", "big")]
    chosen = select_runs(only, None, STORE)
    assert len(chosen.runs) == 2 and chosen.platform is not None and not chosen.left_out

    two = [*only, virtual("w1", "small")]
    with pytest.raises(InputError, match=r"2 platforms \(big, small\).*--runs NAME"):
        select_runs(two, None, STORE)
    assert [r.key for r in select_runs(two, "small", STORE).runs] == ["w1"]
    with pytest.raises(InputError, match="no real runs, only virtual ones"):
        select_runs(only, "real", STORE)
    with pytest.raises(InputError, match="no runs on a platform of that name; choose one of"):
        select_runs(two, "nosuch", STORE)
    with pytest.raises(InputError, match="no virtual runs"):
        select_runs([run("r")], "virtual", STORE)
    assert select_runs([run("r")], None, STORE).note(STORE) is None


SPEC = """\
[app]
name = "stencil"
[build]
command = "make -s CC='{perfcast_build} mpicc'"
[run]
command = "./jacobi {size} 20"
repetitions = 1
timeout = 60
[parameters]
p = RANKS
size = [64, 128, 192]
"""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("smpirun") is None, reason="SimGrid (smpirun) is not installed")
def test_model_and_predict_keep_real_and_virtual_runs_apart_and_name_the_platform(tmp_path, capsys):
    app = copy_stencil(tmp_path)
    real = write_spec(app, SPEC.replace("RANKS", "[1, 2, 3]"))
    assert main(["measure", str(real)]) == 0
    subprocess.run(["make", "-s", "clean"], cwd=app, check=True)
    cluster = tmp_path / "cluster.xml"
    cluster.write_text(PlatformSpec(name="virtual8", nodes=8, latency=1e-5).to_xml())
    simulated = write_spec(app, SPEC.replace("RANKS", "[4, 6, 8]"))
    argv = ["measure", str(simulated), "--backend", "smpi", "--platform", str(cluster)]
    assert main([*argv, "--resume"]) == 0
    store = app / "stencil.sqlite"
    capsys.readouterr()

    real_models, virtual_models = tmp_path / "real.json", tmp_path / "virtual.json"
    assert main(["model", str(store), "-o", str(real_models)]) == 0
    error = capsys.readouterr().err
    assert "9 of the 18 runs in" in error and "are virtual runs on platform 'virtual8'" in error
    assert "3 of 9 runs in" in error and "had more ranks than cores" in error  # p = 3, 2 cores
    saved = ModelSet.load(real_models)
    assert saved.provenance is not None and saved.provenance.platform is None
    assert saved.provenance.ranges["p"] == (1.0, 3.0)

    argv = ["model", str(store), "--runs", "virtual", "-o", str(virtual_models)]
    assert main(argv) == 0
    error = capsys.readouterr().err
    assert "the 9 runs modeled from" in error and "9 of the 18 runs in" in error
    assert "are real runs, kept apart" in error
    assert "more ranks than cores" not in error  # the real runs' p = 3 shared cores, not these
    data = json.loads(virtual_models.read_text())
    assert data["provenance"]["platform"] == {"name": "virtual8", "file": str(cluster)}
    saved = ModelSet.load(virtual_models)
    assert saved.provenance is not None and saved.provenance.ranges["p"] == (4.0, 8.0)

    assert main(["predict", str(virtual_models), "p=64", "size=128"]) == 0
    error = capsys.readouterr().err
    assert f"the models rest on runs on the simulated platform 'virtual8' ({cluster})" in error
    assert main(["predict", str(real_models), "p=64", "size=128"]) == 0
    assert "simulated" not in capsys.readouterr().err

    assert main(["model", str(store), "--runs", "other"]) == 2
    assert "--runs other: the store has no runs on a platform of that name" in (
        capsys.readouterr().err
    )
    assert main(["model", str(virtual_models), "--runs", "real"]) == 2
    assert "--runs chooses among the runs of a campaign store" in capsys.readouterr().err
