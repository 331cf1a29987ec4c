"""Priors as one stage (:mod:`perfcast.priors`) and fitted models as facts.

The composition's rules one by one (restrictions intersect, a fixed structure wins, every
conflict is a finding), immutable models and findings that name their stage and are never
repeated, the model file's findings, ``perfcast model --priors`` in combination, and end to
end: the static model of a small C program fixes the terms of its measured time.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import textwrap
from fractions import Fraction
from itertools import product
from pathlib import Path

import pytest

from perfcast import cli
from perfcast.errors import InputError
from perfcast.experiment import write_experiment
from perfcast.experiment.experiment import Experiment
from perfcast.modeling import PMNFModeler
from perfcast.modeling.findings import Finding
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.pmnf import Factor, Model
from perfcast.modeling.prior import DerivedPriors, Prior
from perfcast.priors import PriorSource, compose, fit_with_priors, intersect
from perfcast.static.prior import StaticSource, parse_rename, prior_from_formula
from perfcast.static.summary import StaticSummary, parse_formula
from perfcast.taint.profile_model import FORMAT, TaintProfile
from perfcast.taint.source import TaintSource
from perfcast.taint.validity import flag_models, match_profile

N = Factor("n", Fraction(1))
N2 = Factor("n", Fraction(2))
P = Factor("p", Fraction(1))
KEY = ("main->kernel", "time")


def derived(source: str, prior: Prior, **extra) -> DerivedPriors:
    return DerivedPriors(source, {KEY: prior}, **extra)


# -- composition ---------------------------------------------------------------------------


def test_restrictions_intersect_parameters_and_products() -> None:
    taint = Prior("taint", frozenset({"n", "p", "q"}), (frozenset({"n", "p"}), frozenset("q")))
    other = Prior("other", frozenset({"n", "p"}), (frozenset({"n", "p", "q"}),))
    composition = compose([derived("taint", taint), derived("other", other)])
    prior = composition.priors[KEY]
    assert prior.parameters == {"n", "p"} and prior.multiplicative == (frozenset({"n", "p"}),)
    assert prior.source == "taint+other" and composition.findings == ()
    # a restriction without products leaves the other's
    assert intersect([Prior("a", frozenset({"n"})), taint]).multiplicative == taint.multiplicative
    assert intersect([Prior.constant("a"), taint]).describe() == "a+taint: constant"


def test_a_fixed_structure_wins_over_a_restriction_and_says_what_it_overrode() -> None:
    effort = Prior.fixed("effort", [(N,), (P,)])
    taint = Prior("taint", frozenset({"n"}))
    composition = compose([derived("taint", taint), derived("effort", effort)])
    assert composition.priors[KEY] == effort
    (finding,) = composition.findings
    assert (finding.stage, finding.kind, finding.callpath, finding.metric) == (
        "priors",
        "ruled-out",
        *KEY,
    )
    assert "depends on p, which the taint prior rules out" in finding.message
    assert "the effort prior is kept" in finding.message
    assert composition.ruled_out == {KEY[0]: {"p"}}
    # the evidence, not the structure, is compared: a law's log2(p) latency was not counted
    quiet = compose([derived("taint", taint), derived("effort", effort, evidence={KEY: {"n"}})])
    assert quiet.findings == () and quiet.priors[KEY] == effort


def test_two_fixed_structures_that_differ_are_a_finding_and_effort_wins() -> None:
    static = Prior.fixed("static", [(N2,), (N,)])
    effort = Prior.fixed("effort", [(N2,)])
    composition = compose([derived("static", static), derived("effort", effort)])
    assert composition.priors[KEY] == effort  # measured counts before source analysis
    (finding,) = composition.findings
    assert finding.kind == "fixed-conflict" and "the effort prior wins" in finding.message
    # the same terms in another order are no conflict
    same = compose([derived("static", Prior.fixed("static", [(N,), (N2,)])), derived("e", static)])
    assert same.findings == ()


def test_an_advisory_source_is_compared_but_constrains_nothing() -> None:
    taint = derived("taint", Prior("taint", frozenset({"n"})), advisory=True)
    alone = compose([taint])
    assert alone.priors == {}
    with_effort = compose([taint, derived("effort", Prior.fixed("effort", [(P,)]))])
    assert with_effort.priors[KEY].source == "effort" and with_effort.ruled_out == {KEY[0]: {"p"}}


# -- models are facts ------------------------------------------------------------------------


def test_models_and_findings_are_immutable() -> None:
    model = Model("f", "time", 1.0, warnings=("fit: few points",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        model.constant = 2.0  # type: ignore[misc]
    with pytest.raises(AttributeError):
        model.warnings.append("later stage")  # type: ignore[attr-defined]
    finding = Finding("taint", "f", None, "contention", "depends on p")
    with pytest.raises(dataclasses.FrozenInstanceError):
        finding.message = "other"  # type: ignore[misc]
    with pytest.raises(ValueError, match="unknown finding stage"):
        Finding("later", "f", None, "x", "y")
    models = ModelSet(["p"], [model])
    once = models.with_findings([finding])
    assert models.findings == () and once.findings == (finding,)  # a new set, the old as it was
    assert once.with_findings([finding]).findings == (finding,)
    assert once.notes(("f", "time")) == ["fit: few points", "[taint] depends on p"]


def _profile() -> TaintProfile:
    """A taint profile of ``main->kernel`` (depends on n; a branch decided by n)."""
    switch = {"line": 7, "params": ["n"], "evaluated": 1, "taken": 1, "calls": []}
    entry = {"terms": [["n"]], "exclusive_terms": [["n"]], "visits_terms": []}
    functions = {
        "kernel": {
            "file": "kern.c",
            "terms": [["n"]],
            "callpaths": {"main->kernel": entry},
            "branches": [switch],
        },
    }
    data = {"format": FORMAT, "parameters": {"n": {}, "p": {}}, "functions": functions}
    return TaintProfile.from_json({**data, "pruned": [], "constant": []})


def _contended() -> Experiment:
    """``main->kernel``: n^2 work and n of setup, slowed by log2(p) contention."""
    rows = []
    for n, p, repetition in product((100, 200, 300, 400, 500), (2, 4, 8, 16, 32), range(3)):
        jitter = 1 + 0.003 * ((repetition * 7 + n + p) % 5 - 2)
        time = (2e-8 * n * n + 1e-6 * n) * (1 + 0.05 * (p.bit_length() - 1))
        rows.append(("main->kernel", "time", (n, p), time * jitter))
    return Experiment.from_rows(("n", "p"), rows)


def test_flagging_twice_repeats_nothing() -> None:
    experiment = _contended()
    profile = _profile()
    match = match_profile(profile, experiment)
    free = PMNFModeler().fit(experiment)
    once = flag_models(free, free, profile, experiment, match)
    kinds = sorted(f.kind for f in once.findings)
    assert kinds == ["algorithm-switch", "contention"]
    assert all(f.stage == "taint" for f in once.findings)
    assert flag_models(once, free, profile, experiment, match).findings == once.findings
    assert free.findings == ()  # the set flagged is untouched


def test_model_file_keeps_findings_with_their_stage_and_reads_old_files(tmp_path: Path) -> None:
    model = Model("main->kernel", "time", 1.5, warnings=("fit fact",))
    finding = Finding("conflict", *KEY, "prior-conflict", "the black-box model is kept")
    path = tmp_path / "models.json"
    ModelSet(["n"], [model], findings=[finding]).save(path)
    loaded = ModelSet.load(path)
    assert loaded.findings == (finding,) and loaded.findings[0].stage == "conflict"
    assert loaded[KEY].warnings == ("fit fact",)
    # a file written before findings existed: every warning on its model
    data = json.loads(path.read_text())
    del data["findings"]
    data["models"][0]["warnings"] = ["fit fact", "depends on p: contention"]
    path.write_text(json.dumps(data))
    old = ModelSet.load(path)
    assert old.findings == () and old[KEY].warnings == ("fit fact", "depends on p: contention")
    data["findings"] = [{"stage": "later", "callpath": "f", "kind": "x", "message": "y"}]
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"models.json: findings\[0\] has stage 'later'"):
        ModelSet.load(path)


# -- the pipeline ----------------------------------------------------------------------------


def summary(instructions: str) -> StaticSummary:
    entry = {"name": "kernel", "counts": {}, "instructions": instructions, "fp_instructions": "0"}
    return StaticSummary.from_json({"functions": [entry]})


def test_static_terms_and_taint_flags_in_one_fit() -> None:
    """The static formula fixes the terms of time; taint's restriction to n agrees, so
    nothing conflicts, and its check still finds the contention in p."""
    experiment = _contended()
    sources: list[PriorSource] = [
        TaintSource(_profile()),
        StaticSource(summary("6 * n^2 + 10 * n")),
    ]
    fit = fit_with_priors(PMNFModeler(), experiment, sources)
    model = fit.models[KEY]
    assert model.prior == "static: fixed terms [n, n^(2)]"
    assert {t.shape for t in model.terms} <= {(N,), (N2,)}
    assert model.leading_exponents()["n"] == (2, 0) and "p" not in model.parameters
    assert "p" in fit.free[KEY].parameters  # the black-box fit saw the contention
    assert fit.composition.findings == ()
    stages = {f.stage: f.kind for f in fit.models.findings if f.metric in (None, "time")}
    assert stages["taint"] in ("contention", "algorithm-switch")
    assert any(f.kind == "contention" for f in fit.models.findings)


def test_static_parameters_the_experiment_lacks_are_noted_not_fitted() -> None:
    result = StaticSource(summary("m * n")).derive(_contended())
    assert result.priors == {}
    assert "use parameters the measurements do not vary" in result.notes[0]
    with pytest.raises(InputError, match="lack"):
        StaticSource(summary("n"), metric="cpu_time").derive(_contended())


def test_renamed_static_parameters_multiply_and_calls_scale_the_formula() -> None:
    """sweep(cols, rows) on a size x size block: cols * rows is size^2 once renamed; it is
    called ``it`` times per run, so measured time has the terms it*size^2 and it*size."""
    rename = parse_rename("cols=size, rows=size", "--static-rename")
    assert rename == {"cols": "size", "rows": "size"}
    sweep = "21 * cols * rows + 11 * rows + 30"
    formula = parse_formula(sweep)
    assert prior_from_formula(formula, rename).describe() == "static: fixed terms [size, size^(2)]"
    rows = []
    for size, it, repetition in product((32, 64, 96, 128, 160), (10, 20, 30, 40, 50), range(2)):
        work = it * (21 * size * size + 11 * size + 30) * 1e-9 * (1 + 0.01 * repetition)
        rows += [
            ("main->sweep", "time", (size, it), work),
            ("main->sweep", "visits", (size, it), float(it)),
        ]
    experiment = Experiment.from_rows(("size", "it"), rows)
    entry = {"name": "sweep", "counts": {}, "instructions": sweep, "fp_instructions": "0"}
    summary = StaticSummary.from_json({"functions": [entry]})
    derived = StaticSource(summary, rename=rename).derive(experiment)
    prior = derived.priors[("main->sweep", "time")]
    assert prior.describe() == "static: fixed terms [it, it * size, it * size^(2)]"
    fit = fit_with_priors(PMNFModeler(), experiment, [StaticSource(summary, rename=rename)])
    assert fit.models[("main->sweep", "time")].prior == prior.describe()
    for bad in ("cols", "cols=size,cols=p", "1x=size"):
        with pytest.raises(InputError, match="--static-rename"):
            parse_rename(bad, "--static-rename")


def test_cli_names_the_input_a_prior_source_needs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "times.json"
    write_experiment(_contended(), data)
    assert cli.main(["model", str(data), "--priors", "taint"]) == 2
    assert "--priors taint needs its input: add --taint PROFILE" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["model", str(data), "--priors", "effort,guess"])
    assert "guess: give prior sources from effort, static, taint" in capsys.readouterr().err
    missing = tmp_path / "none.json"
    assert cli.main(["model", str(data), "--static", str(missing)]) == 2
    assert "none.json: no such static model summary" in capsys.readouterr().err


def test_all_three_sources_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Counts and the static formula fix different terms (effort wins, the finding says
    so); taint's restriction agrees with both; every finding survives the model file."""
    experiment = _contended()
    counts = [
        ("main->kernel", "basic_blocks", (n, p), float(6 * n * n + 10 * n))
        for n, p in product((100, 200, 300, 400, 500), (2, 4, 8, 16, 32))
    ]
    rows = [(c, m, (n, p), v) for c, m, n, p, v in _rows(experiment)] + counts
    data, out = tmp_path / "times.json", tmp_path / "models.json"
    write_experiment(Experiment.from_rows(("n", "p"), rows), data)
    profile = tmp_path / "kern.taint.json"
    profile.write_text(json.dumps(_profile().to_json()))
    static = tmp_path / "model.json"
    entry = {"name": "kernel", "counts": {}, "instructions": "3 * n^3", "fp_instructions": "0"}
    static.write_text(json.dumps({"functions": [entry]}))
    argv = ["model", str(data), "--priors", "taint,effort,static", "--taint", str(profile)]
    assert cli.main([*argv, "--static", str(static), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Effort priors (noise-resilient-priors.txt)" in printed
    assert "Priors (effort, static, taint) composed" in printed
    assert "fixed structures of two sources differ on 1 call path(s)" in printed
    saved = ModelSet.load(out)
    assert (saved[KEY].prior or "").startswith("effort")
    stages = {f.stage for f in saved.findings}
    assert {"priors", "taint"} <= stages
    (conflict,) = [f for f in saved.findings if f.kind == "fixed-conflict"]
    assert "effort and static priors fix different terms" in conflict.message
    assert "the effort prior wins" in conflict.message


def _rows(experiment: Experiment) -> list[tuple[str, str, float, float, float]]:
    data = experiment.data
    return list(
        zip(data["callpath"], data["metric"], data["n"], data["p"], data["value"], strict=True)
    )


# -- end to end: perfcast static fixes the terms of measured time ---------------------------

KERNEL = """\
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

__attribute__((noinline)) double kernel(int n, double *a) {
  double sum = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      sum += a[i] * a[j];
  for (int i = 0; i < n; i++)
    a[i] = sum * 1e-9;
  return sum;
}

int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  double *a = malloc(sizeof(double) * n);
  for (int i = 0; i < n; i++) a[i] = i % 7;
  struct timespec start, stop;
  clock_gettime(CLOCK_MONOTONIC, &start);
  double sum = kernel(n, a);
  clock_gettime(CLOCK_MONOTONIC, &stop);
  printf("%.9f %g\\n", (stop.tv_sec - start.tv_sec) + 1e-9 * (stop.tv_nsec - start.tv_nsec), sum);
  free(a);
  return 0;
}
"""

CLANG = shutil.which("clang-16") or shutil.which("clang")


@pytest.mark.skipif(CLANG is None, reason="clang is not installed")
def test_static_model_fixes_the_terms_of_a_measured_program(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("islpy")
    pytest.importorskip("clang.cindex")
    assert CLANG is not None
    source = tmp_path / "kern.c"
    source.write_text(textwrap.dedent(KERNEL))
    binary = tmp_path / "kern"
    subprocess.run([CLANG, "-g", "-O1", "-o", str(binary), str(source)], check=True)
    model_py = tmp_path / "model.py"
    assert cli.main(["static", str(source), "--binary", str(binary), "-o", str(model_py)]) == 0
    assert "kernel(n): instructions = 6 * n^2" in capsys.readouterr().out
    rows = []  # measured: the program times its kernel
    for n, _ in product((500, 1000, 1500, 2000, 2500), range(3)):
        printed = subprocess.run([str(binary), str(n)], check=True, capture_output=True)
        rows.append(("main->kernel", "time", (n,), float(printed.stdout.split()[0])))
    data, models = tmp_path / "times.json", tmp_path / "models.json"
    write_experiment(Experiment.from_rows(("n",), rows), data)
    argv = ["model", str(data), "--priors", "static", "--static", str(model_py), "-o", str(models)]
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    assert "Priors (static) composed" in captured.out
    assert "1 function(s) of the static model match no measured call path: main" in captured.err
    saved = ModelSet.load(models)
    kernel = saved[KEY]
    notes = saved.notes(KEY)
    if kernel.prior is None:  # a loaded machine made the static terms fit far worse
        assert any("static-prior model:" in w and "black-box model:" in w for w in notes)
    else:
        assert kernel.prior == "static: fixed terms [n, n^(2)]"
        assert {t.shape for t in kernel.terms} <= {(N,), (N2,)}
        assert kernel.leading_exponents()["n"] == (2, 0)
