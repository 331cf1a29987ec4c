"""``perfcast platform calibrate``: this machine as a SimGrid platform, checked against the
real Open MPI ping-pong and the real SimGrid (``smpirun``).

The central check: a hand-written ping-pong trace replayed on the calibrated platform takes
as long per message as the measured ping-pong did, at small, medium and large sizes (the
calibration reaches 0.0 % here; asserted within 2 %, the issue's target is 10 %). It holds
only if the fit knows how SMPI times a message (the 16-byte envelope, the route's two links,
the factor breakpoints) and the factors travel in the file without the replay's neutral
factors overriding them.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perfcast import cli
from perfcast.errors import InputError
from perfcast.measure.local import available_cores
from perfcast.simulate.calibrate import (
    REFERENCE_RATE_PROPERTY,
    Calibration,
    calibrate,
    fit,
    measure,
)
from perfcast.simulate.platform import NEUTRAL_FACTORS, read_platform
from perfcast.simulate.replay import replay

SIZES = (1, 64, 4096, 65536, 1 << 20, 4 << 20)
"""Small (eager), medium (around the rendezvous switch) and large messages."""

needs_tools = pytest.mark.skipif(
    shutil.which("smpirun") is None or shutil.which("mpirun") is None,
    reason="needs SimGrid's smpirun and Open MPI's mpirun",
)


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Calibration, Path]:
    """One calibration of this machine on a few sizes, and its platform file."""
    result = calibrate(sizes=SIZES, repetitions=10, compute_steps=10_000_000)
    path = tmp_path_factory.mktemp("calibrated") / "local.xml"
    path.write_text(result.platform.to_xml())
    return result, path


def pingpong_trace(directory: Path, size: int, round_trips: int) -> Path:
    """The index of a two-rank trace: ``round_trips`` round trips of ``size`` MPI_BYTEs."""
    directory.mkdir()
    ping = f"0 send 1 0 {size} 6\n0 recv 1 0 {size} 6\n" * round_trips
    pong = f"1 recv 0 0 {size} 6\n1 send 0 0 {size} 6\n" * round_trips
    (directory / "rank0.txt").write_text(f"0 init\n{ping}0 finalize\n")
    (directory / "rank1.txt").write_text(f"1 init\n{pong}1 finalize\n")
    index = directory / "trace.txt"
    index.write_text("rank0.txt\nrank1.txt\n")
    return index


@pytest.mark.slow
@needs_tools
def test_the_calibrated_platform_replays_the_measured_pingpong(
    calibrated: tuple[Calibration, Path], tmp_path: Path
) -> None:
    result, path = calibrated
    platform = read_platform(path)
    for size in (64, 65536, 4 << 20):
        index = pingpong_trace(tmp_path / f"size-{size}", size, round_trips=3)
        simulated = replay(index, platform, 2).time / 6
        measured = result.measurement.one_way[size]
        assert simulated == pytest.approx(measured, rel=0.02), size
    # between two measured sizes the time lies between theirs
    index = pingpong_trace(tmp_path / "size-2048", 2048, round_trips=3)
    between = replay(index, platform, 2).time / 6
    assert result.measurement.one_way[64] < between < result.measurement.one_way[4096]
    # the command's own check replayed every measured size
    assert set(result.simulated) == set(SIZES)
    for size, measured in result.measurement.one_way.items():
        assert result.simulated[size] == pytest.approx(measured, rel=0.02), size


@pytest.mark.slow
@needs_tools
def test_the_factors_in_the_file_are_what_makes_it_fit(
    calibrated: tuple[Calibration, Path], tmp_path: Path
) -> None:
    """read_platform leaves the factors to the file; the neutral ones on the command line
    would win over it (SimGrid: "already defined by user") and lose the calibration."""
    result, path = calibrated
    platform = read_platform(path)
    assert platform.hosts == tuple(f"node-{core}" for core in range(available_cores()))
    assert platform.smpi_options == ()
    xml = path.read_text()
    assert '<prop id="smpi/bw-factor" value="0:' in xml
    assert f'<prop id="{REFERENCE_RATE_PROPERTY}"' in xml
    assert result.measurement.reference_rate > 1e6
    size = 4096  # the first rendezvous size here: far from the single line
    index = pingpong_trace(tmp_path / "trace", size, round_trips=3)
    calibrated_time = replay(index, platform, 2).time / 6
    neutral = dataclasses.replace(platform, smpi_options=NEUTRAL_FACTORS)
    neutral_time = replay(index, neutral, 2).time / 6
    assert calibrated_time == pytest.approx(result.measurement.one_way[size], rel=0.02)
    assert abs(neutral_time - calibrated_time) > 0.05 * calibrated_time


@pytest.mark.slow
@needs_tools
def test_calibrate_command_writes_the_platform_and_shows_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "local.xml"
    argv = ["platform", "calibrate", "-o", str(output), "--name", "here", "--cores", "3"]
    assert cli.main([*argv, "--sizes", "4096", "1", "--repetitions", "3"]) == 0
    out = capsys.readouterr().out
    assert "measured us simulated us" in out and f"wrote {output}: 3 cores" in out
    rows = [line.split() for line in out.splitlines() if line.strip().startswith(("1 ", "4096"))]
    assert [row[0] for row in rows] == ["1", "4096"]
    assert all(abs(float(row[3].rstrip("%"))) <= 2 for row in rows)
    platform = read_platform(output)
    assert platform.name == "here" and len(platform.hosts) == 3
    assert cli.main([*argv, "--sizes", "1", "2", "--repetitions", "1"]) == 0  # replaces its own


def test_a_straight_line_needs_no_factors() -> None:
    """... where the line counts the 16 bytes SMPI adds to every message."""
    one_way = {size: 2e-6 + (size + 16) / 5e9 for size in (1, 100, 10_000, 1_000_000)}
    fitted = fit(one_way)
    assert fitted.latency == pytest.approx(2e-6)
    assert fitted.bandwidth == pytest.approx(5e9)
    assert fitted.line_error < 1e-9
    assert (fitted.bw_factor, fitted.lat_factor) == ("0:1", "0:1")


def test_factors_start_at_each_measured_size() -> None:
    """SMPI looks factors up by payload (size + 16) and applies a breakpoint strictly
    above it, so the segment of a measured size s starts at s + 15; the first at 0."""
    one_way = {1: 1e-6, 1000: 1.2e-6, 2000: 40e-6}
    fitted = fit(one_way)
    assert [segment.split(":")[0] for segment in fitted.bw_factor.split(";")] == [
        "0",
        "1015",
        "2015",
    ]
    # the jump from 1000 to 2000 B passes below the origin: that segment has no latency
    assert fitted.lat_factor.split(";")[1] == "1015:0"


def test_read_platform_keeps_neutral_factors_the_file_does_not_set(tmp_path: Path) -> None:
    platform = tmp_path / "p.xml"
    body = '<zone id="z" routing="Full"><host id="h" speed="1Gf"/></zone>'
    config = '<config><prop id="smpi/bw-factor" value="0:1;1015:0.5"/></config>'
    platform.write_text(f'<platform version="4.1">{config}{body}</platform>')
    assert read_platform(platform).smpi_options == ("--cfg=smpi/lat-factor:0:1",)
    platform.write_text(f'<platform version="4.1">{body}</platform>')
    assert read_platform(platform).smpi_options == NEUTRAL_FACTORS
    for bad in ("0:1;x:2", "0:0", "0:1;1015:nan", "0:1:;", "4294967296:1"):
        config = f'<config><prop id="smpi/bw-factor" value="{bad}"/></config>'
        platform.write_text(f'<platform version="4.1">{config}{body}</platform>')
        with pytest.raises(InputError, match="smpi/bw-factor") as error:
            read_platform(platform)
        assert str(platform) in str(error.value)


def test_describe_speed_factor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "twice.xml"
    argv = ["platform", "describe", "-o", str(output), "--nodes", "2"]
    assert cli.main([*argv, "--speed-factor", "2"]) == 0
    assert set(read_platform(output).speeds.values()) == {2e9}
    assert cli.main(argv) == 0
    assert set(read_platform(output).speeds.values()) == {1e9}
    assert cli.main([*argv, "--speed-factor", "0"]) == 2
    assert "speed must be a positive finite number" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main([*argv, "--speed", "3e9", "--speed-factor", "2"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_calibrate_refuses_an_output_it_must_not_replace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Checked before anything is measured."""
    assert cli.main(["platform", "calibrate", "-o", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    assert cli.main(["platform", "calibrate", "-o", str(notes)]) == 2
    assert "exists and is not a SimGrid platform" in capsys.readouterr().err
    assert notes.read_text() == "my notes\n"
    argv = ["platform", "calibrate", "-o", str(tmp_path / "p.xml")]
    assert cli.main([*argv, "--sizes", "8"]) == 2
    assert "at least two different message sizes" in capsys.readouterr().err


@needs_tools
def test_missing_mpi_tools_say_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["platform", "calibrate", "-o", str(tmp_path / "p.xml"), "--sizes", "1", "2"]
    mpicc, mpirun = shutil.which("mpicc"), shutil.which("mpirun")
    assert mpicc is not None and mpirun is not None
    only = tmp_path / "bin"
    only.mkdir()
    (only / "mpicc").symlink_to(mpicc)
    monkeypatch.setenv("PATH", str(only))
    assert cli.main(argv) == 2
    assert "mpirun was not found on PATH: install Open MPI" in capsys.readouterr().err
    (only / "mpicc").unlink()
    (only / "mpirun").symlink_to(mpirun)
    assert cli.main(argv) == 2
    assert "mpicc was not found on PATH" in capsys.readouterr().err
    assert not (tmp_path / "p.xml").exists()


@pytest.mark.slow
@needs_tools
def test_a_failing_pingpong_quotes_mpirun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Open MPI restricted to its self transport cannot connect two ranks."""
    monkeypatch.setenv("OMPI_MCA_btl", "self")
    argv = ["platform", "calibrate", "-o", str(tmp_path / "p.xml"), "--sizes", "1", "2"]
    assert cli.main([*argv, "--repetitions", "1"]) == 2
    err = capsys.readouterr().err
    assert "the ping-pong failed (exit" in err and "mpirun" in err
    assert not (tmp_path / "p.xml").exists()


@pytest.mark.slow
@needs_tools
def test_the_compute_reference_is_the_cores_rate_however_busy_the_machine() -> None:
    """The reference rate is the fastest slice on the thread's CPU clock: two calibrations
    with a busy process competing for the cores agree, where the wall clock once gave
    rates 4.6x apart on this loaded machine."""
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        rates = [
            measure([64, 4096], repetitions=1, compute_steps=40_000_000).reference_rate
            for _ in range(2)
        ]
    finally:
        hog.kill()
        hog.wait()
    assert rates[0] == pytest.approx(rates[1], rel=0.1)
