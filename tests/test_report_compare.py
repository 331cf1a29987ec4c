"""``perfcast report A B`` at scale: how many unchanged call paths the comparison calls
changed, and whether real changes of the code are still found. The campaigns are the
synthetic ones of :mod:`perfcast.report.compare`'s docstring: 1,000 call paths of a few
known costs, 2 % multiplicative noise, p in 2..16 and size in 64..1024, compared at
p=64, size=4096 (4x beyond both)."""

import math
from collections.abc import Callable, Mapping
from dataclasses import replace

import numpy as np
import pytest

from perfcast.experiment import Experiment
from perfcast.modeling import ModelSet, PMNFModeler
from perfcast.modeling.intervals import MeanEstimate
from perfcast.report.compare import (
    DOWN,
    NOISE,
    UP,
    Change,
    benjamini_hochberg,
    compare,
    cost_test,
    measured_grid,
)

RANKS = (2, 4, 8, 16)
SIZES = (64, 128, 256, 512, 1024)
TARGET = {"p": 64.0, "size": 4096.0}
RANGES = {"p": (2.0, 16.0), "size": (64.0, 1024.0)}
CALL_PATHS = 1000
SHAPES = (
    lambda p, s: 1e-6 * s**2,
    lambda p, s: 1e-3 * np.log2(p),
    lambda p, s: 1e-5 * s * p**0.5,
    lambda p, s: 1e-5 * s,
    lambda p, s: 1e-4 * p,
    lambda p, s: 1e-5 * s * np.log2(p),
    lambda p, s: 1e-6 * s**1.5 / p,
)
"""The unchanged call paths' costs (times a coefficient, plus a constant): a kernel, a
reduction, a halo exchange, ..., and strong scaling."""


HALOS = (0, 1)
"""Call paths that are halo exchanges ``2e-5 * size * p^(1/2)`` in every campaign."""


def _halo_to_linear(p: float, s: float) -> float:
    """The code change of the two x8 call paths: a halo exchange (:data:`HALOS`) now grows
    as ``size * p`` (8x at p=64)."""
    return 2e-5 * s * p


def campaign(
    repetitions: int, seed: int, changed: Mapping[int, Callable[[float, float], float] | float]
) -> Experiment:
    """The synthetic program measured once; call path ``k`` in ``changed`` costs
    ``changed[k](p, size)`` instead (a function), or its usual cost times it (a number)."""
    shapes = np.random.default_rng(0).integers(0, len(SHAPES), CALL_PATHS)
    coefficients = np.random.default_rng(1).uniform(0.5, 5.0, CALL_PATHS)
    constants = np.random.default_rng(2).uniform(0.0, 0.01, CALL_PATHS)
    shapes[list(HALOS)], coefficients[list(HALOS)], constants[list(HALOS)] = 2, 2.0, 0.0
    noise = np.random.default_rng(seed)
    rows = []
    for k in range(CALL_PATHS):
        for p in RANKS:
            for size in SIZES:
                cost = constants[k] + coefficients[k] * SHAPES[shapes[k]](p, size)
                change = changed.get(k)
                if callable(change):
                    cost = change(p, size)
                elif change is not None:
                    cost *= change
                for value in cost * (1 + 0.02 * noise.standard_normal(repetitions)):
                    rows.append((f"main->f{k}", "time", (p, size), float(value)))
    return Experiment.from_rows(["p", "size"], rows)


def compared(
    repetitions: int, changed: Mapping[int, Callable[[float, float], float] | float]
) -> tuple[ModelSet, ModelSet, dict[str, np.ndarray] | None]:
    """Two campaigns fitted, B with the changes, and the points both measured."""
    before = PMNFModeler().fit(campaign(repetitions, seed=10, changed={}))
    after = PMNFModeler().fit(campaign(repetitions, seed=11, changed=changed))
    measured = measured_grid([RANGES, RANGES], ["p", "size"])
    return before, after, measured


@pytest.fixture(scope="module")
def eightfold():
    """998 unchanged call paths and two whose halo exchange became linear in p, three
    repetitions: as in the module docstring of perfcast.report.compare."""
    return compared(3, {0: _halo_to_linear, 1: _halo_to_linear})


def _flagged(changes: list[Change], real: set[str]) -> tuple[dict[str, Change], list[Change]]:
    """The changes of the ``real`` call paths, and the unchanged ones flagged."""
    found = {c.callpath: c for c in changes if c.callpath in real}
    false = [c for c in changes if c.changed and c.callpath not in real]
    return found, false


@pytest.mark.slow
def test_both_eightfold_changes_are_found_and_almost_no_unchanged_call_path(eightfold) -> None:
    before, after, measured = eightfold
    changes = compare(before, after, TARGET, measured=measured)
    found, false = _flagged(changes, {"main->f0", "main->f1"})
    for change in found.values():
        assert change.verdict == UP
        assert change.ratio == pytest.approx(8, rel=0.15)
        assert change.p_value < 1e-10
    assert len(false) <= 3
    assert [c.callpath for c in changes[:2]] == ["main->f0", "main->f1"] or [
        c.callpath for c in changes[:2]
    ] == ["main->f1", "main->f0"]


