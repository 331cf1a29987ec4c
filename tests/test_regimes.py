"""Regime changes (perfcast.modeling.regimes): cache steps, slope changes, the p >= 2 step,
smooth data that must not produce one, one repetition, degenerate input."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pytest

from perfcast.modeling.regimes import RegimeChange, find_regime_change, last_segment

N = (16, 20, 24, 32, 40, 48)
P = (1, 2, 4, 8)

Function = Callable[[float, float], float]


def measure(
    function: Function,
    n: tuple[float, ...] = N,
    p: tuple[float, ...] = P,
    repetitions: int = 3,
    noise: float = 0.02,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Coordinates (n, p) of the full grid and repetitions with uniform relative noise."""
    rng = np.random.default_rng(seed)
    coordinates = np.array(list(itertools.product(n, p)), dtype=float)
    exact = np.array([function(a, b) for a, b in coordinates])
    jitter = 1 + noise * rng.uniform(-1, 1, (len(exact), repetitions))
    return coordinates, exact[:, None] * jitter


def cache_step(n: float, p: float) -> float:
    """n^3 per call, 1.8 times the time per element once the working set leaves the cache."""
    return 1e-6 * n**3 * (1.8 if n > 24 else 1.0)


def found(change: RegimeChange | None) -> RegimeChange:
    assert change is not None
    return change


def test_cache_step_along_n() -> None:
    coordinates, values = measure(cache_step)
    change = found(find_regime_change(coordinates, values, ["n", "p"]))
    assert (change.parameter, change.below, change.above, change.kind) == ("n", 24, 32, "step")
    assert 24 < change.estimate < 32
    assert change.interval[0] <= 24 and change.interval[1] >= 32
    assert change.ratio == pytest.approx(1.8, rel=0.05)
    assert change.growth[0] == pytest.approx(3, abs=0.15)
    assert change.p_value < 1e-10
    sentence = change.describe()
    assert "along n between 24 and 32" in sentence and "n >= 32" in sentence
    assert "x1.8" in sentence
    np.testing.assert_array_equal(
        last_segment(coordinates, ["n", "p"], change), coordinates[:, 0] >= 32
    )


def test_cache_step_with_ragged_repetitions() -> None:
    """NaN pads points with fewer repetitions; a point without any is left out."""
    coordinates, values = measure(cache_step, repetitions=4, seed=3)
    values[::3, 3] = np.nan
    values[5, :] = np.nan
    change = found(find_regime_change(coordinates, values, ["n", "p"]))
    assert (change.parameter, change.below, change.above, change.kind) == ("n", 24, 32, "step")


@pytest.mark.parametrize(
    "function",
    [lambda n, p: n**3 * np.log2(n), lambda n, p: n**2],
    ids=["n^3 log2(n)", "n^2"],
)
def test_smooth_data_give_no_regime(function: Function) -> None:
    """At level 0.001 at most one false alarm in 50 seeds at 5 % noise."""
    alarms = [
        seed
        for seed in range(50)
        if find_regime_change(*measure(function, noise=0.05, seed=seed), ["n", "p"])
    ]
    assert len(alarms) <= 1, alarms


def test_sums_of_power_laws_are_no_regime() -> None:
    """Strong scaling plus an overhead, n/p + p, bends from falling to rising in log-log
    like a slope change, but a PMNF of two terms fits it: no regime."""
    p = (1, 2, 4, 8, 16, 32, 64)
    alarms = [
        seed
        for seed in range(20)
        if find_regime_change(*measure(lambda n, q: n / q + q, p=p, seed=seed), ["n", "p"])
    ]
    assert len(alarms) <= 1, alarms


def test_exact_smooth_data_give_no_regime() -> None:
    """Identical repetitions (no noise at all) do not make curvature a regime."""
    for function in (lambda n, p: n**3 * np.log2(n) ** 2, lambda n, p: 10 + n**2 / p):
        coordinates, values = measure(function, noise=0.0)
        assert find_regime_change(coordinates, values, ["n", "p"]) is None


def test_slope_change() -> None:
    """n^1 up to n = 24, n^2 from 32 on (the two meet at n = 28)."""
    coordinates, values = measure(lambda n, p: n * (n / 28 if n > 24 else 1.0) / p)
    change = found(find_regime_change(coordinates, values, ["n", "p"]))
    assert (change.parameter, change.below, change.above, change.kind) == ("n", 24, 32, "slope")
    assert change.growth == pytest.approx((1, 2), abs=0.2)
    assert 24 <= change.estimate <= 32
    assert change.estimate == pytest.approx(28, rel=0.1)
    assert "slope: growth n^1 -> n^2" in change.describe()


