"""Regime changes: where a metric stops following one growth law along a parameter.

A kernel's working set leaves the cache between n = 24 and n = 32 and the time per element
jumps; a collective switches algorithm at some message size; every run at p >= 2 does twice
the iterations of p = 1. One PMNF fitted across such a break invents growth
(``n^3 log2(n)^2`` where each side is ``n^3``) and extrapolates it. Extra-P 4.x's segmented
modeler tries every split of one parameter's sorted points in two segments and keeps the
split when it fits much better. Here the same idea, with a statistical test behind "much
better", for several parameters, with the change point's uncertainty, and with the last
segment named so that the modeler refits it and extrapolates from it (:func:`last_segment`).

Why the method is what it is:

* **Log space.** Timing noise is multiplicative (a few percent of the value), so log values
  have roughly constant noise and a power law ``c x^b`` is a straight line in ``log x``:
  a step is a change of intercept, a change of growth a change of slope. Zero, negative or
  infinite values have no logarithm: no answer (None) rather than a guess.
* **Line by line, one split shared.** A line is the points that differ only in the
  parameter (:func:`perfcast.modeling.lines.lines_along`); each line gets its own smooth
  model, so the other parameters' effects never look like a break. The split, the jump
  and the change of slope (in log space: factors) are shared by all lines: one mechanism,
  one answer, and two numbers to test however many lines there are. (A break whose place
  moves from line to line, a cache limit on n/p along n, is not this model.)
* **Detection: a bent power law and a nested F-test against the repetitions' noise.**
  The smooth model is, per line, ``log y = a + b u + c u^2`` with ``u = log x``: what
  ``x^i log2(x)^j`` bends into over a measured range; a straight power law as the null
  would call every ``log`` factor a regime change. The broken power law (two straight
  segments) and the bent one are not nested, so the test compares the bent model with the
  smallest model holding both: bent + a jump at the split + a change of slope after it
  (the slope term only where both segments have two values or more). The numerator is
  the sum of squares the break explains beyond the bend, the denominator the pure error,
  the pooled variance of the log repetitions around their cell means (as
  :mod:`perfcast.modeling.noise` asks "has this parameter an effect"): a split wins only
  where the smooth model misfits beyond the noise, whatever the noise level. Each split's
  p-value is multiplied by the number of splits tried over all parameters (Bonferroni):
  taking the best of many must not turn into a false alarm. ``level`` is small (0.001).
* **Location: the broken power law.** The bent model plus a break is flexible: with a step
  between 24 and 32, a break at 16 | 20 passes the test too, the bend absorbing the rest.
  Of the detected splits the one whose broken power law (per line a straight segment,
  with the shared jump and change of slope) fits best is reported, each break column
  costing :data:`LOCATION_PENALTY` noise variances, so that a change of slope must earn
  its column: at p = 1, 2, 4, 8 a step at 1 | 2 and a slope change at 2 | 4 fit alike.
* **Sums of power laws are no regime.** ``n/p + p`` (strong scaling and an overhead) or
  ``n^3 + 1e4 n`` turn in log-log from one slope to another like a slope change, and
  the bent model misfits them; but a PMNF of two terms fits them exactly. So a detected
  change must also leave the best ``c0 + c1 f1(x) + c2 f2(x)`` misfitting beyond the
  noise (lack-of-fit F-test at ``level``): ``f1, f2`` from Extra-P's shapes and the
  falling powers, the same two on every line (as one multi-parameter model has), the
  coefficients per line, those of the terms non-negative. Non-negative because costs
  add up, and because a difference of terms (or humps ``x^-i log2(x)^j``, left out) draws
  a plateau: with them the step at p >= 2 fits as well as anything. Sums of power laws
  with non-negative coefficients are convex in log-log, so a step or a concave kink
  (growth slowing down) is never one, while a convex kink (growth speeding up) must be
  sharper than such a sum can bend to be seen. The check costs tens of milliseconds
  (about 2,300 shape pairs) and runs only for a detected split; an undetected metric
  takes a few milliseconds.
* **A minimum effect** besides significance: the two segments' fits must disagree
  somewhere in the measured range by at least 10 % and by three noise standard deviations
  (a step: its jump; a slope change: the gap at either end of the range). Many repetitions
  of very quiet data make tiny differences significant; a 5 % step is not a regime.
* **Describing the break** uses the broken power law: ``kind`` is "slope" when the change
  of slope is significant (p < 0.01) and at least a quarter (the smallest exponent step
  PMNF searches tell apart), "step" otherwise. The estimate is the geometric midpoint of
  the gap for a step (nothing in the data tells where inside it), the crossing of the two
  segments for a slope change (clipped to the gap). The interval joins the gaps of every
  split whose broken fit is not significantly worse than the best one's (F-test, 5 %).
* **The smallest value alone may be the first segment of a step**: p = 1 against p >= 2
  (a serial run without communication, twice the iterations) has one value below the
  break, and a step needs no second one (its growth comes from the other segment). The
  last segment always has ``min_segment`` values: the models are refitted on it.
* **One repetition** (no pure error): the noise is estimated from the residuals of the
  test's own full model instead (any misfit only inflates it: conservative), with at
  least two residual degrees of freedom, and the effect must be at least 25 % and five
  standard deviations. One line of six points leaves one degree: None. Identical
  repetitions (synthetic or cached values) would make any curvature the bent model misses
  infinitely significant: the noise is floored at 0.1 %.

Measured false-positive rates (smooth data; 11 functions: ``n^3 log2(n)``, ``n^2``,
``n^3 log2(n)^2``, ``n^1.5/p``, ``10 + n^2``, ``n^2 + 50 n``, ``log2(p) + n``,
``1000 + p n^2``, ``n^3 + 1e4 n``, ``n^2/p + 100 log2(p)``, ``n/p + p``; 6 designs: n in
16..48 (6 values), 2^4..2^10 (7) or 10..50 (5) x p in 1..8 (4) or 1..64 (7); relative
noise of 1, 2, 5 and 10 %):

* three repetitions, uniform noise, 200 seeds: 1, 1, 2 and 1 false changes in 13,200 runs
  per noise level (0.01 %); none in 8,800 on n = 16..48 x p = 1..8;
* five repetitions, log-normal noise, 100 seeds: 2, 2, 2 and 1 in 6,600 (0.03 %);
* one repetition, uniform noise, 200 seeds: none in 52,800;
* the worst design and function, ``n^2/p + 100 log2(p)`` on n = 10..50 x p = 1..64: 1 in
  100 at each noise level (the two-term check's own chance, at ``level``).

Power on n = 16..48 x p = 1..8, three repetitions, 40 seeds: a cache step x1.2 is found
40 times at 2 % noise, 38 at 5 %, 3 at 10 %; x1.5 and x1.8 always; x1.1, the minimum
effect, about half the time at 2 %. Twice the work from p = 2 on: always. A convex slope
change n -> n^2 at 2 % always, at 5 % once (with eight values of n, 16..64: always). One
repetition: x1.5 always at 2 %, 26 times at 5 %; x1.8 12 times at 10 %.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from perfcast.experiment.points import format_value
from perfcast.modeling.lines import lines_along
from perfcast.modeling.noise import f_survival
from perfcast.modeling.space import DEFAULT_EXPONENTS, DEFAULT_LOG_EXPONENTS, FALLING_EXPONENTS

MIN_EFFECT = math.log(1.1)
"""Smallest disagreement of the two segments (log space) that counts as a regime: 10 %."""

MIN_EFFECT_NOISE = 3.0
"""... and in noise standard deviations (of one log repetition)."""

SINGLE_MIN_EFFECT = math.log(1.25)
"""Without repetitions the noise is a residual estimate: 25 % ..."""

SINGLE_MIN_EFFECT_NOISE = 5.0
"""... and five of its standard deviations."""

SINGLE_MIN_DF = 2
"""Residual degrees of freedom a noise estimate from one repetition needs at least."""

NOISE_FLOOR = 1e-3
"""Smallest noise standard deviation in log space (0.1 %): identical repetitions are not
infinitely precise evidence against a smooth model."""

SLOPE_LEVEL = 0.01
"""Significance of the change of slope that makes a change a "slope" rather than a "step"."""

MIN_SLOPE_CHANGE = 0.25
"""... and its smallest size: a quarter of an exponent."""

INTERVAL_LEVEL = 0.05
"""Splits whose broken fit is worse than the best one's at this level are ruled out."""

