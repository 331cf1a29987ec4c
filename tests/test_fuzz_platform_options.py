"""Property-based: ``perfcast platform describe`` and ``platform calibrate`` given hostile
options end with their platform written or one line ``perfcast platform: error: ...``,
never a traceback, a hang, NumPy's RuntimeWarning or a file written outside the output
named; ``calibrate`` refuses every option that would refuse its result before it measures
(issue 27: ``describe --cores 100000000000`` was accepted, then a MemoryError; a host id
``a:100000000``; ``calibrate --repetitions 1000000000``; a bad ``-o`` or ``--name`` found
only after a minute of measuring).

A case draws options from ``tests/test_fuzz_options.py``'s pools of edges (zero, negative,
huge, beyond 64 bits, non-finite, empty, not a number, non-ASCII; counts at their bounds),
names (empty, 300 characters, a host id ``a:100000000``, names that would run code if
evaluated or expanded) and ``-o`` paths: too long, under a file, a dangling link, a
directory, an existing file that is not perfcast's. A ``describe`` that succeeds must have
written a platform that reads back with every host and finite, positive numbers.

``calibrate`` runs with its measurement (``mpirun`` of the ping-pong) replaced by a stub
that notes it was reached and returns a plausible curve; the rest, the fit, the platform
and its check replayed by SimGrid's ``smpirun``, is real. A case that reached measuring and
was then refused fails the property. ``python3 tests/test_fuzz_platform_options.py N``
counts distinct crash sites over N cases of each verb.
"""

from __future__ import annotations

import contextlib
import math
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import perfcast.simulate.calibrate as calibration
from perfcast.simulate.platform import read_platform

try:
    from fuzz_helpers import case_settings, census
    from test_fuzz_options import NUMBERS, run_case
except ImportError:  # run as a script from the repository root
    sys.path.insert(0, str(Path(__file__).parent))
    from fuzz_helpers import case_settings, census
    from test_fuzz_options import NUMBERS, run_case

COUNTS = (*NUMBERS, "1000000", "1000001", "1048576", "100000000000", "4", "2", "2")
"""Counts at their bounds: a million nodes, 2^20 ranks, and one past each."""
FLOATS = (*NUMBERS, "1e-6", "1.25e9", "1e307", "-0", "1e-320")
CODE_NAMES = (
    "$(touch MARK)",
    "`touch MARK`",
    '"""+__import__("os").system("touch MARK")+"""',
    "';touch MARK;'",
    '{__import__("os").system("touch MARK")}',
)
"""Names that run ``touch MARK`` if a shell expands them or Python evaluates them."""
NAMES = ("target", "", "-", "a b", "a:100000000", "x" * 300, "\u00e9t\u00e9", "a\nb", *CODE_NAMES)
OUTPUTS = ("FILE", "DIR", "DANGLING", "UNDER_FILE", "x" * 300, "y" * 255, ".", "", "FOREIGN")
"""``-o`` at its edges; FOREIGN is an existing file that is not perfcast's (``FILE`` too)."""
DESCRIBE_FLOATS = (
    "--speed", "--speed-factor", "--bandwidth", "--latency", "--backbone-bandwidth",
    "--inter-bandwidth", "--inter-latency",
)  # fmt: skip
SIZES = ("1 2", "1 4096", "0 1", "1", "1 1", "1073741824 1073741825", "-1 8", "1 1e3", "")


def _edge(draw: st.DrawFn, pool: Sequence[str], usual: str) -> str:
    """``usual`` half the time, so that a case reaches past its first option."""
    return usual if draw(st.booleans()) else draw(st.sampled_from(pool))


def _output(draw: st.DrawFn) -> str:
    """A new output half the time, so that the other options are reached."""
    return "new" if draw(st.booleans()) else draw(st.sampled_from(OUTPUTS))


@st.composite
def describe_options(draw: st.DrawFn) -> list[str]:
    argv = ["platform", "describe", "-o", _output(draw)]
    argv.append(f"--nodes={_edge(draw, COUNTS, '4')}")
    if draw(st.booleans()):
        argv.append(f"--cores={_edge(draw, COUNTS, '2')}")
    if draw(st.booleans()):
        argv.append(f"--name={_edge(draw, NAMES, 'target')}")
    if draw(st.booleans()):
        topology = draw(st.sampled_from(("flat", "fat-tree", "two-clusters", "two-clusters", "")))
        argv.append(f"--topology={topology}")
    for option in draw(st.lists(st.sampled_from(DESCRIBE_FLOATS), max_size=3, unique=True)):
        argv.append(f"{option}={_edge(draw, FLOATS, '2e9')}")
    return argv


