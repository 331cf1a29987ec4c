"""What the LULESH/miniFE walkthrough (docs/walkthrough.md) exposed, each pinned down.

- miniFE's recursive ``std::_Rb_tree::_M_erase`` call paths of different depths shortened
  to the same text, so the summary printed them with their full 600-character spelling;
- notes and warnings listed dozens of full C++ signatures (LULESH's CalcEnergyForElems has
  24 parameters), and the taint summary aligned every dependency behind the longest one;
- ``perfcast static --cflags "-DUSE_MPI=1"``, spelled as its own help spells it, was refused
  by argparse, and a missing ``--binary`` got a bare usage line;
- a counting campaign whose ``[metrics] collect`` left the counters out was told to build
  with counters, which it had, and ``--metric cpu_time`` with ``--priors effort`` dropped the
  counters the priors are made from;
- after p = 1, 8, 27 (LULESH takes cube numbers of ranks only) the too-few-values warning
  asked for p = 46, 65.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from effort_helpers import fit_effort

from perfcast.cli import main
from perfcast.cli.taint import _summary
from perfcast.effort.combine import combine_sources
from perfcast.effort.report import short_notes
from perfcast.errors import InputError
from perfcast.experiment import write_experiment
from perfcast.experiment.experiment import Experiment, Metric
from perfcast.experiment.names import display_names, name_list, short_callpath
from perfcast.measure.profiles import RankProfile, UnmatchedFilterWarning, _warn_unmatched
from perfcast.modeling import ModelSet
from perfcast.modeling.advice import extend_series
from perfcast.modeling.provenance import SharedCores, models_note
from perfcast.taint.profile_model import FORMAT, TaintProfile

ERASE = (
    "std::_Rb_tree<int, std::pair<int const, int>, std::_Select1st<std::pair<int const, int> >, "
    "std::less<int>, std::allocator<std::pair<int const, int> > >::_M_erase("
    "std::_Rb_tree_node<std::pair<int const, int> >*)"
)
DRIVER = "int miniFE::driver<double, int, int>(Box const&, Box&, miniFE::Parameters&, YAML_Doc&)"
ENERGY = (
    "CalcEnergyForElems(double*, double*, double*, double*, double*, double*, double*, "
    "double*, double*, double*, double*, double*, double*, double, double, double, double, "
    "double, double*, double*, double, double, int, int*)"
)


def _recursion(depth: int) -> str:
    return "->".join(["main", DRIVER, *[ERASE] * depth])


def test_recursive_call_paths_of_different_depths_get_distinct_short_names():
    names = display_names([_recursion(6), _recursion(7)])
    assert names[_recursion(6)] == "main->miniFE::driver<...>->std::_Rb_tree<...>::_M_erase x6"
    assert names[_recursion(7)] == "main->miniFE::driver<...>->std::_Rb_tree<...>::_M_erase x7"


def test_instantiations_that_would_read_the_same_keep_their_template_arguments():
    """LULESH's vector allocations of int and of double: folded, both read
    ``std::vector<...>::resize``, and the note listed both full call paths (500 characters)."""
    frames = [
        "main",
        "Domain::AllocateElemPersistent(int)",
        "std::vector<{t}, std::allocator<{t}> >::resize(unsigned long)",
        "std::__new_allocator<{t}>::allocate(unsigned long, void const*)",
    ]
    of_int, of_double = ("->".join(frames).format(t=t) for t in ("int", "double"))
    overloads = ["main->f(int)", "main->f(double)"]
    names = display_names([of_int, of_double, *overloads])
    assert names[of_int] == (  # 100 characters at most: the middle frame elided
        "main->...->std::vector<int,std::allocator<int>>::resize->std::__new_allocator<int>::allocate"
    )
    assert "<double>::allocate" in names[of_double]
    assert [names[c] for c in overloads] == overloads  # the same name: the full spelling


def test_recursion_collapses_only_repeated_neighbours():
    assert short_callpath("main->f->g->f->f") == "main->f->g->f x2"


def test_a_note_lists_short_names_with_their_metrics_and_counts_the_rest():
    paths = [f"main->LagrangeLeapFrog(Domain&)->Comm{i}(Domain&, int)" for i in range(9)]
    tags = {path: ["cpu_time"] for path in paths}
    text = name_list(paths, tags=tags, shown=3)
    assert text == (
        "main->LagrangeLeapFrog->Comm0 [cpu_time], main->LagrangeLeapFrog->Comm1 [cpu_time], "
        "main->LagrangeLeapFrog->Comm2 [cpu_time] and 6 more"
    )


def test_taint_summary_lists_function_names_not_signatures(capsys):
    profile = TaintProfile.from_json(
        {
            "format": FORMAT,
            "parameters": {"size": {"loops": 3, "functions": 2, "branches": 1, "mpi": []}},
            "relevant": [ENERGY, "main"],
            "functions": {
                ENERGY: {"terms": [["size"]], "callpaths": {}},
                "main": {"terms": [["iterations", "size"]], "callpaths": {}},
            },
            "constant": [],
            "pruned": [],
            "warnings": [],
        }
    )
    _summary(profile)
    lines = capsys.readouterr().out.splitlines()
    assert "  CalcEnergyForElems  size" in lines
    assert "  main                iterations*size" in lines


def _perfcast(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "perfcast", *arguments],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_static_without_binary_says_what_is_missing(tmp_path):
    (tmp_path / "app.c").write_text("int main(void) { return 0; }\n")
    result = _perfcast("static", "app.c", "--function", "main", cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "missing --binary BINARY" in result.stderr
    assert "-o MODEL.py" in result.stderr


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("clang-16") is None, reason="needs clang-16")
def test_static_takes_cflags_that_start_with_a_dash(tmp_path):
    """The help's own spelling, ``--cflags "-DWITH_WORK"``: the macro reaches the parser
    (without it the function to model is not in the source at all)."""
    (tmp_path / "app.c").write_text(
        "#ifdef WITH_WORK\n"
        "double work(double *a, int n) {\n"
        "  double s = 0;\n"
        "  for (int i = 0; i < n; i++) s += a[i];\n"
        "  return s;\n"
        "}\n"
        "#endif\n"
        "int main(void) { return 0; }\n"
    )
    compile_command = ["clang-16", "-g", "-O1", "-DWITH_WORK", "app.c", "-o", "app"]
    subprocess.run(compile_command, cwd=tmp_path, check=True)
    result = _perfcast(
        "static", "app.c", "--binary", "app", "-o", "model.py", "--cflags", "-DWITH_WORK",
        "--function", "work", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "work(n): instructions" in result.stdout


def test_counts_left_out_by_metrics_collect_are_named_in_the_error():
    rows = [("main->kernel", "time", (1, size), 1e-9 * size**2) for size in (8, 16, 32)]
    light = Experiment.from_rows(("p", "size"), rows, [Metric("time", "s")], source="t.sqlite")
    counted = Experiment.from_rows(("p", "size"), rows, [Metric("time", "s")], source="c.sqlite")
    with pytest.raises(InputError) as error:
        combine_sources(light, counted)
    assert "[metrics] collect" in str(error.value)


def test_metric_selection_keeps_the_counters_effort_priors_are_made_from(tmp_path, capsys):
    """``--metric cpu_time --priors effort --effort-counts counts``, as the walkthrough runs
    it: the selection used to drop the counters, and every call path lost its prior with a
    note telling the user to build with counters, which they had."""
    points = [(p, n) for p in (2, 4, 8, 16) for n in (100, 200, 300, 400)]
    light = [("main->kernel", "cpu_time", point, 1e-9 * point[1] ** 2) for point in points]
    counted = [("main->kernel", "basic_blocks", pt, pt[1] ** 2 + 3.0 * pt[1]) for pt in points]
    write_experiment(Experiment.from_rows(("p", "n"), light), tmp_path / "light.json")
    write_experiment(Experiment.from_rows(("p", "n"), counted), tmp_path / "counts.json")
    models = tmp_path / "models.json"
    argv = ["model", str(tmp_path / "light.json"), "--priors", "effort", "-o", str(models)]
    argv += ["--effort-counts", str(tmp_path / "counts.json"), "--time-metric", "cpu_time"]
    assert main([*argv, "--metric", "cpu_time"]) == 0
    captured = capsys.readouterr()
    assert "no effort counters" not in captured.out + captured.err
    kernel = ModelSet.load(models)[("main->kernel", "cpu_time")]
    assert kernel.prior is not None and kernel.prior.startswith("effort")
    assert "Costliest call paths at p=16, n=400: cpu_time" in captured.out


def test_too_few_values_suggests_the_next_cube_numbers_of_ranks():
    """LULESH runs on cube numbers of ranks only: after p = 1, 8, 27 the warning asked for
    p = 46, 65, which LULESH refuses; the next cubes are 64 and 125."""
    assert extend_series(np.array([1.0, 8.0, 27.0]), 2) == [64.0, 125.0]
    assert extend_series(np.array([1.0, 4.0, 9.0, 16.0]), 1) == [25.0]
    assert extend_series(np.array([10.0, 20.0, 30.0]), 2) == [40.0, 50.0]  # unchanged


def test_shared_core_note_names_functions_not_signatures():
    callpath = f"main->LagrangeLeapFrog(Domain&)->{ENERGY}"
    shared = SharedCores(ranks_parameter="p", ranks_on={2: (8, 27)}, models=frozenset())
    note = models_note([(callpath, "time"), ("main", "time")], shared)
    assert "(time of main, time of main->LagrangeLeapFrog->CalcEnergyForElems)" in note
    assert "double*" not in note


def test_effort_report_heads_each_block_with_the_short_call_path():
    points = [(p, n) for p in (2, 4, 8, 16) for n in (100, 200, 300, 400)]
    kernel = f"main->{ENERGY}"
    rows = [(kernel, "basic_blocks", pt, pt[1] ** 2 + 3.0 * pt[1]) for pt in points]
    rows += [(kernel, "time", pt, 1e-9 * pt[1] ** 2) for pt in points]
    result, derived = fit_effort(Experiment.from_rows(("p", "n"), rows))
    report = derived.report(result.models, result.free)
    assert "main->CalcEnergyForElems  [computation]" in report.splitlines()


def test_unmatched_filter_warning_names_functions_not_signatures():
    """LULESH at -O2 without keep_inlined: 27 filter entries inlined away, each listed with its
    full parameter list (CalcEnergyForElems alone has 24)."""
    profile = RankProfile(
        path=Path("rank-0.pcprof"), rank=0, ranks=1, run="r", program="./lulesh2.0",
        counters=False, cpu_time=False, functions_measured=1, functions_total=2,
        filter_source="lulesh.taint.json", unmatched_filter=[ENERGY, "CalcForceForNodes(Domain&)"],
        threads=1, outside_basic_blocks=0, callpaths={},
    )  # fmt: skip
    with pytest.warns(UnmatchedFilterWarning) as caught:
        _warn_unmatched([[profile]])
    text = str(caught[0].message)
    assert "2 in ./lulesh2.0 (CalcEnergyForElems, CalcForceForNodes)" in text


def test_effort_notes_name_call_paths_as_the_report_blocks_do():
    """LULESH's `... has no communication law` notes printed full C++ signatures; the note
    keeps its text and shows the call path by the name the blocks above use."""
    signature = "main->CommSend(Domain&, int, int, double& (Domain::**)(int), int)->MPI_Waitall"
    notes = [
        f"{signature}: MPI_Waitall has no communication law (Table I); modeled classically",
        "Every call path is modeled classically.",
    ]
    shown = short_notes(notes, [signature, "main"])
    assert shown == [
        "main->CommSend->MPI_Waitall: MPI_Waitall has no communication law (Table I); "
        "modeled classically",
        "Every call path is modeled classically.",
    ]