LOCATION_PENALTY = 6.635
"""Noise variances a break column costs when splits compete for the location: the 1 %
point of chi-square with one degree, so that a change of slope must earn its column as in
the test of the kind (a step at 1 | 2 and a slope change at 2 | 4 fit p = 1, 2, 4, 8
equally well; the simpler wins unless the data say otherwise)."""

P_RESOLUTION = 1e-12
"""Smallest p-value told apart from a smaller one when parameters compete: f_survival is
exact to about 1e-13 with an odd numerator degree."""

_RANK_TOLERANCE = 1e-10
_LOG_MAX = math.log(sys.float_info.max)
"""Largest exponent ``math.exp`` takes without an OverflowError."""

_CONDITION = 1e-10
"""Smallest determinant of a 3 x 3 normal matrix relative to its diagonal's product."""


@dataclass(frozen=True)
class RegimeChange:
    """A change of regime along one parameter, between two measured values of it."""

    parameter: str
    below: float
    """Largest measured value of the parameter in the first segment."""
    above: float
    """Smallest measured value in the last segment."""
    estimate: float
    """Best estimate of where the change happens, between ``below`` and ``above``: the
    geometric midpoint for a step, where the two segments' fits cross for a slope change."""
    interval: tuple[float, float]
    """Change points the data cannot rule out: at least ``(below, above)``, wider when
    neighbouring splits fit nearly as well."""
    kind: str
    """"step" (the level jumps, same growth) or "slope" (the growth rate changes)."""
    p_value: float
    """Of the segmented fit against one smooth model along the parameter, multiplied by
    the number of splits tried (Bonferroni)."""
    ratio: float
    """Last segment's fit over the first segment's fit at ``above``, the first value of the
    new regime: the jump of a step; for a slope change, how far the new regime has left
    the old trend there (see ``growth`` for the change itself)."""
    growth: tuple[float, float]
    """Exponent of the parameter (slope in log-log) in the first and in the last segment,
    averaged over the lines."""

    def describe(self) -> str:
        """One plain sentence for the user."""
        name = self.parameter
        if self.kind == "step":
            what = f"step: x{self.ratio:.3g}"
        else:
            what = f"slope: growth {name}^{self.growth[0]:.2g} -> {name}^{self.growth[1]:.2g}"
        low, high = self.interval
        where = f"near {name} = {self.estimate:.4g}"
        if (low, high) != (self.below, self.above):
            where += f", somewhere in {format_value(low)} to {format_value(high)}"
        chance = (
            f"p < {P_RESOLUTION:.0e}" if self.p_value < P_RESOLUTION else f"p = {self.p_value:.2g}"
        )
        return (
            f"regime change along {name} between {format_value(self.below)} and "
            f"{format_value(self.above)} ({what}, {where}, {chance}); "
            f"models extrapolate from {name} >= {format_value(self.above)}"
        )


