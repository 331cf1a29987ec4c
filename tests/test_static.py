"""perfcast static: domains against enumeration, annotations, binary mapping against
callgrind, the generated model, the CLI and bad input. Real clang, isl, valgrind."""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from fractions import Fraction
from pathlib import Path

import pytest

pytest.importorskip("islpy")
pytest.importorskip("clang.cindex")

from perfcast import cli
from perfcast.errors import InputError
from perfcast.modeling.pmnf import Factor
from perfcast.static import analyze, load_architecture, prior_from_summary
from perfcast.static.arch import DEFAULT_ARCHITECTURE
from perfcast.static.callgrind import run_callgrind
from perfcast.static.codegen import summary, write_model
from perfcast.static.domains import Counter, DomainBuilder, Instance, Place, Symbol
from perfcast.static.formulas import python_expression
from perfcast.static.source import parse_source
from perfcast.static.summary import StaticSummary, read_static_summary

CLANG = shutil.which("clang-16") or shutil.which("clang")
needs_clang = pytest.mark.skipif(CLANG is None, reason="clang is not installed")
needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None, reason="no valgrind")


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return path


def compile_c(source: Path, output: Path, *flags: str) -> Path:
    assert CLANG is not None
    compiler = CLANG.replace("clang", "clang++") if source.suffix == ".cpp" else CLANG
    subprocess.run([compiler, *flags, "-o", str(output), str(source)], check=True)
    return output


def count(place: Place, point: dict[str, int]) -> Fraction:
    domain = DomainBuilder().domain(place)
    symbol = Symbol(domain.isl_text(), False, domain.multipliers, "")
    return eval(python_expression(Counter().count(symbol)), {"F": Fraction}, dict(point))


NESTS = """\
void nests(int n, int m, double *a) {
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) {
      if (j % 4 != 0)
        a[j] += 1.0;
      else
        a[i] -= 1.0;
    }
  for (int i = n; i > 0; i -= 3)
    for (int j = 0; j <= i && j < m; j++)
      if (j > 4 || j == 1)
        a[j] = 0;
}
"""


def test_domains_match_brute_force_enumeration(tmp_path):
    function = parse_source(write(tmp_path, "nests.c", NESTS)).functions[0]
    instance = Instance(function, {})
    by_line = {
        node.line: Place(instance, node) for node in function.root.walk() if node.kind != "body"
    }

    def brute(n: int, m: int) -> dict[int, int]:
        counts = dict.fromkeys((2, 3, 5, 7, 9, 10, 12), 0)
        for i in range(n):
            counts[2] += 1
            for j in range(i + 1, n):
                counts[3] += 1
                counts[5 if j % 4 != 0 else 7] += 1
        for i in range(n, 0, -3):
            counts[9] += 1
            j = 0
            while j <= i and j < m:
                counts[10] += 1
                counts[12] += 1 if (j > 4 or j == 1) else 0
                j += 1
        return counts

    for n in (0, 1, 2, 5, 9, 14):
        for m in (0, 3, 8):
            expected = brute(n, m)
            for line, value in expected.items():
                assert count(by_line[line], {"n": n, "m": m}) == value, (line, n, m)


ANNOTATED = """\
int pick(int);
void annotated(int n, const int *lo, const int *hi, double *a, int k) {
  for (int r = 0; r < n; r++)
    for (int q = lo[r]; q < hi[r]; q++) {
#pragma @Annotation {lp_init:x, lp_cond:y}
      a[q] += 1.0;
    }
  int t = 0;
  while (t < pick(k)) {
#pragma @Annotation {lp_iters:w}
    t++;
  }
  for (int r = 0; r < n; r++)
    if (pick(r) > 3) {
#pragma @Annotation {skip:yes}
      a[r] = 0;
    }
}
"""


