"""Effort priors and taint analysis together (``perfcast model --priors effort --taint``).

First on measurements built row by row with a hand-written taint profile, one call path per
rule of the composition (:mod:`perfcast.priors.compose`); then end to end with the real
tools: the bundled Jacobi stencil built with counters, measured with mpirun, tainted with
DataFlowSanitizer and modeled, and a small program whose dependency taint analysis misses
and the counts catch.
"""

from __future__ import annotations

import json
import math
import subprocess
from fractions import Fraction
from itertools import product
from pathlib import Path
from typing import Any

import pytest
from campaign_helpers import stencil_with_counters

from perfcast.cli import main
from perfcast.effort import EffortModeler
from perfcast.effort.source import EffortSource
from perfcast.experiment import write_experiment
from perfcast.experiment.experiment import Experiment
from perfcast.experiment.metrics import is_counter
from perfcast.modeling.modelset import ModelSet
from perfcast.priors import PriorFit, PriorSource, fit_with_priors
from perfcast.priors.report import render_priors
from perfcast.taint.profile_model import FORMAT, TaintProfile
from perfcast.taint.source import TaintSource

DISAGREEMENT_WARNING = "effort and taint priors disagree"
COMPOSED = "Priors (effort, taint) composed"

N_VALUES = (16, 32, 64, 128, 256)
P_VALUES = (2, 4, 8, 16, 32)

COMPUTE = "main->compute"  # effort prior, taint agrees; a parameter-decided branch
HIDDEN = "main->hidden"  # counts grow with n, taint saw no n (implicit flow)
SPIN = "main->spin"  # counts grow with p (busy waiting), taint allows n only
VALUES = "main->values"  # taint allows n and p, counts grow with n only: no finding
CONTENDED = "main->contended"  # effort prior; time slows down with p (contention)
SETUP = "main->setup"  # no counts: taint prior instead of black-box, contended too
WAIT = "main->MPI_Wait"  # MPI without a Table I law: taint prior (constant)
LOG = "main->log_progress"  # unknown to the taint profile: black-box, noted

COUNTS = {
    COMPUTE: lambda n, p: 10 * n * n + 4 * n + 9,
    HIDDEN: lambda n, p: 100 * n + 20,
    SPIN: lambda n, p: 40 * n + 30 * p + 7,
    VALUES: lambda n, p: 6 * n + 3,
    CONTENDED: lambda n, p: 5 * n + 2,
}
TIMES = {
    COMPUTE: lambda n, p: 2e-8 * n * n,
    HIDDEN: lambda n, p: 1e-6 * n,
    SPIN: lambda n, p: 4e-7 * n + 3e-6 * p,
    VALUES: lambda n, p: 6e-7 * n,
    CONTENDED: lambda n, p: 1e-6 * n * (1 + 0.5 * math.log2(p)),
    SETUP: lambda n, p: 1e-5 * n * (1 + 0.5 * math.log2(p)),
    WAIT: lambda n, p: 2e-5 * (1 + 0.5 * math.log2(p)),
    LOG: lambda n, p: 1e-3,
}


def measurements() -> Experiment:
    """Exact counts (one value per point) and times with a small deterministic jitter over
    three repetitions; the maxima over ranks a little above the means."""
    rows: list[tuple[str, str, tuple[int, int], float]] = []
    for n, p in product(N_VALUES, P_VALUES):
        for callpath, counts in COUNTS.items():
            rows.append((callpath, "basic_blocks", (n, p), float(counts(n, p))))
            rows.append((callpath, "basic_blocks:max", (n, p), float(counts(n, p) + n)))
        for callpath, time in TIMES.items():
            for repetition in range(3):
                jitter = 1 + 0.004 * ((repetition * 7 + n + p) % 5 - 2)
                rows.append((callpath, "time", (n, p), time(n, p) * jitter))
                rows.append((callpath, "time:max", (n, p), 1.1 * time(n, p) * jitter))
    return Experiment.from_rows(["n", "p"], rows)


def _function(callpath: str, terms: list[list[str]], **extra: Any) -> dict[str, Any]:
    entry = {"terms": terms, "exclusive_terms": terms, "visits_terms": []}
    return {"file": "app.c", "terms": terms, "callpaths": {callpath: entry}, **extra}