def find_regime_change(
    coordinates: np.ndarray,
    repetitions: np.ndarray,
    parameters: Sequence[str],
    *,
    level: float = 0.001,
    min_segment: int = 2,
) -> RegimeChange | None:
    """The most significant regime change of one metric over all parameters, or None.

    ``coordinates`` (points, parameters), ``repetitions`` (points, r) padded with NaN where
    a point has fewer repetitions (a point without any is left out). Each segment has at
    least ``min_segment`` distinct values of the parameter, except that the smallest value
    alone may be the first segment of a step. None where no change passes the test at
    ``level``, the two-term PMNF check and the minimum effect; for data without
    logarithms (a zero, negative or infinite value); where no parameter has
    ``2 * min_segment`` (and 4) distinct positive values on lines of three or more; and
    for too few points. Mismatched shapes are a caller's error (ValueError).
    """
    coordinates = np.asarray(coordinates, dtype=float)
    values = np.asarray(repetitions, dtype=float)
    if values.ndim == 1:
        values = values[:, None]
    if coordinates.ndim != 2 or values.ndim != 2:
        raise ValueError("coordinates and repetitions must be two-dimensional")
    if coordinates.shape[0] != values.shape[0] or coordinates.shape[1] != len(parameters):
        raise ValueError(
            f"{coordinates.shape[0]} points x {coordinates.shape[1]} parameters of coordinates "
            f"do not match {values.shape[0]} rows of repetitions and {len(parameters)} names"
        )
    if min_segment < 1:
        raise ValueError("min_segment must be at least 1")
    present = ~np.isnan(values)
    if np.any(values[present] <= 0) or np.any(np.isinf(values[present])):
        return None  # no logarithm: the test's premises do not hold
    count = present.sum(axis=1)
    keep = (count > 0) & np.all(np.isfinite(coordinates), axis=1)
    if keep.sum() < 4:
        return None
    coordinates, values, present, count = (
        coordinates[keep],
        values[keep],
        present[keep],
        count[keep],
    )
    logs = np.log(np.where(present, values, 1.0))
    mean = np.where(present, logs, 0.0).sum(axis=1) / count
    pure_ss = float(np.sum(np.where(present, logs - mean[:, None], 0.0) ** 2))
    pure_df = int(np.sum(count - 1))
    noise = _Noise(pure_ss, pure_df)

    searches = [
        search
        for index in range(coordinates.shape[1])
        if (search := _Search.build(coordinates, mean, count, index, min_segment)) is not None
    ]
    tried = sum(len(search.splits) for search in searches)
    best: tuple[float, float, RegimeChange] | None = None
    for search in searches:
        found = search.best(noise, tried, level, parameters[search.index])
        if found is None:
            continue
        # f_survival resolves p-values to about 1e-13 (odd degrees): below, the F decides
        if best is None or (max(found[0], P_RESOLUTION), -found[1]) < (
            max(best[0], P_RESOLUTION),
            -best[1],
        ):
            best = found
    return None if best is None else best[2]