def test_annotations_complete_the_polyhedral_model(tmp_path):
    function = parse_source(write(tmp_path, "annotated.c", ANNOTATED)).functions[0]
    instance = Instance(function, {})
    loops = {n.line: n for n in function.root.walk() if n.kind == "loop"}
    inner = loops[4].loop
    assert inner is not None and inner.unknown is None
    assert count(Place(instance, loops[4]), {"n": 7, "x": 2, "y": 10}) == 7 * 8
    assert loops[9].loop is not None and loops[9].loop.iterations == "w"
    assert count(Place(instance, loops[9]), {"w": 12}) == 12
    skipped = [n for n in function.root.walk() if n.kind == "branch"]
    assert skipped and skipped[0].skipped


def test_unknown_annotation_key_is_reported_with_its_line(tmp_path):
    source = write(
        tmp_path,
        "bad.c",
        "void f(int n) {\n  for (int i = 0; i < n; i++) {\n"
        "#pragma @Annotation {lp_bogus:3}\n  }\n}\n",
    )
    with pytest.raises(InputError, match=r"bad.c:3: unknown annotation key"):
        parse_source(source)


KERNELS = """\
#include <stdlib.h>
#include <stdio.h>
__attribute__((noinline)) void triad(int n, double *restrict a, const double *restrict b,
                                     const double *restrict c, double s) {
  for (int i = 0; i < n; i++)
    a[i] = b[i] + s * c[i];
}
__attribute__((noinline)) void tri(int n, double *restrict x, const double *restrict y) {
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) {
      if (j % 4 != 0)
        x[j] += y[i] * y[j];
      else
        x[j] -= 0.5 * y[i];
    }
}
int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  double *a = calloc(n, 8), *b = calloc(n, 8), *c = calloc(n, 8);
  triad(n, a, b, c, 3.0);
  tri(n, a, b);
  printf("%g\\n", a[n - 1]);
  return 0;
}
"""


def measured(profile, binary: Path, function: str, arch) -> tuple[int, int]:
    from perfcast.static.disassembly import load_binary

    functions, _ = load_binary(binary)
    target = next(f for f in functions if f.name == function)
    mnemonics = {i.address: i.mnemonic for i in target.instructions()}
    fp = total = 0
    for address, value in profile.by_address.items():
        if target.low <= address < target.high:
            total += value
            if arch.categorize(mnemonics[address]) in arch.floating_point:
                fp += value
    return fp, total


@pytest.mark.slow
@needs_clang
@needs_valgrind
@pytest.mark.parametrize("level", ["-O2", "-O3"])
def test_model_matches_callgrind_exactly(tmp_path, level):
    source = write(tmp_path, "kernels.c", KERNELS)
    binary = compile_c(source, tmp_path / "kernels", "-g", level)
    model = analyze(source, binary)
    module_path, json_path = write_model(model, tmp_path / "model.py")
    namespace: dict = {}
    exec(module_path.read_text(), namespace)
    arch = load_architecture()
    for n in (37, 64):
        profile = run_callgrind([str(binary), str(n)], tmp_path / "cg.out")
        for function in ("triad", "tri"):
            fp, total = measured(profile, binary, function, arch)
            predicted = namespace["evaluate"](function, n=n)
            assert (predicted["fp_instructions"], predicted["instructions"]) == (fp, total)
    data = json.loads(json_path.read_text())
    entry = next(f for f in data["functions"] if f["name"] == "tri")
    assert entry["parameters"] == {"n": "variable n"}
    assert entry["fp_instructions"] == "n^2 - n"
    # the prior stage's reader takes what the writer wrote, formulas and all
    tri = read_static_summary(json_path).function("tri")
    assert tri.formula("fp_instructions").terms == {
        (("n", 2),): Fraction(1),
        (("n", 1),): Fraction(-1),
    }
    assert tri.parameters == {"n": "variable n"}


TEMPLATES = """\
#include <cstdlib>
#include <cstdio>
template <typename T> T dot(int n, const T *x, const T *y) {
  T sum = 0;
  for (int i = 0; i < n; i++)
    sum += x[i] * y[i];
  return sum;
}
__attribute__((noinline)) double run(int n, int reps, const double *x) {
  double total = 0;
  for (int r = 0; r < reps; r++)
    total += dot<double>(n, x, x);
  return total;
}
int main(int argc, char **argv) {
  int n = std::atoi(argv[1]);
  double *x = static_cast<double *>(std::calloc(n, sizeof(double)));
  std::printf("%g\\n", run(n, 3, x));
  return 0;
}
"""


