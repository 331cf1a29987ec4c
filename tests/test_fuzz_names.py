"""Property-based, across the commands: a name is data and an output never replaces the
user's file (issue 27's "code run" and "overwritten" columns, classes 1 and 5).

**Code run.** A case gives one command names that run ``touch MARK`` if a shell expands
them or Python evaluates them (``$(touch MARK)``, backquotes, a triple quote closing a
docstring, ``';touch MARK;'``, an f-string's braces, a line continuation) wherever the
command takes a name or a value: input and ``-o`` file names, trace directories,
``platform --name``, ``synth --name`` and ``--computation``, ``report --at`` and
``predict`` values, ``static``'s source and ``--arch`` names and ``static eval``'s values.
After the case no file ``MARK`` may exist in its directory (where it ran).

**Overwritten.** Half the cases first put a file that is not perfcast's (text notes, or
bytes with a NUL) where the command writes: each ``-o`` file, the files ``synth -o DIR``
writes in an existing DIR, a trace in ``simulate --synthesize -o DIR``, ``init``'s spec.
perfcast's rule (``outputs.py::check_target``, docs/reliability.md) is that it replaces
only its own earlier output: every file present before the case must have its bytes after
it, whether the command refused or not. (``init --force`` replaces any text file by
design and is not drawn.)

Every case runs in its own temporary directory (the working directory too), in-process,
under a time limit, and must end done or refused in one line. ``platform calibrate``
runs with its measurement stubbed (``tests/test_fuzz_platform_options.py``); ``static``
needs clang and its extras and runs in its own, slower test.
``python3 tests/test_fuzz_names.py N`` counts how N cases ended.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import perfcast.cli as cli

try:
    from fuzz_helpers import case_settings, census, run_cli
    from test_fuzz_platform_options import stubbed_measurement
    from test_simulate_synthesis import chain, write_trace
    from test_taint_import import run_output
except ImportError:  # run as a script from the repository root
    sys.path.insert(0, str(Path(__file__).parent))
    from fuzz_helpers import case_settings, census, run_cli
    from test_fuzz_platform_options import stubbed_measurement
    from test_simulate_synthesis import chain, write_trace
    from test_taint_import import run_output

CASE_SECONDS = 60.0
MARK = "MARK"
CODE_NAMES = (
    "$(touch MARK)",
    "`touch MARK`",
    '"""+__import__("os").system("touch MARK")+"""',
    "'''+__import__('os').system('touch MARK')+'''",
    "';touch MARK;'",
    '";touch MARK;"',
    '{__import__("os").system("touch MARK")}',
    "\\\n__import__('os').system('touch MARK')#",
    "x & touch MARK",
)
"""Each runs ``touch MARK`` in the working directory if it is expanded or evaluated."""
CODE_VALUES = (
    *CODE_NAMES,
    '__import__("os").system("touch MARK")',
    "exec('import os; os.system(\"touch MARK\")')",
    "1+__import__('os').system('touch MARK')",
)
"""Values (``x=VALUE``, ``--computation``) that run it if evaluated."""
FOREIGN = (b"my own notes, not perfcast's\n", b"\x7fELF\x00\x01binary of the user\xff\n")
"""What the user had at a target: text, and bytes that are not text."""
MEASUREMENTS = """\
PARAMETER x

POINTS ( 20 )
POINTS ( 30 )
POINTS ( 40 )
POINTS ( 50 )
POINTS ( 60 )

