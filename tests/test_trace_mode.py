"""Trace mode of the measurement runtime (``perfcast build --trace``) end to end: real
programs built with clang-16 and Open MPI, run under mpirun, their traces read back by
:func:`perfcast.simulate.trace.read_trace` and replayed by SimGrid's ``smpirun -replay``."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from perfcast.cli import main
from perfcast.errors import InputError, PerfcastError
from perfcast.measure.build import BuildOptions, wrap
from perfcast.measure.profiles import read_rank_profile
from perfcast.simulate.trace import Trace, read_trace

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("mpicc") is None, reason="Open MPI's mpicc is not installed"),
]
needs_simgrid = pytest.mark.skipif(
    shutil.which("smpirun") is None, reason="SimGrid's smpirun is not installed"
)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
MPIRUN = ("mpirun", "--allow-run-as-root", "--oversubscribe")
TIMEOUT = 120
FLAT_PLATFORM = """<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1"><zone id="z" routing="Full">
<cluster id="c" prefix="node-" suffix="" radical="0-7" speed="1Gf" bw="1GBps" lat="1us"/>
</zone></platform>
"""

# Every traced call the runtime supports, with a peer ring so every rank count works. No two
# outstanding requests share (source, destination, tag): SimGrid's replay keys them so.
ALL_CALLS = r"""
#include <mpi.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int r, p;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    double a[256], b[256 * 8];
    unsigned u[16] = {0};
    int counts[8], displs[8];
    for (int i = 0; i < 256; i++) a[i] = i;
    for (int i = 0; i < p; i++) { counts[i] = 3; displs[i] = 3 * i; }
    int next = (r + 1) % p, prev = (r + p - 1) % p;
    MPI_Request q[2];
    MPI_Status s;
    MPI_Irecv(b, 10, MPI_DOUBLE, prev, 7, MPI_COMM_WORLD, &q[0]);
    MPI_Isend(a, 10, MPI_DOUBLE, next, 7, MPI_COMM_WORLD, &q[1]);
    MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
    MPI_Irecv(b, 11, MPI_INT, prev, 8, MPI_COMM_WORLD, &q[0]);
    MPI_Send(a, 11, MPI_INT, next, 8, MPI_COMM_WORLD);
    MPI_Wait(&q[0], &s);
    MPI_Isend(a, 12, MPI_BYTE, next, 9, MPI_COMM_WORLD, &q[1]);
    MPI_Recv(b, 12, MPI_BYTE, MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Wait(&q[1], MPI_STATUS_IGNORE);
    MPI_Irecv(u, 5, MPI_UNSIGNED, MPI_ANY_SOURCE, 10, MPI_COMM_WORLD, &q[0]);
    MPI_Send(u, 5, MPI_UNSIGNED, next, 10, MPI_COMM_WORLD);
    MPI_Wait(&q[0], MPI_STATUS_IGNORE);
    MPI_Send(a, 4, MPI_DOUBLE, MPI_PROC_NULL, 11, MPI_COMM_WORLD);
    MPI_Sendrecv(a, 5, MPI_DOUBLE, next, 3, b, 5, MPI_DOUBLE, prev, 3, MPI_COMM_WORLD, &s);
    MPI_Allreduce(a, b, 20, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Bcast(a, 21, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Reduce(a, b, 22, MPI_LONG, MPI_SUM, p - 1, MPI_COMM_WORLD);
    MPI_Allgather(a, 3, MPI_DOUBLE, b, 3, MPI_DOUBLE, MPI_COMM_WORLD);
    MPI_Allgatherv(a, 3, MPI_DOUBLE, b, counts, displs, MPI_DOUBLE, MPI_COMM_WORLD);
    MPI_Alltoall(a, 2, MPI_DOUBLE, b, 2, MPI_DOUBLE, MPI_COMM_WORLD);
    MPI_Alltoallv(a, counts, displs, MPI_DOUBLE, b, counts, displs, MPI_DOUBLE, MPI_COMM_WORLD);
    MPI_Gather(a, 4, MPI_DOUBLE, b, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Scatter(a, 4, MPI_DOUBLE, b, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Reduce_scatter(a, b, counts, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
"""

# A compute block of known length (busy-waits on the wall clock, so the block lasts 0.3 s on
# a shared core too; it prints the CPU and the wall time it took), closed in a function of
# its own; then, with "credit", a credit through the threshold iteration rule's hook; with
# "crash" or "abort", a run that never reaches MPI_Finalize.
COMPUTE = r"""
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
extern void perfcast_trace_credit(uint64_t ns) __attribute__((weak));
static double now(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
__attribute__((noinline)) double work(double seconds)
{
    double x = 0, end = now(CLOCK_MONOTONIC) + seconds;
    while (now(CLOCK_MONOTONIC) < end) for (int i = 0; i < 1000; i++) x += i * 0.5;
    return x;
}
__attribute__((noinline)) void sync_ranks(void) { MPI_Barrier(MPI_COMM_WORLD); }
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int r;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    /* The wall interval encloses the reads of the CPU clock, and the times are printed after
     * the timed blocks: a system call after a long busy stretch is where a loaded machine's
     * scheduler takes the core away (reading the CPU clock settles the thread's time slice,
     * a write wakes the pipe's reader), and the rank may wait 20 ms or more to get it back. */
    double wall = now(CLOCK_MONOTONIC), cpu = now(CLOCK_THREAD_CPUTIME_ID), x = work(0.3);
    cpu = now(CLOCK_THREAD_CPUTIME_ID) - cpu;
    wall = now(CLOCK_MONOTONIC) - wall;
    sync_ranks();
    if (argc > 1 && strcmp(argv[1], "credit") == 0 && perfcast_trace_credit != NULL)
        perfcast_trace_credit(500000000ULL);
    MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    printf("cpu %d %.9f %.9f\n", r, cpu, wall);
    if (argc > 1 && strcmp(argv[1], "crash") == 0) abort();
    if (argc > 1 && strcmp(argv[1], "abort") == 0) MPI_Abort(MPI_COMM_WORLD, 3);
    MPI_Finalize();
    return x < 0;
}
"""

UNSUPPORTED = r"""
#include <mpi.h>
#include <string.h>
__attribute__((noinline)) void solve(int split)
{
    int x = 1, flag = 0, r;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    if (split) {
        MPI_Comm half;
        MPI_Comm_split(MPI_COMM_WORLD, r % 2, r, &half);
        MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_SUM, half);
        return;
    }
    MPI_Request q;
    MPI_Irecv(&x, 1, MPI_INT, r, 0, MPI_COMM_WORLD, &q);
    MPI_Send(&x, 1, MPI_INT, r, 0, MPI_COMM_WORLD);
    while (!flag) MPI_Test(&q, &flag, MPI_STATUS_IGNORE);
}
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    solve(argc > 1 && strcmp(argv[1], "split") == 0);
    MPI_Finalize();
    return 0;
}
"""


def build(source: str, name: str, directory: Path, *, trace: bool = True) -> Path:
    """``perfcast build [--trace] -- mpicc -O1 NAME.c -o NAME`` in ``directory``."""
    (directory / f"{name}.c").write_text(source)
    options = ["--trace"] if trace else []
    old = Path.cwd()
    os.chdir(directory)
    try:
        assert main(["build", *options, "--", "mpicc", "-O1", f"{name}.c", "-o", name]) == 0
    finally:
        os.chdir(old)
    return directory / name


def run(program: Path, *args: str, np: int, trace_dir: Path, env=None, check=True):
    environment = {
        **os.environ,
        "PERFCAST_TRACE_DIR": str(trace_dir),
        "PERFCAST_PROFILE_DIR": str(trace_dir.parent / f"{trace_dir.name}-profile"),
        **(env or {}),
    }
    command = [*MPIRUN, "-np", str(np), str(program), *args]
    done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=TIMEOUT)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def replay(trace: Trace, ranks: int, scratch: Path) -> float:
    """Simulated seconds of ``trace`` on a flat cluster, through smpirun itself."""
    platform = scratch / "flat.xml"
    platform.write_text(FLAT_PLATFORM)
    hosts = scratch / "hosts"
    hosts.write_text("".join(f"node-{i}\n" for i in range(8)))
    index = trace.write_index(scratch / "replay-index.txt")
    command = [
        "smpirun", "-np", str(ranks), "-platform", str(platform), "-hostfile", str(hosts),
        "--cfg=smpi/bw-factor:0:1", "--cfg=smpi/lat-factor:0:1", "-replay", str(index),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, cwd=scratch)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    found = re.search(r"Simulation time ([0-9.e+-]+)", output)
    assert found is not None, output
    return float(found.group(1))


def actions(trace: Trace, rank: int) -> list[list[str]]:
    lines = trace.rank_files[rank].read_text().splitlines()
    assert all(line.split()[0] == str(rank) for line in lines)
    return [line.split()[1:] for line in lines]


def own_clocks(stdout: str) -> dict[int, tuple[float, float]]:
    """Per rank, the CPU and the wall seconds the COMPUTE program's busy wait took by its own
    clocks."""
    found = re.findall(r"^cpu (\d) (\S+) (\S+)$", stdout, re.MULTILINE)
    return {int(rank): (float(cpu), float(wall)) for rank, cpu, wall in found}


def compute_seconds(trace: Trace, rank: int) -> float:
    flops = sum(float(a[1]) for a in actions(trace, rank) if a[0] == "compute")
    return flops / trace.reference_speed


@pytest.fixture(scope="module")
def all_calls(tmp_path_factory) -> Path:
    return build(ALL_CALLS, "all_calls", tmp_path_factory.mktemp("all_calls"))


@pytest.fixture(scope="module")
def compute(tmp_path_factory) -> Path:
    return build(COMPUTE, "compute", tmp_path_factory.mktemp("compute"))


@pytest.fixture(scope="module")
def complete_trace(all_calls, tmp_path_factory) -> Path:
    """A complete 2-rank trace for the reader's error tests to damage copies of."""
    directory = tmp_path_factory.mktemp("complete") / "trace"
    run(all_calls, np=2, trace_dir=directory)
    return directory


@needs_simgrid
@pytest.mark.parametrize("ranks", [2, 3])
def test_every_supported_call_is_written_in_simgrid_syntax_and_replays(
    all_calls: Path, tmp_path: Path, ranks: int
) -> None:
    run(all_calls, np=ranks, trace_dir=tmp_path / "trace")
    trace = read_trace(tmp_path / "trace")
    assert trace.ranks == ranks and trace.clock == "wall" and len(trace.elapsed) == ranks
    assert trace.program.endswith("all_calls") and trace.credited == (0.0,) * ranks
    assert (tmp_path / "trace-profile" / "rank-0.pcprof").is_file()  # the profile as before
    last = ranks - 1
    for rank in range(ranks):
        nxt, prev = (rank + 1) % ranks, (rank + ranks - 1) % ranks
        lines = [a for a in actions(trace, rank) if a[0] != "compute"]
        expected = [
            ["init"],
            ["irecv", str(prev), "7", "10", "0"],
            ["isend", str(nxt), "7", "10", "0"],
            ["wait", str(prev), str(rank), "7"],  # Waitall: one wait per request
            ["wait", str(rank), str(nxt), "7"],
            ["irecv", str(prev), "8", "11", "1"],
            ["send", str(nxt), "8", "11", "1"],
            ["wait", str(prev), str(rank), "8"],
            ["isend", str(nxt), "9", "12", "6"],
            ["recv", str(prev), "9", "12", "6"],  # MPI_ANY_SOURCE: the matched source
            ["wait", str(rank), str(nxt), "9"],
            ["send", str(nxt), "10", "20", "6"],  # MPI_UNSIGNED: 5 x 4 bytes
            ["irecv", str(prev), "10", "20", "6"],  # ANY_SOURCE irecv: written at its wait
            ["wait", str(prev), str(rank), "10"],
            # MPI_PROC_NULL send: nothing; Sendrecv: irecv + isend + two waits
            ["irecv", str(prev), "3", "5", "0"],
            ["isend", str(nxt), "3", "5", "0"],
            ["wait", str(prev), str(rank), "3"],
            ["wait", str(rank), str(nxt), "3"],
            ["allreduce", "20", "0", "0"],
            ["bcast", "21", "0", "1"],
            ["reduce", "22", "0", str(last), "4"],
            ["allgather", "3", "3", "0", "0"],
            ["allgatherv", "3", *["3"] * ranks, "0", "0"],
            ["alltoall", "2", "2", "0", "0"],
            ["alltoallv", str(3 * ranks), *["3"] * ranks, str(3 * ranks), *["3"] * ranks, "0", "0"],
            ["gather", "4", "4", "0", "0", "0"],
            ["scatter", "4", "4", "0", "0", "0"],
            ["reducescatter", *["3"] * ranks, "0", "0"],
            ["barrier"],
            ["finalize"],
        ]
        assert lines == expected, rank
    assert replay(trace, ranks, tmp_path) > 0


def test_a_compute_block_of_known_length_is_recorded_with_its_call_paths(
    compute: Path, tmp_path: Path
) -> None:
    own = own_clocks(run(compute, np=2, trace_dir=tmp_path / "trace").stdout)
    trace = read_trace(tmp_path / "trace")
    for rank in range(2):
        # What the run did besides compute is its MPI calls, as the profile beside the trace
        # times them: the two add up to the elapsed time however long a loaded machine keeps
        # a rank waiting in MPI (the share of compute fell to 0.91 with two CPU hogs).
        profile = read_rank_profile(tmp_path / "trace-profile" / f"rank-{rank}.pcprof")
        mpi = sum(
            record.exclusive_ns * 1e-9
            for path, record in profile.callpaths.items()
            if path.rsplit("->", 1)[-1] in ("MPI_Barrier", "MPI_Allreduce")
        )
        # apart by the hooks' own time, about 20 us, and by a time slice or two where the
        # scheduler preempts a rank inside them (at most 2.7 ms in 80 rank runs under load)
        assert trace.elapsed[rank] == pytest.approx(compute_seconds(trace, rank) + mpi, abs=0.015)
        block = max(trace.blocks[rank], key=lambda b: b.seconds)
        assert (block.opening, block.closing, block.count) == (
            "main->MPI_Init",
            "main->sync_ranks->MPI_Barrier",
            1,
        )
        # the busy wait by the program's own clock, which the block lies around (within 4 us
        # in 80 rank runs under load); not 0.3 s itself, which a rank preempted at the end
        # of its wait overshoots (by 23 ms under load)
        wall = own[rank][1]
        assert 0.3 <= wall <= block.seconds <= wall + 0.015
        openings = {(b.opening, b.closing) for b in trace.blocks[rank]}
        assert ("main->sync_ranks->MPI_Barrier", "main->MPI_Allreduce") in openings
        assert ("main->MPI_Allreduce", "main->MPI_Finalize") in openings
        total = sum(b.seconds for b in trace.blocks[rank])
        assert total == pytest.approx(compute_seconds(trace, rank), rel=1e-6, abs=1e-6)


def test_cpu_clock_and_credited_time(compute: Path, tmp_path: Path) -> None:
    done = run(
        compute, "credit", np=2, trace_dir=tmp_path / "trace", env={"PERFCAST_TRACE_CLOCK": "cpu"}
    )
    cpu = {rank: clocks[0] for rank, clocks in own_clocks(done.stdout).items()}
    trace = read_trace(tmp_path / "trace")
    assert trace.clock == "cpu" and trace.credited == (0.5, 0.5)
    for rank in range(2):
        blocks = {(b.opening, b.closing): b.seconds for b in trace.blocks[rank]}
        # the busy wait's block counts the CPU time the rank got, not the 0.3 s it lasted
        work = blocks["main->MPI_Init", "main->sync_ranks->MPI_Barrier"]
        assert work == pytest.approx(cpu[rank], rel=0.05, abs=0.005)
        # the credit counts in the block it was given in, and in the trace's compute
        credited = blocks["main->sync_ranks->MPI_Barrier", "main->MPI_Allreduce"]
        assert 0.5 <= credited < 0.52
        assert compute_seconds(trace, rank) == pytest.approx(work + 0.5, abs=0.02)


def test_a_misspelt_clock_stops_the_run(compute: Path, tmp_path: Path) -> None:
    done = run(compute, np=1, trace_dir=tmp_path / "t", env={"PERFCAST_TRACE_CLOCK": "CPU"},
               check=False)  # fmt: skip
    assert done.returncode != 0
    assert "PERFCAST_TRACE_CLOCK=CPU: set it to wall (the default) or cpu" in done.stderr


def test_a_trace_directory_holding_the_users_files_is_refused(compute: Path, tmp_path: Path):
    """A run replaces trace files and removes index.txt: never in a directory of the user's."""
    sources = tmp_path / "src"
    sources.mkdir()
    (sources / "index.txt").write_text("the user's notes\n")
    (sources / "main.c").write_text("int main(void) { return 0; }\n")
    done = run(compute, np=1, trace_dir=sources, check=False)
    assert done.returncode != 0
    assert f"the trace directory {sources} holds" in done.stderr
    assert "give PERFCAST_TRACE_DIR an empty or new directory" in done.stderr
    assert (sources / "index.txt").read_text() == "the user's notes\n"
    # a directory of an earlier trace is a trace directory: traced again, it is replaced
    trace = tmp_path / "trace"
    run(compute, np=1, trace_dir=trace)
    run(compute, np=1, trace_dir=trace)
    assert (trace / "trace.json").is_file()


@needs_simgrid
def test_the_stencil_example_traces_through_make_and_replays(tmp_path: Path) -> None:
    source = tmp_path / "stencil"
    shutil.copytree(EXAMPLES / "stencil", source)
    subprocess.run(
        ["make", "-s", "CC=perfcast build --trace -- mpicc"],
        cwd=source, check=True, timeout=TIMEOUT, capture_output=True,
    )  # fmt: skip
    run(source / "jacobi", "200", "100", np=2, trace_dir=tmp_path / "trace")
    trace = read_trace(tmp_path / "trace")
    paths = {(b.opening, b.closing) for b in trace.blocks[0]}
    assert (
        "main->exchange_halo->MPI_Sendrecv",
        "main->global_residual->MPI_Allreduce",
    ) in paths
    sweeps = [b for b in trace.blocks[0] if b.closing == "main->global_residual->MPI_Allreduce"]
    assert sweeps[0].count == 100
    # the clang-16 build is not the user's (mpicc runs gcc here): the trace says so, and so
    # does every simulation of it
    assert trace.compilers is not None and "clang" in trace.compilers.measured
    assert trace.compilers.differ == ("clang" not in trace.compilers.user)
    simulated = replay(trace, 2, tmp_path)
    # The replay runs each rank's compute at the traced core's speed, in the order the
    # exchanges made the ranks wait for each other: the sum over phases of the slower rank's
    # compute, plus the little communication of the flat cluster. The run's own wall time is
    # no yardstick: under load a rank loses most of it to preemption while it polls inside
    # MPI, which no compute block records (0.17 s elapsed against 0.03 s of compute, seen
    # with two CPU hogs on 2 cores).
    compute = [compute_seconds(trace, rank) for rank in range(2)]
    assert all(compute[rank] <= trace.elapsed[rank] for rank in range(2))  # parts of the run
    assert max(compute) <= simulated
    assert simulated == pytest.approx(lockstep_compute(trace), abs=STENCIL_COMMUNICATION)


@needs_simgrid
def test_the_users_own_compiler_builds_the_traced_program(tmp_path: Path) -> None:
    """``--user-compiler``: make's gcc build of the stencil, traced through its MPI calls
    alone, replays as the clang build's trace does, and its build record names gcc twice."""
    source = tmp_path / "stencil"
    shutil.copytree(EXAMPLES / "stencil", source)
    record = tmp_path / "builds.jsonl"
    done = subprocess.run(
        ["make", "-s", "CC=perfcast build --trace --user-compiler -- mpicc"],
        cwd=source, timeout=TIMEOUT, capture_output=True, text=True,
        env={**os.environ, "PERFCAST_BUILD_RECORD": str(record)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "note" not in done.stderr  # measured and user's compiler are one: nothing to say
    (built,) = [json.loads(line) for line in record.read_text().splitlines()]
    user = subprocess.run(["mpicc", "--showme:command"], capture_output=True, text=True)
    assert built["measured"] == built["user"]
    assert "clang" not in built["measured"] and user.stdout.split()[0] in built["measured"]
    sections = subprocess.run(["readelf", "-S", str(source / "jacobi")], capture_output=True)
    assert b"xray_instr_map" not in sections.stdout  # no clang instrumentation at all

    run(source / "jacobi", "200", "100", np=2, trace_dir=tmp_path / "trace")
    trace = read_trace(tmp_path / "trace")
    # no function entries: a block is named by the MPI calls that open and close it
    sweeps = [b for b in trace.blocks[0] if b.closing == "MPI_Allreduce"]
    assert [(b.opening, b.count) for b in sweeps] == [("MPI_Sendrecv", 100)]
    assert trace.compilers is not None and not trace.compilers.differ
    assert trace.compilers.measured == built["measured"]
    simulated = replay(trace, 2, tmp_path)
    assert simulated == pytest.approx(lockstep_compute(trace), abs=STENCIL_COMMUNICATION)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (BuildOptions(user_compiler=True), "give --trace"),
        (BuildOptions(user_compiler=True, trace=True, counters=True), "--counters cannot go"),
        (BuildOptions(user_compiler=True, trace=True, smpi=True), "--smpi cannot go"),
    ],
)
def test_user_compiler_refuses_what_needs_clang(options: BuildOptions, named: str) -> None:
    with pytest.raises(PerfcastError, match=named):
        wrap(["mpicc", "-O2", "app.c", "-o", "app"], options)


STENCIL_COMMUNICATION = 100 * 3 * 2 * (3e-6 + 1600 / 1e9)
"""A bound on what the stencil's 100 iterations communicate on the flat cluster: three
exchanges per iteration (two halo rows of 200 doubles, one allreduce) of at most two
messages each, a message crossing at most three links of 1 us and moving 1.6 kB at 1 GB/s
(2.8 ms; 1.1 ms replayed here)."""


def lockstep_compute(trace: Trace) -> float:
    """Seconds of compute when the ranks wait for each other at every MPI call: per phase
    between two calls, the slowest rank's compute. The ranks must make the same calls."""
    phases: list[list[float]] = []
    for rank in range(trace.ranks):
        phases.append([0.0])
        for action in actions(trace, rank):
            if action[0] == "compute":
                phases[-1][-1] += float(action[1]) / trace.reference_speed
            else:
                phases[-1].append(0.0)
    return sum(max(phase) for phase in zip(*phases, strict=True))


def test_an_unsupported_call_stops_with_call_rank_and_call_path(tmp_path: Path) -> None:
    program = build(UNSUPPORTED, "unsupported", tmp_path)
    done = run(program, np=2, trace_dir=tmp_path / "trace", check=False)
    assert done.returncode != 0
    assert re.search(
        r"perfcast trace: MPI_Test is not supported by trace mode \(rank [01], call path "
        r"main->solve\): build without --trace",
        done.stderr,
    ), done.stderr
    assert not (tmp_path / "trace" / "trace.json").exists()
    done = run(program, "split", np=2, trace_dir=tmp_path / "split", check=False)
    assert done.returncode != 0
    assert "MPI_Allreduce on a communicator other than MPI_COMM_WORLD is not supported" in (
        done.stderr
    )


def test_without_trace_the_same_calls_are_profiled(tmp_path: Path) -> None:
    program = build(UNSUPPORTED, "profiled", tmp_path, trace=False)
    run(program, np=2, trace_dir=tmp_path / "trace")
    assert not (tmp_path / "trace").exists()
    profile = (tmp_path / "trace-profile" / "rank-0.pcprof").read_text()
    assert re.search(r"^node .* MPI_Test$", profile, re.MULTILINE)
    symbols = subprocess.run(["nm", str(program)], capture_output=True, text=True).stdout
    assert re.search(r"\bw perfcast_trace_enter$", symbols, re.MULTILINE)  # weak, unresolved


@pytest.mark.parametrize("how", ["crash", "abort"])
def test_a_run_that_dies_leaves_no_complete_trace(compute: Path, tmp_path: Path, how) -> None:
    directory = tmp_path / "trace"
    run(compute, np=2, trace_dir=directory)
    assert read_trace(directory).ranks == 2  # complete, then overwritten by a dying run
    done = run(compute, how, np=2, trace_dir=directory, check=False)
    assert done.returncode != 0
    assert not (directory / "trace.json").exists()
    assert not (directory / "index.txt").exists()
    with pytest.raises(InputError) as caught:
        read_trace(directory)
    message = str(caught.value)
    assert "did not reach MPI_Finalize on every rank" in message
    assert re.search(r"\.rank-0\.trace\.\d+\.tmp", message), message


def test_trace_without_mpi_is_refused(tmp_path: Path) -> None:
    (tmp_path / "serial.c").write_text("int main(void) { return 0; }\n")
    with pytest.raises(PerfcastError, match="--trace records MPI calls"):
        wrap(["clang", str(tmp_path / "serial.c"), "-o", "serial"], BuildOptions(trace=True))


def copy_trace(source: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(source, target)
    return target


def test_read_trace_reports_each_bad_directory(complete_trace: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such trace directory"):
        read_trace(tmp_path / "absent")
    trace = read_trace(complete_trace)
    index = trace.write_index(tmp_path / "index.txt")
    assert index.read_text().splitlines() == [
        str(complete_trace.resolve() / f"rank-{r}.trace") for r in range(2)
    ]
    assert (complete_trace / "index.txt").read_text() == index.read_text()

    damaged = copy_trace(complete_trace, tmp_path / "ranks")
    summary = json.loads((damaged / "trace.json").read_text())
    (damaged / "trace.json").write_text(json.dumps({**summary, "ranks": "two"}))
    with pytest.raises(InputError, match="ranks must be an integer"):
        read_trace(damaged)
    (damaged / "trace.json").write_text(json.dumps({**summary, "files": ["../x", "y"]}))
    with pytest.raises(InputError, match=r"files\[0\] must be a file name inside"):
        read_trace(damaged)
    del summary["clock"]
    (damaged / "trace.json").write_text(json.dumps(summary))
    with pytest.raises(InputError, match="has no 'clock'"):
        read_trace(damaged)

    missing = copy_trace(complete_trace, tmp_path / "missing")
    (missing / "rank-1.trace").unlink()
    with pytest.raises(InputError, match=r"rank 1.s action file rank-1\.trace .* is missing"):
        read_trace(missing)

    other_run = copy_trace(complete_trace, tmp_path / "other")
    blocks = other_run / "rank-0.blocks.tsv"
    lines = blocks.read_text().splitlines()
    lines[0] = re.sub(r"run=\w+", "run=0123456789abcdef", lines[0])
    blocks.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match="from another run or rank") as caught:
        read_trace(other_run)
    assert caught.value.path == blocks and caught.value.line == 1


def test_threshold_without_trace_says_to_add_it(tmp_path: Path) -> None:
    profile = tmp_path / "app.taint.json"
    profile.write_text("{}")
    options = BuildOptions(threshold_profile=profile)
    with pytest.raises(PerfcastError, match=r"--threshold .* give --trace too"):
        wrap(["mpicc", "-c", "app.c"], options)


def test_threshold_with_a_missing_profile_names_it(tmp_path: Path) -> None:
    source = tmp_path / "app.c"
    source.write_text("int main(void) { return 0; }\n")
    options = BuildOptions(trace=True, threshold_profile=tmp_path / "absent.json")
    with pytest.raises(InputError, match=r"absent\.json"):
        wrap(["mpicc", "-c", str(source)], options)