def last_segment(
    coordinates: np.ndarray, parameters: Sequence[str], change: RegimeChange
) -> np.ndarray:
    """Boolean mask of the points in the last segment (parameter >= ``change.above``): the
    points a model refitted for extrapolation should use."""
    coordinates = np.asarray(coordinates, dtype=float)
    index = list(parameters).index(change.parameter)
    return np.asarray(coordinates[:, index] >= change.above)


@dataclass(frozen=True)
class _Noise:
    """Pure error of the log repetitions: sum of squares and degrees of freedom."""

    ss: float
    df: int

    @property
    def variance(self) -> float:
        return max(self.ss / self.df, NOISE_FLOOR**2) if self.df > 0 else math.nan


@dataclass(frozen=True)
class _Group:
    """Lines along the parameter with identical values and repetition counts: one
    projection serves all of them. ``y`` (lines, k) are the cell means of log values,
    scaled like the columns by the square root of the counts (weighted least squares)."""

    u: np.ndarray  # (k,) log of the parameter's values, ascending
    root_w: np.ndarray  # (k,)
    y: np.ndarray  # (lines, k)
    bases: tuple[np.ndarray, np.ndarray]  # orthonormal bases: straight, bent (k, rank)
    residuals: tuple[np.ndarray, np.ndarray]  # y minus its projection on each basis

    @classmethod
    def build(cls, u: np.ndarray, root_w: np.ndarray, y: np.ndarray) -> _Group:
        centred = u - u.mean()
        bases = tuple(
            _orthonormal(root_w[:, None] * centred[:, None] ** np.arange(degree + 1))
            for degree in (1, 2)
        )
        residuals = tuple(y - (y @ basis) @ basis.T for basis in bases)
        return cls(u, root_w, y, (bases[0], bases[1]), (residuals[0], residuals[1]))

    def below(self, threshold: float) -> int:
        return len(np.unique(self.u[self.u < threshold]))

    def above(self, threshold: float) -> int:
        return len(np.unique(self.u[self.u > threshold]))


@dataclass(frozen=True)
class _Shared:
    """Least squares of the shared break columns (jump, change of slope) on what the
    per-line models leave: the sum of squares they explain, their number (rank) and
    coefficients, and the degrees of freedom left (for a noise estimate without
    repetitions)."""

    explained: float
    rank: int
    coefficients: np.ndarray  # (columns,): jump at the split, change of slope after it
    residual_df: int
    residual_ss: float


@dataclass(frozen=True)
class _Split:
    index: int  # between values[index] and values[index + 1]
    threshold: float  # log-space midpoint
    columns: int  # 1: step only; 2: step and change of slope
    lines: tuple[int, ...]  # groups taking part


