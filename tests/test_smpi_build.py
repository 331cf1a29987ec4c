"""``perfcast build --smpi``: the stencil built with smpicc and perfcast's runtime, run by
a real smpirun on a described platform, writes one profile per rank on the simulated clock."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from perfcast.errors import PerfcastError
from perfcast.measure.build import BuildOptions, wrap
from perfcast.measure.profiles import check_run, read_profiles, read_rank_profile

STENCIL = Path(__file__).parents[1] / "src" / "perfcast" / "examples" / "stencil"
HALO = "main->exchange_halo->MPI_Sendrecv"
NODES = 4
SIZE, ITERATIONS = 192, 60

needs_simgrid = pytest.mark.skipif(
    shutil.which("smpirun") is None or shutil.which("smpicc") is None,
    reason="SimGrid (smpirun, smpicc) is not installed",
)


def platform(directory: Path, bandwidth: str) -> tuple[Path, Path]:
    """A described 4-node cluster (1 Gflop/s hosts: with smpi/host-speed 1Gf, one simulated
    second of compute is one second measured here) and its host file."""
    xml = directory / f"cluster-{bandwidth}.xml"
    xml.write_text(
        "<?xml version='1.0'?>\n"
        '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
        '<platform version="4.1">\n'
        f'  <cluster id="c" prefix="node-" suffix="" radical="0-{NODES - 1}" speed="1Gf" '
        f'bw="{bandwidth}" lat="10us"/>\n'
        "</platform>\n"
    )
    hosts = directory / "hosts"
    hosts.write_text("".join(f"node-{n}\n" for n in range(NODES)))
    return xml, hosts


@pytest.fixture(scope="module")
def smpi_jacobi(tmp_path_factory) -> Path:
    build = tmp_path_factory.mktemp("smpi-stencil")
    for source in STENCIL.iterdir():
        if source.suffix in (".c", ".h") or source.name == "Makefile":
            shutil.copy(source, build)
    subprocess.run(
        ["make", "-s", "CC=python3 -m perfcast build --smpi -- smpicc"],
        cwd=build,
        check=True,
        capture_output=True,
    )
    return build / "jacobi"


def simulate(program: Path, ranks: int, bandwidth: str, directory: Path) -> Path:
    xml, hosts = platform(directory, bandwidth)
    profiles = directory / f"p{ranks}-{bandwidth}"
    subprocess.run(
        ["smpirun", "-np", str(ranks), "-platform", str(xml), "-hostfile", str(hosts),
         "--cfg=smpi/host-speed:1Gf", "--cfg=smpi/bw-factor:0:1", "--cfg=smpi/lat-factor:0:1",
         str(program), str(SIZE), str(ITERATIONS)],
        env={**os.environ, "PERFCAST_PROFILE_DIR": str(profiles)},
        check=True,
        capture_output=True,
    )  # fmt: skip
    return profiles


def inclusive(profiles: Path, rank: int, callpath: str) -> int:
    return read_rank_profile(profiles / f"rank-{rank}.pcprof").callpaths[callpath].inclusive_ns


def fastest_sweep(program: Path, ranks: int, bandwidth: str, directory: Path) -> list[int]:
    """Each rank's sweep time, the least of three simulations. SMPI charges a compute burst
    with the CPU time it really took here, so a sweep of a few milliseconds shares this
    machine's noise (another process on the core, a cold cache); the least of three is
    the sweep's own cost, which is what the platform should not change."""
    runs = []
    for repetition in range(3):
        where = directory / f"sweep-{ranks}-{bandwidth}-{repetition}"
        where.mkdir()
        runs.append(simulate(program, ranks, bandwidth, where))
    return [min(inclusive(run, rank, "main->sweep") for run in runs) for rank in range(ranks)]


@needs_simgrid
def test_every_rank_writes_its_profile_on_the_simulated_clock(smpi_jacobi, tmp_path):
    profiles = simulate(smpi_jacobi, NODES, "10GBps", tmp_path)
    ranks = check_run(
        [read_rank_profile(profiles / f"rank-{r}.pcprof") for r in range(NODES)], profiles
    )
    assert sorted(profile.rank for profile in ranks) == list(range(NODES))
    assert {profile.ranks for profile in ranks} == {NODES}
    exp = read_profiles(profiles, {"p": NODES})
    assert "main->sweep" in exp.callpaths and HALO in exp.callpaths
    for profile in ranks:
        assert profile.callpaths["main->sweep"].visits == ITERATIONS
        assert profile.callpaths[HALO].visits == 2 * ITERATIONS
    # weak scaling: each rank sweeps the same block, so its time is that of one rank alone
    (alone,) = fastest_sweep(smpi_jacobi, 1, "10GBps", tmp_path)
    for sweep in fastest_sweep(smpi_jacobi, NODES, "10GBps", tmp_path):
        assert sweep == pytest.approx(alone, rel=0.3)


