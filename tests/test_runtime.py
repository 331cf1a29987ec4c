"""The measurement runtime end to end: build the examples with perfcast build, run them
under mpirun, and check call trees, exact visits, basic blocks and MPI bytes."""

from __future__ import annotations

import os
import shutil
import subprocess
from fractions import Fraction
from pathlib import Path

import pytest

from perfcast.cli import main
from perfcast.errors import InputError
from perfcast.measure.design import PlannedRun
from perfcast.measure.local import LocalBackend, mpirun_command
from perfcast.measure.profiles import (
    combine_runs,
    parse_rank_profile,
    read_profiles,
    read_rank_profile,
)
from perfcast.measure.runner import Job

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
MPIRUN = ("mpirun", "--allow-run-as-root", "--oversubscribe")
TIMEOUT = 120


def build(*command: str | Path, cwd: Path, counters: bool = True, filter_file=None) -> None:
    options = ["--counters"] if counters else []
    options += ["--filter", str(filter_file)] if filter_file else []
    args = [str(c) for c in command]
    old = Path.cwd()
    os.chdir(cwd)
    try:
        assert main(["build", *options, "--", *args]) == 0
    finally:
        os.chdir(old)


def run(program: Path, *args: object, np: int = 1, profile: Path, env=None, check=True):
    environment = {**os.environ, "PERFCAST_PROFILE_DIR": str(profile), **(env or {})}
    command = [*MPIRUN, "-np", str(np), str(program), *map(str, args)]
    done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=TIMEOUT)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def value(experiment, callpath, metric):
    rows = experiment.select(callpath, metric)
    assert len(rows) == 1, (callpath, metric, rows)
    return float(rows["value"].iloc[0])


@pytest.fixture(scope="module")
def jacobi(tmp_path_factory) -> Path:
    """The multi-file stencil, built through its own Makefile."""
    directory = tmp_path_factory.mktemp("stencil")
    for source in (EXAMPLES / "stencil").iterdir():
        shutil.copy(source, directory)
    subprocess.run(
        ["make", "-s", "CC=perfcast build --counters -- mpicc"],
        cwd=directory,
        check=True,
        timeout=TIMEOUT,
    )
    return directory / "jacobi"


@pytest.fixture(scope="module")
def samplesort(tmp_path_factory) -> Path:
    """The sample sort, compiled and linked by one command."""
    directory = tmp_path_factory.mktemp("samplesort")
    source = EXAMPLES / "samplesort" / "samplesort.c"
    build("mpicc", "-O2", source, "-o", "samplesort", cwd=directory)
    return directory / "samplesort"


