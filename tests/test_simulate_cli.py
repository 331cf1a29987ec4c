"""``perfcast simulate``: traces replayed on platforms with the real SimGrid (``smpirun``).

The traces are written here in the layout of a traced run (``perfcast-trace/``: one action
file per rank, the compute blocks, ``trace.json`` last), with actions whose cost is known:
a communication-bound exchange of two 100 MB messages, whose communication time is the
volume over the link bandwidth, and a compute-bound run of 2e9 and 1e9 flops, whose
compute time is the flops over the core speed. Halving the bandwidth must double the
first's communication and leave its compute alone; doubling the speed must halve the
second's compute. Each bad input ends in one line and exit status 2.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perfcast import cli
from perfcast.errors import PerfcastError
from perfcast.simulate.platform import PlatformSpec, read_platform
from perfcast.simulate.simulation import simulate
from perfcast.simulate.trace import read_trace

BYTES = 100_000_000
"""Bytes of each message of the communication-bound trace: 0.1 s at 1 GB/s, so the 1 us
latencies are a 1e-5 share of it."""

needs_simgrid = pytest.mark.skipif(
    shutil.which("smpirun") is None, reason="SimGrid's smpirun is not installed"
)
needs_mpi = pytest.mark.skipif(
    shutil.which("mpicc") is None, reason="Open MPI's mpicc is not installed"
)

EXCHANGE = [
    # rank 0 computes 10 ms, sends 100 MB to rank 1 and gets 100 MB back
    ["compute 1e7", f"send 1 0 {BYTES} 6", f"recv 1 1 {BYTES} 6"],
    ["compute 1e7", f"recv 0 0 {BYTES} 6", f"send 0 1 {BYTES} 6"],
]
WORK = [
    # rank 0 computes 2e9 flops, rank 1 1e9, then one 8-byte allreduce
    ["compute 2e9", "allreduce 1 0 0"],
    ["compute 1e9", "allreduce 1 0 0"],
]


def write_trace(directory: Path, actions: list[list[str]], elapsed: list[float]) -> Path:
    """A complete trace directory as a traced run leaves it, with ``actions`` per rank
    (between ``init`` and ``finalize``) and one compute block per rank."""
    directory.mkdir()
    ranks = len(actions)
    for rank, lines in enumerate(actions):
        body = [f"{rank} init", *(f"{rank} {line}" for line in lines), f"{rank} finalize"]
        (directory / f"rank-{rank}.trace").write_text("\n".join(body) + "\n")
        flops = sum(float(line.split()[1]) for line in lines if line.startswith("compute"))
        (directory / f"rank-{rank}.blocks.tsv").write_text(
            f"# perfcast-trace-blocks/1 run=test rank={rank}\n"
            f"main->MPI_Init\tmain->solve->MPI_Send\t{rank + 1}\t{flops / 1e9!r}\n"
        )
    files = [f"rank-{rank}.trace" for rank in range(ranks)]
    (directory / "index.txt").write_text("".join(f"{directory / name}\n" for name in files))
    manifest = {
        "format": "perfcast-trace/1",
        "run_id": "test",
        "ranks": ranks,
        "reference_speed": 1e9,
        "clock": "wall",
        "program": "test",
        "elapsed": elapsed,
        "files": files,
        "blocks": [f"rank-{rank}.blocks.tsv" for rank in range(ranks)],
        "credited": [0.0] * ranks,
    }
    (directory / "trace.json").write_text(json.dumps(manifest))
    return directory


def write_platform(directory: Path, spec: PlatformSpec) -> Path:
    path = directory / f"{spec.name}.xml"
    path.write_text(spec.to_xml())
    return path


@needs_simgrid
def test_halving_the_bandwidth_doubles_the_communication(tmp_path: Path) -> None:
    trace = read_trace(write_trace(tmp_path / "trace", EXCHANGE, [0.3, 0.3]))
    fast = write_platform(tmp_path, PlatformSpec("fast", nodes=2, bandwidth=1e9))
    slow = write_platform(tmp_path, PlatformSpec("slow", nodes=2, bandwidth=5e8))
    result = simulate(trace, [read_platform(fast), read_platform(slow)])
    on_fast, on_slow = result.platforms
    # two messages one after the other: 2 x BYTES / bandwidth, plus microseconds of latency
    assert on_fast.communication == pytest.approx(2 * BYTES / 1e9, rel=0.01)
    assert on_slow.communication / on_fast.communication == pytest.approx(2, rel=0.01)
    assert on_fast.compute == on_slow.compute == pytest.approx(0.01, rel=1e-9)
    for platform in result.platforms:
        assert platform.time == pytest.approx(platform.compute + platform.communication)
        assert platform.ranks == 2 and platform.simulation_seconds > 0
    assert (on_fast.name, on_slow.name) == ("fast", "slow")


@needs_simgrid
def test_doubling_the_core_speed_halves_the_compute(tmp_path: Path) -> None:
    trace = read_trace(write_trace(tmp_path / "trace", WORK, [2.0, 2.0]))
    base = write_platform(tmp_path, PlatformSpec("base", nodes=2, speed=1e9))
    double = write_platform(tmp_path, PlatformSpec("double", nodes=2, speed=2e9))
    on_base, on_double = simulate(trace, [read_platform(base), read_platform(double)]).platforms
    assert on_base.compute == pytest.approx(2.0, rel=1e-9)
    assert on_double.compute == pytest.approx(1.0, rel=1e-9)
    # both ranks leave the allreduce together; rank 0 is the one rank 1 waited for
    assert on_base.slowest_rank == on_double.slowest_rank == 0
    assert on_base.communication < 1e-3 and on_double.communication < 1e-3


@needs_simgrid
def test_the_rank_that_computes_last_is_the_slowest_and_its_waiting_is_communication(
    tmp_path: Path,
) -> None:
    """Rank 1 waits 0.1 s in the allreduce for rank 0, then computes 0.5 s alone."""
    late = [["compute 1e8", "allreduce 1 0 0"], ["allreduce 1 0 0", "compute 5e8"]]
    trace = read_trace(write_trace(tmp_path / "trace", late, [0.6, 0.6]))
    base = read_platform(write_platform(tmp_path, PlatformSpec("base", nodes=2)))
    (prediction,) = simulate(trace, [base]).platforms
    assert prediction.slowest_rank == 1
    assert prediction.compute == pytest.approx(0.5, rel=1e-9)
    assert prediction.communication == pytest.approx(0.1, rel=1e-3)
    assert prediction.time == pytest.approx(0.6, rel=1e-3)


@needs_simgrid
def test_json_carries_every_platform(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = write_trace(tmp_path / "trace", WORK, [2.0, 1.5])
    base = write_platform(tmp_path, PlatformSpec("base", nodes=2))
    double = write_platform(tmp_path, PlatformSpec("double", nodes=1, cores=2, speed=2e9))
    argv = ["simulate", str(trace), "--platform", str(base), "--platform", str(double)]
    assert cli.main([*argv, "--json", "--native", "4"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert set(shown) >= {"trace", "ranks", "trace_seconds", "platforms", "slowdown"}
    assert (shown["trace"], shown["ranks"], shown["trace_seconds"]) == (str(trace), 2, 2.0)
    keys = {"name", "file", "time", "compute", "communication", "slowest_rank"}
    assert all(set(entry) >= keys | {"simulation_seconds"} for entry in shown["platforms"])
    assert [entry["name"] for entry in shown["platforms"]] == ["base", "double"]
    assert shown["platforms"][1]["file"] == str(double)
    assert shown["platforms"][1]["time"] == pytest.approx(1.0, rel=1e-3)
    simulated = sum(entry["simulation_seconds"] for entry in shown["platforms"])
    assert shown["slowdown"] == pytest.approx((2.0 + simulated) / 4)
    # the blocks of both ranks share their call paths: one block, counts and seconds summed
    assert shown["blocks"] == [
        {
            "open": "main->MPI_Init",
            "close": "main->solve->MPI_Send",
            "count": 3,
            "seconds": pytest.approx(3.0),
        }
    ]


@needs_simgrid
def test_text_names_each_platform_and_the_blocks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_trace(tmp_path / "trace", EXCHANGE, [0.3, 0.25])
    fast = write_platform(tmp_path, PlatformSpec("fast", nodes=2, bandwidth=1e9))
    slow = write_platform(tmp_path, PlatformSpec("slow", nodes=2, bandwidth=5e8))
    assert cli.main(["simulate", str(trace), "--platform", str(fast), "--platform", str(slow)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"trace {trace}: 2 rank(s), traced run 0.3 s"
    rows = {line.split()[0]: line.split() for line in lines[2:4]}
    assert rows["fast"][1:4] == ["0.21", "0.01", "0.2"]  # predicted, compute, communication
    assert rows["slow"][1:4] == ["0.41", "0.01", "0.4"]
    assert not any(line.startswith("slowdown") for line in lines)  # no --native given
    assert lines[-1].split() == ["0.02", "3", "main->MPI_Init", "->", "main->solve->MPI_Send"]


@needs_simgrid
@pytest.mark.parametrize("user", ["gcc (Debian 12.2.0-14) 12.2.0", "clang version 16.0.6"])
def test_a_trace_of_a_build_that_is_not_the_users_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], user: str
) -> None:
    trace = write_trace(tmp_path / "trace", WORK, [2.0, 1.0])
    summary = json.loads((trace / "trace.json").read_text())
    measured = "Debian clang version 16.0.6"
    summary["compilers"] = {"measured": measured, "user": user}
    (trace / "trace.json").write_text(json.dumps(summary))
    platform = write_platform(tmp_path, PlatformSpec("fast", nodes=2))
    assert cli.main(["simulate", str(trace), "--platform", str(platform)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith(f"built by {measured}")
    noted = [line for line in lines if line.startswith("note: ")]
    if "gcc" in user:  # the prediction is of the clang build, not the one the user runs
        assert len(noted) == 1 and user in noted[0] and "--user-compiler" in noted[0]
    else:
        assert noted == []
    assert cli.main(["simulate", str(trace), "--platform", str(platform), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["compilers"] == {"measured": measured, "user": user}
    assert (shown["compiler_note"] is None) == ("gcc" not in user)


def test_damaged_compilers_in_a_trace_are_refused_with_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_trace(tmp_path / "trace", WORK, [2.0, 1.0])
    summary = json.loads((trace / "trace.json").read_text())
    summary["compilers"] = {"measured": 3}
    (trace / "trace.json").write_text(json.dumps(summary))
    platform = write_platform(tmp_path, PlatformSpec("fast", nodes=2))
    message = error_of(["simulate", str(trace), "--platform", str(platform)], capsys)
    assert "trace.json" in message and "compilers" in message


def error_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line ``perfcast simulate`` prints on stderr when it exits with status 2."""
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.splitlines()) == 1
    return captured.err


