"""Functions a filter asks for that the optimiser inlined away: the build names them once,
``--keep-inlined`` keeps them measurable, and reading many runs gives one note, not one
warning per run."""

from __future__ import annotations

import os
import subprocess
import warnings
from pathlib import Path

import pytest

from perfcast.errors import InputError
from perfcast.measure.build import _probe_arguments, output_of
from perfcast.measure.elf_symbols import measurable_symbols
from perfcast.measure.profiles import UnmatchedFilterWarning, combine_runs, read_profiles

MPIRUN = ("mpirun", "--allow-run-as-root", "--oversubscribe")
TIMEOUT = 120
CALLS = 7

PROGRAM = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
/* small and static inline: clang -O2 inlines it into main and emits no function */
static inline double small_kernel(double x, int n) {
    double s = 0;
    for (int i = 0; i < n; ++i) s += x * i;
    return s;
}
__attribute__((noinline)) double solve(int calls) {
    double t = 0;
    for (int k = 0; k < calls; ++k) t += small_kernel(k, 100);
    return t;
}
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    printf("%f\n", solve(atoi(argv[1])));
    MPI_Finalize();
    return 0;
}
"""

CXX_PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
namespace grid {
struct Cell {
    double value;
    double scaled(double factor) const { return value * factor; }  // inlined at -O2
};
}
int main(int argc, char **argv) {
    grid::Cell cell{2.0};
    double total = 0;
    for (int k = 0; k < std::atoi(argv[1]); ++k) total += cell.scaled(k);
    std::printf("%f\n", total);
    return 0;
}
"""