def taint_profile() -> dict[str, Any]:
    """What ``perfcast taint`` writes, reduced to the fields the modeling side reads."""
    switch = {"line": 12, "params": ["n"], "evaluated": 1, "taken": 1, "calls": []}
    functions = {
        "compute": _function(COMPUTE, [["n"]], branches=[switch]),
        "hidden": _function(HIDDEN, []),
        "spin": _function(SPIN, [["n"]]),
        "values": _function(VALUES, [["n", "p"]]),
        "contended": _function(CONTENDED, [["n"]]),
        "setup": _function(SETUP, [["n"]]),
        "MPI_Wait": {**_function(WAIT, []), "file": None},
        "main": _function("main", [["n", "p"]]),
    }
    return {
        "format": FORMAT,
        "parameters": {"n": {}, "p": {}},
        "functions": functions,
        "pruned": [],
        "constant": [],
    }


def fit_both(*, apply: bool = True) -> PriorFit:
    effort = EffortModeler()
    profile = TaintProfile.from_json(taint_profile())
    sources: list[PriorSource] = [EffortSource(effort), TaintSource(profile, apply=apply)]
    return fit_with_priors(effort.modeler, measurements(), sources, fixed=effort)


@pytest.fixture(scope="module")
def combined() -> PriorFit:
    return fit_both()


def _warnings(result: PriorFit, callpath: str, metric: str = "time") -> list[str]:
    return result.models.notes((callpath, metric))


def taint_fitted(result: PriorFit) -> dict[str, list[str]]:
    """Call path -> the metrics whose composed prior is taint's."""
    fitted: dict[str, list[str]] = {}
    for (callpath, metric), prior in result.composition.priors.items():
        if prior.source == "taint":
            fitted.setdefault(callpath, []).append(metric)
    return fitted


def test_effort_prior_wins_over_taint(combined) -> None:
    for callpath in (COMPUTE, HIDDEN, SPIN, VALUES, CONTENDED):
        model = combined.models[(callpath, "time")]
        assert model.prior is not None and model.prior.startswith("effort"), callpath
    # taint says hidden's code is constant; the exact counts grow with n, and they win
    assert combined.models[(HIDDEN, "time")].parameters == ("n",)
    assert combined.models[(SPIN, "time")].parameters == ("n", "p")


def test_taint_prior_where_effort_has_nothing_to_say(combined) -> None:
    setup = combined.models[(SETUP, "time")]
    assert setup.prior == "taint: parameters {n}, products {n}"
    assert setup.parameters == ("n",)  # the black-box fit saw the contention in p
    assert combined.free[(SETUP, "time")].parameters == ("n", "p")
    wait = combined.models[(WAIT, "time")]
    assert wait.prior == "taint: constant" and wait.terms == ()
    assert combined.models[(LOG, "time")].prior is None
    # time:max has no effort prior on any call path: taint restricts it everywhere it can
    compute_max = combined.models[(COMPUTE, "time:max")]
    assert compute_max.prior is not None and compute_max.prior.startswith("taint")
    assert taint_fitted(combined)[COMPUTE] == ["time:max"]
    assert set(taint_fitted(combined)[SETUP]) == {"time", "time:max"}
    assert LOG not in taint_fitted(combined)
    # counts stay exact and free: they are what the cross-check compares with taint
    hidden_counts = combined.models[(HIDDEN, "basic_blocks")]
    assert hidden_counts.prior is None and hidden_counts.parameters == ("n",)
    assert combined.models[(SPIN, "basic_blocks:max")].prior is None
    assert is_counter("basic_blocks:max") and is_counter("mpi_bytes_sent")
    assert not is_counter("time") and not is_counter("visits")


def test_counts_that_taint_rules_out_are_flagged(combined) -> None:
    assert combined.composition.ruled_out == {HIDDEN: {"n"}, SPIN: {"p"}}
    hidden = [w for w in _warnings(combined, HIDDEN) if DISAGREEMENT_WARNING in w]
    assert len(hidden) == 1 and hidden[0].startswith("[priors] ")
    assert "the effort evidence depends on n" in hidden[0]
    assert "implicit (control-flow)" in hidden[0] and "the effort prior is kept" in hidden[0]
    spin = [w for w in _warnings(combined, SPIN) if DISAGREEMENT_WARNING in w]
    assert len(spin) == 1 and "busy waiting" in spin[0] and "depends on p" in spin[0]
    # taint allowing p that the counts do not use is no finding
    for callpath in (VALUES, COMPUTE, CONTENDED):
        assert not any(DISAGREEMENT_WARNING in w for w in _warnings(combined, callpath))