REGION r
METRIC time
DATA 1.0 1.1
DATA 2.0 2.1
DATA 3.0 3.1
DATA 4.0 4.1
DATA 5.0 5.1
"""

Surface = Callable[[Path, str, str], tuple[list[list[str]], list[str]]]
"""Given the case directory, a name and a value: the command lines to run (in order) and
the paths, relative to the directory, where they write (a foreign file may be put there)."""


def _measurements(directory: Path, name: str) -> str:
    (directory / f"{name}.txt").write_text(MEASUREMENTS)
    return f"{name}.txt"


def model(directory: Path, name: str, value: str) -> tuple[list[list[str]], list[str]]:
    return [["model", _measurements(directory, name), "-o", f"{name}.json"]], [f"{name}.json"]


def report(directory: Path, name: str, value: str) -> tuple[list[list[str]], list[str]]:
    text = _measurements(directory, name)
    return [["report", text, "--at", f"x={value}", "-o", f"{name}.html"]], [f"{name}.html"]


def predict(directory: Path, name: str, value: str) -> tuple[list[list[str]], list[str]]:
    text = _measurements(directory, name)
    first = ["model", text, "-o", f"{name}.json"]
    return [first, ["predict", f"{name}.json", f"x={value}"]], [f"{name}.json"]


def export(directory: Path, name: str, value: str) -> tuple[list[list[str]], list[str]]:
    text = _measurements(directory, name)
    return [["export", text, "-o", f"{name}.json"]], [f"{name}.json"]


def describe(directory: Path, name: str, value: str) -> tuple[list[list[str]], list[str]]:
    argv = ["platform", "describe", "-o", f"{name}.xml", "--nodes", "2", "--name", name]
    return [argv], [f"{name}.xml"]


def calibrate(directory: Path, name: str, value: str) -> tuple[list[list[str]], list[str]]:
    argv = ["platform", "calibrate", "-o", f"{name}.xml", "--name", name, "--sizes", "1", "2"]
    return [argv], [f"{name}.xml"]


def synth(directory: Path, name: str, value: str) -> tuple[list[list[str]], list[str]]:
    term = "n^2" if value == "25" else value  # a usual term for the usual value
    argv = ["synth", "-o", name, "--kernels", "1", "--name", name, "--computation", term]
    plain = ["synth", "-o", name, "--kernels", "1"]
    outputs = [f"{name}/{name}.cpp", f"{name}/{name}.truth.json", f"{name}/bench.cpp"]
    return [argv, plain], [*outputs, f"{name}/bench.truth.json"]


def synthesize(directory: Path, name: str, value: str) -> tuple[list[list[str]], list[str]]:
    traces = [write_trace(directory / f"{name}-{p}", p, chain).name for p in (3, 4, 6)]
    argv = ["simulate", *traces, "--synthesize", "8", "-o", f"{name}-8"]
    return [argv], [f"{name}-8/index.txt", f"{name}-8/rank-0.trace", f"{name}-8/trace.json"]


def taint_import(directory: Path, name: str, value: str) -> tuple[list[list[str]], list[str]]:
    (directory / f"{name}_0.json").write_text(json.dumps(run_output()))
    argv = ["taint", "import", f"{name}_0.json", "-o", f"{name}.profile.json"]
    return [argv], [f"{name}.profile.json"]


def init(directory: Path, name: str, value: str) -> tuple[list[list[str]], list[str]]:
    return [["init", f"{name}.toml"]], [f"{name}.toml"]


SURFACES: dict[str, Surface] = {
    "model": model,
    "report": report,
    "predict": predict,
    "export": export,
    "platform describe": describe,
    "synth": synth,
    "simulate --synthesize": synthesize,
    "taint import": taint_import,
    "init": init,
}
if shutil.which("smpirun"):  # calibrate's check replays the ping-pong with SimGrid
    SURFACES["platform calibrate"] = calibrate


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, str, str, bytes | None]:
    """(surface, name, value, what the user had at each target or None)."""
    surface = draw(st.sampled_from(sorted(SURFACES)))
    name = draw(st.sampled_from(("plain", *CODE_NAMES)))
    value = draw(st.sampled_from(("25", *CODE_VALUES)))
    existing = draw(st.sampled_from((None, *FOREIGN)))
    return surface, name, value, existing


def _files(directory: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in directory.rglob("*") if p.is_file() and not p.is_symlink()}


def run_lines(argvs: list[list[str]], directory: Path) -> str:
    """The command lines in ``directory`` (their working directory): 'done' when each
    did its work, else 'refused'; a traceback, a warning or another status fails."""
    ended = "done"
    for argv in argvs:
        status, said = run_cli(argv, CASE_SECONDS, directory)
        assert status in (0, 2), f"{argv} exited {status}: {said}"
        if status == 2:
            assert re.search(rf"perfcast {argv[0]}( [a-z]+)?: error: ", said), said
            ended = "refused"
    return ended


def run_case(case: tuple[str, str, str, bytes | None], directory: Path) -> str:
    """One case in a fresh ``directory``: no MARK after it, every file there before it
    unchanged."""
    surface, name, value, existing = case
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    argvs, outputs = SURFACES[surface](directory, name, value)
    if existing is not None:
        for output in outputs:
            (directory / output).parent.mkdir(parents=True, exist_ok=True)
            (directory / output).write_bytes(existing)
    before = _files(directory)
    reached: list[Sequence[int]] = []
    with stubbed_measurement(reached):
        ended = run_lines(argvs, directory)
    marks = [str(p) for p in directory.rglob(MARK)]
    assert not marks, f"code ran: {surface} with {name!r} / {value!r} made {marks}"
    changed = [str(p) for p, data in before.items() if not p.is_file() or p.read_bytes() != data]
    assert not changed, f"overwritten: {surface} with {name!r} changed {changed}"
    return ended


WORKDIR = tempfile.TemporaryDirectory(prefix="perfcast-fuzz-names-")


@pytest.mark.slow
@case_settings(60)
@given(cases())
def test_names_run_no_code_and_outputs_replace_only_perfcasts_files(case) -> None:
    run_case(case, Path(WORKDIR.name) / "case")


@pytest.mark.long
@case_settings(1000)
@given(cases())
def test_names_and_outputs_long(case) -> None:
    run_case(case, Path(WORKDIR.name) / "case")


# -- static: source, binary and --arch names, then static eval's values ----------------------

CODE_SOURCE = """\
double tri(int n) { double s = 0;
  for (int i = 0; i < n; i++) s += i;
  return s; }
