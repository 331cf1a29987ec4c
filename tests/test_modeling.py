"""The PMNF modeler: exact recovery, noise handling, priors, bad input."""

from fractions import Fraction
from itertools import product

import numpy as np
import pytest

from perfcast.errors import InputError
from perfcast.experiment import Experiment
from perfcast.modeling import Factor, ModelSet, PMNFModeler, Prior, SearchSpace
from perfcast.synth.functions import pmnf_function
from perfcast.synth.measurements import default_grid, sample
from perfcast.synth.noise import Noise

GRID = {"p": (4, 8, 16, 32, 64), "n": (10, 20, 30, 40, 50), "s": (2, 4, 6, 8, 10)}


def experiment(functions, parameters, repetitions=1, noise=0.0, seed=0):
    """Sample ``{callpath: f(**point)}`` on the full grid of ``parameters``."""
    rng = np.random.default_rng(seed)
    rows = []
    for point in product(*(GRID[p] for p in parameters)):
        named = dict(zip(parameters, point, strict=True))
        for callpath, function in functions.items():
            for _ in range(repetitions):
                value = function(**named) * (1 + noise * rng.uniform(-1, 1))
                rows.append((callpath, "time", point, value))
    return Experiment.from_rows(parameters, rows)


def shape(model):
    """The model's terms as sets of (parameter, exponent, log exponent)."""
    return sorted(
        tuple(sorted((f.parameter, f.exponent, f.log_exponent) for f in t.factors))
        for t in model.terms
    )


def log2(x):
    return np.log2(x)


F = Fraction


@pytest.mark.parametrize(
    ("function", "expected"),
    [
        (lambda p: 3 + 2 * p, [(("p", F(1), 0),)]),
        (lambda p: 1 + 0.5 * p**2 * log2(p), [(("p", F(2), 1),)]),
        (lambda p: 7 + 4 * p ** (1 / 3), [(("p", F(1, 3), 0),)]),
        (lambda p: 2 + 3 * log2(p) ** 2, [(("p", F(0), 2),)]),
        (lambda p: 0.1 + 1e-3 * p**3, [(("p", F(3), 0),)]),
    ],
)
def test_single_parameter_functions_are_recovered_exactly(function, expected):
    models = PMNFModeler().fit(experiment({"f": function}, ["p"]))
    model = models[("f", "time")]
    assert shape(model) == expected
    assert model.statistics.smape < 1e-6


def test_two_parameter_sum_and_product():
    functions = {
        "sum": lambda p, n: 5 + 2 * p**2 + 3 * n ** (1 / 2) * log2(n),
        "product": lambda p, n: 1 + 0.25 * p * log2(p) * n**2,
        "mixed": lambda p, n: 2 + p * n + 4 * p,
    }
    models = PMNFModeler().fit(experiment(functions, ["p", "n"]))
    assert shape(models[("sum", "time")]) == [(("n", F(1, 2), 1),), (("p", F(2), 0),)]
    assert shape(models[("product", "time")]) == [(("n", F(2), 0), ("p", F(1), 1))]
    assert shape(models[("mixed", "time")]) == [(("n", F(1), 0), ("p", F(1), 0)), (("p", F(1), 0),)]
    assert models[("product", "time")].terms[0].coefficient == pytest.approx(0.25)


def test_three_parameter_sums_and_products():
    functions = {
        "sum": lambda p, n, s: 1 + p + 2 * n**2 + 3 * s ** (1 / 2),
        "product": lambda p, n, s: 2 + 0.5 * log2(p) * n * s**2,
        "nested_plus": lambda p, n, s: 3 + p * n + 5 * s**3,
    }
    models = PMNFModeler().fit(experiment(functions, ["p", "n", "s"]))
    assert shape(models[("sum", "time")]) == [
        (("n", F(2), 0),),
        (("p", F(1), 0),),
        (("s", F(1, 2), 0),),
    ]
    assert shape(models[("product", "time")]) == [(("n", F(1), 0), ("p", F(0), 1), ("s", F(2), 0))]
    assert shape(models[("nested_plus", "time")]) == [
        (("n", F(1), 0), ("p", F(1), 0)),
        (("s", F(3), 0),),
    ]


def test_constant_data_gives_constant_model():
    models = PMNFModeler().fit(experiment({"c": lambda p, n: 42.0}, ["p", "n"], repetitions=3))
    model = models[("c", "time")]
    assert model.is_constant()
    assert model.constant == pytest.approx(42.0)


