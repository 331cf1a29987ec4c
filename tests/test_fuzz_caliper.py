"""Property-based: damaged Caliper profiles are one message naming the file, never a
traceback or a hang (issue 27's fuzz suites for the newer surfaces).

Seeds are thicket's real LULESH profiles (``../shared/data/caliper/mpi_scaling_cali``); a
case damages one of the five, at the byte level (flips, inserts, deletions, truncation)
or at the record level (a ``__rec=`` line deleted, duplicated, or one of its fields given
another value, a number of another size or type), and reads the set as ``perfcast model
DIR --parameters jobsize`` does. ``python3 tests/test_fuzz_caliper.py N`` counts distinct
crash sites over N cases instead of failing.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfcast.errors import PerfcastError
from perfcast.experiment import read_experiment

try:
    from fuzz_helpers import case_settings, census, time_limit
except ImportError:  # run as a script from the repository root
    sys.path.insert(0, str(Path(__file__).parent))
    from fuzz_helpers import case_settings, census, time_limit

SET = Path(__file__).resolve().parents[2] / "shared" / "data" / "caliper" / "mpi_scaling_cali"
SEEDS = sorted(SET.glob("*.cali")) if SET.is_dir() else []
CASE_SECONDS = 10.0
HOSTILE_VALUES = ("", "-1", "nan", "inf", "1e999", "9" * 400, "x=y", "\u00e9", ",", "=")

pytestmark = pytest.mark.skipif(not SEEDS, reason=f"shared Caliper data not found at {SET}")


@st.composite
def damaged(draw: st.DrawFn) -> tuple[str, bytes]:
    """One seed's name and its damaged bytes."""
    seed = draw(st.sampled_from(SEEDS))
    data = bytearray(seed.read_bytes())
    kind = draw(st.sampled_from(["bytes", "truncate", "records"]))
    if kind == "truncate":
        return seed.name, bytes(data[: draw(st.integers(0, len(data)))])
    if kind == "bytes":
        for _ in range(draw(st.integers(1, 8))):
            at = draw(st.integers(0, len(data) - 1))
            action = draw(st.sampled_from(["flip", "insert", "delete"]))
            if action == "flip":
                data[at] = draw(st.integers(0, 255))
            elif action == "insert":
                data[at:at] = draw(st.binary(min_size=1, max_size=8))
            else:
                del data[at : at + draw(st.integers(1, 16))]
        return seed.name, bytes(data)
    lines = bytes(data).decode().splitlines()
    for _ in range(draw(st.integers(1, 4))):
        number = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["delete", "duplicate", "field"]))
        if action == "delete":
            del lines[number]
        elif action == "duplicate":
            lines.insert(number, lines[number])
        else:
            fields = lines[number].split(",")
            at = draw(st.integers(0, len(fields) - 1))
            key, _, _ = fields[at].partition("=")
            fields[at] = f"{key}={draw(st.sampled_from(HOSTILE_VALUES))}"
            lines[number] = ",".join(fields)
    return seed.name, ("\n".join(lines) + "\n").encode()


def run_case(name: str, data: bytes, directory: Path) -> str:
    """Read the set with one profile damaged; only PerfcastErrors may escape."""
    case = directory / "set"
    if case.exists():
        shutil.rmtree(case)
    case.mkdir()
    for seed in SEEDS:
        (case / seed.name).write_bytes(data if seed.name == name else seed.read_bytes())
    with time_limit(CASE_SECONDS), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            read_experiment(case, parameters="jobsize")
        except PerfcastError as error:
            assert str(case) in str(error), f"the message names no file of the set: {error}"
            return "refused"
    return "read"


WORKDIR = tempfile.TemporaryDirectory(prefix="perfcast-fuzz-caliper-")


@pytest.mark.slow
@case_settings(300)
@given(damaged())
def test_damaged_caliper_profiles_raise_only_perfcast_errors(case: tuple[str, bytes]) -> None:
    run_case(*case, Path(WORKDIR.name))


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    census(damaged(), lambda case: run_case(case[0], case[1], Path(WORKDIR.name)), count)
