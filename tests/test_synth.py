"""The evaluation toolkit: exact synthetic data, documented noise, ED and RE as the paper
defines them (noise-resilient-priors.txt, Eq. 4 and 5, Sec. V-A6)."""

import math
from fractions import Fraction

import numpy as np
import pytest

from perfcast.errors import InputError
from perfcast.experiment.experiment import VALUE
from perfcast.synth import (
    PAPER_GRIDS,
    FunctionSpace,
    Noise,
    NoisePattern,
    Structure,
    evaluation_point,
    exponent_deviation,
    exponent_deviations,
    generate,
    grid_points,
    leading_exponent_matches,
    model_relative_error,
    next_point,
    pmnf_function,
    random_function,
    relative_error,
    sample,
    unit_samples,
)

SAMPLES = 200_000


# -- functions and measurements ------------------------------------------------------------


def test_specified_function_evaluates_to_hand_computed_values():
    f = pmnf_function(
        "main->solve", 3.0, [(2.0, {"p": ("1/2", 1), "n": (1, 0)}), (0.5, {"m": (2, 2)})]
    )
    # 3 + 2 * 16^(1/2) * log2(16) * 10 + 0.5 * 8^2 * log2(8)^2 = 3 + 320 + 288
    assert f.evaluate({"p": 16, "n": 10, "m": 8}) == pytest.approx(611.0, rel=1e-14)
    assert f.leading_exponents() == {
        "p": (Fraction(1, 2), 1),
        "n": (Fraction(1), 0),
        "m": (Fraction(2), 2),
    }


def test_generated_measurements_equal_the_truth_exactly_without_noise():
    bench = generate(7, np.random.default_rng(0), n_parameters=3, repetitions=4)
    data = bench.experiment.data
    assert len(data) == 7 * 5**3 * 4
    assert bench.experiment.parameters == ["p", "n", "m"]
    for callpath, truth in bench.truths.items():
        rows = data[data.callpath == callpath]
        expected = truth.evaluate({p: rows[p].to_numpy() for p in bench.grid})
        np.testing.assert_allclose(rows[VALUE].to_numpy(), expected, rtol=1e-12)
        assert sorted(rows.repetition.unique()) == [0, 1, 2, 3]


def test_sample_with_hand_computed_truth():
    truth = pmnf_function("k", 1.0, [(2.0, {"x": (1, 0), "y": (2, 0)})])
    exp = sample([truth], {"x": (1, 2), "y": (3, 4)}, repetitions=2)
    by_point = exp.data.groupby(["x", "y"])[VALUE].apply(list).to_dict()
    assert by_point == {(1, 3): [19, 19], (1, 4): [33, 33], (2, 3): [37, 37], (2, 4): [65, 65]}


def test_random_function_structures_and_shapes():
    rng = np.random.default_rng(5)
    reference = {"p": 2048.0, "n": 40000.0, "m": 50.0}
    space = FunctionSpace()
    additive = random_function("a", reference, rng, structure=Structure.ADDITIVE)
    assert [t.parameters for t in additive.terms] == [("p",), ("n",), ("m",)]
    product = random_function("b", reference, rng, structure="multiplicative")
    assert [t.parameters for t in product.terms] == [("p", "n", "m")]
    seen = set()
    for index in range(200):
        f = random_function(f"c{index}", reference, rng)
        params = [p for t in f.terms for p in t.parameters]
        assert sorted(params) == sorted(reference)  # every parameter exactly once
        for factor in (fac for t in f.terms for fac in t.factors):
            assert (factor.exponent, factor.log_exponent) in space.shapes
        seen.add(len(f.terms))
    assert seen == {1, 2, 3}  # mixed structures include sums, products and mixtures


def test_term_weights_hold_at_the_reference_point():
    rng = np.random.default_rng(9)
    reference = {"p": 2048.0, "n": 40000.0}
    space = FunctionSpace(term_weight_range=(1.0, 10.0), constant_weight_range=(0.1, 1.0))
    point = {k: np.asarray(v) for k, v in reference.items()}
    for index in range(100):
        f = random_function(f"k{index}", reference, rng, space=space)
        for term in f.terms:
            ratio = term.coefficient * float(term.basis(point)) / f.constant
            assert 1.0 - 1e-9 <= ratio <= 100.0 + 1e-9