def test_taint_validity_flags_reach_every_final_model(combined) -> None:
    contention = "depends on p, which the code cannot: contention or noise"
    for callpath in (CONTENDED, SETUP, WAIT):  # effort prior, taint prior, taint constant
        assert any(contention in w for w in _warnings(combined, callpath)), callpath
    assert not any("which the code cannot" in w for w in _warnings(combined, COMPUTE))
    # hidden's and spin's black-box fits use a parameter taint rules out, but so does the
    # counted work: not contention, the disagreement warning says what is wrong
    assert not any("contention" in w for w in _warnings(combined, HIDDEN))
    assert not any("contention" in w for w in _warnings(combined, SPIN))
    assert "n" in combined.free[(HIDDEN, "time")].parameters
    switch = "possible algorithm switch on n: the branch at app.c:12"
    assert any(switch in w for w in _warnings(combined, COMPUTE))
    assert any(switch in w for w in _warnings(combined, COMPUTE, "basic_blocks"))
    # exact counts are never suspected of contention
    assert not any("contention" in w for w in _warnings(combined, SPIN, "basic_blocks"))


def _prior_row(report: str, callpath: str) -> str:
    """The prior a block of the composed section shows for ``callpath``."""
    block = report.split(f"\n{callpath}\n", 1)[1]
    label, text = block.splitlines()[0].split(None, 1)
    assert label == "prior"
    return text


def test_report_shows_effort_then_the_composed_priors(combined) -> None:
    effort, taint = render_priors(combined, "time").split(COMPOSED)
    assert f"{HIDDEN}  [computation]" in effort
    assert f"warning: [priors] {DISAGREEMENT_WARNING}" in effort
    # the effort notes say why there is no effort prior; the blocks below say what came
    assert f"{WAIT}: MPI_Wait has no communication law (Table I); no effort prior" in effort
    assert f"{LOG}: no 'basic_blocks' counts; no effort prior" in effort
    assert _prior_row(taint, SETUP) == "taint: parameters {n}, products {n}"
    assert _prior_row(taint, WAIT) == "taint: constant" and "time (black-box)" in taint
    assert f"{LOG}\n" not in taint  # unknown to the profile: black-box, noted on stderr
    assert "priors disagree on 2 call path(s)" in taint
    assert f"{HIDDEN}: n; {SPIN}: p" in taint
    assert "also under priors: time:max of 7 call path(s)" in taint


def test_check_mode_flags_without_taint_priors() -> None:
    result = fit_both(apply=False)
    assert taint_fitted(result) == {}
    wait = result.models[(WAIT, "time")]
    assert wait.prior is None and "p" in wait.parameters
    notes = _warnings(result, WAIT)
    assert any("which the code cannot: contention or noise" in w for w in notes)
    # compared, not fitted: the counts that taint rules out are still found
    assert result.composition.ruled_out == {HIDDEN: {"n"}, SPIN: {"p"}}
    assert "taint: flags only" in render_priors(result, "time")


