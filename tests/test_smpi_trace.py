"""``perfcast build --smpi --trace``: traces of virtual runs. The stencil built with smpicc,
run by a real smpirun on a described platform, writes a complete trace whose compute blocks
are the bursts SMPI charged, which replays to the SMPI run's own simulated time and which
trace synthesis takes as input; ``--threshold`` works there too; and ``[run] mpirun_args``
reach smpirun where they are SimGrid's options."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from perfcast.cli import main
from perfcast.measure.local import LocalBackend
from perfcast.measure.smpi import SmpiBackend, VirtualCluster
from perfcast.simulate.platform import PlatformSpec, read_platform
from perfcast.simulate.simulation import simulate
from perfcast.simulate.synthesis import synthesize
from perfcast.simulate.trace import Trace, read_threshold_stats, read_trace

STENCIL = Path(__file__).parents[1] / "src" / "perfcast" / "examples" / "stencil"
NODES = 16
SWEEP_CLOSES = "main->global_residual->MPI_Allreduce"
PROGRAM_ACTIONS = {"init", "compute", "irecv", "isend", "wait", "allreduce", "finalize"}
"""What the stencil calls: MPI_Sendrecv (irecv, isend, two waits) and MPI_Allreduce."""
TIMEOUT = 120

needs_simgrid = pytest.mark.skipif(
    shutil.which("smpirun") is None or shutil.which("smpicc") is None,
    reason="SimGrid (smpirun, smpicc) is not installed",
)


def stencil(directory: Path, *options: str) -> Path:
    """The bundled stencil copied to ``directory`` and built by ``make`` through
    ``perfcast build --smpi OPTIONS -- smpicc``: the program smpirun loads."""
    directory.mkdir(parents=True)
    for source in STENCIL.iterdir():
        if source.suffix in (".c", ".h") or source.name == "Makefile":
            shutil.copy(source, directory)
    make_cc = f"CC=python3 -m perfcast build --smpi {' '.join(options)} -- smpicc"
    subprocess.run(
        ["make", "-s", make_cc], cwd=directory, check=True, capture_output=True, timeout=TIMEOUT
    )
    return directory / "jacobi"


@pytest.fixture(scope="module")
def traced(tmp_path_factory) -> Path:
    return stencil(tmp_path_factory.mktemp("smpi-trace") / "stencil", "--trace")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Path:
    """A described 16-node cluster of 1 Gflop/s cores: with smpi/host-speed 1Gf, a second
    of compute measured here is a second on its hosts, as in a trace's replay."""
    path = tmp_path_factory.mktemp("platform") / "cluster.xml"
    path.write_text(PlatformSpec(name="c16", nodes=NODES, latency=1e-5).to_xml())
    return path


def smpirun(
    program: Path,
    ranks: int,
    platform: Path,
    directory: Path,
    arguments: Sequence[str],
    options: Sequence[str] = (),
    **env: str,
) -> subprocess.CompletedProcess:
    """``smpirun OPTIONS program ARGUMENTS`` on ``platform``'s first ``ranks`` cores, as the
    SMPI backend runs it, tracing into ``directory/trace``, with SimGrid's report of the
    simulated time on."""
    directory.mkdir(parents=True, exist_ok=True)
    described = read_platform(platform)
    hosts = directory / "hosts"
    hosts.write_text("".join(f"{host}\n" for host in described.hosts[:ranks]))
    command = [
        "smpirun", "-np", str(ranks), "-platform", str(platform), "-hostfile", str(hosts),
        "--cfg=smpi/host-speed:1Gf", *described.smpi_options, "--cfg=smpi/display-timing:yes",
        *options, str(program), *arguments,
    ]  # fmt: skip
    return subprocess.run(
        command,
        env={**os.environ, "PERFCAST_TRACE_DIR": str(directory / "trace"), **env},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=directory,
    )


def traced_run(
    program: Path, ranks: int, platform: Path, directory: Path, *arguments: str, **env: str
) -> tuple[Trace, float]:
    """The trace of an SMPI run and the run's simulated seconds, as SimGrid reports them."""
    done = smpirun(program, ranks, platform, directory, arguments, **env)
    assert done.returncode == 0, done.stderr
    found = re.search(r"Simulated time: ([0-9.e+-]+) seconds", done.stdout + done.stderr)
    assert found is not None, done.stdout + done.stderr
    return read_trace(directory / "trace"), float(found.group(1))


def lines(path: Path) -> list[list[str]]:
    return [line.split()[1:] for line in path.read_text().splitlines()]


def program_compute(actions: list[list[str]], first: str, last: str) -> float:
    """Seconds of compute from just after the first ``first`` action to the last action
    before the first ``last`` one, at 1e9 flop/s."""
    names = [action[0] for action in actions]
    start = names.index(first) + 1
    end = names.index(last)
    while names[end - 1] == "compute":
        end -= 1  # the block that ``last`` closes
    return sum(float(a[1]) for a in actions[start:end] if a[0] == "compute") / 1e9


