"""Effort priors: counts fix the exponents, noisy time only the coefficients."""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
from campaign_helpers import stencil_with_counters
from effort_helpers import fit_effort

from perfcast.cli import main
from perfcast.effort import (
    DISAGREEMENT_WARNING,
    INEXACT_WARNING,
    CommunicationLaw,
    CountModeler,
    EffortModeler,
    Law,
)
from perfcast.errors import InputError
from perfcast.experiment import write_experiment
from perfcast.experiment.experiment import Experiment, Metric
from perfcast.modeling import Factor, ModelSet, PMNFModeler
from perfcast.synth import Noise, exponent_deviations

P = (2, 4, 8, 16, 32)
N = (1000, 2000, 3000, 4000, 5000)
REPETITIONS = 3
COMPUTE = "main->compute"
ALLREDUCE = "main->MPI_Allreduce"


def _compute_blocks(p: float, n: float) -> float:
    return 20 + 7 * n**1.5 * np.log2(p)


def _allreduce_bytes(p: float, n: float) -> float:
    return 8 * p * n


def _clean(time_of_compute=None, counters: bool = True) -> Experiment:
    """Exact counts, time proportional to the effort (plus latency for the allreduce)."""
    time_of_compute = time_of_compute or (lambda p, n: 3e-9 * _compute_blocks(p, n))
    rows = []
    for p, n in itertools.product(P, N):
        for _ in range(REPETITIONS):
            rows.append((COMPUTE, "time", (p, n), time_of_compute(p, n)))
            # Table I's B is the vector, 8n bytes; the runtime records 8pn per rank
            rows.append((ALLREDUCE, "time", (p, n), 2e-5 * np.log2(p) + 1e-9 * 8 * n))
            if counters:
                rows.append((COMPUTE, "basic_blocks", (p, n), _compute_blocks(p, n)))
                rows.append((ALLREDUCE, "mpi_bytes_sent", (p, n), _allreduce_bytes(p, n)))
                rows.append((ALLREDUCE, "mpi_bytes_received", (p, n), _allreduce_bytes(p, n)))
    metrics = [Metric("time", "s"), Metric("basic_blocks"), Metric("mpi_bytes_sent", "bytes")]
    return Experiment.from_rows(("p", "n"), rows, metrics)


def _noisy(experiment: Experiment, rng: np.random.Generator) -> Experiment:
    """20 % noise on time only; counts stay exact."""
    noisy = Noise("uniform", 0.2, symmetric=True).apply_to(experiment, rng)
    is_time = (noisy.data["metric"] == "time").to_numpy()
    noisy.data.loc[~is_time, "value"] = experiment.data.loc[~is_time, "value"]
    return noisy


def test_allreduce_law_structure():
    law = CommunicationLaw.for_callpath("main->solve->MPI_Allreduce")
    assert law is not None and law.law is Law.REDUCTION
    clean = _clean()
    bytes_model = PMNFModeler(significance=None).fit(clean)[(ALLREDUCE, "mpi_bytes_sent")]
    structure = law.structure(bytes_model, ["p", "n"])
    log_p = (Factor("p", Fraction(0), 1),)
    p_times_n = (Factor("n", Fraction(1)), Factor("p", Fraction(1)))
    # the recorded 8*p*n bytes per rank are an 8*n-byte vector: B = recorded / p
    assert structure == (log_p, (Factor("n", Fraction(1)),))
    # Without p as a parameter the tree latency log2(p) has nothing to grow with.
    assert law.structure(bytes_model, ["n"]) == (p_times_n,)
    barrier = CommunicationLaw.for_callpath("main->MPI_Barrier")
    assert barrier is not None and barrier.structure(None, ["p"]) == (log_p,)
    assert CommunicationLaw.for_callpath("main->MPI_Waitall") is None
    assert CommunicationLaw.for_callpath("main->compute") is None


