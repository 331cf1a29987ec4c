"""perfcast static on real code: LULESH's lulesh.cc end to end, derived locals, functions
it must skip, --function, MPI flags from the wrapper, and formula texts that are never
run as code. Real clang, libclang, isl and Open MPI's wrappers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from fractions import Fraction
from pathlib import Path

import pytest

pytest.importorskip("islpy")
pytest.importorskip("clang.cindex")

from perfcast import cli
from perfcast.static import analyze
from perfcast.static import expressions as ex
from perfcast.static.arithmetic import UnsafeExpression, evaluate_formula, parse_formula
from perfcast.static.codegen import summary, write_model
from perfcast.static.source import finds_mpi_header, mpi_wrapper_flags, parse_source

CLANG = shutil.which("clang-16") or shutil.which("clang")
MPICC = shutil.which("mpicc")
MPICXX = shutil.which("mpicxx")
LULESH = Path(__file__).resolve().parents[2] / "shared" / "apps" / "lulesh"  # ../shared
needs_clang = pytest.mark.skipif(CLANG is None, reason="clang is not installed")
needs_mpi = pytest.mark.skipif(MPICC is None or MPICXX is None, reason="no MPI wrappers")


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return path


def compile_c(source: Path, output: Path, *flags: str) -> Path:
    assert CLANG is not None
    subprocess.run([CLANG, *flags, "-o", str(output), str(source)], check=True)
    return output


def load(path: Path) -> dict:
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace


# --- formulas are parsed, never evaluated as code ---------------------------------------


def test_formulas_evaluate_exactly_with_the_whitelist():
    assert evaluate_formula("(n + 1) * (m // 4) - n % 3", {"n": 10, "m": 17}) == 43
    assert evaluate_formula("F(1, 2) * n**2", {"n": 3}) == Fraction(9, 2)
    condition = "((1*n + -1) >= 0 and (-1*m) >= 0) or (False)"
    assert evaluate_formula(condition, {"n": 1, "m": 0}) is True
    assert evaluate_formula("(n if n > m else m)", {"n": 2, "m": 5}) == 5


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('true')",
        "n.__class__",
        "a[0]",
        "(lambda: 1)()",
        "open('x')",
        "F(1, 2, 3)",
        "'text'",
        "[n for n in m]",
    ],
)
def test_formulas_that_are_not_arithmetic_are_rejected(text):
    with pytest.raises(UnsafeExpression):
        evaluate_formula(text, {"n": 1, "m": 2, "a": [1]})


def test_a_missing_name_or_a_huge_power_is_an_error_not_a_hang():
    with pytest.raises(UnsafeExpression, match="needs a value for m"):
        evaluate_formula("n + m", {"n": 1})
    with pytest.raises(UnsafeExpression, match="power"):
        evaluate_formula("9 ** 9 ** 9", {})


def test_no_eval_is_left_in_the_static_analysis():
    """The generated code and the analysis compute formulas through the whitelist only."""
    static = Path(__file__).resolve().parents[1] / "src" / "perfcast" / "static"
    offenders = [
        f"{path.name}:{number}"
        for path in static.glob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "eval(" in line.replace("evaluate_formula(", "").replace("def evaluate(", "")
        and "module.evaluate(" not in line
    ]
    assert offenders == []


def test_a_derived_parameter_names_every_opaque_atom_it_uses():
    """Regression (LULESH): ``Real_t(4.0) * n`` became the derived ``Real_t_4_0 * n``
    while only ``Real_t`` was registered, so evaluating it raised NameError."""
    parameters = ex.ParameterTable.empty()
    writer = ex.IslWriter({}, parameters)
    writer.affine(ex.parse(["Real_t", "(", "4.0", ")", "*", "n"]))
    (expression,) = parameters.derived.values()
    assert parse_formula(expression) is not None
    assert {"Real_t_4_0", "n"} <= set(parameters.free)
    assert evaluate_formula(expression, dict.fromkeys(parameters.free, 3)) == 9


def test_python_keywords_in_c_names_get_a_suffix():
    assert ex.sanitize("from") == "from_"
    assert ex.sanitize("yield") == "yield_"
    assert ex.sanitize("count") == "count"


# --- derived locals, skipped functions, --function ----------------------------------------

DERIVED = """\
double grid(int nx, int from, const double *a) {
  int edgeNodes = nx + 1;
  const int plane = edgeNodes * 2;
  int moved = nx;
  moved += 3;
  double sum = 0;
  for (int i = 0; i < edgeNodes; i++)
    for (int j = from; j < plane; j++)
      sum += a[i] * j;
  for (int k = 0; k < moved; k++)
    sum += a[k];
  return sum;
}