def test_cli_combines_both(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, profile, out = tmp_path / "times.json", tmp_path / "profile.json", tmp_path / "m.json"
    write_experiment(measurements(), data)
    profile.write_text(json.dumps(taint_profile()))
    argv = ["model", str(data), "--priors", "effort", "--taint", str(profile), "-o", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr()
    assert "Effort priors (noise-resilient-priors.txt)" in printed.out
    assert COMPOSED in printed.out
    assert f"modeled without prior: {LOG}" in printed.err  # the taint notes
    saved = ModelSet.load(out)
    assert saved[(WAIT, "time")].prior == "taint: constant"
    assert (saved[(HIDDEN, "time")].prior or "").startswith("effort")
    assert any(DISAGREEMENT_WARNING in w for w in saved.notes((HIDDEN, "time")))
    # the same with the sources named: --priors effort,taint
    listed = ["model", str(data), "--priors", "taint,effort", "--taint", str(profile)]
    assert main(listed) == 0
    assert COMPOSED in capsys.readouterr().out
    assert main([*argv, "--taint-mode", "check"]) == 0
    assert "flags only" in capsys.readouterr().out
    assert ModelSet.load(out)[(WAIT, "time")].prior is None
    # a profile that did not mark a parameter of the experiment is an input error naming it
    unmarked = taint_profile()
    del unmarked["parameters"]["p"]
    profile.write_text(json.dumps(unmarked))
    assert main(argv) == 2
    assert "profile.json: experiment parameters ['p'] were not marked" in capsys.readouterr().err


def prior_kept(models: ModelSet, key: tuple[str, str], source: str) -> bool:
    """Whether the model of ``key`` was fitted under its ``source`` prior; where it was not,
    the prior's fit was much worse than the free fit on these measured times, and the
    conflict's finding must show both models (``modeling/prior_conflicts.py``)."""
    model = models[key]
    if model.prior is not None:
        assert model.prior.startswith(source), model.prior
        return True
    conflicts = [w for w in models.notes(key) if f"{source}-prior model:" in w]
    assert conflicts and "black-box model:" in conflicts[0], models.notes(key)
    return False


@pytest.mark.slow
def test_stencil_taint_and_effort_end_to_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The stencil tainted with DataFlowSanitizer, built with counters, measured with
    mpirun (the design reduced by the profile), modeled with both priors."""
    spec = stencil_with_counters(tmp_path, repetitions=2)
    app = spec.parent
    sources = ["jacobi.c", "grid.c", "halo.c"]
    assert main(["taint", str(spec), "--", "mpicc", *sources, "-o", "jacobi"]) == 0
    profile = app / "stencil.taint.json"
    assert json.loads(profile.read_text())["functions"]["sweep"]["dependency"] == "size"
    assert main(["measure", str(spec)]) == 0
    capsys.readouterr()
    store, models = str(app / "stencil.sqlite"), tmp_path / "models.json"
    argv = ["model", store, "--priors", "effort", "--taint", str(profile), "--exclusive"]
    argv += ["-o", str(models)]

    # Basic blocks but no MPI byte counts: the MPI call paths fall to their taint priors.
    assert main([*argv, "--metric", "time", "--metric", "basic_blocks"]) == 0
    printed = capsys.readouterr()
    effort, taint = printed.out.split(COMPOSED)
    assert "main->sweep  [computation]" in effort
    sendrecv_key = ("main->exchange_halo->MPI_Sendrecv", "time")
    allreduce_key = ("main->global_residual->MPI_Allreduce", "time")
    assert _prior_row(taint, sendrecv_key[0]).startswith("taint: parameters {size}")
    assert _prior_row(taint, allreduce_key[0]).startswith("taint: parameters {p}")
    assert "modeled without prior: main->MPI_Init, main->MPI_Finalize" in printed.err
    saved = ModelSet.load(models)
    sweep = saved[("main->sweep", "time")]
    assert sweep.prior is not None and sweep.prior.startswith("effort")
    assert sweep.leading_exponents()["size"] == (Fraction(2), 0) and "p" not in sweep.parameters
    # counts and taint agree: size
    assert not any(DISAGREEMENT_WARNING in w for w in saved.notes(("main->sweep", "time")))
    # MPI wall time of 3 ranks on 2 cores can contradict a prior: then the free fit is kept
    if prior_kept(saved, sendrecv_key, "taint"):
        assert "p" not in saved[sendrecv_key].parameters
    if prior_kept(saved, allreduce_key, "taint"):
        assert "size" not in saved[allreduce_key].parameters

    # With the byte counts the laws take over; taint still restricts the per-rank maxima.
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "main->exchange_halo->MPI_Sendrecv  [communication]" in out
    assert "also under priors: time:max" in out
    saved = ModelSet.load(models)
    prior_kept(saved, sendrecv_key, "effort")
    sweep_max = saved[("main->sweep", "time:max")]
    assert sweep_max.prior is not None and sweep_max.prior.startswith("taint")
    assert "p" not in sweep_max.parameters
    assert saved[("main->sweep", "basic_blocks:max")].prior is None  # counts stay free

    # The static model of the same code (`perfcast static`, a -g build) composed with both.
    _static_model_composes_with_taint_and_effort(app, store, profile, capsys)


def _static_model_composes_with_taint_and_effort(
    app: Path, store: str, profile: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """sweep(cols, rows) counts 21*cols*rows + 11*rows + 30 instructions per call; with
    cols and rows renamed to the block edge it fixes the terms size^2 and size: alone it
    fixes sweep's time model, with effort's basic blocks (the same terms) effort keeps it
    and no conflict arises; taint still restricts the MPI call paths."""
    pytest.importorskip("islpy")
    pytest.importorskip("clang.cindex")
    sources = ["jacobi.c", "grid.c", "halo.c"]
    build = ["mpicc", "-g", "-O1", *sources, "-o", "jacobi-native", "-lm"]
    subprocess.run(build, cwd=app, check=True)
    static = app / "grid_model.py"
    argv = ["static", str(app / "grid.c"), "--binary", str(app / "jacobi-native")]
    assert main([*argv, "-o", str(static)]) == 0
    assert "sweep(cols, rows): instructions = 21 * cols * rows" in capsys.readouterr().out
    models = app / "static-models.json"
    rename = ["--static", str(static), "--static-rename", "cols=size,rows=size"]
    common = [store, "--exclusive", "--metric", "time", "-o", str(models), *rename]

    assert main(["model", *common, "--priors", "static"]) == 0
    assert "Priors (static) composed" in capsys.readouterr().out
    sweep_key = ("main->sweep", "time")
    saved = ModelSet.load(models)
    if prior_kept(saved, sweep_key, "static"):
        assert saved[sweep_key].prior == "static: fixed terms [size, size^(2)]"

    argv = ["model", *common, "--priors", "taint,effort,static", "--taint", str(profile)]
    assert main(argv) == 0
    assert "Priors (effort, static, taint) composed" in capsys.readouterr().out
    saved = ModelSet.load(models)
    assert (saved[sweep_key].prior or "effort").startswith("effort")
    assert not [f for f in saved.findings_of(sweep_key) if f.kind == "fixed-conflict"]


IMPLICIT = r"""
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))
static volatile double sink;

