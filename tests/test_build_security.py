"""perfcast build: text read from a filter or a taint profile never becomes code, bad names
are reported with their file and line, and build errors read like every other command's."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from perfcast.cli import main
from perfcast.errors import InputError
from perfcast.measure import toolchain
from perfcast.measure.build import function_name_problem, read_filter, wrap
from perfcast.taint.profile_model import FORMAT

MPIRUN = ("mpirun", "--allow-run-as-root", "--oversubscribe")
TIMEOUT = 120

PROGRAM = r"""
#include <mpi.h>
__attribute__((noinline)) double kernel(int n) {
    double s = 0;
    for (int i = 0; i < n; ++i) s += i * 0.5;
    return s;
}
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    volatile double r = kernel(1000);
    MPI_Finalize();
    return r < 0;
}
"""


def injection(marker: Path) -> str:
    """A 'function name' that, pasted into a C string literal with backslashes and quotes
    escaped, ends the literal (a backslash-newline splices lines first) and defines a
    constructor that creates ``marker`` in every rank before main."""
    command = ",".join(str(byte) for byte in f"touch {marker}".encode())
    return (
        'x\\\n"};\n#include <stdlib.h>\n'
        "__attribute__((constructor)) static void injected(void) "
        f"{{ static const char c[] = {{{command},0}}; system(c); }}\n"
        "static const char *const unused[] = {0,//"
    )


def taint_profile(path: Path, relevant: list[Any]) -> Path:
    profile = {"format": FORMAT, "functions": {}, "relevant": relevant, "not_executed": []}
    path.write_text(json.dumps(profile, indent=1))
    return path


def perfcast_build(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["perfcast", "build", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def mpirun(program: Path, profile: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PERFCAST_PROFILE_DIR": str(profile)}
    return subprocess.run(
        [*MPIRUN, "-np", "2", str(program)],
        env=environment,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


@pytest.mark.slow
def test_a_profile_name_that_injects_code_is_refused_with_its_line(tmp_path):
    marker = tmp_path / "marker"
    (tmp_path / "app.c").write_text(PROGRAM)
    profile = taint_profile(tmp_path / "profile.json", ["kernel", injection(marker)])
    done = perfcast_build(
        "--filter", profile, "--", "mpicc", "-O2", "app.c", "-o", "app", cwd=tmp_path
    )
    assert done.returncode == 2
    line = next(n for n, text in enumerate(profile.read_text().splitlines(), 1) if "x\\\\" in text)
    assert done.stderr.startswith(f"perfcast build: error: {profile}:{line}: function name 'x\\\\")
    assert "is not a C or C++ function: '\\\\' occurs in no C or C++ function name" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "app").exists()
    assert not marker.exists()


@pytest.mark.slow
def test_names_reach_the_program_as_data_even_unchecked(tmp_path):
    """The embedded filter is bytes: a name that would be code in a string literal is
    a name that matches nothing, and the other names still select what is measured."""
    marker = tmp_path / "marker"
    (tmp_path / "app.c").write_text(PROGRAM)
    linked = wrap(["mpicc", "-O2", "app.c", "-o", str(tmp_path / "app")])
    embedded = toolchain.filter_object(["kernel", injection(marker)])
    environment = {**os.environ, **linked.env}
    subprocess.run([*linked.argv, str(embedded)], env=environment, check=True, cwd=tmp_path)
    done = mpirun(tmp_path / "app", tmp_path / "profile")
    assert done.returncode == 0, done.stderr
    assert not marker.exists()
    text = (tmp_path / "profile" / "rank-0.pcprof").read_text()
    assert "functions 2 " in text  # main and kernel patched, nothing else
    assert any(line.startswith("node ") and line.endswith(" kernel") for line in text.splitlines())


@pytest.mark.parametrize(
    "name",
    [
        "solve",
        "_Z5solvev",
        "_ZL17CalcForceForNodesR6Domain",
        "compute.cold",
        "kernel.llvm.1234",
        "Domain::x(int) const",
        "std::vector<double, std::allocator<double> >::_M_fill_assign(unsigned long, double)",
        "ns::S::operator()(int)",
        "operator<<(std::ostream&, Point const&)",
        'operator"" _km(char const*)',
        "main::{lambda(int)#1}::operator()(int) const",
        "(anonymous namespace)::helper",
        "apply(void (*)(int), int (&) [3])",
        "café",
    ],
)
def test_real_function_names_are_accepted(name):
    assert function_name_problem(name) is None


@pytest.mark.parametrize(
    ("name", "character"),
    [
        ("x\\", "\\"),
        ('f"); system("id', '"'),
        ("f; g", ";"),
        ("f\ng", "\n"),
        ("f\tg", "\t"),
        ("f`id`", "`"),
    ],
)
def test_names_with_code_characters_are_rejected(name, character):
    assert function_name_problem(name) == f"{character!r} occurs in no C or C++ function name"


def test_a_bad_name_in_a_filter_file_is_reported_with_its_line(tmp_path):
    path = tmp_path / "filter.txt"
    path.write_text('# kernels\nsolve\nsolve"); abort(); ("\n')
    with pytest.raises(InputError, match=r"filter\.txt:3: function name 'solve\"\); abort"):
        read_filter(path)


def test_a_profile_whose_names_are_not_strings_is_an_input_error(tmp_path):
    bad = taint_profile(tmp_path / "profile.json", [{"name": "kernel"}])
    with pytest.raises(InputError, match=r"profile\.json: .*relevant'? must be a list of"):
        read_filter(bad)
    unlisted = tmp_path / "unlisted.json"
    profile = {"format": FORMAT, "functions": {}, "relevant": [], "not_executed": "kernel"}
    unlisted.write_text(json.dumps(profile))
    with pytest.raises(InputError, match=r"unlisted\.json: not_executed must be a list of names"):
        read_filter(unlisted)


def test_build_errors_name_the_command_not_its_arguments(tmp_path, capsys):
    status = main(["build", "--filter", str(tmp_path / "missing.txt"), "--", "mpicc", "a.o"])
    assert status == 2
    error = capsys.readouterr().err
    missing = tmp_path / "missing.txt"
    assert (
        error == f"perfcast build: error: {missing}: no such filter file; save the function names, "
        "one a line, as UTF-8 text\n"
    )
    assert main(["build", "--", "ifort", "a.f90"]) == 2
    assert capsys.readouterr().err.startswith("perfcast build: error: cannot wrap 'ifort'")
    assert main(["build", "--keep-inlined", "--", "mpicc", "-c", "a.c"]) == 2
    assert capsys.readouterr().err == (
        "perfcast build: error: --keep-inlined keeps the functions of a --filter FILE: give one\n"
    )