int main(int c, char **v) { return (int) tri(c); }
"""
ARCH = Path(cli.__file__).parents[1] / "static" / "x86_64.yaml"


CLANG = shutil.which("clang-16") or shutil.which("clang")


def static_lines(directory: Path, name: str, value: str) -> tuple[list[list[str]], list[str]]:
    assert CLANG is not None
    (directory / f"{name}.c").write_text(CODE_SOURCE)  # the binary's DWARF names it
    compile_line = [CLANG, "-g", "-O2", f"{name}.c", "-o", f"{name}.bin"]
    subprocess.run(compile_line, cwd=directory, check=True)
    arch = ARCH.read_text().replace("name: x86-64", f"name: {json.dumps(name)}", 1)
    (directory / f"{name}.yaml").write_text(arch)
    build = ["static", f"{name}.c", "--binary", f"{name}.bin", "-o", f"{name}.py"]
    with_arch = [*build[:-2], "--arch", f"{name}.yaml", "-o", f"{name}-arch.py"]
    evaluate = ["static", "eval", f"{name}.py", "--function", "tri", f"n={value}"]
    evaluate_arch = ["static", "eval", f"{name}-arch.py", "--function", "tri", "n=10"]
    outputs = [f"{name}.py", f"{name}.json", f"{name}-arch.py", f"{name}-arch.json"]
    return [build, evaluate, with_arch, evaluate_arch], outputs


@pytest.mark.slow
@pytest.mark.parametrize("name", CODE_NAMES)
def test_static_names_and_values_run_no_code(name: str) -> None:
    pytest.importorskip("islpy")
    pytest.importorskip("clang.cindex")
    pytest.importorskip("elftools")
    if CLANG is None:
        pytest.skip("needs clang")
    SURFACES["static"] = static_lines
    try:
        directory = Path(WORKDIR.name) / "static"
        run_case(("static", name, '__import__("os").system("touch MARK")', None), directory)
        run_case(("static", name, "10", FOREIGN[0]), directory)
    finally:
        del SURFACES["static"]


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    census(cases(), lambda case: run_case(case, Path(WORKDIR.name) / "case"), count)