def test_a_crashed_run_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = write_trace(tmp_path / "trace", WORK, [2.0, 2.0])
    (trace / "trace.json").unlink()  # what a rank that never reached MPI_Finalize leaves
    platform = write_platform(tmp_path, PlatformSpec("base", nodes=2))
    message = error_of(["simulate", str(trace), "--platform", str(platform)], capsys)
    assert "trace.json" in message and "MPI_Finalize" in message


def test_a_platform_with_too_few_cores_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_trace(tmp_path / "trace", [*WORK, ["compute 1", "allreduce 1 0 0"]], [1, 1, 1])
    platform = write_platform(tmp_path, PlatformSpec("small", nodes=1, cores=2))
    message = error_of(["simulate", str(trace), "--platform", str(platform)], capsys)
    assert str(platform) in message
    assert "3 ranks, more than the 2 cores of platform 'small'" in message


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "no such simgrid platform"),
        ("<platform version='4.1'><zone id='z'", "xml error"),
        ("<html/>", "the root element is <html>"),
    ],
)
def test_an_unreadable_platform_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, expected: str
) -> None:
    trace = write_trace(tmp_path / "trace", WORK, [2.0, 2.0])
    platform = tmp_path / "platform.xml"
    if content is not None:
        platform.write_text(content)
    message = error_of(["simulate", str(trace), "--platform", str(platform)], capsys)
    assert str(platform) in message and expected in message.lower()