int main(int argc, char **argv) {
  static double a[4096];
  (void)argv;
  return (int)grid(argc + 20, argc, a);
}
"""


@needs_clang
def test_derived_locals_are_counted_in_the_parameters_they_come_from(tmp_path):
    source = write(tmp_path, "derived.c", DERIVED)
    function = next(f for f in parse_source(source).functions if f.name == "grid")
    assert set(function.derived_locals) == {"edgeNodes", "plane"}  # moved is written
    binary = compile_c(source, tmp_path / "derived", "-g", "-O1", "-fno-inline")
    model = analyze(source, binary)
    grid = model.function("grid")
    assert grid.parameters == ["from_", "moved", "nx"]
    module = load(write_model(model, tmp_path / "model.py")[0])
    for nx, start, moved in ((10, 2, 7), (33, 5, 1)):
        result = module["evaluate"]("grid", nx=nx, from_=start, moved=moved)
        # two FP operations per inner iteration, (nx + 1) * (2 (nx + 1) - from) of them,
        # and one per iteration of the k loop
        assert result["fp_instructions"] == 2 * (nx + 1) * (2 * (nx + 1) - start) + moved
    main = next(f for f in summary(model)["functions"] if f["name"] == "main")
    assert list(main["parameters"]) == ["argc", "moved"]  # from = argc is bound by the call
    entry = next(f for f in summary(model)["functions"] if f["name"] == "grid")
    assert "nx^2" in entry["instructions"]
    assert "edgeNodes" not in entry["instructions"] and "plane" not in entry["parameters"]


STALE = """\
double sum(int n, const double *a) {
  double total = 0;
  for (int i = 0; i < n; i++)
    total += a[i];
  return total;
}

__attribute__((noinline)) double chunked(int n, const double *a) {
  const int chunks = CHUNKS;
  double total = 0;
  for (int c = 0; c < n / (chunks - 1); c++)
    total += a[c];
  return total;
}

