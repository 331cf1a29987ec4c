"""The modeler's warnings to the user, worded in one place.

Every model carries warnings where it should not be read as a scaling law: a poor fit
(:func:`poor_fit`), fewer than :data:`~perfcast.modeling.advice.RECOMMENDED_VALUES` values
of a parameter (:func:`few_values`, with the values to add), fewer than
:data:`RECOMMENDED_REPETITIONS` repetitions (:func:`few_repetitions`), a parameter left
out (:func:`too_few_distinct`, :func:`not_a_dependency`), a constant model because the
variation is noise (:data:`WITHIN_NOISE`), and where a call path exists only at some
points (:func:`existence_note`). The search (:mod:`perfcast.modeling.shapes`,
:mod:`perfcast.modeling.search`) decides when; this module says what, so tests and later
stages can refer to the same texts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from perfcast.experiment.points import format_point, format_value
from perfcast.modeling.advice import POOR_FIT, RECOMMENDED_VALUES, extend_series
from perfcast.modeling.pmnf import FitStatistics

RECOMMENDED_REPETITIONS = 3
"""Fewest repetitions per point without a warning: two give the noise test one degree of
freedom per point, one none at all."""

EXACT_SMAPE = 1e-6
"""SMAPE (percent) at or below which a model reproduces its data exactly (counts)."""

POOR_SMAPE = 10.0
"""SMAPE (percent) above which a model is flagged as a poor fit, unless the repetitions'
own noise explains it (see :func:`poor_fit`)."""

POOR_ADJUSTED_R2 = 0.5
"""Adjusted R^2 below which a model with terms explains too little of the variation."""

WITHIN_NOISE = "variation is within the measurement noise: constant model"
"""The warning of a constant model whose parameters the noise test all left out."""


def too_few_distinct(name: str, distinct: int) -> str:
    """A parameter with fewer distinct values than ``min_points`` for a call path."""
    return (
        f"{name} has only {distinct} distinct value(s) for this call path; "
        "it is left out of the model"
    )


def few_values(values: Mapping[str, np.ndarray]) -> str | None:
    """One warning for all parameters measured at fewer than :data:`RECOMMENDED_VALUES`
    distinct ``values`` (by parameter, sorted), or None: three points fit many shapes
    about equally well (Extra-P warns below five), so the model's exponents are weakly
    supported however well it fits. The warning names the values that would extend the
    existing series."""
    few = []
    for name, measured in values.items():
        if len(measured) < RECOMMENDED_VALUES:
            more = extend_series(measured, RECOMMENDED_VALUES - len(measured))
            shown = ", ".join(map(format_value, measured))
            few.append(
                f"{name} ({shown}): measure {name}={', '.join(map(format_value, more))} as well"
            )
    if not few:
        return None
    return (
        f"too few values to tell the shapes apart (fewer than {RECOMMENDED_VALUES}): "
        + "; ".join(few)
    )


def not_a_dependency(names: Sequence[str], effect: float) -> str:
    """Parameters along which a call path measured once per point changes by less than
    ``effect`` (relative): left out of the model."""
    return (
        f"{', '.join(names)} change(s) the values by less than "
        f"{100 * effect:g} % over the measured range: not a dependency, left out "
        "of the model"
    )


def few_repetitions(
    counts: np.ndarray, statistics: FitStatistics, dropped: Sequence[str]
) -> str | None:
    """The warning on fewer than :data:`RECOMMENDED_REPETITIONS` repetitions per point
    (``counts``: each point's), or None: with one, noise cannot be told from a trend at all
    (the noise test does not run); with two, the test's estimate of the noise is so rough
    that it can take a real trend for noise (``dropped``: the parameters it left out).
    Exact data (a count the model reproduces) needs no repetitions, so it gets none."""
    fewest = int(counts.min()) if len(counts) else 0
    if fewest >= RECOMMENDED_REPETITIONS or statistics.smape <= EXACT_SMAPE:
        return None
    if fewest <= 1:
        what = "the noise test cannot run, so noise may have been fitted as a trend"
    elif dropped:
        what = (
            f"the noise test left out {', '.join(dropped)}, but with so few repetitions "
            "it may have taken a real trend for noise"
        )
    else:
        what = "the noise estimate behind the model choice is rough"
    return (
        f"only {fewest} repetition(s) at some points: {what}; measure every point "
        f"{RECOMMENDED_REPETITIONS} times or more (5 recommended)"
    )


def existence_note(parameters: Sequence[str], coordinates: np.ndarray, present: np.ndarray) -> str:
    """Where a call path exists, for one that is absent from some measured points.

    A call path absent from a completed run was not called there: MPI calls at ``p = 1``,
    a branch taken only for large inputs. Its model is fitted where it exists and holds
    only there; the zeros are not fitted, since no PMNF function jumps from zero to a
    latency, and one that tried would bend every coefficient towards the jump. The note
    names the parameter that decides, as a threshold (``exists for p >= 2``) where one
    parameter's values separate the points, otherwise the absent points themselves."""
    absent = coordinates[~present]
    for j, name in enumerate(parameters):
        inside, outside = coordinates[present, j], absent[:, j]
        for above, relation in ((True, ">="), (False, "<=")):
            bound = inside.min() if above else inside.max()
            beyond = coordinates[:, j] >= bound if above else coordinates[:, j] <= bound
            if np.array_equal(beyond, present):
                shown = ", ".join(map(format_value, np.unique(outside)))
                return (
                    f"exists for {name} {relation} {format_value(bound)} only: not called at "
                    f"{name}={shown} "
                    "(zero there); the model holds where it exists"
                )
    shown = "; ".join(format_point(zip(parameters, point, strict=True)) for point in absent[:3])
    more = f" and {len(absent) - 3} more" if len(absent) > 3 else ""
    return (
        f"absent from {len(absent)} of {len(coordinates)} points ({shown}{more}): not called "
        "there (zero); the model holds where it exists"
    )


def poor_fit(statistics: FitStatistics, noise: float, has_terms: bool) -> str | None:
    """Why a model does not describe its data well enough to be read as a scaling law, or
    None. A SMAPE above :data:`POOR_SMAPE` counts only where it also exceeds twice the
    robust relative noise of one repetition (in percent,
    :func:`~perfcast.modeling.robust.robust_noise`): noisy points are not the model's fault. An
    adjusted R^2 below :data:`POOR_ADJUSTED_R2` counts for models with terms: their terms
    explain less than half the variation, as the strong-scaling miss (``nx^3 log2(nx)^2``
    for ``nx^4/p``, R^2 0.18) did."""
    reasons = []
    if statistics.smape > max(POOR_SMAPE, 200.0 * noise):
        reasons.append(f"SMAPE {statistics.smape:.1f} % is above {POOR_SMAPE:g} %")
    if has_terms and statistics.adjusted_r2 < POOR_ADJUSTED_R2:
        reasons.append(f"adjusted R^2 {statistics.adjusted_r2:.2f} is below {POOR_ADJUSTED_R2:g}")
    if not reasons:
        return None
    return (
        f"{POOR_FIT}: "
        + " and ".join(reasons)
        + "; the model misses part of the variation (a shape outside the search space, "
        "a change of algorithm, or noise): do not extrapolate it"
    )