def test_same_seed_same_benchmark():
    a = generate(20, np.random.default_rng(42), n_parameters=2)
    b = generate(20, np.random.default_rng(42), n_parameters=2)
    assert [m.to_json() for m in a.truths.values()] == [m.to_json() for m in b.truths.values()]
    assert a.experiment.data.equals(b.experiment.data)


def test_function_space_from_sets_and_errors():
    space = FunctionSpace.from_sets([0, "1/2"], [0, 1])
    assert space.shapes == ((Fraction(0), 1), (Fraction(1, 2), 0), (Fraction(1, 2), 1))
    assert len(FunctionSpace().shapes) == 20 * 3 - 1
    with pytest.raises(InputError, match="constant"):
        FunctionSpace(((Fraction(0), 0),))
    with pytest.raises(InputError, match="term_weight_range"):
        FunctionSpace(term_weight_range=(5.0, 1.0))
    with pytest.raises(InputError, match="1 to 4 parameters"):
        random_function("x", {k: 10.0 for k in "abcde"}, np.random.default_rng(0))
    with pytest.raises(InputError, match="must exceed 1"):
        random_function("x", {"p": 1.0}, np.random.default_rng(0))
    with pytest.raises(InputError, match="not in grid"):
        sample([pmnf_function("f", 1, [(1, {"q": (1, 0)})])], {"p": (1, 2)})


def test_grid_and_test_point_follow_the_interval_rule():
    points = grid_points({"p": (1, 2), "n": (10, 20, 30)})
    assert points.tolist() == [[1, 10], [1, 20], [1, 30], [2, 10], [2, 20], [2, 30]]
    assert next_point([2**5, 2**6, 2**7, 2**8, 2**9]) == 2**10  # the paper's example
    # the paper's synthetic evaluation: trained on these grids, tested at p=4096, n=48000
    assert evaluation_point({k: PAPER_GRIDS[k] for k in ("p", "n")}) == {"p": 4096, "n": 48000}
    with pytest.raises(InputError, match="neither evenly spaced nor a geometric"):
        next_point([1, 2, 5])


# -- noise -----------------------------------------------------------------------------------


def _poisson_cdf(k: int, lam: float) -> float:
    return sum(math.exp(i * math.log(lam) - lam - math.lgamma(i + 1)) for i in range(k + 1))


def test_unit_samples_have_the_documented_distributions():
    rng = np.random.default_rng(1)
    uniform = unit_samples("uniform", SAMPLES, rng)
    assert uniform.min() >= 0 and uniform.max() <= 1
    assert uniform.mean() == pytest.approx(0.5, abs=0.003)
    assert uniform.var() == pytest.approx(1 / 12, abs=0.001)

    normal = unit_samples(NoisePattern.NORMAL, SAMPLES, rng)
    assert normal.min() >= 0 and normal.max() <= 1
    # N(0, 1) truncated to [0, 1]: mean (phi(0) - phi(1)) / (Phi(1) - Phi(0))
    phi = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    mean = (phi(0) - phi(1)) / (0.5 * math.erf(1 / math.sqrt(2)))
    assert normal.mean() == pytest.approx(mean, abs=0.003)
    # density falls: more mass in [0, 0.5] than in [0.5, 1], by the ratio of normal areas
    low = (0.5 * math.erf(0.5 / math.sqrt(2))) / (0.5 * math.erf(1 / math.sqrt(2)))
    assert (normal < 0.5).mean() == pytest.approx(low, abs=0.005)

    poisson = unit_samples("poisson", SAMPLES, rng)
    assert (poisson == 1).mean() == pytest.approx(1 - _poisson_cdf(999, 1000), abs=0.005)
    assert poisson.min() > 0.85  # sd of Poisson(1000)/1000 is 0.032

    exponential = unit_samples("exponential", SAMPLES, rng)
    assert (exponential == 1).mean() == pytest.approx(math.exp(-1), abs=0.005)
    assert exponential.mean() == pytest.approx(1 - math.exp(-1), abs=0.003)  # E[min(X, 1)]


@pytest.mark.parametrize("pattern", list(NoisePattern))
def test_noise_intensity_bounds_the_relative_perturbation(pattern):
    rng = np.random.default_rng(2)
    values = np.full(50_000, 200.0)
    up = Noise(pattern, 0.05).apply(values, rng) / values - 1
    assert up.min() >= 0 and up.max() <= 0.05 + 1e-12
    both = Noise(pattern, 0.05, symmetric=True).apply(values, rng) / values - 1
    assert both.min() >= -0.05 - 1e-12 and both.max() <= 0.05 + 1e-12
    assert (both < 0).mean() == pytest.approx(0.5, abs=0.02)