def test_variation_within_noise_gives_constant_model():
    # 1 % growth across the range, 10 % noise on every repetition: not a real effect.
    noisy = experiment({"f": lambda p: 100 + 0.01 * p}, ["p"], repetitions=5, noise=0.1)
    model = PMNFModeler().fit(noisy)[("f", "time")]
    assert model.is_constant()
    assert any("noise" in w for w in model.warnings)
    # The same growth without noise is a real dependency.
    clean = experiment({"f": lambda p: 100 + 0.01 * p}, ["p"], repetitions=5)
    assert shape(PMNFModeler().fit(clean)[("f", "time")]) == [(("p", F(1), 0),)]


def test_noise_resilience_on_a_realistic_case():
    noisy = experiment(
        {"f": lambda p, n: 10 + 0.01 * p**2 * n}, ["p", "n"], repetitions=5, noise=0.05
    )
    model = PMNFModeler().fit(noisy)[("f", "time")]
    assert model.leading_exponents() == {"p": (F(2), 0), "n": (F(1), 0)}


def test_batched_result_does_not_depend_on_the_other_call_paths():
    functions = {"a": lambda p, n: 1 + p * n, "b": lambda p, n: 3 + n**3, "c": lambda p, n: 9.0}
    together = PMNFModeler().fit(experiment(functions, ["p", "n"]))
    alone = PMNFModeler().fit(experiment({"b": functions["b"]}, ["p", "n"]))
    assert together[("b", "time")].text() == alone[("b", "time")].text()


def test_prior_excludes_parameters():
    data = experiment({"f": lambda p, n: 1 + p + n**2}, ["p", "n"], repetitions=2, noise=0.01)
    prior = Prior("taint", parameters=frozenset({"n"}))
    model = PMNFModeler().fit(data, priors={"f": prior})[("f", "time")]
    assert model.parameters == ("n",)
    assert model.prior == "taint: parameters {n}"


def test_prior_forbids_products():
    data = experiment({"f": lambda p, n: 1 + p * n}, ["p", "n"])
    prior = Prior("taint", multiplicative=(frozenset({"p"}), frozenset({"n"})))
    model = PMNFModeler().fit(data, priors={"f": prior})[("f", "time")]
    assert all(len(term.factors) == 1 for term in model.terms)
    free = PMNFModeler().fit(data)[("f", "time")]
    assert len(free.terms) == 1 and len(free.terms[0].factors) == 2


def test_constant_prior_and_fixed_structure():
    data = experiment({"f": lambda p, n: 5 + 2 * p * log2(p) + 0.5 * n}, ["p", "n"], repetitions=2)
    constant = PMNFModeler().fit(data, priors={"f": Prior.constant("taint")})[("f", "time")]
    assert constant.is_constant()
    # A fixed structure that is wrong on purpose: only its coefficients are fitted.
    fixed = Prior.fixed("effort", [(Factor("p", F(2), 0),), (Factor("n", F(1), 0),)])
    model = PMNFModeler().fit(data, priors={"f": fixed})[("f", "time")]
    assert shape(model) == [(("n", F(1), 0),), (("p", F(2), 0),)]
    assert model.prior is not None and model.prior.startswith("effort: fixed terms")


def test_prior_naming_unknown_parameter_is_rejected():
    data = experiment({"f": lambda p: p}, ["p"])
    with pytest.raises(InputError, match=r"\['q'\]"):
        PMNFModeler().fit(data, priors={"f": Prior("taint", parameters=frozenset({"q"}))})


def test_negative_exponents_model_strong_scaling():
    data = experiment({"f": lambda p: 2 + 1000 / p}, ["p"])
    space = SearchSpace(exponents=(F(-1), F(-1, 2), F(0), F(1)), log_exponents=(0, 1))
    model = PMNFModeler(space).fit(data)[("f", "time")]
    assert shape(model) == [(("p", F(-1), 0),)]


def test_model_set_json_round_trip_and_vectorised_prediction(tmp_path):
    models = PMNFModeler().fit(experiment({"f": lambda p, n: 1 + p * n**2}, ["p", "n"]))
    path = tmp_path / "models.json"
    models.save(path)
    loaded = ModelSet.load(path)
    model = loaded[("f", "time")]
    assert model.text() == models[("f", "time")].text()
    values = loaded.predict({"p": np.array([4.0, 128.0]), "n": np.array([10.0, 1000.0])})
    np.testing.assert_allclose(values[("f", "time")], [401.0, 128_000_001.0], rtol=1e-9)


