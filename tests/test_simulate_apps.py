"""Prediction by simulation on real MPI applications (``../shared/apps``), as a user runs it:
build through the application's own build with ``perfcast build --trace``, run under
mpirun, ``perfcast simulate`` on described platforms.

NAS IS is the dPerf paper's benchmark (Allreduce, Alltoall, Alltoallv, Irecv/Send/Wait);
LULESH exchanges halos with Isend/Irecv/Wait between 8 ranks, traced here on 2 cores with
the CPU clock, which is how a user on a small machine traces a job larger than it; miniFE
receives from MPI_ANY_SOURCE.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from perfcast import cli
from perfcast.simulate.trace import read_trace

APPS = Path(__file__).resolve().parents[2] / "shared" / "apps"
MPIRUN = ("mpirun", "--allow-run-as-root", "--oversubscribe")
PERFCAST_BUILD = "python3 -m perfcast build --trace --"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("mpicc") is None, reason="Open MPI's mpicc is not installed"),
    pytest.mark.skipif(
        shutil.which("smpirun") is None, reason="SimGrid's smpirun is not installed"
    ),
    pytest.mark.skipif(not APPS.is_dir(), reason=f"the shared apps are missing: {APPS}"),
]


def actions(trace_files: tuple[Path, ...]) -> set[str]:
    """The SimGrid actions the ranks' files hold, all ranks together."""
    return {line.split()[1] for path in trace_files for line in path.read_text().splitlines()}


def predict(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], **networks: list[str]
) -> dict[str, dict]:
    """``perfcast simulate --json`` of ``trace`` on one described platform per keyword."""
    argv = ["simulate", str(trace), "--json"]
    for name, describe in networks.items():
        platform = tmp_path / f"{name}.xml"
        assert (
            cli.main(["platform", "describe", "-o", str(platform), "--name", name, *describe]) == 0
        )
        argv += ["--platform", str(platform)]
    capsys.readouterr()
    assert cli.main(argv) == 0
    shown = json.loads(capsys.readouterr().out)
    return {entry["name"]: entry for entry in shown["platforms"]}


