"""Property-based: ``perfcast static`` given a damaged binary or a hostile C source ends with
a model or one line naming the file, never a traceback, a hang or NumPy's RuntimeWarning
(issue 27's fuzz suites for the newer surfaces: ELF input and C sources to ``static``).

Seed: one program of loop nests, annotated loops and a triangular loop
(``tests/test_static.py``'s NESTS and ANNOTATED, with a ``main``), built with ``-g -O2``.
An ELF case damages the binary (bytes flipped, a range zeroed, truncation) and models the
intact source; a source case damages the source (bytes flipped, truncation; a line
deleted or duplicated; a number made empty, negative, huge or beyond 64 bits; a line from a
pool: an include of ``/dev/zero``, a broken or hostile annotation, deep parentheses, a NUL,
a byte that is not UTF-8) and models it against the intact binary. Each case runs
``perfcast static SOURCE --binary BINARY -o model.py`` in-process.
``python3 tests/test_fuzz_static.py N`` counts distinct crash sites over N cases of each.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("islpy")
pytest.importorskip("clang.cindex")
pytest.importorskip("elftools")


try:
    from fuzz_helpers import case_settings, census, run_cli
    from test_static import ANNOTATED, NESTS
except ImportError:  # run as a script from the repository root
    sys.path.insert(0, str(Path(__file__).parent))
    from fuzz_helpers import case_settings, census, run_cli
    from test_static import ANNOTATED, NESTS

CLANG = shutil.which("clang-16") or shutil.which("clang")
SOURCE = (
    NESTS
    + ANNOTATED
    + """\
int pick(int x) { return x % 7; }
double tri(int n) {
    double s = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            s += i * 0.5 + j;
    return s;
}
int main(int argc, char **argv) {
    double a[64] = {0};
    int lo[4] = {0, 1, 2, 3}, hi[4] = {4, 5, 6, 7};
    nests(argc * 8, argc * 4, a);
    annotated(4, lo, hi, a, argc);
    return (int) tri(argc * 10) + (int) a[3];
}
"""
)
LINES = (
    '#include "/dev/zero"',
    '#include "/etc/passwd"',
    "#pragma @Annotation {lp_init:x, lp_cond:",
    "#pragma @Annotation {lp_iters:" + "w" * 5000 + "}",
    '#pragma @Annotation {lp_iters:"""+__import__("os").system("true")+"""}',
    "#pragma @Annotation {skip:yes}",
    "int deep = " + "(" * 3000 + "1" + ")" * 3000 + ";",
    "for (long i = 0; i < 9223372036854775807; i += 0) {}",
    "\x00",
    "\u00e9\u202e",
    "}",
    "{",
)
NUMBERS = ("", "-1", "0", "9" * 40, "1e400", "0x7fffffffffffffff", "18446744073709551616")
NUMBER = re.compile(rb"\b\d+\b")
CASE_SECONDS = 60.0
WORKDIR = tempfile.TemporaryDirectory(prefix="perfcast-fuzz-static-")
CASE = Path(WORKDIR.name) / "case"


@functools.cache
def pristine() -> tuple[bytes, bytes]:
    """The seed's source and binary, built once where every case runs: the binary's debug
    information names the source by its path, so a case's source must sit there too."""
    assert CLANG is not None
    CASE.mkdir(parents=True, exist_ok=True)
    source, binary = CASE / "app.c", CASE / "app"
    source.write_text(SOURCE)
    subprocess.run([CLANG, "-g", "-O2", str(source), "-o", str(binary)], check=True)
    return source.read_bytes(), binary.read_bytes()


@st.composite
def damaged_binary(draw: st.DrawFn) -> tuple[str, bytes]:
    data = bytearray(pristine()[1])
    kind = draw(st.sampled_from(["bytes", "zero", "truncate"]))
    if kind == "truncate":
        return "binary", bytes(data[: draw(st.integers(0, len(data)))])
    if kind == "zero":
        start = draw(st.integers(0, len(data) - 1))
        end = min(len(data), start + draw(st.integers(1, 4096)))
        data[start:end] = bytes(end - start)
        return "binary", bytes(data)
    for _ in range(draw(st.integers(1, 20))):
        data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    return "binary", bytes(data)


@st.composite
def damaged_source(draw: st.DrawFn) -> tuple[str, bytes]:
    data = bytearray(SOURCE.encode())
    kind = draw(st.sampled_from(["bytes", "truncate", "lines", "lines", "number"]))
    if kind == "truncate":
        return "source", bytes(data[: draw(st.integers(0, len(data)))])
    if kind == "bytes":
        for _ in range(draw(st.integers(1, 6))):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        return "source", bytes(data)
    if kind == "number":
        spans = list(NUMBER.finditer(bytes(data)))
        span = draw(st.sampled_from(spans))
        value = draw(st.sampled_from(NUMBERS)).encode()
        return "source", bytes(data[: span.start()] + value + data[span.end() :])
    lines = SOURCE.splitlines()
    for _ in range(draw(st.integers(1, 3))):
        number = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["delete", "duplicate", "insert", "insert"]))
        if action == "delete":
            del lines[number]
        elif action == "duplicate":
            lines.insert(number, lines[number])
        else:
            lines.insert(number, draw(st.sampled_from(LINES)))
    return "source", ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")


def run_case(which: str, data: bytes) -> str:
    """Model the seed with its source or its binary replaced by ``data``."""
    source, binary = pristine()
    case_source, case_binary = CASE / "app.c", CASE / "app"
    case_source.write_bytes(data if which == "source" else source)
    case_binary.write_bytes(data if which == "binary" else binary)
    model = CASE / "model.py"
    model.unlink(missing_ok=True)
    argv = ["static", str(case_source), "--binary", str(case_binary), "-o", str(model)]
    status, said = run_cli(argv, CASE_SECONDS)
    if status == 0:
        return "modeled"
    # the file at fault: the source, the binary, or a file the source includes
    named = any(str(p) in said for p in (case_source, case_binary, "/etc/passwd"))
    assert status == 2 and named, f"the message names no file: {said}"
    return "refused"


needs_clang = pytest.mark.skipif(CLANG is None, reason="clang is not installed")


@needs_clang
@pytest.mark.slow
@case_settings(30)
@given(damaged_binary())
def test_damaged_binaries_are_a_model_or_one_line(case: tuple[str, bytes]) -> None:
    run_case(*case)


@needs_clang
@pytest.mark.slow
@case_settings(30)
@given(damaged_source())
def test_hostile_sources_are_a_model_or_one_line(case: tuple[str, bytes]) -> None:
    run_case(*case)


@needs_clang
@pytest.mark.long
@case_settings(500)
@given(st.one_of(damaged_binary(), damaged_source()))
def test_static_inputs_long(case: tuple[str, bytes]) -> None:
    run_case(*case)


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    for strategy in (damaged_binary(), damaged_source()):
        census(strategy, lambda c: run_case(*c), count)