def test_uniform_noise_spreads_evenly_and_share_limits_it():
    rng = np.random.default_rng(3)
    values = np.full(SAMPLES, 10.0)
    both = Noise("uniform", 0.2, symmetric=True).apply(values, rng) / values - 1
    assert both.mean() == pytest.approx(0.0, abs=0.002)
    assert both.var() == pytest.approx(0.4**2 / 12, rel=0.02)  # U(-0.2, 0.2)
    partial = Noise("uniform", 0.2, share=0.3).apply(values, rng)
    assert (partial == 10.0).mean() == pytest.approx(0.7, abs=0.005)


def test_noise_on_an_experiment_changes_values_only():
    bench = generate(3, np.random.default_rng(4), n_parameters=2, repetitions=3)
    noisy = Noise("exponential", 0.2).apply_to(bench.experiment, np.random.default_rng(5))
    clean = bench.experiment.data
    assert noisy.data.drop(columns=VALUE).equals(clean.drop(columns=VALUE))
    ratio = noisy.data[VALUE] / clean[VALUE]
    assert ratio.between(1.0, 1.2).all() and ratio.nunique() > 1
    again = Noise("exponential", 0.2).apply_to(bench.experiment, np.random.default_rng(5))
    assert again.data.equals(noisy.data)


def test_noise_rejects_bad_settings():
    with pytest.raises(InputError, match="unknown noise pattern 'gauss'"):
        Noise("gauss", 0.05)
    with pytest.raises(InputError, match=">= 0"):
        Noise("uniform", -0.1)
    with pytest.raises(InputError, match="negative"):
        Noise("uniform", 1.5, symmetric=True)


# -- metrics ---------------------------------------------------------------------------------


def test_exponent_deviation_follows_eq_4():
    truth = pmnf_function("f", 1, [(1, {"p": (2, 0)}), (1, {"n": (1, 1)})])
    model = pmnf_function("f", 1, [(3, {"p": ("3/2", 1), "n": (1, 2)})])
    assert exponent_deviations(model, truth, ["p", "n"]) == {"p": Fraction(1, 2), "n": 0}
    # log2(x) is x^0 * log2(x): exponent 0, so it deviates from x by 1 and not from a constant
    log_only = pmnf_function("g", 1, [(1, {"p": (0, 1)})])
    linear = pmnf_function("g", 1, [(1, {"p": (1, 0)})])
    constant = pmnf_function("g", 5, [])
    assert exponent_deviation(log_only, linear, "p") == 1
    assert exponent_deviation(log_only, constant, "p") == 0
    # the leading term counts: 2 + p^(1/3) + p^(5/2) against p^3
    mixed = pmnf_function("h", 2, [(1, {"p": ("1/3", 0)}), (1, {"p": ("5/2", 0)})])
    assert exponent_deviation(mixed, pmnf_function("h", 0, [(1, {"p": (3, 0)})]), "p") == Fraction(
        1, 2
    )


def test_exact_match_is_stricter_than_zero_ed():
    truth = pmnf_function("f", 1, [(1, {"p": (1, 0), "n": ("1/2", 0)})])
    model = pmnf_function("f", 1, [(1, {"p": (1, 1)}), (2, {"n": ("1/2", 0)})])
    assert exponent_deviation(model, truth, "p") == 0
    assert leading_exponent_matches(model, truth, ["p", "n"]) == {"p": False, "n": True}
    assert leading_exponent_matches(
        pmnf_function("f", 3, []), pmnf_function("f", 4, []), ["p"]
    ) == {"p": True}


def test_relative_error_follows_eq_5():
    assert relative_error(110.0, 100.0) == pytest.approx(10.0)
    np.testing.assert_allclose(relative_error([90.0, 150.0], [100.0, 100.0]), [10.0, 50.0])
    truth = pmnf_function("f", 0, [(1, {"p": (1, 0)})])
    model = pmnf_function("f", 0, [(1.5, {"p": (1, 0)})])
    assert model_relative_error(model, truth, {"p": 4096}) == pytest.approx(50.0)