def test_too_few_values_per_parameter():
    rows = [("f", "time", (p, 1), float(p)) for p in (1, 2, 3, 4, 5)]
    rows += [("f", "time", (p, 2), float(p)) for p in (1, 2, 3, 4, 5)]
    with pytest.raises(InputError, match=r"parameter 'n' .* 2 distinct value"):
        PMNFModeler().fit(Experiment.from_rows(["p", "n"], rows))


def test_non_positive_values_need_a_shift():
    rows = [("f", "time", (x,), float(x)) for x in (0, 1, 2, 3, 4)]
    with pytest.raises(InputError, match=r"parameter 'x' takes the value 0"):
        PMNFModeler().fit(Experiment.from_rows(["x"], rows))
    integer_space = SearchSpace(exponents=(F(0), F(1), F(2)), log_exponents=(0,))
    model = PMNFModeler(integer_space).fit(Experiment.from_rows(["x"], rows))[("f", "time")]
    assert shape(model) == [(("x", F(1), 0),)]


def test_nan_measurement_is_rejected():
    rows = [("f", "time", (x,), float(x)) for x in (1, 2, 3, 4)] + [("f", "time", (5,), np.nan)]
    with pytest.raises(InputError, match="NaN"):
        PMNFModeler().fit(Experiment.from_rows(["x"], rows))


def test_flat_noisy_lines_do_not_veto_a_parameters_shape():
    # A product term that only rises above the noise where the other parameters are large:
    # most lines along p are flat and noisy, and must not push p's shape to an arbitrary one.
    truth = pmnf_function(
        "f", 6e-4, [(1.2e-23, {"p": ("8/3", 2), "n": ("2/3", 1), "m": ("8/3", 1)})]
    )
    clean = sample([truth], default_grid(3), repetitions=5)
    hits = 0
    for seed in range(5):
        noisy = Noise("uniform", 0.05).apply_to(clean, np.random.default_rng(seed))
        model = PMNFModeler(aggregation="mean").fit(noisy)[("f", "time")]
        hits += sum(
            abs(model.leading_exponents().get(p, (F(0), 0))[0] - e) <= F(1, 4)
            for p, e in (("p", F(8, 3)), ("n", F(2, 3)), ("m", F(8, 3)))
        )
    assert hits >= 13  # of 15: exponents within one step of the truth


def test_with_params_copies_every_setting_but_the_changed_ones():
    space = SearchSpace(exponents=(Fraction(1), Fraction(2)), log_exponents=(0,))
    modeler = PMNFModeler(space, terms=2, aggregation="mean", candidates=5)
    variant = modeler.with_params(significance=None)
    assert variant.significance is None
    assert variant.get_params() == {**modeler.get_params(), "significance": None}
    assert variant.space is space


def test_median_estimators_on_a_flat_call_path_with_a_wild_repetition():
    rows = [
        ("f", "time", (p,), value)
        for p in GRID["p"]
        for value in (1.0, 2.0, 3.0, 4.0, 100.0)  # flat, one wild repetition per point
    ]
    data = Experiment.from_rows(["p"], rows)
    sample_median = PMNFModeler(median_estimator="sample").fit(data)[("f", "time")]
    assert sample_median.constant == 3.0 and not sample_median.terms
    harrell_davis = PMNFModeler(median_estimator="harrell-davis", significance=None)
    constant = harrell_davis.fit(data)[("f", "time")].constant
    # Beta(3, 3) weights of the five order statistics: 0.058, 0.259, 0.365, 0.259, 0.058.
    assert constant == pytest.approx(8.50, abs=0.01)
    assert constant < np.mean([1, 2, 3, 4, 100]) / 2
    with pytest.raises(InputError, match="unknown median_estimator 'trimmed'"):
        PMNFModeler(median_estimator="trimmed")