@pytest.fixture(scope="module")
def getters(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("getters")
    sources = [EXAMPLES / "getters" / name for name in ("getters.cpp", "elem.cpp")]
    for source in sources:
        build("mpicxx", "-O2", "-c", source, "-o", source.with_suffix(".o").name, cwd=directory)
    build("mpicxx", "getters.o", "elem.o", "-o", "getters", cwd=directory, counters=False)
    return directory


JACOBI_PATHS = {
    "main",
    "main->MPI_Init",
    "main->init_grid",
    "main->exchange_halo",
    "main->exchange_halo->MPI_Sendrecv",
    "main->sweep",
    "main->global_residual",
    "main->global_residual->MPI_Allreduce",
    "main->MPI_Finalize",
}


@pytest.mark.parametrize("np", [1, 2, 3, 4])
def test_stencil_call_tree_visits_and_bytes_are_exact(jacobi, tmp_path, np):
    size, iterations = 16, 3
    run(jacobi, size, iterations, np=np, profile=tmp_path)
    exp = read_profiles(tmp_path, {"size": size})
    assert set(exp.callpaths) == JACOBI_PATHS
    visits = {
        "main": 1,
        "main->init_grid": 2,
        "main->sweep": iterations,
        "main->exchange_halo": iterations,
        "main->exchange_halo->MPI_Sendrecv": 2 * iterations,
        "main->global_residual->MPI_Allreduce": iterations,
    }
    for callpath, expected in visits.items():
        assert value(exp, callpath, "visits") == expected
        assert value(exp, callpath, "visits:max") == expected
    halo = "main->exchange_halo->MPI_Sendrecv"
    for metric in ("mpi_bytes_sent", "mpi_bytes_received", "mpi_bytes_sent:max"):
        assert value(exp, halo, metric) == 2 * iterations * size * 8
    allreduce = "main->global_residual->MPI_Allreduce"
    assert value(exp, allreduce, "mpi_bytes_sent") == iterations * np * 8
    assert value(exp, allreduce, "mpi_bytes_received:max") == iterations * np * 8
    profile = read_rank_profile(tmp_path / "rank-0.pcprof")
    assert profile.ranks == np and profile.counters
    assert {(m.operation, m.comm_size) for m in profile.callpaths[halo].mpi} == {
        ("MPI_Sendrecv", np)
    }


def test_exclusive_time_is_inclusive_minus_callees(jacobi, tmp_path):
    run(jacobi, 16, 3, np=2, profile=tmp_path)
    profile = read_rank_profile(tmp_path / "rank-1.pcprof")
    for callpath, record in profile.callpaths.items():
        children = [
            r
            for c, r in profile.callpaths.items()
            if c.rsplit("->", 1)[0] == callpath and c != callpath
        ]
        assert record.exclusive_ns == record.inclusive_ns - sum(c.inclusive_ns for c in children)
        assert record.exclusive_ns >= 0


def sweep_blocks(jacobi: Path, directory: Path, size: int, iterations: int, np: int = 1):
    run(jacobi, size, iterations, np=np, profile=directory)
    return [
        read_rank_profile(directory / f"rank-{r}.pcprof").callpaths["main->sweep"].basic_blocks
        for r in range(np)
    ]


def test_basic_blocks_are_deterministic_and_follow_the_trip_counts(jacobi, tmp_path):
    first = sweep_blocks(jacobi, tmp_path / "a", 16, 3, np=3)
    again = sweep_blocks(jacobi, tmp_path / "b", 16, 3, np=3)
    assert first == again and len(set(first)) == 1  # across runs and across ranks
    doubled = sweep_blocks(jacobi, tmp_path / "c", 16, 6)
    assert doubled[0] == 2 * first[0]  # exactly proportional to the iterations
    # per sweep, a quadratic in size whose leading coefficient is one block per inner
    # iteration (size * size of them): exact at a fourth size
    per_call = {s: sweep_blocks(jacobi, tmp_path / f"s{s}", s, 1)[0] for s in (8, 16, 24, 40)}
    a = Fraction(per_call[24] - 2 * per_call[16] + per_call[8], 2 * 8 * 8)
    b = Fraction(per_call[16] - per_call[8], 8) - a * (16 + 8)
    c = per_call[8] - a * 64 - b * 8
    assert a == 1
    assert per_call[40] == a * 40 * 40 + b * 40 + c


def test_samplesort_collective_bytes_follow_the_rules(samplesort, tmp_path):
    n, np = 1000, 3
    run(samplesort, n, np=np, profile=tmp_path)
    exp = read_profiles(tmp_path)
    gather = "main->choose_splitters->MPI_Allgather"
    assert value(exp, gather, "mpi_bytes_sent") == np * (np - 1) * 4
    assert value(exp, gather, "mpi_bytes_received") == np * (np - 1) * 4
    assert value(exp, "main->MPI_Alltoall", "mpi_bytes_sent") == np * 4
    # every key leaves its rank once; what arrives depends on the data but sums to n*p
    assert value(exp, "main->MPI_Alltoallv", "mpi_bytes_sent") == n * 4
    assert value(exp, "main->MPI_Alltoallv", "mpi_bytes_sent:max") == n * 4
    assert value(exp, "main->MPI_Alltoallv", "mpi_bytes_received") == n * 4  # the mean
    assert value(exp, "main->MPI_Allreduce", "mpi_bytes_sent") == np * 2 * 8
    assert value(exp, "main->sort_local", "visits") == 2
    assert value(exp, "main->choose_splitters->sort_local", "visits") == 1
    assert value(exp, "main->sort_local", "basic_blocks") > 0


BCAST = r"""
#include <mpi.h>
#include <stdlib.h>
__attribute__((noinline)) void broadcast(int *data, int n) {
    MPI_Bcast(data, n, MPI_INT, 0, MPI_COMM_WORLD);
}
__attribute__((noinline)) void reduce(int *data, int *out, int n) {
    MPI_Reduce(data, out, n, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
}
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int n = atoi(argv[1]);
    int *data = calloc(n, sizeof *data), *out = calloc(n, sizeof *out);
    broadcast(data, n);
    reduce(data, out, n);
    MPI_Finalize();
    return 0;
}
"""


def test_bcast_bytes_match_the_papers_formula(tmp_path):
    (tmp_path / "bcast.c").write_text(BCAST)
    build("mpicc", "-O1", "bcast.c", "-o", "bcast", cwd=tmp_path, counters=False)
    n, np = 250, 4
    run(tmp_path / "bcast", n, np=np, profile=tmp_path / "profile")
    for rank in range(np):
        callpaths = read_rank_profile(tmp_path / "profile" / f"rank-{rank}.pcprof").callpaths
        (bcast,) = callpaths["main->broadcast->MPI_Bcast"].mpi
        (reduce,) = callpaths["main->reduce->MPI_Reduce"].mpi
        root = rank == 0
        assert (bcast.bytes_sent, bcast.bytes_received) == ((np * n * 4, 0) if root else (0, n * 4))
        assert (reduce.bytes_sent, reduce.bytes_received) == (n * 4, np * n * 4 if root else 0)
        assert bcast.comm_size == np and bcast.calls == 1


def test_cpp_names_are_demangled_and_the_filter_selects_functions(getters, tmp_path):
    run(getters / "getters", 4, 2, profile=tmp_path / "full")
    full = read_profiles(tmp_path / "full")
    volume = "main->InitMesh(Domain&)->CalcElemVolume(double const*, double const*, double const*)"
    assert value(full, volume, "visits") == 4**3  # once per element
    names = tmp_path / "filter.txt"  # qualified name, mangled name, and one that is not there
    names.write_text("CalcForceForNodes\n_Z16LagrangeLeapFrogR6Domain\nNoSuchFunction\n")
    objects = ("getters.o", "elem.o")
    build("mpicxx", *objects, "-o", tmp_path / "filtered", cwd=getters, filter_file=names)
    run(tmp_path / "filtered", 4, 2, profile=tmp_path / "filtered-profile")
    with pytest.warns(UserWarning, match="NoSuchFunction"):
        filtered = read_profiles(tmp_path / "filtered-profile")
    functions = {c for c in filtered.callpaths if "MPI_" not in c}
    assert functions == {
        "main",
        "main->LagrangeLeapFrog(Domain&)",
        "main->LagrangeLeapFrog(Domain&)->CalcForceForNodes(Domain&)",
    }
    assert (
        value(filtered, "main->LagrangeLeapFrog(Domain&)->CalcForceForNodes(Domain&)", "visits")
        == 2
    )
    # the filter can be replaced at run time, without rebuilding
    other = tmp_path / "other.txt"
    other.write_text("InitMesh\n")
    run(tmp_path / "filtered", 4, 2, profile=tmp_path / "env", env={"PERFCAST_FILTER": str(other)})
    functions = {c for c in read_profiles(tmp_path / "env").callpaths if "MPI_" not in c}
    assert functions == {"main", "main->InitMesh(Domain&)"}


CRASH = r"""
#include <mpi.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argv[1][0] == 'a' && rank == 0) MPI_Abort(MPI_COMM_WORLD, 3);
    MPI_Finalize();
    if (argv[1][0] == 'c' && rank == 1) {  /* die after the others have written */
        sleep(1);
        raise(SIGSEGV);
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def crasher(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("crash")
    (directory / "crash.c").write_text(CRASH)
    build("mpicc", "-O1", "crash.c", "-o", "crash", cwd=directory, counters=False)
    return directory / "crash"


def test_a_crashed_rank_makes_the_run_unreadable(crasher, tmp_path):
    done = run(crasher, "crash", np=3, profile=tmp_path, check=False)
    assert done.returncode != 0
    assert not (tmp_path / "rank-1.pcprof").exists()
    with pytest.raises(InputError, match=r"rank\(s\) 1 of 3 wrote no profile"):
        read_profiles(tmp_path)


def test_mpi_abort_writes_no_profile(crasher, tmp_path):
    done = run(crasher, "abort", np=2, profile=tmp_path, check=False)
    assert done.returncode != 0
    with pytest.raises(InputError, match="no perfcast profiles"):
        read_profiles(tmp_path)


def test_truncated_or_mixed_profiles_are_rejected(jacobi, tmp_path):
    run(jacobi, 8, 1, np=2, profile=tmp_path / "one")
    text = (tmp_path / "one" / "rank-0.pcprof").read_text()
    lines = text.splitlines()
    for cut in (3, len(lines) // 2, len(lines) - 1):
        with pytest.raises(InputError, match=r"ends before|expected"):
            parse_rank_profile("\n".join(lines[:cut]) + "\n", "rank-0.pcprof")
    run(jacobi, 8, 1, np=2, profile=tmp_path / "two")
    shutil.copy(tmp_path / "two" / "rank-1.pcprof", tmp_path / "one" / "rank-1.pcprof")
    with pytest.raises(InputError, match="different runs"):
        read_profiles(tmp_path / "one")


THREADS = r"""
#include <pthread.h>
__attribute__((noinline)) long work(long n) {
    long s = 0;
    for (long i = 0; i < n; ++i) s += i ^ (s >> 3);
    return s;
}
void *worker(void *arg) { *(long *)arg = work(1000); return 0; }
int main(void) {
    pthread_t thread; long result = 0;
    pthread_create(&thread, 0, worker, &result);
    pthread_join(thread, 0);
    return work(1000) == result ? 0 : 1;
}
"""


def test_threads_of_a_serial_program_get_their_own_trees(tmp_path):
    (tmp_path / "threads.c").write_text(THREADS)
    build("cc", "-O1", "-pthread", "threads.c", "-o", "threads", cwd=tmp_path)
    environment = {**os.environ, "PERFCAST_PROFILE_DIR": str(tmp_path / "profile")}
    subprocess.run([tmp_path / "threads"], env=environment, check=True, timeout=TIMEOUT)
    profile = read_rank_profile(tmp_path / "profile" / "rank-0.pcprof")
    assert (profile.rank, profile.ranks, profile.threads) == (0, 1, 2)
    main_work = profile.callpaths["main->work"]
    thread_work = profile.callpaths["worker->work"]
    assert main_work.visits == thread_work.visits == 1
    assert main_work.basic_blocks == thread_work.basic_blocks > 1000


def test_runs_combine_into_a_model_of_the_trip_count(jacobi, tmp_path):
    from perfcast.modeling import PMNFModeler

    runs = []
    for size in (64, 128, 192, 256, 320):  # large enough for size^2 to dominate 2*size
        directory = tmp_path / f"size{size}"
        run(jacobi, size, 2, np=2, profile=directory)
        runs.append(({"size": size}, directory))
    exp = combine_runs(runs)
    assert exp.parameters == ["size"]
    assert len(exp.coordinates()) == 5
    model = PMNFModeler().fit(exp)[("main->sweep", "basic_blocks")]
    exponents = {f.exponent for t in model.terms for f in t.factors}
    assert Fraction(2) in exponents


KERNELS = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
__attribute__((noinline)) void nap(long ms) {
    struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&pause, 0);
}
__attribute__((noinline)) double spin(long n) {
    volatile double sum = 0;
    for (long i = 0; i < n; ++i) sum += i * 0.5;
    return sum;
}
static double seconds(clockid_t clock) {
    struct timespec now;
    clock_gettime(clock, &now);
    return now.tv_sec + 1e-9 * now.tv_nsec;
}
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    nap(atol(argv[1]));
    MPI_Barrier(MPI_COMM_WORLD);  /* every rank spins at the same time */
    double cpu = seconds(CLOCK_PROCESS_CPUTIME_ID), wall = seconds(CLOCK_MONOTONIC);
    double sum = spin(atol(argv[2]));
    cpu = seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu, wall = seconds(CLOCK_MONOTONIC) - wall;
    if (argc > 3) printf("spin %.9f %.9f\n", cpu, wall);  /* its own view, to compare */
    MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
"""
CPU_TIME_ON = {"PERFCAST_CPU_TIME": "1"}


@pytest.fixture(scope="module")
def kernels(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("kernels")
    (directory / "kernels.c").write_text(KERNELS)
    build("mpicc", "-O2", "kernels.c", "-o", "kernels", cwd=directory, counters=False)
    return directory / "kernels"


def test_cpu_time_is_off_unless_asked_for_and_a_bad_setting_stops_the_run(kernels, tmp_path):
    run(kernels, 1, 1000, profile=tmp_path / "off")
    assert not read_rank_profile(tmp_path / "off" / "rank-0.pcprof").cpu_time
    metrics = set(read_profiles(tmp_path / "off").data["metric"])
    assert "time" in metrics and not any(m.startswith("cpu_time") for m in metrics)
    done = run(
        kernels, 1, 1000, profile=tmp_path / "bad", env={"PERFCAST_CPU_TIME": "yes"}, check=False
    )
    assert done.returncode != 0
    assert "PERFCAST_CPU_TIME=yes: set it to 1" in done.stderr


def test_a_sleeping_kernel_has_wall_time_but_no_cpu_time_and_a_busy_one_both(kernels, tmp_path):
    nap_ms = 300
    done = run(kernels, nap_ms, 100_000_000, "report", profile=tmp_path, env=CPU_TIME_ON)
    own_cpu, own_wall = map(float, done.stdout.split()[1:3])  # the program's own clocks
    exp = read_profiles(tmp_path)
    assert value(exp, "main->nap", "time") >= nap_ms * 1e-3
    assert value(exp, "main->nap", "cpu_time") < 0.02 * nap_ms * 1e-3
    busy, busy_cpu = value(exp, "main->spin", "time"), value(exp, "main->spin", "cpu_time")
    assert own_cpu > 0.02
    # the call path's CPU time is the spin's, whatever share of the core it got
    assert busy_cpu == pytest.approx(own_cpu, rel=0.05, abs=2e-3)
    assert busy == pytest.approx(own_wall, rel=0.05, abs=2e-3)
    assert busy_cpu <= busy * 1.001  # equal when it has a core of its own
    # the same conventions as time: exclusive <= inclusive, callees subtracted
    main_cpu = value(exp, "main", "cpu_time_inclusive")
    assert main_cpu >= busy_cpu and value(exp, "main", "cpu_time") < 0.1 * main_cpu
    assert value(exp, "main->spin", "cpu_time:max") == busy_cpu  # one rank
    for mpi in ("main->MPI_Barrier", "main->MPI_Allreduce"):
        assert 0 <= value(exp, mpi, "cpu_time") <= value(exp, mpi, "time") * 1.001 + 1e-5


def test_cpu_time_stays_put_under_oversubscription_where_wall_time_grows(kernels, tmp_path):
    cores = len(os.sched_getaffinity(0))
    ranks = 2 * cores  # two busy ranks per core, spinning at the same time
    spins = 60_000_000
    run(kernels, 0, spins, profile=tmp_path / "alone", env=CPU_TIME_ON)
    run(kernels, 0, spins, np=ranks, profile=tmp_path / "shared", env=CPU_TIME_ON)
    alone = read_profiles(tmp_path / "alone")
    shared = read_profiles(tmp_path / "shared")
    cpu_alone = value(alone, "main->spin", "cpu_time")
    cpu_shared = value(shared, "main->spin", "cpu_time")
    # the work per rank is the same, and so is its CPU time (generous: caches, migrations)
    assert 0.6 < cpu_shared / cpu_alone < 1.7
    # whereas each rank waits for its share of a core: the slowest rank's wall time is at
    # least about (ranks / cores) times its CPU time, whatever else runs on the machine
    assert value(shared, "main->spin", "time:max") > 1.4 * cpu_shared


VERSION_1 = """perfcast-profile 1
rank 0
ranks 1
run 00000000000000aa
program /bin/app
clock CLOCK_MONOTONIC ns
counters 0 0
functions 2 2 all
threads 1
thread 0
outside 0
node 1 0 1 3000 1000 0 main
node 2 1 2 2000 2000 0 work
end
"""


def test_profiles_of_format_version_1_still_read_without_cpu_time():
    profile = parse_rank_profile(VERSION_1, "old/rank-0.pcprof")
    assert not profile.cpu_time
    assert profile.callpaths["main->work"].exclusive_ns == 2000
    assert profile.callpaths["main->work"].visits == 2
    with pytest.raises(InputError, match="version 9 is not one this perfcast reads"):
        parse_rank_profile(VERSION_1.replace("profile 1", "profile 9"), "rank-0.pcprof")


def test_the_local_backend_forwards_cpu_time_to_the_ranks(kernels, tmp_path, monkeypatch):
    job = Job(
        run=PlannedRun({"p": 2}, 0),
        attempt=1,
        argv=(str(kernels), "0", "1000"),
        cwd=tmp_path,
        directory=tmp_path / "attempt",
        timeout=TIMEOUT,
        expect_profiles=True,
    )
    unset = mpirun_command(job, cores=4, environment={})
    assert "PERFCAST_CPU_TIME" not in unset  # mpirun would warn about an unset variable
    monkeypatch.setenv("PERFCAST_CPU_TIME", "1")
    command = mpirun_command(job, cores=4)
    assert command[command.index("PERFCAST_CPU_TIME") - 1] == "-x"
    backend = LocalBackend()
    backend.submit([job])
    (record,) = backend.wait()
    assert record.ok, record.reason
    profiles = [parse_rank_profile(text.decode(), name) for name, text in record.profiles.items()]
    assert len(profiles) == 2 and all(p.cpu_time for p in profiles)