def test_nas_is_traces_and_a_slower_network_predicts_more_communication(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    npb = tmp_path / "npb"
    shutil.copytree(APPS / "npb" / "NPB3.4-MPI", npb)
    shutil.copy(npb / "config" / "make.def.template", npb / "config" / "make.def")
    (npb / "bin").mkdir(exist_ok=True)
    subprocess.run(
        ["make", "is", "CLASS=S", f"MPICC={PERFCAST_BUILD} mpicc"],
        cwd=npb, check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    trace = tmp_path / "trace"
    run = subprocess.run(
        [*MPIRUN, "-np", "2", "-x", f"PERFCAST_TRACE_DIR={trace}", "bin/is.S.x"],
        cwd=npb, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0 and "SUCCESSFUL" in run.stdout, run.stdout + run.stderr
    recorded = read_trace(trace)
    assert recorded.ranks == 2
    assert {"allreduce", "alltoall", "alltoallv", "irecv", "send", "wait"} <= actions(
        recorded.rank_files
    )
    common = ["--nodes", "2", "--latency", "1e-5"]
    shown = predict(
        trace, tmp_path, capsys,
        fast=[*common, "--bandwidth", "1e9"], slow=[*common, "--bandwidth", "1e7"],
    )  # fmt: skip
    fast, slow = shown["fast"], shown["slow"]
    assert fast["compute"] == pytest.approx(slow["compute"], rel=1e-9)
    # IS class S moves a few hundred kB per rank: 100x less bandwidth is milliseconds more
    assert slow["communication"] > fast["communication"] + 1e-3


def test_lulesh_at_8_ranks_on_2_cores_traces_with_the_cpu_clock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "lulesh"
    shutil.copytree(APPS / "lulesh", source)
    files = ["lulesh.cc", "lulesh-comm.cc", "lulesh-init.cc", "lulesh-util.cc", "lulesh-viz.cc"]
    build = [*PERFCAST_BUILD.split(), "mpicxx", "-DUSE_MPI=1", "-O2", *files, "-o", "lulesh2.0"]
    subprocess.run(build, cwd=source, check=True, capture_output=True, timeout=600)
    trace = tmp_path / "trace"
    environment = ["-x", f"PERFCAST_TRACE_DIR={trace}", "-x", "PERFCAST_TRACE_CLOCK=cpu"]
    run = subprocess.run(
        [*MPIRUN, "-np", "8", *environment, "./lulesh2.0", "-s", "4", "-i", "10"],
        cwd=source, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    recorded = read_trace(trace)
    assert (recorded.ranks, recorded.clock) == (8, "cpu")
    assert {"isend", "irecv", "wait", "allreduce"} <= actions(recorded.rank_files)
    # every rank's blocks name LULESH's own functions around its MPI calls
    assert any("CommSend" in block.closing for block in recorded.blocks[0])
    shown = predict(trace, tmp_path, capsys, cluster=["--nodes", "8"])
    cluster = shown["cluster"]
    assert cluster["time"] >= cluster["compute"] > 0
    assert len(cluster["ranks"]) == 8


def test_lulesh_synthesised_at_125_ranks_from_8_27_64_on_its_cube_grid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """LULESH's ranks are a cube exchanging with up to 26 neighbours (faces, edges,
    corners): offsets in rank numbers fit none of them, grid offsets on 2x2x2, 3x3x3 and
    4x4x4 do. Synthesised at 125 (5x5x5; its trace, taken by hand, has the same messages
    in every rank), every rank exchanges with the neighbours its position has, and SimGrid
    replays it."""
    source = tmp_path / "lulesh"
    shutil.copytree(APPS / "lulesh", source)
    files = ["lulesh.cc", "lulesh-comm.cc", "lulesh-init.cc", "lulesh-util.cc", "lulesh-viz.cc"]
    build = [*PERFCAST_BUILD.split(), "mpicxx", "-DUSE_MPI=1", "-O2", *files, "-o", "lulesh2.0"]
    subprocess.run(build, cwd=source, check=True, capture_output=True, timeout=600)
    inputs = []
    for ranks in (8, 27, 64):
        inputs.append(str(tmp_path / f"trace-p{ranks}"))
        environment = ["-x", f"PERFCAST_TRACE_DIR={inputs[-1]}", "-x", "PERFCAST_TRACE_CLOCK=cpu"]
        subprocess.run(
            [*MPIRUN, "-np", str(ranks), *environment, "./lulesh2.0", "-s", "4", "-i", "5"],
            cwd=source, check=True, capture_output=True, timeout=300,
        )  # fmt: skip
    output = tmp_path / "p125"
    platform = tmp_path / "cluster.xml"
    assert cli.main(["platform", "describe", "-o", str(platform), "--nodes", "125"]) == 0
    argv = ["simulate", *inputs, "--synthesize", "125", "-o", str(output), "--grid", "cube"]
    capsys.readouterr()
    assert cli.main([*argv, "--platform", str(platform), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["synthesis"]["grid"]["target"] == [5, 5, 5]
    assert shown["synthesis"]["grid"]["inputs"] == [[2, 2, 2], [3, 3, 3], [4, 4, 4]]
    assert shown["platforms"][0]["time"] >= shown["platforms"][0]["compute"] > 0
    # a corner has 7 neighbours, an edge 11, a face 17, the interior 26
    for rank, neighbours in ((0, 7), (1, 11), (6, 17), (31, 26), (62, 26), (124, 7)):
        lines = (output / f"rank-{rank}.trace").read_text().splitlines()
        assert len({line.split()[2] for line in lines if " irecv " in line}) == neighbours


def test_minife_traces_its_wildcard_receives_and_replays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """miniFE's setup receives from MPI_ANY_SOURCE: the trace names the matched source, so
    the replay pairs every receive with its send."""
    shutil.copytree(APPS / "minife", tmp_path / "minife")
    source = tmp_path / "minife" / "ref" / "src"
    compilers = [f"CXX={PERFCAST_BUILD} mpicxx", f"CC={PERFCAST_BUILD} mpicc"]
    subprocess.run(
        ["make", "-j2", *compilers], cwd=source, check=True, capture_output=True, timeout=600
    )
    trace = tmp_path / "trace"
    run = subprocess.run(
        [*MPIRUN, "-np", "3", "-x", f"PERFCAST_TRACE_DIR={trace}", "./miniFE.x", "nx=12"],
        cwd=source, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    recorded = read_trace(trace)
    lines = [line.split() for path in recorded.rank_files for line in path.read_text().splitlines()]
    # no wildcard survives: every receive names a rank of the run
    receives = [fields for fields in lines if fields[1] in ("irecv", "recv")]
    assert receives and all(0 <= int(fields[2]) < 3 for fields in receives)
    sends = sum(fields[1] in ("send", "isend") for fields in lines)
    assert sends == len(receives)
    shown = predict(trace, tmp_path, capsys, cluster=["--nodes", "3"])
    assert shown["cluster"]["time"] >= shown["cluster"]["compute"] > 0