def test_huber_centre_is_the_mean_of_calm_repetitions_and_ignores_a_spike():
    calm = (1.00, 1.00, 1.01, 1.03, 1.04)
    spiky = (1.00, 1.00, 1.01, 1.03, 5.00)  # another process ran during one repetition
    rows = [
        (name, "time", (p,), value)
        for name, values in (("calm", calm), ("spiky", spiky))
        for p in GRID["p"]
        for value in values
    ]
    data = Experiment.from_rows(["p"], rows)
    models = PMNFModeler().fit(data)
    # pooled robust sd ~1.5 %: every calm repetition lies within 2 sd, so all count fully
    assert models[("calm", "time")].constant == pytest.approx(np.mean(calm), rel=1e-12)
    assert models[("spiky", "time")].constant == pytest.approx(1.015, abs=0.005)
    harrell_davis = PMNFModeler(median_estimator="harrell-davis").fit(data)
    assert harrell_davis[("spiky", "time")].constant > 1.2  # 6 % of the spike's 4.0


def test_parsimony_keeps_a_noisy_product_from_growing_extra_terms():
    # 40 call paths of one nested loop under 20 % noise: an additive term on top of the
    # product fits some of the noise, by less than the repetitions' spread explains
    truth = {f"f{k}": (lambda p, n: 2 + 0.1 * p * n) for k in range(40)}
    data = experiment(truth, ["p", "n"], repetitions=5, noise=0.2)

    def single_term(modeler):
        return sum(len(model.terms) == 1 for model in modeler.fit(data))

    plain = single_term(PMNFModeler(parsimony=0))
    parsimonious = single_term(PMNFModeler())
    assert parsimonious > plain + 4
    assert parsimonious >= 25


def test_parsimony_and_combinations_are_checked():
    with pytest.raises(InputError, match="parsimony"):
        PMNFModeler(parsimony=-1.0)
    with pytest.raises(InputError, match="combinations"):
        PMNFModeler(combinations=0)


def test_combination_budget_bounds_the_candidates_a_structure_combines():
    truth = {f"f{k}": (lambda p, n: 2 + 0.1 * p ** (4 / 5) * n ** (3 / 2)) for k in range(20)}
    data = experiment(truth, ["p", "n"], repetitions=5, noise=0.2)

    def shapes(modeler):
        return [shape(model) for model in modeler.fit(data)]

    # a budget of one combination leaves every structure its best shapes only
    assert shapes(PMNFModeler(combinations=1)) == shapes(PMNFModeler(candidates=1))
    assert shapes(PMNFModeler()) != shapes(PMNFModeler(candidates=1))
    # two candidates per parameter fit a budget of 4 for products of two parameters
    two = PMNFModeler(candidates=2)
    assert shapes(two.with_params(combinations=4)) == shapes(two.with_params(combinations=100))
    assert shapes(two.with_params(combinations=3)) != shapes(two.with_params(combinations=4))


@pytest.mark.parametrize("finalists", [1, 4])
def test_screening_keeps_the_simplest_exact_model_whatever_the_number_of_finalists(finalists):
    functions = {
        "sum": lambda p, n, s: 2 + 3 * p * log2(p) + 0.5 * n**2 + 4 * s ** (1 / 2),
        "product": lambda p, n, s: 1 + 0.01 * p ** (3 / 2) * n * log2(s),
    }
    models = PMNFModeler(finalists=finalists).fit(experiment(functions, ["p", "n", "s"]))
    assert shape(models[("sum", "time")]) == [
        (("n", F(2), 0),),
        (("p", F(1), 1),),
        (("s", F(1, 2), 0),),
    ]
    assert shape(models[("product", "time")]) == [
        (("n", F(1), 0), ("p", F(3, 2), 0), ("s", F(0), 1)),
    ]


def test_a_metric_with_fewer_repetitions_keeps_its_model():
    # Counts (one repetition: they are exact) fitted beside noisy time (three): the padding
    # of the counts' missing repetitions must not count as repetitions of value 1, which
    # made their growth look like noise and gave them a constant model.
    rng = np.random.default_rng(11)
    rows = []
    for x in (4, 8, 16, 32, 64):
        rows.append(("f", "blocks", (x,), 2014.0 + 20.0 * x * x))
        for _ in range(3):
            rows.append(("f", "time", (x,), 1e-3 * x * (1 + 0.05 * rng.random())))
    models = PMNFModeler().fit(Experiment.from_rows(("x",), rows))
    blocks = models[("f", "blocks")]
    assert blocks.leading_exponents()["x"] == (F(2), 0)
    assert not blocks.warnings