@needs_simgrid
def test_halving_the_bandwidth_slows_the_halo_exchange_not_the_sweep(smpi_jacobi, tmp_path):
    # a slow network, so that moving the halo (1.5 kB a message) outweighs the latency and
    # the waits for neighbours whose sweep took longer
    fast = simulate(smpi_jacobi, NODES, "20MBps", tmp_path)
    slow = simulate(smpi_jacobi, NODES, "10MBps", tmp_path)
    for rank in range(NODES):
        assert inclusive(slow, rank, HALO) > 1.3 * inclusive(fast, rank, HALO)
    fast_sweeps = fastest_sweep(smpi_jacobi, NODES, "20MBps", tmp_path)
    slow_sweeps = fastest_sweep(smpi_jacobi, NODES, "10MBps", tmp_path)
    assert slow_sweeps == pytest.approx(fast_sweeps, rel=0.3)


def test_smpi_wrappers_need_smpi_and_smpi_needs_them():
    with pytest.raises(PerfcastError, match="give --smpi"):
        wrap(["smpicc", "-c", "app.c"])
    with pytest.raises(PerfcastError, match="smpicc"):
        wrap(["mpicc", "-c", "app.c"], BuildOptions(smpi=True))


@needs_simgrid
def test_basic_block_counters_count_exactly_in_every_ranks_copy_of_the_program(tmp_path):
    """--counters under SMPI: each rank's dlopen copy of the program has its own coverage
    guards and its own runtime, so each counts its own blocks: sweep's count is the
    stencil README's exact formula on every rank."""
    build = tmp_path / "build"
    build.mkdir()
    for source in STENCIL.iterdir():
        if source.suffix in (".c", ".h") or source.name == "Makefile":
            shutil.copy(source, build)
    subprocess.run(
        ["make", "-s", "CC=python3 -m perfcast build --smpi --counters -- smpicc"],
        cwd=build, check=True, capture_output=True,
    )  # fmt: skip
    size, iterations = 48, 7
    xml, hosts = platform(tmp_path, "10GBps")
    profiles = tmp_path / "counted"
    subprocess.run(
        ["smpirun", "-np", str(NODES), "-platform", str(xml), "-hostfile", str(hosts),
         "--cfg=smpi/host-speed:1Gf", str(build / "jacobi"), str(size), str(iterations)],
        env={**os.environ, "PERFCAST_PROFILE_DIR": str(profiles)},
        check=True, capture_output=True,
    )  # fmt: skip
    for rank in range(NODES):
        sweep = read_rank_profile(profiles / f"rank-{rank}.pcprof").callpaths["main->sweep"]
        assert sweep.basic_blocks == iterations * (size * size + 2 * size + 3)


@needs_simgrid
def test_smpi_link_runs_clang_with_smpiccs_additions_and_the_runtime():
    wrapped = wrap(["smpicc", "-O2", "app.c", "-o", "app"], BuildOptions(smpi=True))
    assert Path(wrapped.argv[0]).name == "clang-16"
    assert "-shared" in wrapped.argv and "-fxray-instrument" in wrapped.argv
    assert any(Path(a).name.startswith("smpi-perfcast_mpi-") for a in wrapped.argv)
    assert any(Path(a).name.startswith("libperfcast_xray_shared-") for a in wrapped.argv)


@needs_simgrid
def test_without_a_program_copy_per_rank_no_mixed_profile_is_written(smpi_jacobi, tmp_path):
    xml, hosts = platform(tmp_path, "10GBps")
    profiles = tmp_path / "shared"
    done = subprocess.run(
        ["smpirun", "-np", "2", "-platform", str(xml), "-hostfile", str(hosts),
         "--cfg=smpi/privatization:no", str(smpi_jacobi), "16", "3"],
        env={**os.environ, "PERFCAST_PROFILE_DIR": str(profiles)},
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert "smpi/privatization:no" in done.stderr
    assert not profiles.exists()


WORK_BEFORE_INIT = r"""
#include <mpi.h>
__attribute__((noinline)) double setup(void)
{
    volatile double x = 0;
    for (long i = 0; i < 20000000; i++) x += 0.5;
    return x;
}
int main(int argc, char **argv)
{
    double x = setup();
    MPI_Init(&argc, &argv);
    MPI_Finalize();
    return x < 0;
}
"""


@needs_simgrid
def test_no_call_path_outlasts_main_however_smpi_charged_the_bursts(tmp_path):
    """SMPI charges nothing before MPI_Init (nor bursts below smpi/cpu-threshold), so the
    simulated clock after a call can stand before the rank's reading at its start: a time
    that went back wrapped to about 1.8e19 ns (LULESH's MPI_Init). Readings never go back."""
    (tmp_path / "early.c").write_text(WORK_BEFORE_INIT)
    subprocess.run(
        ["python3", "-m", "perfcast", "build", "--smpi", "--", "smpicc", "-O1", "early.c",
         "-o", "early"],
        cwd=tmp_path, check=True, capture_output=True,
    )  # fmt: skip
    xml, hosts = platform(tmp_path, "10GBps")
    subprocess.run(
        ["smpirun", "-np", "1", "-platform", str(xml), "-hostfile", str(hosts),
         "--cfg=smpi/host-speed:1Gf", str(tmp_path / "early")],
        env={**os.environ, "PERFCAST_PROFILE_DIR": str(tmp_path / "profiles")},
        check=True, capture_output=True,
    )  # fmt: skip
    paths = read_rank_profile(tmp_path / "profiles" / "rank-0.pcprof").callpaths
    main = paths["main"].inclusive_ns
    assert 0 < main < 10**11
    assert all(path.inclusive_ns <= main for path in paths.values())
    assert paths["main->MPI_Init"].inclusive_ns < main
