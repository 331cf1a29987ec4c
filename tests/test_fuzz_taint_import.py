"""Property-based: damaged perf-taint result files are one message naming the file, never a
traceback, a hang or NumPy's RuntimeWarning, when imported (issue 27's fuzz suites for the
newer surfaces).

Seeds: the run output and the JSONConverter output of ``tests/test_taint_import.py``'s
program (loop trees, call references, composed ``deps``). A case damages one at the JSON
level (a value replaced by another type, a 400- or 5,000-digit number, NaN, deep nesting;
a key deleted or duplicated; a value wrapped; ``tests/test_fuzz_readers.py``'s edits) or
at the byte level (flips, truncation), then runs ``perfcast taint import FILE -o OUT``.
``python3 tests/test_fuzz_taint_import.py N`` counts distinct crash sites over N cases.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import perfcast.cli as cli

try:
    from fuzz_helpers import case_settings, census, numpy_warnings_fail, time_limit
    from test_fuzz_readers import dump, json_edit, load
    from test_taint_import import converted, run_output
except ImportError:  # run as a script from the repository root
    sys.path.insert(0, str(Path(__file__).parent))
    from fuzz_helpers import case_settings, census, numpy_warnings_fail, time_limit
    from test_fuzz_readers import dump, json_edit, load
    from test_taint_import import converted, run_output

SEEDS = (json.dumps(run_output()), json.dumps(converted()))
CASE_SECONDS = 20.0


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    text = draw(st.sampled_from(SEEDS))
    kind = draw(st.sampled_from(["json", "json", "bytes", "truncate"]))
    if kind == "json":
        return dump(draw(json_edit(load(text)))).encode()
    data = bytearray(text.encode())
    if kind == "truncate":
        return bytes(data[: draw(st.integers(0, len(data)))])
    for _ in range(draw(st.integers(1, 6))):
        data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    return bytes(data)


def run_case(data: bytes, directory: Path) -> str:
    source = directory / "app_0.json"
    source.write_bytes(data)
    out = directory / "profile.json"
    out.unlink(missing_ok=True)
    error = io.StringIO()
    with (
        time_limit(CASE_SECONDS),
        numpy_warnings_fail(),
        contextlib.redirect_stderr(error),
        contextlib.redirect_stdout(io.StringIO()),
    ):
        status = cli.main(["taint", "import", str(source), "-o", str(out)])
    said = error.getvalue()
    if status == 0:
        assert out.is_file(), said
        return "imported"
    assert status == 2 and str(source) in said, f"the message does not name the file: {said}"
    return "refused"


WORKDIR = tempfile.TemporaryDirectory(prefix="perfcast-fuzz-taint-import-")


@pytest.mark.slow
@case_settings(300)
@given(damaged())
def test_damaged_perftaint_files_are_one_line_errors(case: bytes) -> None:
    run_case(case, Path(WORKDIR.name))


@pytest.mark.long
@case_settings(3000)
@given(damaged())
def test_damaged_perftaint_files_long(case: bytes) -> None:
    run_case(case, Path(WORKDIR.name))


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    census(damaged(), lambda case: run_case(case, Path(WORKDIR.name)), count)