@pytest.mark.slow
def test_without_the_measured_points_other_terms_look_like_changes(eightfold) -> None:
    """The stored rivals alone do not cover two campaigns picking other terms: the
    unchanged pairs that part beyond the range are then flagged by dozens, which is why
    compare() counts a model of other terms that agrees where measured as a rival."""
    before, after, _ = eightfold
    changes = compare(before, after, TARGET)
    _, false = _flagged(changes, {"main->f0", "main->f1"})
    assert len(false) > 10
    assert all(c.terms_differ for c in false)


@pytest.mark.slow
def test_a_stricter_level_reports_a_subset(eightfold) -> None:
    before, after, measured = eightfold
    loose = compare(before, after, TARGET, 0.5, measured)
    strict = compare(before, after, TARGET, 0.999, measured)
    loose_changed = {c.callpath for c in loose if c.verdict in (UP, DOWN)}
    strict_changed = {c.callpath for c in strict if c.verdict in (UP, DOWN)}
    assert {"main->f0", "main->f1"} <= strict_changed <= loose_changed


@pytest.mark.slow
def test_a_modest_change_is_found_with_five_repetitions() -> None:
    """One call path 1.3x costlier (the same terms, a larger coefficient) among 999
    unchanged ones, five repetitions each."""
    before, after, measured = compared(5, {2: 1.3})
    changes = compare(before, after, TARGET, measured=measured)
    found, false = _flagged(changes, {"main->f2"})
    modest = found["main->f2"]
    assert modest.verdict == UP
    assert modest.ratio == pytest.approx(1.3, rel=0.05)
    assert len(false) <= 3


def test_benjamini_hochberg_rejects_the_smallest_up_to_the_last_under_its_line() -> None:
    # m = 4 tested (nan is not a test); the line is 0.05 k / 4: 0.0125, 0.025, 0.0375, 0.05
    assert benjamini_hochberg([0.01, 0.04, 0.03, 0.2, math.nan], 0.05) == [
        True,
        False,
        False,
        False,
        False,
    ]
    # the 3rd smallest (0.036 <= 0.0375) carries the 2nd (0.03 > 0.025) with it
    assert benjamini_hochberg([0.036, 0.03, 0.01, 0.9], 0.05) == [True, True, True, False]
    assert benjamini_hochberg([], 0.05) == []
    assert benjamini_hochberg([math.nan], 0.05) == [False]


def _estimate(
    value: float, low: float, high: float, variance: float, dof: float = 40.0
) -> MeanEstimate:
    """A fit's estimate at the target, as :func:`mean_estimate` gives it (0-d arrays); the
    noise of a new measurement is not part of the cost test."""
    arrays = (np.array(value), np.array(low), np.array(high), np.array(variance))
    return MeanEstimate(*arrays, dof, noise=0.0, noise_dof=dof)


def test_the_cost_test_measures_the_gap_between_the_fits_and_their_rivals() -> None:
    # 10 against 11 with a standard error of 0.1 each: 7 standard errors of the difference
    apart = cost_test(_estimate(10, 10, 10, 0.01), _estimate(11, 11, 11, 0.01))
    assert 0 < apart < 1e-7
    # a rival of A at 10.9 leaves a gap of 0.1, well inside the noise
    rival = cost_test(_estimate(10, 10, 10.9, 0.01), _estimate(11, 11, 11, 0.01))
    assert 0.4 < rival < 0.6
    # overlapping rivals: nothing tells the two apart
    assert cost_test(_estimate(10, 9, 11.5, 0.01), _estimate(11, 11, 11, 0.01)) == 1.0
    # noiseless fits that differ, and a value that is not finite
    assert cost_test(_estimate(10, 10, 10, 0.0), _estimate(11, 11, 11, 0.0)) == 0.0
    assert math.isnan(cost_test(_estimate(10, 10, 10, 0.01), _estimate(math.inf, 1, 1, 0.01)))


def test_the_measured_grid_is_where_both_campaigns_measured() -> None:
    grid = measured_grid(
        [{"p": (2.0, 16.0), "n": (0.0, 8.0)}, {"p": (4.0, 32.0), "n": (0, 8)}], ["p", "n"]
    )
    assert grid is not None
    assert grid["p"].min() == 4.0 and grid["p"].max() == 16.0
    assert sorted(set(grid["n"].tolist())) == [0.0, 2.0, 4.0, 6.0, 8.0]  # linear: 0 is in it
    assert measured_grid([{"p": (2.0, 4.0)}, {"p": (8.0, 16.0)}], ["p"]) is None
    assert measured_grid([{"p": (2.0, 4.0)}, None], ["p"]) is None


def test_models_without_uncertainty_are_not_judged_nor_counted() -> None:
    """A model read from another tool's file stores no uncertainty: its cost change is
    listed as not judged, and it is not one of the comparisons the false discovery rate
    is controlled over."""
    rows = [
        (path, "time", (p,), scale * (3.0 + 2 * p) * (1 + 0.02 * noise))
        for path, scale in (("f", 1.0), ("g", 1.0))
        for p in (1, 2, 3, 4, 5)
        for noise in (-1.0, 0.0, 1.0)
    ]
    models = PMNFModeler().fit(Experiment.from_rows(["p"], rows))
    bare = models.with_models([replace(models[("f", "time")], uncertainty=None)])
    changes = {c.callpath: c for c in compare(bare, models, {"p": 20.0})}
    assert changes["f"].verdict == "no interval" and math.isnan(changes["f"].p_value)
    assert changes["g"].verdict == NOISE and changes["g"].p_value == 1.0