@needs_simgrid
def test_a_four_rank_virtual_run_traces_the_bursts_smpi_charged_and_replays_to_its_time(
    traced, cluster, tmp_path
):
    trace, simulated = traced_run(traced, 4, cluster, tmp_path, "384", "60")
    assert trace.ranks == 4 and trace.clock == "cpu"
    assert trace.program.endswith("jacobi")
    for rank in range(4):
        # the program's MPI calls only: not perfcast's own run-id broadcast in MPI_Init or
        # its gather in MPI_Finalize, which SMPI's own trace shows
        assert {action[0] for action in lines(trace.rank_files[rank])} == PROGRAM_ACTIONS
        (sweeps,) = [b for b in trace.blocks[rank] if b.closing == SWEEP_CLOSES]
        assert sweeps.count == 60
    # elapsed is simulated time: MPI_Init's end to MPI_Finalize, within SMPI's whole run
    assert 0.9 * simulated < max(trace.elapsed) <= simulated
    # replayed on the platform the run was simulated on, the trace takes the run's time:
    # measured -1 % to -4 % (the bursts SMPI charged include perfcast's ~3 us per MPI
    # call, and the end of the run perfcast's writing of the trace, which the trace omits)
    (replayed,) = simulate(trace, [read_platform(cluster)]).platforms
    assert replayed.time == pytest.approx(simulated, rel=0.1)

    # SMPI's own time-independent trace of the same run: each rank's compute between
    # MPI_Init and MPI_Finalize is what perfcast's blocks add up to (measured -3 % to -4 %:
    # perfcast's own time around each call is charged by SMPI, not in the blocks)
    again = tmp_path / "again"
    smpi_trace = again / "smpi-ti"
    done = smpirun(
        traced,
        4,
        cluster,
        again,
        ("384", "60"),
        ("-trace-ti", f"--cfg=tracing/filename:{smpi_trace}"),
    )
    assert done.returncode == 0, done.stderr
    ours = read_trace(again / "trace")
    for rank in range(4):
        (charged_file,) = (again / "smpi-ti_files").glob(f"*_rank-{rank + 1}.txt")
        # SMPI numbers its actors from 1; perfcast's broadcast ends MPI_Init, its gather
        # starts writing trace.json in MPI_Finalize
        charged = program_compute(lines(charged_file), "bcast", "gather")
        traced_compute = program_compute(lines(ours.rank_files[rank]), "init", "finalize")
        assert traced_compute == pytest.approx(charged, rel=0.1)


@needs_simgrid
def test_the_wall_clock_is_refused_under_smpi(traced, cluster, tmp_path):
    done = smpirun(traced, 2, cluster, tmp_path, ("64", "5"), PERFCAST_TRACE_CLOCK="wall")
    assert done.returncode != 0
    assert "PERFCAST_TRACE_CLOCK=wall" in done.stderr
    assert "--smpi --trace times its blocks as SMPI charges them" in done.stderr
    assert not (tmp_path / "trace" / "trace.json").exists()


@needs_simgrid
def test_virtual_traces_at_p_3_to_6_synthesise_p_16_like_a_virtual_run_at_16(
    traced, cluster, tmp_path
):
    inputs = [
        traced_run(traced, p, cluster, tmp_path / f"p{p}", "96", "20")[0] for p in (3, 4, 5, 6)
    ]
    made = synthesize(inputs, NODES, tmp_path / "p16")
    assert made.inputs == (3, 4, 5, 6)
    synthesised = read_trace(tmp_path / "p16")
    direct, _ = traced_run(traced, NODES, cluster, tmp_path / "direct", "96", "20")
    assert synthesised.ranks == direct.ranks == NODES and synthesised.clock == "cpu"
    for rank in (0, 7, NODES - 1):
        # the same messages, in the same order, as the run at p = 16
        made_actions = [a for a in lines(synthesised.rank_files[rank]) if a[0] != "compute"]
        assert made_actions == [a for a in lines(direct.rank_files[rank]) if a[0] != "compute"]
    # and the same time on the platform (measured -5 %)
    platform = read_platform(cluster)
    (predicted,) = simulate(synthesised, [platform]).platforms
    (measured,) = simulate(direct, [platform]).platforms
    assert predicted.time == pytest.approx(measured.time, rel=0.25)


def taint_profile(path: Path) -> Path:
    """The stencil's taint profile, reduced to what the threshold rule reads (as in
    tests/test_threshold.py): init_grid's and sweep's row loops depend on ``n``."""

    def loop(line: int, *inner: dict) -> dict:
        return {"line": line, "kind": "for", "params": ["n"], "loops": list(inner)}

    files = {
        "main": ("jacobi.c", [loop(51)]),
        "init_grid": ("grid.c", [loop(6, loop(7))]),
        "sweep": ("grid.c", [loop(17, loop(21))]),
        "exchange_halo": ("halo.c", []),
        "global_residual": ("halo.c", []),
    }
    functions = {
        name: {"file": file, "terms": [["n"]], "callpaths": {}, "loops": loops}
        for name, (file, loops) in files.items()
    }
    path.write_text(json.dumps({"format": "perfcast-taint-profile/1", "functions": functions}))
    return path


