"""Property-based: damaged SimGrid platform files are one message naming the file, never a
traceback or a hang (issue 27's fuzz suites for the newer surfaces).

Seeds: the platforms ``perfcast platform describe`` writes (a flat cluster with SMPI
factors in its ``<config>``, a two-level fat tree, two clusters joined by a slow link). A
case damages one at the byte level (flips, truncation) or at the attribute level (a value
replaced by an empty, negative, huge, non-finite or non-ASCII one, or an element
duplicated), then reads it as ``perfcast simulate --platform FILE`` does.
``python3 tests/test_fuzz_platforms.py N`` counts distinct crash sites over N cases.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfcast.errors import PerfcastError
from perfcast.simulate.platform import PlatformSpec, read_platform

try:
    from fuzz_helpers import case_settings, census, numpy_warnings_fail, time_limit
except ImportError:  # run as a script from the repository root
    sys.path.insert(0, str(Path(__file__).parent))
    from fuzz_helpers import case_settings, census, numpy_warnings_fail, time_limit

SEEDS = (
    PlatformSpec(
        "flat", nodes=8, cores=4, config=(("smpi/bw-factor", "0:0.5;65536:0.9"),)
    ).to_xml(),
    PlatformSpec("tree", nodes=16, cores=2, topology="fat-tree").to_xml(),
    PlatformSpec("two", nodes=8, topology="two-clusters", inter_bandwidth=1e8).to_xml(),
)
VALUES = ("", "-1", "nan", "inf", "1e400", "9" * 400, "\u00e9", "0", "1Gf", "x:1-99999999")
ATTRIBUTE = re.compile(r'="[^"]*"')
CASE_SECONDS = 10.0


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    text = draw(st.sampled_from(SEEDS))
    kind = draw(st.sampled_from(["bytes", "truncate", "attribute", "duplicate"]))
    data = bytearray(text.encode())
    if kind == "truncate":
        return bytes(data[: draw(st.integers(0, len(data)))])
    if kind == "bytes":
        for _ in range(draw(st.integers(1, 6))):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        return bytes(data)
    lines = text.splitlines()
    number = draw(st.integers(0, len(lines) - 1))
    if kind == "duplicate":
        lines.insert(number, lines[number])
    else:
        spans = list(ATTRIBUTE.finditer(lines[number]))
        if spans:
            span = draw(st.sampled_from(spans))
            value = draw(st.sampled_from(VALUES))
            lines[number] = (
                lines[number][: span.start()] + f'="{value}"' + lines[number][span.end() :]
            )
    return "\n".join(lines).encode()


def run_case(data: bytes, directory: Path) -> str:
    path = directory / "platform.xml"
    path.write_bytes(data)
    with time_limit(CASE_SECONDS), numpy_warnings_fail():
        try:
            read_platform(path)
        except PerfcastError as error:
            assert str(path) in str(error), f"the message does not name the file: {error}"
            return "refused"
    return "read"


WORKDIR = tempfile.TemporaryDirectory(prefix="perfcast-fuzz-platforms-")


@pytest.mark.slow
@case_settings(400)
@given(damaged())
def test_damaged_platform_files_raise_only_perfcast_errors(case: bytes) -> None:
    run_case(case, Path(WORKDIR.name))


@pytest.mark.long
@case_settings(4000)
@given(damaged())
def test_damaged_platform_files_long(case: bytes) -> None:
    run_case(case, Path(WORKDIR.name))


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    census(damaged(), lambda case: run_case(case, Path(WORKDIR.name)), count)