@dataclass(frozen=True)
class _Search:
    """All candidate splits along one parameter."""

    index: int
    values: np.ndarray  # distinct values of the parameter, ascending
    groups: tuple[_Group, ...]
    splits: tuple[_Split, ...]

    @classmethod
    def build(
        cls,
        coordinates: np.ndarray,
        mean: np.ndarray,
        count: np.ndarray,
        index: int,
        min_segment: int,
    ) -> _Search | None:
        x = coordinates[:, index]
        if np.any(x <= 0):
            return None  # no log scale for this parameter
        values = np.unique(x)
        if len(values) < max(2 * min_segment, 4):
            return None
        batches: dict[bytes, tuple[np.ndarray, np.ndarray, list[np.ndarray]]] = {}
        for members in lines_along(coordinates, index):
            line_x = x[members]
            if len(np.unique(line_x)) < 3:
                continue  # a bent power law fits it exactly: nothing to test
            weights = count[members].astype(float)
            key = line_x.tobytes() + weights.tobytes()
            batches.setdefault(key, (line_x, weights, []))[2].append(mean[members])
        groups = tuple(
            _Group.build(np.log(line_x), np.sqrt(weights), np.sqrt(weights) * np.stack(ys))
            for line_x, weights, ys in batches.values()
        )
        logs = np.log(values)
        splits = []
        for split in range(len(values) - 1):
            first, last = split + 1, len(values) - split - 1
            if last < min_segment or (first < min_segment and first != 1):
                continue
            threshold = (logs[split] + logs[split + 1]) / 2
            need = min_segment if first >= min_segment else 1
            taking_part = tuple(
                number
                for number, group in enumerate(groups)
                if group.below(threshold) >= need and group.above(threshold) >= min_segment
            )
            if taking_part:
                columns = 2 if first >= 2 and last >= 2 else 1
                splits.append(_Split(split, threshold, columns, taking_part))
        if not splits:
            return None
        return cls(index, values, groups, tuple(splits))

    def fit(self, split: _Split, bent: bool, columns: int) -> _Shared:
        """Shared break columns on top of the per-line straight (or bent) power laws, by
        Frisch-Waugh-Lovell: project the per-line models out of the data and the columns,
        then one small least squares for the shared ones."""
        which = 1 if bent else 0
        gram = np.zeros((columns, columns))
        right = np.zeros(columns)
        left_ss, left_df = 0.0, 0
        for number in split.lines:
            group = self.groups[number]
            basis, residual = group.bases[which], group.residuals[which]
            after = group.u > split.threshold
            raw = np.stack([after, np.where(after, group.u - split.threshold, 0.0)], axis=1)
            z = group.root_w[:, None] * raw[:, :columns]
            z = z - basis @ (basis.T @ z)
            gram += len(residual) * (z.T @ z)
            right += z.T @ residual.sum(axis=0)
            left_ss += float(np.sum(residual**2))
            left_df += residual.size - len(residual) * basis.shape[1]
        eigenvalues, vectors = np.linalg.eigh(gram)
        largest = eigenvalues.max(initial=0.0)
        usable = eigenvalues > _RANK_TOLERANCE * largest if largest > 0 else eigenvalues > 1
        coefficients = vectors[:, usable] @ ((vectors[:, usable].T @ right) / eigenvalues[usable])
        explained = float(right @ coefficients)
        rank = int(usable.sum())
        return _Shared(
            explained,
            rank,
            coefficients,
            left_df - rank,
            max(left_ss - explained, 0.0),
        )

    def best(
        self, noise: _Noise, tried: int, level: float, name: str
    ) -> tuple[float, float, RegimeChange] | None:
        """The change along this parameter, if any: (adjusted p, F, change).

        Detection and location are separate questions. Detection: a split's bent-model
        test, its p-value times the ``tried`` splits of all parameters, below ``level``.
        Location: among the detected splits, the one whose broken power law (straight
        segments with the shared break) fits best, each break column costing
        :data:`LOCATION_PENALTY` noise variances. The bent model
        with a break is too flexible to say where the break is: with a step between 24
        and 32, a break at 16 | 20 lets the bend absorb the rest almost as well."""
        single = noise.df == 0
        detected = []
        for split in self.splits:
            full = self.fit(split, bent=True, columns=split.columns)
            if full.rank == 0:
                continue
            if single:
                if full.residual_df < SINGLE_MIN_DF:
                    continue
                variance = max(full.residual_ss / full.residual_df, NOISE_FLOOR**2)
                df = full.residual_df
            else:
                variance, df = noise.variance, noise.df
            statistic = full.explained / full.rank / variance
            p_value = min(1.0, float(f_survival(statistic, full.rank, df)) * tried)
            if p_value < level:
                broken = self.fit(split, bent=False, columns=split.columns)
                detected.append((broken, split, p_value, statistic, variance, df))
        if not detected:
            return None
        common = min(candidate[4] for candidate in detected)
        _, _, split, p_value, statistic, variance, df = max(
            (c[0].explained - LOCATION_PENALTY * c[0].rank * common, -c[1].index, *c[1:])
            for c in detected
        )
        if not self._pmnf_misfits(split, variance, df, level):
            return None
        return self._describe(split, variance, df, single, p_value, statistic, name)

    def _pmnf_misfits(self, split: _Split, variance: float, df: int, level: float) -> bool:
        """Whether the best PMNF of up to two terms along the parameter, the same two shapes
        on every line taking part (as one multi-parameter model has), each line its own
        coefficients, misfits beyond the noise: lack-of-fit F-test at ``level``."""
        groups = [self.groups[number] for number in split.lines]
        misfit = sum(
            (_pmnf_misfit(group.u, group.root_w**2, group.y / group.root_w) for group in groups),
            start=np.zeros(len(_shapes()[2])),
        )
        freedom = sum(len(group.y) * (len(group.u) - 3) for group in groups)
        if freedom < 1:
            return False
        best = float(misfit.min())
        return float(f_survival(best / freedom / variance, freedom, max(df, 1))) < level

    def _describe(
        self,
        split: _Split,
        variance: float,
        df: int,
        single: bool,
        p_value: float,
        statistic: float,
        name: str,
    ) -> tuple[float, float, RegimeChange] | None:
        step = self.fit(split, bent=False, columns=1)
        kind = "step"
        shared = step
        if split.columns == 2:
            slope = self.fit(split, bent=False, columns=2)
            gain = (slope.explained - step.explained) / variance
            change = float(slope.coefficients[1])
            if (
                slope.rank == 2
                and float(f_survival(gain, 1, df)) < SLOPE_LEVEL
                and abs(change) >= MIN_SLOPE_CHANGE
            ):
                kind, shared = "slope", slope
        jump = float(shared.coefficients[0]) if shared.rank else 0.0
        change = float(shared.coefficients[1]) if kind == "slope" else 0.0
        low, high = self._range(split)
        effect = max(
            abs(jump + change * (low - split.threshold)),
            abs(jump + change * (high - split.threshold)),
        )
        if single:
            least = max(SINGLE_MIN_EFFECT, SINGLE_MIN_EFFECT_NOISE * math.sqrt(variance))
        else:
            least = max(MIN_EFFECT, MIN_EFFECT_NOISE * math.sqrt(variance))
        if effect < least:
            return None
        below, above = float(self.values[split.index]), float(self.values[split.index + 1])
        log_below, log_above = math.log(below), math.log(above)
        if kind == "slope":
            crossing = split.threshold - jump / change
            estimate = math.exp(min(max(crossing, log_below), log_above))
        else:
            estimate = math.exp(split.threshold)
        start = self._first_slope(split, shared, kind == "slope")
        change_record = RegimeChange(
            parameter=name,
            below=below,
            above=above,
            estimate=estimate,
            interval=self._interval(split, kind, variance, df),
            kind=kind,
            p_value=p_value,
            # a break between values 1e-140 and 1e140 can extrapolate past the doubles:
            # the ratio is then the largest double, not an OverflowError
            ratio=math.exp(min(jump + change * (log_above - split.threshold), _LOG_MAX)),
            growth=(start, start + change),
        )
        return p_value, statistic, change_record

    def _range(self, split: _Split) -> tuple[float, float]:
        us = np.concatenate([self.groups[number].u for number in split.lines])
        return float(us.min()), float(us.max())

    def _first_slope(self, split: _Split, shared: _Shared, slope: bool) -> float:
        """Mean exponent of the first segment over the lines taking part: each line's
        straight fit once the shared break is taken out."""
        columns = 2 if slope else 1
        slopes = []
        for number in split.lines:
            group = self.groups[number]
            after = group.u > split.threshold
            raw = np.stack([after, np.where(after, group.u - split.threshold, 0.0)], axis=1)
            z = group.root_w[:, None] * raw[:, :columns]
            rest = group.y - z @ shared.coefficients[:columns]
            design = group.root_w[:, None] * np.stack([np.ones_like(group.u), group.u], axis=1)
            solution = np.linalg.lstsq(design, rest.T, rcond=None)[0]
            slopes.append(solution[1])
        return float(np.mean(np.concatenate(slopes)))

    def _interval(self, chosen: _Split, kind: str, variance: float, df: int) -> tuple[float, float]:
        """Hull of the gaps of the splits whose broken fit (of the chosen kind) is not
        significantly worse than the best split's."""
        columns = 2 if kind == "slope" else 1
        usable = [split for split in self.splits if split.columns >= columns]
        explained = np.array(
            [self.fit(split, bent=False, columns=columns).explained for split in usable]
        )
        # the same lines must take part for sums of squares to compare; splits near the
        # ends of an irregular design may lose some, and then only the chosen split counts
        same = np.array([split.lines == chosen.lines for split in usable])
        best = explained[same].max(initial=0.0)
        worse = np.maximum(best - explained, 0.0) / columns / variance
        plausible = same & (f_survival(worse, columns, max(df, 1)) >= INTERVAL_LEVEL)
        indices = [split.index for split, ok in zip(usable, plausible, strict=True) if ok]
        indices.append(chosen.index)
        return float(self.values[min(indices)]), float(self.values[max(indices) + 1])