/* A C string of n characters: memset writes them, so no assignment carries n's label */
NOINLINE static char *make_text(int n) {
  char *text = calloc((size_t)n + 1, 1);
  memset(text, 'x', (size_t)n);
  return text;
}
/* Walks to the terminator: n iterations, decided by data, not by a tainted bound */
NOINLINE static void scan(const char *text) {
  for (int k = 0; text[k] != '\0'; k++) sink += k;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  char *text = make_text(atoi(argv[1]));
  scan(text);
  free(text);
  MPI_Finalize();
  return 0;
}
"""

IMPLICIT_SPEC = """\
[app]
name = "text"
[build]
sources = ["app.c"]
compiler = "mpicc"
flags = ["-O2"]
output = "app"
counters = true
[run]
command = "./app {n}"
repetitions = 1
timeout = 60
[parameters]
n = [250000, 500000, 1000000, 2000000, 4000000]
[metrics]
collect = ["time", "basic_blocks"]
"""


@pytest.mark.slow
def test_counts_catch_a_dependency_taint_analysis_misses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """scan() loops until a terminator that memset placed n characters away: no tainted
    value bounds the loop, so taint analysis calls it constant; its basic blocks grow with n.
    The effort prior keeps n, and the model says that counts and taint disagree."""
    (tmp_path / "app.c").write_text(IMPLICIT)
    spec = tmp_path / "perfcast.toml"
    spec.write_text(IMPLICIT_SPEC)
    # one-off form, beside the campaign: its profile must not reduce the measured design
    profile = tmp_path / "profile.json"
    taint = ["taint", "-o", str(profile), "--run", "./app 1000", "--param", "n=argv:1"]
    monkeypatch.chdir(tmp_path)
    assert main([*taint, "--", "mpicc", "app.c", "-o", "app"]) == 0
    functions = json.loads(profile.read_text())["functions"]
    assert functions["scan"]["dependency"] == "1", "taint analysis now sees this flow"
    assert main(["measure", str(spec)]) == 0
    capsys.readouterr()
    models = tmp_path / "models.json"
    store = str(tmp_path / "text.sqlite")
    argv = ["model", store, "--priors", "effort", "--taint", str(profile), "--exclusive"]
    assert main([*argv, "-o", str(models)]) == 0
    out = capsys.readouterr().out
    assert "priors disagree on 1 call path(s)" in out
    saved = ModelSet.load(models)
    scan, notes = saved[("main->scan", "time")], saved.notes(("main->scan", "time"))
    assert scan.parameters == ("n",)
    if scan.prior is None:  # the effort fit of this tiny kernel's noisy time was much worse
        # than the free fit: the free model is kept, both fits in its finding
        assert any("effort-prior model:" in w and "black-box model:" in w for w in notes)
    else:
        assert scan.prior.startswith("effort")
    assert any(f"{DISAGREEMENT_WARNING}: the effort evidence depends on n" in w for w in notes)
    assert not any("contention" in w for w in notes)