def perfcast_build(*args: str | Path, cwd: Path) -> str:
    """Run ``perfcast build`` as a Makefile would; its stderr. The user builds with clang
    here, so the link's note on a user compiler other than clang's (test_compilers.py)
    stays out of the notes these tests read."""
    done = subprocess.run(
        ["perfcast", "build", *map(str, args)],
        cwd=cwd,
        env={**os.environ, "OMPI_CC": "clang-16"},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


def run(program: Path, profile: Path, *args: object, np: int | None = None) -> None:
    environment = {**os.environ, "PERFCAST_PROFILE_DIR": str(profile)}
    launcher = [*MPIRUN, "-np", str(np)] if np else []
    command = [*launcher, str(program), *map(str, args)]
    done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def inlined(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("inlined")
    (directory / "app.c").write_text(PROGRAM)
    (directory / "filter.txt").write_text("solve\nsmall_kernel\n")
    return directory


@pytest.mark.slow
def test_the_link_names_once_the_filtered_functions_that_were_inlined_away(inlined, tmp_path):
    compiled = perfcast_build(
        "--filter", "filter.txt", "--", "mpicc", "-O2", "-c", "app.c", "-o", "app.o", cwd=inlined
    )
    linked = perfcast_build(
        "--filter", "filter.txt", "--", "mpicc", "app.o", "-o", "app", cwd=inlined
    )
    assert compiled == ""
    assert linked.count("small_kernel") == 1
    assert linked.startswith(
        "perfcast build: note: 1 of the 2 functions of the filter filter.txt are not in app, "
        "so they cannot be measured: small_kernel. They were inlined into their callers"
    )
    assert linked.rstrip().endswith(
        "compile with perfcast build --filter filter.txt --keep-inlined "
        "(in a campaign: [build] keep_inlined = true)"
    )
    assert "solve" not in linked  # a function of the program: it is measured
    run(inlined / "app", tmp_path / "profile", CALLS, np=2)
    with pytest.warns(UnmatchedFilterWarning, match="small_kernel"):
        measured = read_profiles(tmp_path / "profile")
    assert {c for c in measured.callpaths if "MPI_" not in c} == {"main", "main->solve"}


@pytest.mark.slow
def test_keep_inlined_measures_the_filtered_function_with_its_visits(inlined, tmp_path):
    perfcast_build(
        "--filter",
        "filter.txt",
        "--keep-inlined",
        "--",
        "mpicc",
        "-O2",
        "-c",
        "app.c",
        "-o",
        "kept.o",
        cwd=inlined,
    )
    linked = perfcast_build(
        "--filter", "filter.txt", "--", "mpicc", "kept.o", "-o", "kept", cwd=inlined
    )
    assert linked == ""  # nothing is missing any more
    run(inlined / "kept", tmp_path / "profile", CALLS, np=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnmatchedFilterWarning)
        measured = read_profiles(tmp_path / "profile")
    rows = measured.select("main->solve->small_kernel", "visits")
    assert list(rows["value"]) == [CALLS]


@pytest.mark.slow
def test_keep_inlined_finds_a_cxx_member_by_its_demangled_name(tmp_path):
    (tmp_path / "cell.cpp").write_text(CXX_PROGRAM)
    (tmp_path / "filter.txt").write_text("grid::Cell::scaled\n")
    note = perfcast_build(
        "--filter", "filter.txt", "--", "clang++", "-O2", "cell.cpp", "-o", "inlined", cwd=tmp_path
    )
    assert "cannot be measured: grid::Cell::scaled. They were inlined" in note
    kept = perfcast_build(
        "--filter",
        "filter.txt",
        "--keep-inlined",
        "--",
        "clang++",
        "-O2",
        "cell.cpp",
        "-o",
        "kept",
        cwd=tmp_path,
    )
    assert kept == ""
    run(tmp_path / "kept", tmp_path / "profile", 5)
    measured = read_profiles(tmp_path / "profile")
    rows = measured.select("main->grid::Cell::scaled(double) const", "visits")
    assert list(rows["value"]) == [5]


TEMPLATES = r"""
#include <cstdio>
#include <cstdlib>
#include <vector>
namespace la {
template <typename V>
void axpy(typename V::value_type a, const V &x, V &y) {
    for (std::size_t i = 0; i < x.size(); ++i) y[i] += a * x[i];
}
double dot(const std::vector<double> &x, const std::vector<double> &y) {
    double s = 0;
    for (std::size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
    return s;
}
}
int main(int argc, char **argv) {
    int n = std::atoi(argv[1]);
    std::vector<double> x(n, 1.0), y(n, 2.0);
    for (int k = 0; k < 3; ++k) la::axpy(0.5, x, y);
    std::vector<float> u(n, 1.0f), v(n, 2.0f);
    la::axpy(0.5f, u, v);
    std::printf("%f %f\n", la::dot(x, y), v[0]);
    return 0;
}
"""


@pytest.mark.slow
def test_a_filter_names_templates_as_the_source_spells_them(tmp_path):
    """A taint profile names a template by its source (``la::axpy(typename V::value_type,
    ...)``) and a function by libclang's spelling (``const std::vector<double> &``); the
    program has ``void la::axpy<std::vector<double, ...> >(double, ...)``. Each entry that
    names no function exactly selects those of its qualified name: both instantiations."""
    (tmp_path / "la.cpp").write_text(TEMPLATES)
    (tmp_path / "filter.txt").write_text(
        "la::axpy(typename V::value_type, const V &, V &)\n"
        "la::dot(const std::vector<double> &, const std::vector<double> &)\n"
    )
    note = perfcast_build(
        "--filter", "filter.txt", "--keep-inlined", "--",
        "clang++", "-O2", "la.cpp", "-o", "la", cwd=tmp_path,
    )  # fmt: skip
    assert note == ""  # every entry names functions of the program
    run(tmp_path / "la", tmp_path / "profile", 1000)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnmatchedFilterWarning)
        measured = read_profiles(tmp_path / "profile")
    visits = {
        path.removeprefix("main->"): int(measured.select(path, "visits")["value"].iloc[0])
        for path in measured.callpaths
        if path != "main"
    }
    axpy = {name: count for name, count in visits.items() if "la::axpy<" in name}
    assert sorted(axpy.values()) == [1, 3]  # the float and the double instantiation
    assert [count for name, count in visits.items() if name.startswith("la::dot(")] == [1]


@pytest.mark.slow
def test_many_runs_with_an_inlined_filter_entry_give_one_summarized_note(inlined, tmp_path):
    perfcast_build(
        "--filter", "filter.txt", "--", "mpicc", "-O2", "app.c", "-o", "many", cwd=inlined
    )
    runs = []
    for calls in (3, 5, 7):
        for repetition in range(2):
            profile = tmp_path / f"run-{calls}-{repetition}"
            run(inlined / "many", profile, calls, np=2)
            runs.append(({"calls": calls}, profile))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        experiment = combine_runs(runs)
    notes = [w for w in caught if issubclass(w.category, UserWarning)]
    assert len(notes) == 1
    assert issubclass(notes[0].category, UnmatchedFilterWarning)
    message = str(notes[0].message)
    assert "in 6 of 6 run(s): 1 in " in message and "(small_kernel)" in message
    assert list(experiment.select("main->solve", "visits")["value"]) == [1.0] * 6


def test_the_probe_compile_keeps_what_defines_a_unit_and_drops_outputs():
    command = ["-O2", "-I", "inc", "-DN=3", "-c", "a.c", "-o", "a.o", "-MD", "-MF", "a.d"]
    command += ["-MTa.o", "-oother.o", "-x", "c", "-lm", "lib.a"]
    assert _probe_arguments(command) == ["-O2", "-I", "inc", "-DN=3", "-x", "c", "-lm"]


def test_the_program_of_a_link_is_its_output_or_a_out():
    assert output_of(["mpicc", "a.o", "-o", "bin/app"]) == Path("bin/app")
    assert output_of(["mpicc", "a.o", "-obin/app"]) == Path("bin/app")
    assert output_of(["mpicc", "a.o"]) == Path("a.out")


@pytest.mark.slow
def test_a_function_keep_inlined_cannot_keep_is_still_named(tmp_path):
    (tmp_path / "twice.c").write_text(
        "static inline __attribute__((always_inline)) int twice(int x) { return 2 * x; }\n"
        "int main(int argc, char **argv) { (void)argv; return twice(argc) - 2; }\n"
    )
    (tmp_path / "filter.txt").write_text("twice\n")
    command = ("--filter", "filter.txt", "--keep-inlined", "--", "cc", "-O2", "twice.c")
    note = perfcast_build(*command, "-o", "twice", cwd=tmp_path)
    expected = "cannot be measured: twice. They are not defined in its sources, are always_inline"
    assert expected in note


def test_only_elf_programs_with_an_xray_map_are_checked(tmp_path):
    (tmp_path / "plain.c").write_text("int main(void) { return 0; }\n")
    subprocess.run(
        ["clang-16", str(tmp_path / "plain.c"), "-o", str(tmp_path / "plain")], check=True
    )
    assert measurable_symbols(tmp_path / "plain") is None  # not linked by perfcast build
    (tmp_path / "script").write_text("#!/bin/sh\n")
    with pytest.raises(InputError, match="script: not a 64-bit little-endian ELF file"):
        measurable_symbols(tmp_path / "script")
