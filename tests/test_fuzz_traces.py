"""Property-based: damaged traces are one message naming a file (or, for a structure
synthesis cannot follow, the ranks and actions), never a traceback or a hang, when read
and synthesised (issue 27's fuzz suites for the newer surfaces).

Seeds: the traces of a known ring program at 3, 4 and 6 ranks, as a traced run leaves them
(``tests/test_simulate_synthesis.py``'s writer). A case damages one file of one of them —
a rank's actions, its blocks file or ``trace.json`` — at the byte level (flips, inserts,
deletions, truncation) or at the line level (a line deleted, duplicated, or one word given
an empty, negative, huge, non-finite or non-ASCII value), then reads the three traces and
synthesises 16 ranks as ``perfcast simulate T1 T2 T3 --synthesize 16`` does.
``python3 tests/test_fuzz_traces.py N`` counts distinct crash sites over N cases.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfcast.errors import PerfcastError
from perfcast.simulate.synthesis import synthesize
from perfcast.simulate.trace import read_trace

try:
    from fuzz_helpers import case_settings, census, numpy_warnings_fail, time_limit
    from test_simulate_synthesis import chain, write_trace
except ImportError:  # run as a script from the repository root
    sys.path.insert(0, str(Path(__file__).parent))
    from fuzz_helpers import case_settings, census, numpy_warnings_fail, time_limit
    from test_simulate_synthesis import chain, write_trace

COUNTS = (3, 4, 6)
CASE_SECONDS = 20.0
HOSTILE_WORDS = ("", "-1", "nan", "inf", "1e400", "9" * 40, "\u00e9", "0x10", "1.5", "{", "]")


def seeds(directory: Path) -> list[Path]:
    return [write_trace(directory / f"p{p}", p, chain) for p in COUNTS]


@st.composite
def damage(draw: st.DrawFn) -> tuple[int, str, bytes]:
    """Which trace (index), which of its files, and the damaged bytes."""
    scratch = Path(tempfile.mkdtemp(prefix="perfcast-fuzz-seed-"))
    try:
        traces = seeds(scratch)
        which = draw(st.integers(0, len(traces) - 1))
        files = sorted(p.name for p in traces[which].iterdir())
        name = draw(st.sampled_from(files))
        data = bytearray((traces[which] / name).read_bytes())
    finally:
        shutil.rmtree(scratch)
    kind = draw(st.sampled_from(["bytes", "truncate", "lines"]))
    if kind == "truncate":
        return which, name, bytes(data[: draw(st.integers(0, len(data)))])
    if kind == "bytes" and data:
        for _ in range(draw(st.integers(1, 6))):
            at = draw(st.integers(0, len(data) - 1))
            data[at] = draw(st.integers(0, 255))
        return which, name, bytes(data)
    lines = bytes(data).decode().splitlines() or [""]
    for _ in range(draw(st.integers(1, 3))):
        number = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["delete", "duplicate", "word"]))
        if action == "delete":
            del lines[number]
            lines = lines or [""]
        elif action == "duplicate":
            lines.insert(number, lines[number])
        else:
            words = lines[number].split(" ")
            words[draw(st.integers(0, len(words) - 1))] = draw(st.sampled_from(HOSTILE_WORDS))
            lines[number] = " ".join(words)
    return which, name, ("\n".join(lines) + "\n").encode()


def run_case(which: int, name: str, data: bytes, directory: Path) -> str:
    """Read the three traces, one file damaged, and synthesise 16 ranks."""
    if directory.exists():
        shutil.rmtree(directory)
    traces = seeds(directory)
    (traces[which] / name).write_bytes(data)
    with time_limit(CASE_SECONDS), numpy_warnings_fail():
        try:
            synthesize([read_trace(t) for t in traces], 16, directory / "out")
        except PerfcastError as error:
            message = str(error)
            # a refusal of the traces' structure names the ranks and actions, not one file
            named = str(directory) in message or message.startswith("cannot synthesise")
            assert named, f"the message names no file: {error}"
            return "refused"
    return "synthesised"


WORKDIR = tempfile.TemporaryDirectory(prefix="perfcast-fuzz-traces-")


@pytest.mark.slow
@case_settings(150)
@given(damage())
def test_damaged_traces_raise_only_perfcast_errors(case: tuple[int, str, bytes]) -> None:
    run_case(*case, Path(WORKDIR.name) / "case")


@pytest.mark.long
@case_settings(1500)
@given(damage())
def test_damaged_traces_long(case: tuple[int, str, bytes]) -> None:
    run_case(*case, Path(WORKDIR.name) / "case")


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    census(damage(), lambda c: run_case(c[0], c[1], c[2], Path(WORKDIR.name) / "case"), count)