@needs_simgrid
def test_the_threshold_rule_credits_each_ranks_virtual_trace(cluster, tmp_path):
    profile = taint_profile(tmp_path / "stencil.taint.json")
    program = stencil(tmp_path / "stencil", "--trace", "--threshold", str(profile))
    # the rule times a row only where the clock read that times it is below epsilon of the
    # row (perfcast_threshold.c): rows of 1024 take about 1.5 us and the SMPI clock's read
    # 0.24-0.36 us, so at 1024 a slower read on a CI machine left the sweep untimed and in
    # full; rows of 2048 (about 3 us) keep twice that margin at an epsilon of 0.2
    trace, _ = traced_run(
        program, 4, cluster, tmp_path / "run", "2048", "20", PERFCAST_THRESHOLD_EPSILON="0.2"
    )
    stats = read_threshold_stats(tmp_path / "run" / "trace")
    # each rank wrote its own statistics, named by the rank its copy of the program joined
    # MPI_COMM_WORLD as (all ranks share one process and its environment)
    assert sorted({s.rank for s in stats}) == [0, 1, 2, 3]
    for rank in range(4):
        (sweep,) = [s for s in stats if s.rank == rank and s.line == 17]
        assert sweep.rule_on and sweep.entries == 20
        assert sweep.iterations_run + sweep.iterations_skipped == 20 * 2048
        assert sweep.iterations_skipped > 0
        # at smpi/host-speed 1Gf a credited CPU second is a second at the reference speed
        credited = sum(s.seconds_credited for s in stats if s.rank == rank)
        assert trace.credited[rank] == pytest.approx(credited, rel=1e-6)


VIRTUAL_STENCIL = """\
[app]
name = "stencil"
[build]
command = "make -s CC='{{perfcast_build}} mpicc'"
[run]
command = "./jacobi 64 10"
repetitions = 1
timeout = 60
mpirun_args = {mpirun_args}
[parameters]
p = [2, 3]
"""


def campaign(directory: Path, mpirun_args: list[str]) -> Path:
    app = directory / "stencil"
    app.mkdir()
    for source in STENCIL.iterdir():
        if source.suffix in (".c", ".h") or source.name == "Makefile":
            shutil.copy(source, app)
    spec = app / "perfcast.toml"
    spec.write_text(VIRTUAL_STENCIL.format(mpirun_args=json.dumps(mpirun_args)))
    return spec


@needs_simgrid
def test_simgrid_options_in_mpirun_args_reach_smpirun(cluster, tmp_path, capsys):
    options = ["--cfg=smpi/host-speed:2Gf", "--log=root.thres:warning"]
    spec = campaign(tmp_path, options)
    assert main(["measure", str(spec), "--backend", "smpi", "--platform", str(cluster)]) == 0
    with sqlite3.connect(spec.parent / "stencil.sqlite") as db:
        runs = db.execute("SELECT status, command FROM runs").fetchall()
    assert len(runs) == 2
    for status, command in runs:
        assert status == "ok"
        # after perfcast's own options, so that SimGrid keeps the user's value of a key
        assert command.index("--cfg=smpi/host-speed:1Gf") < command.index(options[0])
        assert command.endswith(f"{options[0]} {options[1]} ./jacobi 64 10")


@needs_simgrid
def test_open_mpi_options_in_mpirun_args_are_refused_before_anything_runs(
    cluster, tmp_path, capsys
):
    spec = campaign(tmp_path, ["--bind-to", "none", "--cfg=smpi/host-speed:2Gf"])
    assert main(["measure", str(spec), "--backend", "smpi", "--platform", str(cluster)]) == 2
    error = capsys.readouterr().err
    assert str(spec) in error and "[run] mpirun_args --bind-to none:" in error
    assert "only SimGrid's --cfg=KEY:VALUE and --log=... options" in error
    assert not (spec.parent / "stencil.sqlite").exists()
    assert not (spec.parent / "jacobi").exists()  # not even built


def test_the_smpi_backend_names_the_launcher_options_it_refuses(tmp_path):
    if shutil.which("smpirun") is None:
        pytest.skip("SimGrid's smpirun is not installed")
    backend = SmpiBackend(VirtualCluster(path=tmp_path / "c.xml", name="c", hosts=("node-0",)))
    assert backend.launcher_arguments_problem(["--cfg=smpi/simulate-computation:no"]) is None
    assert backend.launcher_arguments_problem([]) is None
    problem = backend.launcher_arguments_problem(["-x", "OMP_NUM_THREADS", "--log=a.thres:info"])
    assert problem is not None and problem.startswith("[run] mpirun_args -x OMP_NUM_THREADS:")
    # mpirun takes the key's options as they are
    assert LocalBackend(parallel=1).launcher_arguments_problem(["--bind-to", "none"]) is None