def test_effort_prior_recovers_exponents_under_noise():
    rng = np.random.default_rng(7)
    clean = _clean()
    fitted, _ = fit_effort(clean)
    truth = fitted.models[(COMPUTE, "basic_blocks")]
    allreduce_truth = fitted.models[(ALLREDUCE, "time")]  # exact on clean data
    assert truth.leading_exponents() == {"n": (Fraction(3, 2), 0), "p": (Fraction(0), 1)}
    effort_misses = blackbox_misses = 0
    for _ in range(6):
        result, _ = fit_effort(_noisy(clean, rng))
        for callpath in (COMPUTE, ALLREDUCE):
            reference = truth if callpath == COMPUTE else allreduce_truth
            constrained = result.models[(callpath, "time")]
            free = result.free[(callpath, "time")]
            assert constrained.prior is not None and constrained.prior.startswith("effort")
            effort_misses += any(exponent_deviations(constrained, reference, ["p", "n"]).values())
            blackbox_misses += any(exponent_deviations(free, reference, ["p", "n"]).values())
    assert effort_misses == 0
    assert blackbox_misses > 0


def test_disagreement_is_flagged():
    # Time grows with p^2 (waiting) while the counted effort grows with n^(3/2) log2(p).
    waiting = _clean(time_of_compute=lambda p, n: 1e-6 * p**2 + 1e-9 * n)
    result, derived = fit_effort(waiting)
    warnings = result.models.notes((COMPUTE, "time"))
    assert any(DISAGREEMENT_WARNING in w for w in warnings)
    assert not any(DISAGREEMENT_WARNING in w for w in result.models.notes((ALLREDUCE, "time")))
    assert DISAGREEMENT_WARNING in derived.report(result.models, result.free)


def test_missing_counters_fall_back_to_classic_modeling():
    result, derived = fit_effort(_clean(counters=False))
    assert not derived.effort_priors
    assert "perfcast build --counters" in derived.notes[0]
    assert result.models[(COMPUTE, "time")].prior is None


def test_counts_without_time_and_time_without_counts():
    rows: list[tuple[str, str, tuple[int, int], float]] = []
    for p, n in itertools.product(P, N):
        rows.append(("main->counted", "basic_blocks", (p, n), 5.0 * n))
        rows.append(("main->timed", "time", (p, n), 1e-6 * n))
        rows.append(("main->MPI_Wait", "time", (p, n), 1e-6 * p))
    result, derived = fit_effort(Experiment.from_rows(("p", "n"), rows))
    notes = "\n".join(derived.notes)
    assert "main->counted: has effort counts but no 'time' measurements" in notes
    assert "main->timed: no 'basic_blocks' counts; no effort prior" in notes
    assert "main->MPI_Wait: MPI_Wait has no communication law" in notes
    assert result.models[("main->timed", "time")].prior is None


@pytest.mark.parametrize("operation", ["Send", "Recv", "Bcast", "Scatter", "Gather", "Barrier"])
def test_every_table_one_operation_has_a_law(operation):
    law = CommunicationLaw.for_callpath(f"main->MPI_{operation}")
    assert law is not None
    assert law.law.has_tree_latency == (operation not in ("Send", "Recv"))


def test_cli_model_with_effort_priors(tmp_path, capsys):
    path = tmp_path / "campaign.json"
    write_experiment(_noisy(_clean(), np.random.default_rng(3)), path)
    assert main(["model", str(path), "--priors", "effort", "-o", str(tmp_path / "m.json")]) == 0
    out = capsys.readouterr().out
    assert "effort (basic_blocks)  20 + 7 * n^(3/2) * log2(p)" in out
    assert "prior                  effort: fixed terms [n^(3/2) * log2(p)]" in out
    assert "MPI_Allreduce: log2(p)*alpha + (beta + (p-1)/p*gamma)*B" in out
    saved = ModelSet.load(tmp_path / "m.json")
    assert saved[(COMPUTE, "time")].leading_exponents() == {
        "n": (Fraction(3, 2), 0),
        "p": (Fraction(0), 1),
    }


def test_cli_without_counters_says_it_models_classically(tmp_path, capsys):
    path = tmp_path / "campaign.json"
    write_experiment(_clean(counters=False), path)
    assert main(["model", str(path), "--priors", "effort"]) == 0
    out = capsys.readouterr().out
    assert "no effort counters" in out and "modeled classically" in out