@st.composite
def calibrate_options(draw: st.DrawFn) -> list[str]:
    argv = ["platform", "calibrate", "-o", _output(draw)]
    if draw(st.booleans()):
        argv.append(f"--name={draw(st.sampled_from(NAMES))}")
    if draw(st.booleans()):
        argv.append(f"--cores={_edge(draw, COUNTS, '4')}")
    if draw(st.booleans()):
        argv.append(f"--repetitions={draw(st.sampled_from((*COUNTS, '10000', '10001')))}")
    sizes = draw(st.sampled_from((*SIZES, "MANY", "TOO_MANY"))) if draw(st.booleans()) else "1 2"
    if sizes in ("MANY", "TOO_MANY"):
        sizes = " ".join(str(2**i) for i in range(64 if sizes == "MANY" else 65))
    argv += ["--sizes", *sizes.split()]
    return argv


def _numbers_of(platform: Path) -> list[float]:
    """Every bandwidth, latency and speed the platform file gives, in SI units."""
    text = platform.read_text()
    found = re.findall(r'(?:bw|lat|bandwidth|latency|speed)="([^"]*?)(?:Bps|s|f)"', text)
    return [float(number) for number in found]


def run_describe(argv: list[str], directory: Path) -> str:
    """A describe case; a platform written must read back whole, with numbers SimGrid
    takes (finite and positive; a latency may be 0)."""
    ended = run_case(argv, directory)
    if ended == "done":
        output = directory / argv[argv.index("-o") + 1]  # relative: the case ran there
        described = read_platform(output)
        nodes = int(next(a for a in argv if a.startswith("--nodes=")).split("=")[1])
        cores = [int(a.split("=")[1]) for a in argv if a.startswith("--cores=")] or [1]
        assert len(described.hosts) == nodes * cores[0], argv
        numbers = _numbers_of(output)
        assert numbers and all(math.isfinite(n) and n >= 0 for n in numbers), (argv, numbers)
    return ended


@contextlib.contextmanager
def stubbed_measurement(reached: list[Sequence[int]]) -> Iterator[None]:
    """``calibrate``'s ping-pong replaced: notes the sizes asked for in ``reached`` and
    returns a curve of 1 us latency and 10 GB/s, instead of starting ``mpirun``."""

    def measure(sizes: Sequence[int], repetitions: int = 50, *_: object, **__: object) -> object:
        reached.append(tuple(sizes))
        chosen = calibration.check_sizes(sizes)
        one_way = {size: 1e-6 + size / 1e10 for size in chosen}
        return calibration.Measurement(one_way=one_way, reference_rate=4e8)

    real = calibration.measure
    calibration.measure = measure  # type: ignore[assignment]
    try:
        yield
    finally:
        calibration.measure = real


def run_calibrate(argv: list[str], directory: Path) -> str:
    """A calibrate case: done, refused before measuring, or a failed property (refused
    after measuring: the minute of measuring lost)."""
    reached: list[Sequence[int]] = []
    with stubbed_measurement(reached):
        ended = run_case(argv, directory)
    assert not reached or ended == "done", f"{argv}: refused after measuring"
    return ended


WORKDIR = tempfile.TemporaryDirectory(prefix="perfcast-fuzz-platform-options-")
needs_smpirun = pytest.mark.skipif(shutil.which("smpirun") is None, reason="needs SimGrid")


@pytest.mark.slow
@case_settings(80)
@given(describe_options())
def test_hostile_describe_options_are_one_line_errors(argv: list[str]) -> None:
    run_describe(argv, Path(WORKDIR.name) / "case")


@pytest.mark.slow
@needs_smpirun
@case_settings(40)
@given(calibrate_options())
def test_calibrate_refuses_hostile_options_before_measuring(argv: list[str]) -> None:
    run_calibrate(argv, Path(WORKDIR.name) / "case")


@pytest.mark.long
@needs_smpirun
@case_settings(1000)
@given(st.one_of(describe_options(), calibrate_options()))
def test_hostile_platform_options_long(argv: list[str]) -> None:
    run = run_describe if argv[1] == "describe" else run_calibrate
    run(argv, Path(WORKDIR.name) / "case")


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    census(describe_options(), lambda a: run_describe(a, Path(WORKDIR.name) / "case"), count)
    census(calibrate_options(), lambda a: run_calibrate(a, Path(WORKDIR.name) / "case"), count)