def test_kink_at_a_measured_value_widens_the_interval() -> None:
    """n^1 up to n = 28, n^2 from there: the kink sits on a measured value, so the gaps on
    both sides of it stay possible."""
    n = (16, 20, 24, 28, 32, 40, 48, 64)
    coordinates, values = measure(lambda a, p: a * max(1.0, a / 28), n=n, p=(1, 2))
    change = found(find_regime_change(coordinates, values, ["n", "p"]))
    assert change.kind == "slope"
    assert (change.below, change.above) in ((24, 28), (28, 32))
    assert change.interval == (24, 32)
    assert change.estimate == pytest.approx(28, rel=0.03)
    assert "somewhere in 24 to 32" in change.describe()


def test_step_at_two_processes() -> None:
    """Every run at p >= 2 does twice the iterations of p = 1: a step between 1 and 2,
    with a first segment of one value."""
    coordinates, values = measure(lambda n, p: n * (2.0 if p >= 2 else 1.0))
    change = found(find_regime_change(coordinates, values, ["n", "p"]))
    assert (change.parameter, change.below, change.above, change.kind) == ("p", 1, 2, "step")
    assert change.ratio == pytest.approx(2, rel=0.05)
    assert 1 < change.estimate < 2
    assert change.growth == pytest.approx((0, 0), abs=0.1)
    np.testing.assert_array_equal(
        last_segment(coordinates, ["n", "p"], change), coordinates[:, 1] >= 2
    )


def test_most_significant_parameter_wins() -> None:
    """A large step along n and a small one along p: the one along n is reported."""
    coordinates, values = measure(lambda n, p: cache_step(n, p) * (1.15 if p >= 4 else 1.0))
    change = found(find_regime_change(coordinates, values, ["n", "p"]))
    assert change.parameter == "n"


def test_one_repetition() -> None:
    """Without repetitions the noise comes from the residuals: a clear step is found, a
    smooth function is not, and one line of six points leaves too little to tell."""
    coordinates, values = measure(cache_step, repetitions=1)
    change = found(find_regime_change(coordinates, values, ["n", "p"]))
    assert (change.parameter, change.below, change.above, change.kind) == ("n", 24, 32, "step")
    alarms = [
        seed
        for seed in range(20)
        if find_regime_change(
            *measure(lambda n, p: n**2, repetitions=1, seed=seed, noise=0.05), ["n", "p"]
        )
    ]
    assert len(alarms) <= 1, alarms
    line, values = measure(cache_step, p=(1,), repetitions=1)
    assert find_regime_change(line, values, ["n", "p"]) is None


def test_too_small_a_step_is_no_regime() -> None:
    """5 % is below the minimum effect (10 %) however significant."""
    coordinates, values = measure(
        lambda n, p: n**2 * (1.05 if n > 24 else 1.0), repetitions=10, noise=0.002
    )
    assert find_regime_change(coordinates, values, ["n", "p"]) is None


def test_min_segment() -> None:
    """Each segment keeps at least min_segment values: with 4, no split of six values
    does, with 3 the cache step between the third and the fourth is found."""
    coordinates, values = measure(cache_step)
    assert find_regime_change(coordinates, values, ["n", "p"], min_segment=4) is None
    change = found(find_regime_change(coordinates, values, ["n", "p"], min_segment=3))
    assert (change.below, change.above) == (24, 32)


def degenerate_cases() -> list[tuple[str, np.ndarray, np.ndarray]]:
    coordinates, values = measure(cache_step)
    zero = values.copy()
    zero[4, 1] = 0.0
    negative = values.copy()
    negative[7, 0] = -1.0
    infinite = values.copy()
    infinite[2, 2] = np.inf
    few, few_values = measure(cache_step, n=(16, 24, 32))
    at_zero = coordinates.copy()
    at_zero[:, 0] -= 16  # n = 0 has no logarithm
    return [
        ("empty", np.empty((0, 2)), np.empty((0, 3))),
        ("one point", coordinates[:1], values[:1]),
        ("constant", coordinates, np.ones_like(values)),
        ("zeros", coordinates, np.zeros_like(values)),
        ("a zero", coordinates, zero),
        ("negative", coordinates, negative),
        ("infinite", coordinates, infinite),
        ("all NaN", coordinates, np.full_like(values, np.nan)),
        ("three values", few, few_values),
        ("parameter at zero", at_zero, values),
        ("no repetitions column", coordinates, np.empty((len(coordinates), 0))),
    ]


@pytest.mark.parametrize(
    ("name", "coordinates", "values"), degenerate_cases(), ids=[c[0] for c in degenerate_cases()]
)
def test_degenerate_input_gives_none(
    name: str, coordinates: np.ndarray, values: np.ndarray
) -> None:
    assert find_regime_change(coordinates, values, ["n", "p"]) is None


def test_mismatched_shapes_are_an_error() -> None:
    coordinates, values = measure(cache_step)
    with pytest.raises(ValueError, match="do not match"):
        find_regime_change(coordinates, values[:-1], ["n", "p"])
    with pytest.raises(ValueError, match="do not match"):
        find_regime_change(coordinates, values, ["n"])


def test_result_is_frozen() -> None:
    change = found(find_regime_change(*measure(cache_step), ["n", "p"]))
    with pytest.raises(AttributeError):
        change.below = 0.0  # type: ignore[misc]