def test_without_smpirun_says_how_to_install_simgrid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = write_trace(tmp_path / "trace", WORK, [2.0, 2.0])
    platform = write_platform(tmp_path, PlatformSpec("base", nodes=2))
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    message = error_of(["simulate", str(trace), "--platform", str(platform)], capsys)
    assert "smpirun not found" in message and "apt-get install libsimgrid-dev" in message


@needs_simgrid
def test_a_trace_simgrid_cannot_finish_quotes_simgrid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both ranks wait for a message the other never sends: SimGrid reports a deadlock."""
    waiting = [["recv 1 0 10 6"], ["recv 0 0 10 6"]]
    trace = write_trace(tmp_path / "trace", waiting, [1.0, 1.0])
    platform = write_platform(tmp_path, PlatformSpec("base", nodes=2))
    message = error_of(["simulate", str(trace), "--platform", str(platform)], capsys)
    assert f"{trace}: SimGrid could not replay the trace on platform 'base'" in message
    assert "Deadlock detected" in message


@needs_simgrid
def test_a_replay_past_its_time_limit_stops(tmp_path: Path) -> None:
    trace = read_trace(write_trace(tmp_path / "trace", WORK, [2.0, 2.0]))
    platform = read_platform(write_platform(tmp_path, PlatformSpec("base", nodes=2)))
    with pytest.raises(
        PerfcastError, match=r"trace: the replay on platform 'base' ran past 0\.001 s"
    ):
        simulate(trace, [platform], timeout=0.001)


EXCHANGING_PROGRAM = r"""
#include <mpi.h>
#include <stdlib.h>
static double work(long n) { double x = 0; for (long i = 0; i < n; i++) x += i * 0.5; return x; }
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char *buffer = calloc(MESSAGE, 1); double x = 0, y = 0;
  for (int step = 0; step < STEPS; step++) {
    x += work(5000000L * (rank + 1));
    if (rank == 0) {
      MPI_Send(buffer, MESSAGE, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
      MPI_Recv(buffer, MESSAGE, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(buffer, MESSAGE, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buffer, MESSAGE, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
    }
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  free(buffer); MPI_Finalize(); return y < 0;
}
"""
MESSAGE, STEPS = 1 << 22, 5


@needs_simgrid
@needs_mpi
def test_a_traced_run_is_predicted_on_a_slower_network(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A program built with ``perfcast build --trace`` and run under mpirun: on a network
    ten times slower its communication grows by what its volume implies (2 x STEPS
    messages of MESSAGE bytes, each 1/1e8 - 1/1e9 s per byte slower), its compute stays."""
    source = tmp_path / "exchange.c"
    source.write_text(
        EXCHANGING_PROGRAM.replace("MESSAGE", str(MESSAGE)).replace("STEPS", str(STEPS))
    )
    build = [sys.executable, "-m", "perfcast", "build", "--trace", "--"]
    subprocess.run(
        [*build, "mpicc", "-O1", source.name, "-o", "exchange"], cwd=tmp_path, check=True
    )
    trace = tmp_path / "perfcast-trace"
    environment = {
        **os.environ,
        "PERFCAST_TRACE_DIR": str(trace),
        "PERFCAST_PROFILE_DIR": str(tmp_path / "profile"),
    }
    mpirun = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]
    subprocess.run([*mpirun, "./exchange"], cwd=tmp_path, env=environment, check=True, timeout=120)
    fast = write_platform(tmp_path, PlatformSpec("fast", nodes=2, bandwidth=1e9))
    slow = write_platform(tmp_path, PlatformSpec("slow", nodes=2, bandwidth=1e8))
    argv = ["simulate", str(trace), "--platform", str(fast), "--platform", str(slow), "--json"]
    assert cli.main(argv) == 0
    on_fast, on_slow = json.loads(capsys.readouterr().out)["platforms"]
    slower = 2 * STEPS * MESSAGE * (1 / 1e8 - 1 / 1e9)
    assert on_slow["communication"] - on_fast["communication"] == pytest.approx(slower, rel=0.05)
    assert on_slow["compute"] == pytest.approx(on_fast["compute"], rel=1e-9)
    # the compute predicted on a core as fast as the traced one is what the rank's blocks took
    blocks = read_trace(trace).blocks[on_fast["slowest_rank"]]
    assert on_fast["compute"] == pytest.approx(sum(block.seconds for block in blocks), rel=1e-3)


THRESHOLD_HEADER = (
    "loop\tfile\tline\trule\tentries\titerations_run\titerations_skipped\t"
    "seconds_measured\tseconds_credited\n"
)


@needs_simgrid
def test_what_the_threshold_rule_skipped_is_reported_per_loop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The statistics the threshold runtime leaves beside the trace, summed over ranks."""
    trace = write_trace(tmp_path / "trace", WORK, [2.0, 1.5])
    for rank, (run, skipped, credited) in enumerate([(40, 960, 0.6), (50, 950, 0.5)]):
        (trace / f"threshold-{rank}.tsv").write_text(
            THRESHOLD_HEADER + f"1\tgrid.c\t17\ton\t300\t{run}\t{skipped}\t0.02\t{credited}\n"
        )
    platform = write_platform(tmp_path, PlatformSpec("base", nodes=2))
    argv = ["simulate", str(trace), "--platform", str(platform)]
    assert cli.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-3] == "threshold rule: 1.1 s credited for skipped iterations, all ranks:"
    assert lines[-1].split() == ["grid.c:17", "90", "1910", "1.1"]
    assert cli.main([*argv, "--json"]) == 0
    (loop,) = json.loads(capsys.readouterr().out)["threshold"]
    assert loop == {
        "file": "grid.c",
        "line": 17,
        "rule": "on",
        "iterations_run": 90,
        "iterations_skipped": 1910,
        "seconds_credited": pytest.approx(1.1),
    }


def test_damaged_threshold_statistics_are_refused_with_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_trace(tmp_path / "trace", WORK, [2.0, 1.5])
    (trace / "threshold-1.tsv").write_text(THRESHOLD_HEADER + "1\tgrid.c\t17\ton\t3\t4\n")
    platform = write_platform(tmp_path, PlatformSpec("base", nodes=2))
    message = error_of(["simulate", str(trace), "--platform", str(platform)], capsys)
    assert "threshold-1.tsv:2: " in message and "9 tab-separated fields" in message
