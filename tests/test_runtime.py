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
from perfcast.measure.profiles import (
    combine_runs,
    parse_rank_profile,
    read_profiles,
    read_rank_profile,
)

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