@pytest.mark.slow
@needs_clang
@needs_valgrind
def test_inlined_template_is_credited_to_its_callee(tmp_path):
    source = write(tmp_path, "tpl.cpp", TEMPLATES)
    binary = compile_c(source, tmp_path / "tpl", "-g", "-O2")
    model = analyze(source, binary)
    run_model = model.function("run")
    inlined = [c.callee for c in run_model.calls if c.callee.startswith("dot__inlined")]
    assert inlined, [c.callee for c in run_model.calls]
    assert model.function(inlined[0]).source_name == "dot"
    module_path, _ = write_model(model, tmp_path / "model.py")
    namespace: dict = {}
    exec(module_path.read_text(), namespace)
    profile = run_callgrind([str(binary), "101"], tmp_path / "cg.out")
    fp, total = measured(profile, binary, run_model.binary_symbol, load_architecture())
    predicted = namespace["evaluate"]("run", n=101, reps=3)
    assert predicted["fp_instructions"] == fp
    assert predicted["instructions"] == total


@needs_clang
def test_cli_builds_and_evaluates(tmp_path, capsys):
    source = write(tmp_path, "kernels.c", KERNELS)
    binary = compile_c(source, tmp_path / "kernels", "-g", "-O2")
    model = tmp_path / "model.py"
    assert cli.main(["static", str(source), "--binary", str(binary), "-o", str(model)]) == 0
    assert "tri(n): instructions =" in capsys.readouterr().out
    assert cli.main(["static", "eval", str(model), "--function", "tri", "n=100", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["fp_instructions"] == 100 * 99
    assert set(result) >= {"counts", "fp_instructions", "instructions"}
    assert cli.main(["static", "eval", str(model), "--function", "tri"]) == 2
    assert "needs values for ['n']" in capsys.readouterr().err


@needs_clang
def test_names_in_the_generated_model_stay_data(tmp_path, capsys, monkeypatch):
    """A file or architecture name cannot close the model's docstring and run as code when
    the model is loaded (issue 27, class 1)."""
    monkeypatch.chdir(tmp_path)
    payload = '"""+str(__import__("os").system("touch INJECTED"))+"""'
    source = write(tmp_path, f"inj{payload}.c", KERNELS)
    binary = compile_c(source, tmp_path / f"bin{payload}", "-g", "-O2")
    arch = tmp_path / "arch.yaml"
    described = DEFAULT_ARCHITECTURE.read_text()
    arch.write_text(described.replace("name: x86-64", f"name: 'x86{payload}'", 1))
    model = tmp_path / "model.py"
    argv = ["static", str(source), "--binary", str(binary), "--arch", str(arch), "-o", str(model)]
    assert cli.main(argv) == 0
    capsys.readouterr()
    assert cli.main(["static", "eval", str(model), "--function", "tri", "n=100", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fp_instructions"] == 100 * 99
    assert not (tmp_path / "INJECTED").exists()
    header = model.read_text().split(3 * '"')[1]  # the module docstring, whole
    shown = payload.replace('"', "'")  # the names as text, their double quotes made single
    assert f"inj{shown}.c" in header and f"bin{shown}" in header and f"x86{shown}" in header


@needs_clang
def test_bad_input_gets_clear_messages(tmp_path, capsys):
    broken = write(tmp_path, "broken.c", "int f(int n) { return n +; }\n")
    assert (
        cli.main(["static", str(broken), "--binary", str(broken), "-o", str(tmp_path / "m.py")])
        == 2
    )
    assert "broken.c:1: does not compile" in capsys.readouterr().err
    source = write(tmp_path, "kernels.c", KERNELS)
    stripped = compile_c(source, tmp_path / "nodebug", "-O2")
    assert (
        cli.main(["static", str(source), "--binary", str(stripped), "-o", str(tmp_path / "m.py")])
        == 2
    )
    assert "no DWARF debug information: rebuild it with -g" in capsys.readouterr().err


WHILE_LOOP = """\
int next(int);
__attribute__((noinline)) int walk(int n, double *a) {
  int steps = 0;
  for (int i = 0; i < n; i++) {
    int k = 0;
    while (k < next(i)) {
      a[i] += k;
      k++;
    }
    steps += k;
  }
  return steps;
}
int next(int i) { return i % 3; }
int main(void) { double a[8] = {0}; return walk(8, a); }
"""


@needs_clang
def test_loop_outside_the_model_becomes_a_named_parameter(tmp_path):
    source = write(tmp_path, "walk.c", WHILE_LOOP)
    binary = compile_c(source, tmp_path / "walk", "-g", "-O1", "-fno-inline")
    model = analyze(source, binary)
    walk = model.function("walk")
    assert "iters_6" in walk.parameters
    assert "while loop" in walk.own_parameters["iters_6"]
    data = summary(model)
    entry = next(f for f in data["functions"] if f["name"] == "walk")
    assert "iters_6" in entry["instructions"]


def test_static_formula_becomes_a_fixed_prior():
    data = {
        "functions": [
            {
                "name": "dgemm",
                "counts": {},
                "instructions": "6 * n^3 + 0.5 * n^2 + 3",
                "fp_instructions": "2 * n^3",
            }
        ]
    }
    model = StaticSummary.from_json(data)
    prior = prior_from_summary(model, "dgemm", rename={"n": "size"})
    assert prior.source == "static"
    assert prior.structure == (
        (Factor("size", Fraction(2)),),
        (Factor("size", Fraction(3)),),
    )
    with pytest.raises(InputError, match="no function"):
        prior_from_summary(model, "other")


def test_a_byte_that_is_not_utf8_in_a_comment_is_read_and_said(tmp_path):
    """Old codes carry Latin-1 comments; libclang's binding decodes tokens as UTF-8."""
    source = tmp_path / "latin1.c"
    source.write_bytes(
        b"int kernel(int n) {\n  /* \xe9t\xe9 \xff */\n  int s = 0;\n"
        b"  for (int i = 0; i < n; i++) s += i;\n  return s;\n}\n"
    )
    program = parse_source(source)
    (kernel,) = program.functions
    assert kernel.name == "kernel"
    assert any(
        "latin1.c:2: bytes that are not UTF-8 (the first 0xe9)" in w for w in program.warnings
    )


@needs_clang
def test_an_include_of_a_device_is_refused_with_its_line(tmp_path):
    """``#include "/dev/zero"`` made libclang read without end in perfcast's own process
    (15 GB, then the kernel's out-of-memory kill; issue 27's static fuzz suite)."""
    source = write(tmp_path, "app.c", 'int f(int n) {\n#include "/dev/zero"\n  return n; }\n')
    with pytest.raises(InputError, match=r"#include of /dev/zero, which is not a regular file"):
        parse_source(source)


@needs_clang
def test_a_function_of_an_included_header_is_named_where_it_is(tmp_path, capsys):
    """miniFE's waxpby is a template of a header that main.cpp includes: asked for it, the
    user learns where it is and what to model instead, not only this file's functions."""
    write(tmp_path, "axpy.hpp", """\
        namespace la {
        template <typename T> void axpy(int n, T a, const T *x, T *y) {
            for (int i = 0; i < n; i++) y[i] += a * x[i];
        }
        }
        """)  # fmt: skip
    source = write(tmp_path, "main.cpp", """\
        #include "axpy.hpp"
        double solve(int n, double *x, double *y) { la::axpy(n, 2.0, x, y); return y[0]; }
        int main() { double x[4] = {1, 2, 3, 4}, y[4] = {0}; return (int)solve(4, x, y); }
        """)  # fmt: skip
    binary = compile_c(source, tmp_path / "main", "-g", "-O2")
    argv = ["static", str(source), "--binary", str(binary), "-o", str(tmp_path / "m.py")]
    assert cli.main([*argv, "--function", "axpy"]) == 2
    error = capsys.readouterr().err
    assert "la::axpy is defined in" in error and "axpy.hpp:2, a header this file includes" in error
    assert "model the function of this file that calls it" in error