@functools.cache
def _shapes() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The single-parameter PMNF shapes ``x^i log2(x)^j`` (Extra-P's exponents and log
    exponents 0 to 2, and the falling powers of strong scaling) and all their pairs:
    exponents, log exponents (shapes,), and the first and second shape of each pair."""
    exponents = np.array([float(e) for e in (*DEFAULT_EXPONENTS, *FALLING_EXPONENTS)])
    logs = np.array(DEFAULT_LOG_EXPONENTS, dtype=float)
    exponent, log_exponent = (a.reshape(-1) for a in np.meshgrid(exponents, logs))
    # no constant (it is a column of its own), no hump x^-i log2(x)^j: two of them with
    # positive coefficients make a plateau from x = 2 on, the very step this looks for
    dropped = ((exponent == 0) & (log_exponent == 0)) | ((exponent < 0) & (log_exponent > 0))
    exponent, log_exponent = exponent[~dropped], log_exponent[~dropped]
    first, second = np.triu_indices(len(exponent), k=1)
    return exponent, log_exponent, first, second


GAUSS_NEWTON_STEPS = 3
"""Steps from the relative least-squares fit towards the log-space fit of each shape pair."""

PAIR_BLOCK = 32
"""Lines fitted together against all shape pairs: (pairs, lines, points) temporaries of
about 2300 x 32 x k doubles."""


def _pmnf_misfit(u: np.ndarray, counts: np.ndarray, mean_log: np.ndarray) -> np.ndarray:
    """For each pair of shapes (:func:`_shapes`), the log-space residual sum of squares
    (weighted by the counts) of ``c0 + c1 f1(x) + c2 f2(x)`` with ``c1, c2 >= 0`` fitted
    to each line, summed over the lines: ``u`` (k,) log values of the parameter,
    ``counts`` (k,), ``mean_log`` (lines, k) the cell means of the log values.

    Least squares with non-negative term coefficients is the best of the fits on the
    four subsets of the terms (both, either, none; always with the constant) whose term
    coefficients come out non-negative; those with one shape at most are fitted once per
    shape, not per pair. Each is a linear least squares on the values with relative
    weights (log residuals to first order), then :data:`GAUSS_NEWTON_STEPS` steps towards
    the log-space fit; a pair's misfit is the smallest met on the way. A fit not positive
    everywhere has no logarithm: its misfit is infinite."""
    exponent, log_exponent, first, second = _shapes()
    # each shape scaled to a largest magnitude of about 1, computed from logarithms so
    # that x^3 of x = 1e200 does not overflow
    power = exponent[:, None] * u
    log2 = u / math.log(2)
    largest = np.abs(log2).max()
    shapes = (
        np.exp(power - power.max(axis=1, keepdims=True))
        * (log2 / (largest if largest > 0 else 1.0)) ** log_exponent[:, None]
    )  # (shapes, k)
    one = np.ones_like(shapes)
    single = np.stack([one, shapes, np.zeros_like(shapes)], axis=2)  # (shapes, k, 3)
    double = np.stack([one[first], shapes[first], shapes[second]], axis=2)  # (pairs, k, 3)
    total = np.zeros(len(first))
    for start in range(0, len(mean_log), PAIR_BLOCK):
        block = mean_log[start : start + PAIR_BLOCK]
        values = np.exp(block - block.max(axis=1, keepdims=True))  # (lines, k)
        alone = _best_fit(single, _SINGLE_SUBSETS, counts, values)  # (shapes, lines)
        both = _best_fit(double, _PAIR_SUBSETS, counts, values)  # (pairs, lines)
        best = np.minimum(both, np.minimum(alone[first], alone[second]))
        total += best.sum(axis=1)
    return total


def _best_fit(
    columns: np.ndarray, subsets: tuple[np.ndarray, ...], counts: np.ndarray, values: np.ndarray
) -> np.ndarray:
    """(batch, lines) smallest log misfit of the fits of ``values`` on the ``columns``
    (batch, k, 3) kept by each of ``subsets``, with non-negative term coefficients."""
    best = np.full((len(columns), len(values)), np.inf)
    # values spanning 1e-140 to 1e140 (each within the modeler's bound) give weights 1 / f^2
    # beyond the doubles: inf or nan, whose fits are unusable and their misfit inf
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        log_values = np.log(values)
        start = np.broadcast_to(values, (len(columns), *values.shape))
        for subset in subsets:
            kept = columns * subset
            # relative least squares first, then Gauss-Newton steps on the log residuals:
            # log f(c + d) ~ log f + X d / f, a least squares in d weighted by 1 / f^2
            fitted, usable = _weighted_fit(kept, subset, counts / start**2, start)
            for step in range(GAUSS_NEWTON_STEPS + 1):
                safe = np.where(usable[:, :, None], fitted, start)
                misfit = (counts * (np.log(safe) - log_values) ** 2).sum(axis=2)
                best = np.minimum(best, np.where(usable, misfit, np.inf))
                if step < GAUSS_NEWTON_STEPS:
                    target = safe * (1 + log_values - np.log(safe))
                    fitted, usable = _weighted_fit(kept, subset, counts / safe**2, target)
    return best


_SINGLE_SUBSETS = tuple(np.array(mask, dtype=float) for mask in ((1, 1, 0), (1, 0, 0)))
_PAIR_SUBSETS = (np.array((1.0, 1.0, 1.0)),)
"""The columns (constant, first term, second term) a fit may keep, those with one shape
at most once per shape, the others once per pair. The constant is always kept, with
either sign: held at zero where the truth has none, it would inflate the misfit."""

_UPPER = ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))


def _weighted_fit(
    columns: np.ndarray, subset: np.ndarray, weights: np.ndarray, values: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Weighted least squares of ``values`` (pairs, lines, k) on the three ``columns``
    (pairs, k, 3), those outside ``subset`` (3,) zeroed and held at a zero coefficient,
    with ``weights`` (pairs, lines, k), by the adjugate of the 3 x 3 normal matrix: the
    fitted values (pairs, lines, k) and where the fit is usable (regular, the terms'
    coefficients non-negative, values positive). Batched matrix products over the pairs."""
    products = np.stack([columns[:, :, i] * columns[:, :, j] for i, j in _UPPER], axis=2)
    upper = weights @ products  # (pairs, lines, 6)
    g = [[upper[..., _UPPER.index((min(i, j), max(i, j)))] for j in range(3)] for i in range(3)]
    for i in range(3):
        g[i][i] = g[i][i] + (1.0 - subset[i])  # a dropped column: coefficient zero
    right = (weights * values) @ columns  # (pairs, lines, 3)
    cofactor = [
        [
            g[(i + 1) % 3][(j + 1) % 3] * g[(i + 2) % 3][(j + 2) % 3]
            - g[(i + 1) % 3][(j + 2) % 3] * g[(i + 2) % 3][(j + 1) % 3]
            for j in range(3)
        ]
        for i in range(3)
    ]
    determinant = sum(g[0][j] * cofactor[0][j] for j in range(3))
    regular = determinant > _CONDITION * g[0][0] * g[1][1] * g[2][2]
    with np.errstate(all="ignore"):
        # symmetric: the adjugate is the cofactor matrix itself
        coefficients = (
            np.stack(
                [sum(cofactor[i][j] * right[..., j] for j in range(3)) for i in range(3)], axis=2
            )
            / determinant[..., None]
        )
        fitted = coefficients @ np.swapaxes(columns, 1, 2)  # (pairs, lines, k)
    usable = (
        regular
        & np.all(coefficients[..., 1:] >= 0, axis=2)
        & np.all(np.isfinite(fitted) & (fitted > 0), axis=2)
    )
    return fitted, usable


def _orthonormal(matrix: np.ndarray) -> np.ndarray:
    """Orthonormal basis of the column space (rank-revealing SVD)."""
    vectors, singular, _ = np.linalg.svd(matrix, full_matrices=False)
    if not singular.size or singular[0] == 0:
        return vectors[:, :0]
    return vectors[:, : int(np.sum(singular > _RANK_TOLERANCE * singular[0]))]
