"""Parameters read through libstdc++ (issue 25): ``std::string`` copies and ``std::stoi``,
``std::istringstream >> n``, ``std::stringstream``, ``>> std::string`` and miniFE's
``parse_parameter``. libstdc++.so is not instrumented; the taint build compiles std::string
into the program and wraps the stream routines (runtime/perfcast_taint_stdlib.cc). Every
test compiles and runs a real program with DataFlowSanitizer."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from perfcast.taint import ArgvParameter, taint_program

pytestmark = pytest.mark.slow

APPS = Path(__file__).resolve().parents[2] / "shared" / "apps"

STREAMS = r"""
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>
static long by_stoi(int n) { long s = 0; for (int i = 0; i < n; i++) s += i; return s; }
static long by_int(int n) { long s = 0; for (int i = 0; i < n; i++) s += 2 * i; return s; }
static long by_double(double x) { long s = 0; for (int i = 0; i < x; i++) s += 3 * i; return s; }
static long by_long(long n) { long s = 0; for (long i = 0; i < n; i++) s += 4 * i; return s; }
static long by_unsigned(unsigned n) { long s = 0; for (unsigned i = 0; i < n; i++) s++; return s; }
static long by_word(int n) { long s = 0; for (int i = 0; i < n; i++) s += 6 * i; return s; }
static long by_line(short n) { long s = 0; for (short i = 0; i < n; i++) s += 7 * i; return s; }
int main(int argc, char **argv) {
  std::string text(argv[1]);
  int a = std::stoi(text);                 // std::string copy, then std::stoi
  std::istringstream one(argv[2]);
  int b = 0;
  one >> b;                                // istringstream >> int
  std::string all = argv[0];               // miniFE's way: the arguments joined, a substr
  for (int i = 1; i < argc; ++i) all += " " + std::string(argv[i]);
  std::istringstream two(all.substr(all.find("x=") + 2));
  double x = 0;
  two >> x;                                // >> double
  std::stringstream three;
  three.str(argv[4]);
  long l = 0;
  unsigned u = 0;
  three >> l >> u;                         // str(s), then >> long >> unsigned
  std::istringstream four(argv[5]);
  std::string word, line;
  four >> word;                            // >> std::string, then atoi
  std::getline(four, line);                // the rest of the line
  short w = 0;
  std::istringstream(line) >> w;
  int unused = 0;
  std::istringstream(argv[6]) >> unused;   // read, and reaches nothing
  std::vector<int> none;
  int *first = &none[0];                   // fine without _GLIBCXX_ASSERTIONS' checks
  (void)first;
  return (by_stoi(a) + by_int(b) + by_double(x) + by_long(l) + by_unsigned(u) +
          by_word(std::atoi(word.c_str())) + by_line(w)) < 0;
}
"""

EXPECTED = {
    "by_stoi(int)": "a",
    "by_int(int)": "b",
    "by_double(double)": "x",
    "by_long(long)": "lu",
    "by_unsigned(unsigned int)": "lu",
    "by_word(int)": "wv",
    "by_line(short)": "wv",
}


@pytest.mark.parametrize("optimisation", ["-O0", "-O2"])
def test_parameters_read_through_strings_and_string_streams_keep_their_labels(
    tmp_path: Path, optimisation: str
) -> None:
    """Each value reaches its own loop with its own label. At -O0 the program calls
    libstdc++'s stream constructors and extractors, at -O2 it inlines some of them into
    instrumented code: both keep the labels. A value read and then unused is reported where
    the stream read it."""
    (tmp_path / "streams.cc").write_text(STREAMS)
    bindings = ["a=argv:1", "b=argv:2", "x=argv:3", "lu=argv:4", "wv=argv:5", "z=argv:6"]
    profile = taint_program(
        ["c++", optimisation, "streams.cc", "-o", "streams"],
        "./streams 7 9 x=5.5 '12 13' '8 6' 4",
        [ArgvParameter.parse(binding) for binding in bindings],
        cwd=tmp_path,
    ).to_json()
    functions = profile["functions"]
    assert {name: functions[name]["dependency"] for name in EXPECTED} == EXPECTED
    assert profile["unused_parameters"] == ["z"]
    (warning,) = profile["warnings"]
    assert "last seen where std::istream::operator>> read its value" in warning


DERIVED = r"""
#include <sstream>
#include <string>
static long by_reader(int n) { long s = 0; for (int i = 0; i < n; i++) s += i; return s; }
static long by_both(int n) { long s = 0; for (int i = 0; i < n; i++) s += 2 * i; return s; }
static long by_buffer(int n) { long s = 0; for (int i = 0; i < n; i++) s += 3 * i; return s; }
struct Reader : std::istringstream {
  explicit Reader(const std::string &s) : std::istringstream(s) {}
};
struct Both : std::stringstream {
  explicit Both(const std::string &s) : std::stringstream(s) {}
};
int main(int argc, char **argv) {
  Reader reader{std::string(argv[1])};
  int n = 0;
  reader >> n;
  Both both{std::string(argv[2])};
  int m = 0;
  both >> m;
  std::stringbuf buffer{std::string(argv[3])};
  std::istream in(&buffer);
  int k = 0;
  in >> k;
  return (by_reader(n) + by_both(m) + by_buffer(k)) < 0;
}
"""


@pytest.mark.parametrize("optimisation", ["-O0", "-O2"])
def test_streams_of_derived_classes_and_a_bare_stringbuf_keep_labels(
    tmp_path: Path, optimisation: str
) -> None:
    """A class derived from std::istringstream or std::stringstream calls the stream's
    base-object constructor (which takes the VTT), a bare std::stringbuf its own."""
    (tmp_path / "derived.cc").write_text(DERIVED)
    profile = taint_program(
        ["c++", optimisation, "derived.cc", "-o", "derived"],
        "./derived 7 5 3",
        [ArgvParameter.parse(f"{name}=argv:{n}") for n, name in enumerate("nmk", 1)],
        cwd=tmp_path,
    ).to_json()
    functions = profile["functions"]
    assert [functions[f"by_{f}(int)"]["dependency"] for f in ("reader", "both", "buffer")] == [
        "n",
        "m",
        "k",
    ]


@pytest.mark.skipif(shutil.which("mpicxx") is None, reason="Open MPI's mpicxx is not installed")
@pytest.mark.skipif(not (APPS / "minife").is_dir(), reason=f"miniFE is missing: {APPS}")
def test_minife_nx_reaches_assembly_and_cg(tmp_path: Path) -> None:
    """miniFE joins argv into a std::string, takes a substr after `nx=` and reads it with
    std::istringstream >> int (utils/param_utils.hpp): nx reaches the assembly and the CG
    loops (about 15 s: the build dominates)."""
    shutil.copytree(APPS / "minife" / "ref", tmp_path / "ref")
    src = tmp_path / "ref" / "src"
    flags = [
        *(f"-I{tmp_path / 'ref' / d}" for d in ("src", "utils", "fem")),
        "-O2",
        "-DMINIFE_SCALAR=double",
        "-DMINIFE_LOCAL_ORDINAL=int",
        "-DMINIFE_GLOBAL_ORDINAL=int",
        "-DMINIFE_CSR_MATRIX",
        "-DHAVE_MPI",
        "-DMPICH_IGNORE_CXX_SEEK",
        "-DMINIFE_INFO=0",
        "-DMINIFE_KERNELS=0",
    ]
    sources = [
        "main.cpp",
        "YAML_Doc.cpp",
        "YAML_Element.cpp",
        *(f"../utils/{name}.cpp" for name in ("BoxPartition", "param_utils", "utils", "mytimer")),
    ]
    profile = taint_program(
        ["mpicxx", *flags, *sources, "-o", "miniFE.x"],
        "mpirun --allow-run-as-root --oversubscribe -np 2 ./miniFE.x nx=8",
        [ArgvParameter.parse("nx=argv:1")],
        cwd=src,
    ).to_json()
    assert "nx" not in profile["unused_parameters"]
    functions = profile["functions"]

    def dependency(prefix: str) -> str:
        (name,) = [name for name in functions if name.startswith(prefix)]
        return str(functions[name]["dependency"])

    for kernel in (
        "Mantevo::parse_parameter(",
        "miniFE::generate_matrix_structure(",
        "miniFE::perform_element_loop(",
        "miniFE::assemble_FE_data(",
        "miniFE::matvec_std::operator()(",
        "miniFE::waxpby(",
        "miniFE::dot(",
        "miniFE::cg_solve(",
    ):
        assert re.search(r"\bnx\b", dependency(kernel)), kernel
