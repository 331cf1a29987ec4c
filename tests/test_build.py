"""perfcast build: which commands it wraps, what it adds, and the errors users see."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from perfcast.cli import main
from perfcast.errors import InputError, PerfcastError
from perfcast.measure import elf_symbols, toolchain
from perfcast.measure.build import (
    COUNTER_COMPILE_FLAGS,
    XRAY_COMPILE_FLAGS,
    BuildOptions,
    Step,
    parse_command,
    read_filter,
    wrap,
)


@pytest.mark.parametrize(
    ("command", "step", "language", "mpi"),
    [
        (["mpicc", "-O2", "-c", "a.c", "-o", "a.o"], Step.COMPILE, "c", True),
        (["mpicxx", "-O2", "app.cpp", "-o", "app"], Step.LINK, "c++", True),
        (["/usr/bin/gcc-12", "a.o", "b.o", "-o", "app"], Step.LINK, "c", False),
        (["clang++-16", "-c", "x.cc"], Step.COMPILE, "c++", False),
        (["cc", "main.c", "-lmpi", "-o", "app"], Step.LINK, "c", True),
        (["mpicc", "-E", "a.c"], Step.PASS_THROUGH, "c", True),
        (["mpicc", "--showme"], Step.PASS_THROUGH, "c", True),
        (["gcc", "-MM", "a.c"], Step.PASS_THROUGH, "c", False),
        # the value of -o is not an input, even when it looks like a source file
        (["gcc", "-c", "-o", "x.c.o", "-I", "inc.c", "x.c"], Step.COMPILE, "c", False),
    ],
)
def test_commands_are_classified(command, step, language, mpi):
    invocation = parse_command(command)
    assert (invocation.step, invocation.language, invocation.mpi) == (step, language, mpi)


@pytest.mark.parametrize("command", [["nvcc", "-c", "k.cu"], ["mpif90", "a.f90"], ["make"]])
def test_an_unwrappable_command_names_what_can_be_wrapped(command):
    with pytest.raises(PerfcastError, match=r"cannot wrap .*mpicc, mpicxx"):
        parse_command(command)


def test_empty_command_and_shared_libraries_are_refused():
    with pytest.raises(PerfcastError, match="after '--'"):
        parse_command([])
    with pytest.raises(PerfcastError, match="shared-library"):
        parse_command(["mpicc", "-shared", "a.o", "-o", "liba.so"])


def test_compile_step_gets_flags_and_no_runtime():
    wrapped = wrap(["gcc", "-O2", "-c", "a.c"], BuildOptions(counters=True))
    clang = toolchain.find_xray_clang()
    assert wrapped.argv[0] == clang.cc
    assert wrapped.argv[1:4] == ["-O2", "-c", "a.c"]
    assert set(XRAY_COMPILE_FLAGS) <= set(wrapped.argv)
    assert list(COUNTER_COMPILE_FLAGS) == wrapped.argv[-len(COUNTER_COMPILE_FLAGS) :]
    assert not any(arg.endswith(".o") for arg in wrapped.argv)
    # the driver's -fsanitize-coverage would pull a sanitizer runtime into a link
    assert not any(arg.startswith("-fsanitize-coverage=") for arg in wrapped.argv)


def test_mpi_link_runs_the_wrapper_on_clang_and_links_both_runtime_parts():
    wrapped = wrap(["mpicxx", "a.o", "b.o", "-o", "app"])
    clang = toolchain.find_xray_clang()
    assert wrapped.argv[0] == "mpicxx"
    assert wrapped.env["OMPI_CXX"] == clang.cxx
    objects = [Path(a).name for a in wrapped.argv if a.endswith(".o") and "perfcast" in a]
    assert [name.split("-")[0] for name in objects] == ["perfcast_rt", "perfcast_mpi"]
    assert "-fxray-instrument" in wrapped.argv
    assert not set(COUNTER_COMPILE_FLAGS) & set(wrapped.argv)  # nothing to compile here
    plain = wrap(["cc", "a.o", "-o", "app"])
    assert [Path(a).name.split("-")[0] for a in plain.argv if "perfcast_" in a] == ["perfcast_rt"]


def test_runtime_is_built_once_per_source_hash_into_the_xdg_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = toolchain.runtime_objects(mpi=True)
    assert all(p.parent == tmp_path / "perfcast" and p.is_file() for p in first)
    stamps = [p.stat().st_mtime_ns for p in first]
    assert toolchain.runtime_objects(mpi=True) == first
    assert [p.stat().st_mtime_ns for p in first] == stamps
    assert not list((tmp_path / "perfcast").glob(".*"))  # no temporary files left


def test_filter_file_is_read_and_embedded(tmp_path):
    path = tmp_path / "filter.txt"
    path.write_text('# kernels\n  solve  \n\nDomain::x(int)\noperator"" _km\n')
    assert read_filter(path) == ["solve", "Domain::x(int)", 'operator"" _km']
    wrapped = wrap(["mpicc", "a.o", "-o", "app"], BuildOptions(filter_file=path))
    embedded = Path(wrapped.argv[-1])
    assert embedded.name.startswith("perfcast_embedded_filter")
    symbols = subprocess.run(["nm", str(embedded)], capture_output=True, text=True).stdout
    assert "perfcast_embedded_filter" in symbols
    with pytest.raises(InputError, match=r"missing\.txt: no such filter file"):
        read_filter(tmp_path / "missing.txt")


def test_missing_clang_names_the_packages_to_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    toolchain.find_xray_clang.cache_clear()
    try:
        status = main(["build", "--", "gcc", "-c", "a.c"])
    finally:
        toolchain.find_xray_clang.cache_clear()
    assert status == 2
    message = capsys.readouterr().err
    assert "clang-16 was not found" in message
    assert "apt-get install clang-16 libclang-rt-16-dev" in message


def test_cli_reports_an_unwrappable_command(capsys):
    assert main(["build", "--", "ifort", "a.f90"]) == 2
    assert "cannot wrap 'ifort'" in capsys.readouterr().err


def test_cli_passes_the_compilers_exit_status_and_message(tmp_path, capsys):
    source = tmp_path / "broken.c"
    source.write_text("int main(void) { return undeclared; }\n")
    status = main(["build", "--", "cc", "-c", str(source), "-o", str(tmp_path / "b.o")])
    assert status != 0


@pytest.mark.parametrize(
    ("name", "qualified"),
    [
        ("void la::axpy<std::vector<double, std::allocator<double> > >(double)", "la::axpy"),
        ("la::axpy(typename V::value_type, const V &, V &)", "la::axpy"),
        ("miniFE::Vector<double, int, int>::Vector(int, int)", "miniFE::Vector::Vector"),
        ("(anonymous namespace)::relax(int)", "(anonymous namespace)::relax"),
        ("CalcKinematicsForElems(Domain&, double, int)", "CalcKinematicsForElems"),
        ("bool operator< <int>(A<int> const&, A<int> const&)", None),  # < is no argument list
        (
            "miniFE::matvec_std<miniFE::CSRMatrix<double> >::operator()(int&)",
            "miniFE::matvec_std::operator()",
        ),
        ("main", "main"),
    ],
)
def test_the_qualified_name_is_what_source_and_symbol_both_say(name, qualified):
    assert elf_symbols.qualified_name(name) == qualified


def test_an_entry_naming_one_overload_exactly_selects_only_it():
    symbols = ["_Z1fi", "_Z1fd", "_Z1gi"]  # f(int), f(double), g(int)
    assert elf_symbols.select(symbols, ["f(int)"]) == ({"_Z1fi"}, set())
    # spelt in no notation the program has: every function of that qualified name
    assert elf_symbols.select(symbols, ["f(const T &)", "h"]) == ({"_Z1fi", "_Z1fd"}, {"h"})