def test_effort_terms_with_negative_time_coefficients_are_dropped_by_the_drop_policy():
    rows: list[tuple[str, str, tuple[int, int], float]] = []
    for p, n in itertools.product(P, N):
        rows.append((COMPUTE, "basic_blocks", (p, n), 1e3 * n + 1e5 * p))
        rows.append((COMPUTE, "time", (p, n), 1e-6 * n * (1 - 0.01 * p)))
    campaign = Experiment.from_rows(("p", "n"), rows)
    # the default keeps p's only term: its negative coefficient is what time says
    kept = fit_effort(campaign)[0].models[(COMPUTE, "time")]
    assert set(kept.parameters) == {"p", "n"}
    # (dropping p's term costs the fit its p-dependence: the prior conflict check would
    # keep the black-box model, so it is switched off to see what the policy itself does)
    dropping = EffortModeler(negative_terms="drop", disagreement_ratio=float("inf"))
    result, derived = fit_effort(campaign, dropping)
    assert derived.effort_priors[COMPUTE].prior.structure == (
        (Factor("p", Fraction(1)),),
        (Factor("n", Fraction(1)),),
    )
    time = result.models[(COMPUTE, "time")]
    assert time.parameters == ("n",) and all(t.coefficient > 0 for t in time.terms)
    assert any("effort terms [p] dropped" in w for w in time.warnings)


def _counts(blocks) -> Experiment:
    rows = [("main->k", "basic_blocks", (p, n), blocks(p, n)) for p, n in itertools.product(P, N)]
    return Experiment.from_rows(("p", "n"), rows)


def test_counts_with_a_different_shape_per_term_are_modeled_exactly():
    # An n x n loop, then an n x p loop: n has two shapes, which the time modeler's
    # one-shape-per-parameter space cannot express: its best fit is not exact.
    counts = _counts(lambda p, n: 20 + 7 * n**2 + 3 * n * p)
    classic = PMNFModeler(significance=None).fit(counts)[("main->k", "basic_blocks")]
    assert classic.statistics.smape > 1e-3
    exact = CountModeler().fit(counts)[("main->k", "basic_blocks")]
    assert exact.text(4) == "20 + 7 * n^(2) + 3 * n * p"
    assert not exact.warnings
    shapes = {t.shape for t in exact.terms}
    assert shapes == {
        (Factor("n", Fraction(2)),),
        (Factor("n", Fraction(1)), Factor("p", Fraction(1))),
    }


def test_counts_with_three_shapes_of_one_parameter():
    counts = _counts(lambda p, n: 5 + 2 * n * np.log2(n) * p + 4 * n**1.5 + 9 * n * p)
    exact = CountModeler().fit(counts)[("main->k", "basic_blocks")]
    assert exact.leading_exponents() == {"n": (Fraction(3, 2), 0), "p": (Fraction(1), 0)}
    assert exact.statistics.smape < 1e-9


def test_counts_that_are_no_pmnf_function_fall_back_with_a_warning():
    # A doubling loop runs ceil(log2(n)) times: 4 % away from log2(n) at n = 3000.
    counts = _counts(lambda p, n: 3 * n * np.ceil(np.log2(n)) + 7)
    model = CountModeler().fit(counts)[("main->k", "basic_blocks")]
    assert any(INEXACT_WARNING in w for w in model.warnings)
    assert model.leading_exponents()["n"][0] == 1  # the fallback still finds the growth


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("mpicc") is None or shutil.which("clang-16") is None,
    reason="needs Open MPI and clang-16",
)
def test_stencil_campaign_with_effort_priors(tmp_path, capsys):
    """The real thing: the stencil built with counters, measured, modeled with effort priors."""
    spec = stencil_with_counters(tmp_path)
    app = spec.parent
    assert main(["measure", str(spec)]) == 0
    capsys.readouterr()
    models = tmp_path / "models.json"
    store = str(app / "stencil.sqlite")
    assert main(["model", store, "--priors", "effort", "--metric", "time", "-o", str(models)]) == 0
    out = capsys.readouterr().out
    # --metric time picks what is ranked; the counters still reach the priors
    assert "no effort counters" not in out
    assert "Costliest call paths at " in out and ": time [s]" in out
    assert "main->exchange_halo->MPI_Sendrecv  [communication]" in out
    assert "(MPI_Sendrecv: alpha + B*beta)" in out
    assert "note: main->MPI_Init: MPI_Init has no communication law" in out
    saved = ModelSet.load(models)
    # the sweep's time obeys the counted work, size^2 (plus lower-order terms), not p
    sweep = saved[("main->sweep", "time")]
    assert sweep.prior is not None and sweep.prior.startswith("effort")
    assert sweep.leading_exponents()["size"] == (Fraction(2), 0)
    assert "p" not in sweep.parameters
    # the allreduce's law: tree latency log2(p); its 8*p recorded bytes per iteration are
    # one 8-byte vector, a constant
    allreduce = saved[("main->global_residual->MPI_Allreduce", "time")]
    if allreduce.prior is not None:
        assert "log2(p)" in allreduce.prior
    else:  # wall time of 3 ranks on 2 cores can contradict the law: the free fit is kept,
        # and the warning shows the law's model beside it
        notes = saved.notes(("main->global_residual->MPI_Allreduce", "time"))
        conflict = [w for w in notes if w.startswith(f"[conflict] {DISAGREEMENT_WARNING}")]
        assert len(conflict) == 1
        assert "log2(p)" in conflict[0].split("effort-prior model:")[1].split("black-box")[0]