int main(void) {
  static double a[64];
  return (int)(sum(8, a) + chunked(8, a));
}
"""


@needs_clang
def test_a_function_it_cannot_handle_is_skipped_with_its_reason(tmp_path, capsys):
    """The binary was built before ``chunks`` was edited to 1: that loop bound now divides
    by zero. Before, the whole file failed; now that function is listed and left out."""
    source = tmp_path / "stale.c"
    source.write_text(STALE.replace("CHUNKS", "3"))
    binary = compile_c(source, tmp_path / "stale", "-g", "-O1")
    source.write_text(STALE.replace("CHUNKS", "1"))
    output = tmp_path / "model.py"
    arguments = ["static", str(source), "--binary", str(binary), "-o", str(output)]
    assert cli.main([*arguments, "--cflags=-Wno-division-by-zero"]) == 0
    out = capsys.readouterr().out
    assert "skipped: chunked: `(n // (1 - 1))` divides by zero" in out
    assert "sum_(n): instructions = 4 * n" in out  # not the builtin the module uses
    data = json.loads(output.with_suffix(".json").read_text())
    assert [s["function"] for s in data["skipped"]] == ["chunked"]
    main = next(f for f in data["functions"] if f["name"] == "main")
    assert main["external_calls"] == ["chunked"]  # a call into what is not modeled
    assert load(output)["evaluate"]("sum_", n=100)["fp_instructions"] == 100


@needs_clang
def test_function_option_models_one_function_and_its_callees(tmp_path, capsys):
    source = write(tmp_path, "derived.c", DERIVED)
    binary = compile_c(source, tmp_path / "derived", "-g", "-O1", "-fno-inline")
    output = tmp_path / "model.py"
    arguments = ["static", str(source), "--binary", str(binary), "-o", str(output)]
    assert cli.main([*arguments, "--function", "main"]) == 0
    names = [f["name"] for f in json.loads(output.with_suffix(".json").read_text())["functions"]]
    assert names == ["grid", "main"]  # main calls grid, which stayed a call
    capsys.readouterr()
    assert cli.main([*arguments, "--function", "grid"]) == 0
    names = [f["name"] for f in json.loads(output.with_suffix(".json").read_text())["functions"]]
    assert names == ["grid"]
    capsys.readouterr()
    assert cli.main([*arguments, "--function", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert "--function nosuch: no such function" in err and "grid, main" in err


# --- MPI flags from the wrapper -------------------------------------------------------------

MPI_PROGRAM = """\
#include <mpi.h>
double halo(int n, const double *a) {
  double sum = 0;
  for (int i = 0; i < n; i++)
    sum += a[i];
  MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return sum;
}
int main(int argc, char **argv) {
  static double a[128];
  MPI_Init(&argc, &argv);
  halo(100, a);
  MPI_Finalize();
  return 0;
}
"""


@needs_mpi
def test_mpi_flags_come_from_the_wrapper_when_none_are_given(tmp_path, capsys):
    shown, flags = mpi_wrapper_flags("c")
    assert shown == "mpicc --showme:compile" and finds_mpi_header(flags)
    assert not finds_mpi_header(["-DN=3", f"-I{tmp_path}"])
    source = write(tmp_path, "halo.c", MPI_PROGRAM)
    binary = tmp_path / "halo"
    assert MPICC is not None
    subprocess.run([MPICC, "-g", "-O1", "-o", str(binary), str(source)], check=True)
    output = tmp_path / "model.py"
    assert cli.main(["static", str(source), "--binary", str(binary), "-o", str(output)]) == 0
    out = capsys.readouterr().out
    assert "note: parsing with the MPI flags of `mpicc --showme:compile`" in out
    assert "halo(n): instructions =" in out
    # Flags that already find mpi.h are the user's choice: nothing is added.
    include = next(f for f in flags if f.startswith("-I") and finds_mpi_header([f]))
    arguments = ["static", str(source), "--binary", str(binary), "-o", str(output)]
    assert cli.main([*arguments, f"--cflags={include}"]) == 0
    assert "note: parsing with the MPI flags" not in capsys.readouterr().out


# --- LULESH ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lulesh_binary(tmp_path_factory) -> Path:
    if not (LULESH / "lulesh.cc").is_file() or MPICXX is None or CLANG is None:
        pytest.skip("LULESH sources or MPI/clang are not installed")
    binary = tmp_path_factory.mktemp("lulesh") / "lulesh2.0"
    sources = sorted(str(p) for p in LULESH.glob("lulesh*.cc"))
    environment = {**os.environ, "OMPI_CXX": CLANG.replace("clang", "clang++")}
    command = [MPICXX, "-g", "-O3", "-DUSE_MPI=1", f"-I{LULESH}", *sources, "-o", str(binary)]
    subprocess.run(command, check=True, env=environment, capture_output=True)
    return binary


@pytest.mark.slow
@needs_mpi
def test_lulesh_is_modeled_without_a_traceback(lulesh_binary, tmp_path, capsys):
    """Regression for issue 12.8: clang -O3 LULESH ended in NameError: Real_t_4_0."""
    output = tmp_path / "lulesh.py"
    arguments = ["static", str(LULESH / "lulesh.cc"), "--binary", str(lulesh_binary)]
    assert cli.main([*arguments, "-o", str(output), "--cflags=-DUSE_MPI=1"]) == 0
    out = capsys.readouterr().out
    assert "note: parsing with the MPI flags of `mpicxx --showme:compile`" in out
    data = json.loads(output.with_suffix(".json").read_text())
    names = {f["name"] for f in data["functions"]}
    assert {"CalcKinematicsForElems", "LagrangeLeapFrog", "CalcElemVolume"} <= names
    assert all(s["reason"] for s in data["skipped"])
    module = load(output)
    result = module["evaluate"]("CalcKinematicsForElems", numElem=1000)
    small = module["evaluate"]("CalcKinematicsForElems", numElem=10)
    assert result["fp_instructions"] > small["fp_instructions"] > 0

    assert cli.main([*arguments, "-o", str(output), "--function", "CalcKinematicsForElems"]) == 2
    assert "You should specify USE_MPI" in capsys.readouterr().err
    arguments += ["-o", str(output), "--cflags=-DUSE_MPI=1"]
    assert cli.main([*arguments, "--function", "CalcKinematicsForElems"]) == 0
    data = json.loads(output.with_suffix(".json").read_text())
    roots = {f["name"] for f in data["functions"] if f["inlined_into"] is None}
    assert "CalcKinematicsForElems" in roots and "LagrangeLeapFrog" not in roots
    assert cli.main(["static", "eval", str(output), "--function", "CalcKinematicsForElems"]) == 2
    assert "needs values for ['numElem']" in capsys.readouterr().err