def _two_term_campaign(blocks, time) -> Experiment:
    """Exact counts of two loop nests, time as given."""
    rows: list[tuple[str, str, tuple[int, int], float]] = []
    for p, n in itertools.product(P, N):
        rows.append((COMPUTE, "basic_blocks", (p, n), blocks(p, n)))
        rows.append((COMPUTE, "time", (p, n), time(p, n)))
    return Experiment.from_rows(("p", "n"), rows)


def _shapes(model) -> set[str]:
    return {" * ".join(sorted(f.text() for f in t.factors)) for t in model.terms}


LEADING_AND_LOWER = (lambda p, n: 1.0 * n * n * p + 50.0 * n, "n^(2) * p", "n")
"""n^2 * p leads in both parameters; the n term is of lower order in every one."""
P_ONLY_IN_SMALLER = (lambda p, n: 1.0 * n * n + 50.0 * p * n, "n^(2)", "n * p")
"""n^2 leads in n, but p grows only in the smaller p * n term."""


@pytest.mark.parametrize(
    ("policy", "kept"),
    [
        ("keep", {"lower": 2, "leading": 2, "p_only": 2}),
        ("drop", {"lower": 1, "leading": 1, "p_only": 1}),
        ("drop-lower", {"lower": 1, "leading": 2, "p_only": 2}),
    ],
)
def test_negative_effort_terms_follow_the_policy(policy, kept):
    modeler = EffortModeler(negative_terms=policy)
    blocks, big, small = LEADING_AND_LOWER
    cases = {
        # the lower-order term's time coefficient comes out negative
        "lower": (blocks, lambda p, n: 1e-9 * n * n * p - 1e-7 * n, {big}),
        # the leading term's does
        "leading": (blocks, lambda p, n: 1e-5 * n - 1e-14 * n * n * p, {small}),
    }
    blocks, big, small = P_ONLY_IN_SMALLER
    # the only term with p comes out negative: dropping it would lose p's exponent
    cases["p_only"] = (blocks, lambda p, n: 1e-9 * n * n - 1e-9 * p * n, {big})
    for case, (counts, time, after_drop) in cases.items():
        model = fit_effort(_two_term_campaign(counts, time), modeler)[0].models[(COMPUTE, "time")]
        assert len(model.terms) == kept[case], case
        if kept[case] == 1:
            assert _shapes(model) == after_drop, case
            assert model.terms[0].coefficient > 0
            assert any("dropped" in w for w in model.warnings)


def test_an_unknown_negative_term_policy_is_refused():
    with pytest.raises(InputError, match="choose one of drop-lower, drop, keep"):
        EffortModeler(negative_terms="clip")


def test_effort_coefficients_come_from_the_fastest_repetition():
    # Interference only adds time: every repetition but the first of each point is slowed
    # by up to 75 %. The counts fix the work, so the fastest repetition is its undisturbed
    # time, and with the default aggregation ("min") the coefficients come out exact; the
    # time modeler's centre (aggregation=None) carries the interference's mean into every
    # prediction.
    clean = _clean()
    noisy = Noise("uniform", 0.75).apply_to(clean, np.random.default_rng(5))
    disturbed = (noisy.data["metric"] == "time") & (noisy.data["repetition"] > 0)
    data = clean.data.copy()
    data.loc[disturbed, "value"] = noisy.data.loc[disturbed, "value"]
    slowed = Experiment(clean.parameters, data, clean.metrics.values())
    beyond = {"p": 64.0, "n": 6000.0}
    truth = 3e-9 * _compute_blocks(beyond["p"], beyond["n"])
    fastest, _ = fit_effort(slowed)
    model = fastest.models[(COMPUTE, "time")]
    assert model.prior is not None and model.prior.startswith("effort")
    assert model.evaluate(beyond) == pytest.approx(truth, rel=1e-9)
    # the report's black-box model keeps the time modeler's own centre
    assert fastest.free[(COMPUTE, "time")].evaluate(beyond) > 1.1 * truth
    centre = fit_effort(slowed, EffortModeler(aggregation=None))[0].models[(COMPUTE, "time")]
    assert centre.evaluate(beyond) > 1.1 * truth
    also_min, _ = fit_effort(
        slowed, EffortModeler(PMNFModeler(aggregation="min"), aggregation=None)
    )
    assert also_min.models[(COMPUTE, "time")].evaluate(beyond) == pytest.approx(truth, rel=1e-9)


def test_an_unknown_effort_aggregation_is_refused():
    with pytest.raises(InputError, match="unknown aggregation 'mode'"):
        EffortModeler(aggregation="mode")


LAW_CASES: dict[
    str, tuple[Callable[[float], float], Callable[[float, float], float], float, float]
] = {
    # call path: (latency term's growth, the law's B, the law's alpha, beta); the runtime
    # records B * p^-k per rank (laws.RECORDED_BYTES_RANKS_POWER)
    "main->MPI_Send": (lambda p: 1.0, lambda p, n: 8 * n, 3e-6, 2e-10),
    "main->MPI_Bcast": (np.log2, lambda p, n: 8 * n, 5e-6, 4e-10),
    "main->MPI_Gather": (np.log2, lambda p, n: 8 * p * n, 7e-6, 3e-10),
    "main->MPI_Allreduce": (np.log2, lambda p, n: 8 * n, 2e-5, 1e-9),
    "main->MPI_Barrier": (np.log2, lambda p, n: 0.0, 4e-6, 0.0),
}
RECORDED_PER_LAW_BYTE = {"main->MPI_Gather": lambda p: 1 / p, "main->MPI_Allreduce": lambda p: p}


def test_table_one_laws_recover_alpha_and_beta_from_communication_times():
    """Times made from Table I (with (p-1)/p taken as 1, as the laws do) give back the
    latency alpha as the coefficient of the latency term and beta per byte of the bytes
    model as the coefficient of its term."""
    rows = []
    for p, n in itertools.product(P, N):
        for callpath, (latency, bytes_of, alpha, beta) in LAW_CASES.items():
            law_bytes = bytes_of(p, n)
            sent = law_bytes * RECORDED_PER_LAW_BYTE.get(callpath, lambda p: 1)(p)
            rows.append((callpath, "time", (p, n), alpha * latency(p) + beta * law_bytes))
            rows.append((callpath, "mpi_bytes_sent", (p, n), sent))
    metrics = [Metric("time", "s"), Metric("mpi_bytes_sent", "bytes")]
    result, _ = fit_effort(Experiment.from_rows(("p", "n"), rows, metrics))
    for callpath, (_, bytes_of, alpha, beta) in LAW_CASES.items():
        model = result.models[(callpath, "time")]
        assert model.prior is not None and model.prior.startswith("effort"), callpath
        latency_terms = [t for t in model.terms if all(f.exponent == 0 for f in t.factors)]
        byte_terms = [t for t in model.terms if any(f.exponent != 0 for f in t.factors)]
        fitted_alpha = (
            model.constant if callpath == "main->MPI_Send" else latency_terms[0].coefficient
        )
        assert fitted_alpha == pytest.approx(alpha, rel=1e-6), callpath
        if beta:
            (term,) = byte_terms  # beta times the bytes: its basis is B up to B's coefficient
            point = {"p": np.array([4.0]), "n": np.array([3000.0])}
            contribution = term.coefficient * term.basis(point)[0]
            assert contribution == pytest.approx(beta * bytes_of(4.0, 3000.0), rel=1e-6), callpath
        else:
            assert byte_terms == [], callpath
