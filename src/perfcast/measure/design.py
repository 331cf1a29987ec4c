"""Experiment designs: which parameter combinations a campaign measures, and what it costs.

The plan is an explicit object (:class:`ExperimentPlan`: a list of points and a repetition
count) rather than a loop hidden in the runner, so other stages can inspect and shrink it
— the taint analysis, for one, replaces the full grid by one-parameter lines where
parameters only combine additively — and ``perfcast design`` can print it before anything
runs.

Designs (``[design] kind``):

``full``
    Every combination of every parameter's values (the default; what the modeler's
    multi-parameter search likes best).
``lines``
    One line per varied parameter through a base point: the parameter takes all its values,
    the others stay at the base (``[design] base``; default: each parameter's smallest
    value). Enough for additive models and for the per-parameter shape search.
``cross``
    Extra-P's cross design: the lines through the cheapest corner (every parameter at its
    smallest value). Extra-P's multi-parameter modeler needs at least
    :data:`EXTRAP_LINE_POINTS` points on each line.
``sparse``
    The cross plus ``extra_points`` points off its lines, cheapest first, as Extra-P's
    sparse modeler recommends: the extra points let the search tell a product of
    parameters from a sum.

**Taint reduction** (:func:`reduce_with_taint`, paper section A1). With a taint profile
(``perfcast taint``; found automatically beside the campaign store), any design keeps only
the points a model can need: parameters no function depends on, although their label reached
a branch, are held at their base value (a label that reached nothing was probably lost: that
parameter keeps its values), and parameters that never share a product in any function
(``size + p``) are varied one at a time -- the full grid becomes one-parameter lines.
Parameters that do multiply (``size * iterations`` in ``main``) keep their joint grid; the
design is the union of the grids of such groups through the base point.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from perfcast.appspec import RANKS, AppSpec, Parameter
from perfcast.columns import aligned
from perfcast.errors import InputError, PerfcastError
from perfcast.experiment.points import format_point, format_value
from perfcast.measure.store import OK, CampaignStore
from perfcast.taint.campaign import default_profile_path
from perfcast.taint.interactions import Interactions, interactions
from perfcast.taint.profile_model import read_profile

EXTRAP_LINE_POINTS = 5
"""Points per parameter line that Extra-P's modelers ask for; fewer earns a note."""

PRODUCT_WITNESSES = 3
"""Functions named per product in the taint reduction's note (the rest are counted)."""

MAX_GRID_POINTS = 100_000
"""Points a full or sparse design may enumerate: 5 parameters with 10 values each, where
Extra-P asks for 5 values per parameter. Listing them takes a fraction of a second; a
typo'd range (10^12 points) would otherwise fill memory at hundreds of MB a second."""

MAX_PLAN_RUNS = 100_000
"""Runs a plan may have (points x repetitions): 28 hours of one-second runs back to back,
far above the few thousand runs of a real campaign (5 values each of 4 parameters, 5
repetitions: 3125), so only a typo reaches it."""

MAX_SUGGESTIONS = 1000
"""Most runs ``perfcast design --suggest`` lists or ``--until`` measures in a round: more
than any round of a campaign measures (:mod:`perfcast.workflows.design`)."""

DEFAULT_SUGGESTIONS = 10
"""Runs ``perfcast design --suggest`` lists by default."""

DEFAULT_PER_ROUND = 3
"""Suggested points ``perfcast measure --until`` measures per round: after a few runs the
models are fitted again, since a run between rival shapes settles what the next should be."""

Coordinate = tuple[float, ...]


@dataclass(frozen=True)
class PlannedRun:
    """One execution: a point of the plan and the repetition number (0-based)."""

    point: Mapping[str, float]
    repetition: int

    @property
    def key(self) -> str:
        """Stable identity in the store: ``p=4,size=128#2``."""
        return f"{format_point(self.point, separator=',')}#{self.repetition}"

    @property
    def ranks(self) -> int:
        return int(self.point.get(RANKS, 1))


@dataclass(frozen=True)
class PlanCost:
    """What a plan costs: runs, and rank-seconds (ranks x seconds, summed over runs).

    ``rank_seconds`` is an estimate when the spec gives ``run.expected_seconds``, otherwise
    an upper bound from the timeout (``bounded`` is then True).
    """

    points: int
    runs: int
    rank_runs: int
    rank_seconds: float
    bounded: bool

    def describe(self) -> str:
        what = "at most" if self.bounded else "about"
        basis = "the timeout" if self.bounded else "run.expected_seconds"
        return (
            f"{self.points} points, {self.runs} runs, {self.rank_runs} rank-runs; "
            f"{what} {_duration(self.rank_seconds)} rank-time (from {basis})"
        )


@dataclass(frozen=True)
class ExperimentPlan:
    """The points to measure (every parameter, fixed ones included) and how often."""

    parameters: tuple[str, ...]
    points: tuple[Coordinate, ...]
    repetitions: int
    kind: str = "full"
    notes: tuple[str, ...] = ()
    point_repetitions: tuple[int, ...] = ()
    """Each point's repetitions where they differ (empty: ``repetitions`` for every point):
    a round of suggested runs (:mod:`perfcast.workflows.design`) adds repetitions to some
    measured points and new points with the spec's repetitions, in one campaign."""

    def __post_init__(self):
        for point in self.points:
            if len(point) != len(self.parameters):
                raise ValueError(f"point {point} does not match parameters {self.parameters}")
        if len(set(self.points)) != len(self.points):
            raise ValueError("a plan lists a point twice")
        if self.point_repetitions and len(self.point_repetitions) != len(self.points):
            raise ValueError("a plan's point_repetitions must give one count per point")

    def repetitions_of(self, index: int) -> int:
        """How often the point ``index`` is measured (its repetitions 0 .. n-1)."""
        return self.point_repetitions[index] if self.point_repetitions else self.repetitions

    @property
    def varied(self) -> list[str]:
        """Parameters that take more than one value in this plan: the model's parameters."""
        return [
            name
            for i, name in enumerate(self.parameters)
            if len({point[i] for point in self.points}) > 1
        ]

    def point(self, index: int) -> dict[str, float]:
        return dict(zip(self.parameters, self.points[index], strict=True))

    def runs(self) -> list[PlannedRun]:
        """Every run, repetitions of a point interleaved with the other points: repetition
        r of all points before repetition r+1, so slow drift of the machine spreads over
        the whole grid instead of biasing one point."""
        counts = [self.repetitions_of(i) for i in range(len(self.points))]
        return [
            PlannedRun(self.point(i), repetition)
            for repetition in range(max(counts, default=0))
            for i in range(len(self.points))
            if repetition < counts[i]
        ]

    def subset(self, keep: Callable[[Mapping[str, float]], bool], note: str) -> ExperimentPlan:
        """The plan with only the points ``keep`` accepts (how other stages shrink it)."""
        kept = [i for i in range(len(self.points)) if keep(self.point(i))]
        counts = tuple(self.point_repetitions[i] for i in kept) if self.point_repetitions else ()
        points = tuple(self.points[i] for i in kept)
        return replace(self, points=points, notes=(*self.notes, note), point_repetitions=counts)

    def cost(self, *, expected_seconds: float | None, timeout: float) -> PlanCost:
        runs = self.runs()
        rank_runs = sum(run.ranks for run in runs)
        seconds = expected_seconds if expected_seconds is not None else timeout
        return PlanCost(
            points=len(self.points),
            runs=len(runs),
            rank_runs=rank_runs,
            rank_seconds=rank_runs * seconds,
            bounded=expected_seconds is None,
        )

    def table(self) -> str:
        """The points as an aligned table, one row per point."""
        rows = [[format_value(v) for v in point] for point in self.points]
        return "\n".join(aligned([self.parameters, *rows], right=range(len(self.parameters))))


def plan_from_spec(
    spec: AppSpec,
    kind: str | None = None,
    *,
    taint_profile: Path | None = None,
    campaign_profile: bool = True,
) -> ExperimentPlan:
    """The plan ``[design]`` asks for (or ``kind``, overriding it).

    Reduced with the taint profile ``taint_profile``, or else -- with ``campaign_profile``
    -- with the campaign's own profile if ``perfcast taint`` wrote one beside the store.
    """
    plan = _design(spec, kind or spec.design.kind)
    path = taint_profile
    if path is None and campaign_profile and default_profile_path(spec).is_file():
        path = default_profile_path(spec)
    if path is not None:
        base = spec.design.base if plan.kind in ("full", "lines") else {}
        plan = reduce_with_taint(
            plan, spec.parameters, interactions(read_profile(path)), base=base, source=path.name
        )
    runs = len(plan.points) * plan.repetitions
    if runs > MAX_PLAN_RUNS:
        raise spec.error(
            ("run", "repetitions"),
            f"the {plan.kind} plan has {runs} runs ({len(plan.points)} points x "
            f"{plan.repetitions} repetitions), more than the limit of {MAX_PLAN_RUNS}; give "
            "fewer repetitions or values, or a smaller design ([design] kind)",
        )
    return plan


def _design(spec: AppSpec, kind: str) -> ExperimentPlan:
    parameters = list(spec.parameters)
    grid = math.prod(len(p.values) for p in parameters)
    if kind in ("full", "sparse") and grid > MAX_GRID_POINTS:
        sizes = " x ".join(f"{len(p.values)} {p.name}" for p in parameters if not p.fixed)
        raise spec.error(
            ("parameters",),
            f"the {kind} design has {grid} points ({sizes}), more than the limit of "
            f"{MAX_GRID_POINTS}; give fewer values, or measure lines: [design] kind = "
            '"lines" or "cross"',
        )
    if kind == "full":
        plan = full_factorial(parameters, spec.run.repetitions)
    elif kind == "lines":
        plan = lines(parameters, spec.run.repetitions, spec.design.base)
    elif kind == "cross":
        plan = cross(parameters, spec.run.repetitions)
    elif kind == "sparse":
        plan = sparse(parameters, spec.run.repetitions, spec.design.extra_points)
    else:
        raise spec.error(
            ("design", "kind"), f"unknown design {kind!r}; choose full, lines, cross or sparse"
        )
    return plan


def full_factorial(parameters: Sequence[Parameter], repetitions: int) -> ExperimentPlan:
    points = tuple(itertools.product(*(p.values for p in parameters)))
    return ExperimentPlan(tuple(p.name for p in parameters), points, repetitions, "full")


def lines(
    parameters: Sequence[Parameter],
    repetitions: int,
    base: Mapping[str, float] | None = None,
    kind: str = "lines",
) -> ExperimentPlan:
    """One-parameter lines through ``base`` (missing entries: the smallest value)."""
    base = dict(base or {})
    for name in base:
        if name not in {p.name for p in parameters}:
            raise InputError(f"the base point names {name!r}, which is not a parameter")
    centre = tuple(base.get(p.name, p.values[0]) for p in parameters)
    points: list[Coordinate] = [centre]
    notes = []
    for i, parameter in enumerate(parameters):
        if parameter.fixed:
            continue
        for value in parameter.values:
            point = (*centre[:i], value, *centre[i + 1 :])
            if point not in points:
                points.append(point)
        if len(parameter.values) < EXTRAP_LINE_POINTS:
            notes.append(
                f"the line of {parameter.name} has {len(parameter.values)} points; Extra-P "
                f"asks for at least {EXTRAP_LINE_POINTS}"
            )
    names = tuple(p.name for p in parameters)
    return ExperimentPlan(names, tuple(points), repetitions, kind, tuple(notes))


def cross(parameters: Sequence[Parameter], repetitions: int) -> ExperimentPlan:
    """Extra-P's cross: the lines through the cheapest corner."""
    return lines(parameters, repetitions, None, kind="cross")


def sparse(parameters: Sequence[Parameter], repetitions: int, extra_points: int) -> ExperimentPlan:
    """The cross plus the ``extra_points`` cheapest points off its lines."""
    base = cross(parameters, repetitions)
    taken = set(base.points)
    others = [p for p in itertools.product(*(q.values for q in parameters)) if p not in taken]
    others.sort(key=lambda point: _cheapness(parameters, point))
    added = tuple(others[:extra_points])
    notes = list(base.notes)
    if len(added) < extra_points:
        notes.append(f"only {len(added)} points exist off the cross")
    return ExperimentPlan(base.parameters, base.points + added, repetitions, "sparse", tuple(notes))


def reduce_with_taint(
    plan: ExperimentPlan,
    parameters: Sequence[Parameter],
    found: Interactions,
    *,
    base: Mapping[str, float] | None = None,
    source: str = "the taint profile",
) -> ExperimentPlan:
    """The points of ``plan`` a model can need, given which parameters multiply.

    A point is kept when the parameters it moves away from ``base`` (default: each
    parameter's smallest value) lie within one product of some function's dependency and
    none is held. Held: varied parameters no function depends on although their label
    reached a branch (one that selects no work: a parameter deciding a branch between loops
    of different cost is in the dependency of the function that branches, so it is varied
    at all its values with the parameters of that work, and the note says it switches
    algorithms). A varied parameter the taint run did not mark, or whose label reached
    nothing at all (probably lost), may multiply anything, so it joins every product: a
    parameter the user varies is never dropped on the evidence of a label that went nowhere
    (giving it one value in ``[parameters]`` drops it explicitly).
    """
    by_name = {p.name: p for p in parameters}
    centre = {n: (base or {}).get(n, by_name[n].values[0]) for n in plan.parameters}
    varied = plan.varied
    lost = sorted(n for n in varied if n in found.unreached)
    unknown = {n for n in varied if n not in found.marked} | set(lost)
    held = [n for n in varied if n in found.marked and n not in found.used and n not in lost]
    active = [n for n in varied if n not in held]
    joint = _joint_variations(active, found, unknown)

    def keep(point: Mapping[str, float]) -> bool:
        moved = {n for n in varied if point[n] != centre[n]}
        return any(moved <= group for group in joint)

    kept = sum(keep(plan.point(i)) for i in range(len(plan.points)))
    why = []
    if held:
        why.append(
            "held at the base value, no function depends on them (their labels reached "
            "only branches that select no loop): " + format_point((n, centre[n]) for n in held)
        )
    products = [g for g in joint if len(g) > 1]
    if products:
        why.append(
            "joint grids for the products "
            + ", ".join(_product_text(sorted(g), found) for g in products)
        )
    switching = [n for n in active if n in found.switches]
    if switching:
        why.append(
            "kept at all their values, they switch algorithms (a branch on them selects "
            "loops of different cost, varied with the parameters of that work): "
            + "; ".join(f"{n} in {', '.join(found.switches[n])}" for n in switching)
        )
    alone = sorted(n for n in active if not any(n in g for g in products))
    if alone and len(active) > 1:
        why.append(f"varied one at a time, they multiply no other parameter: {', '.join(alone)}")
    unmarked = sorted(unknown - set(lost))
    if unmarked:
        why.append(
            f"not marked in the taint run, so joined to every product: {', '.join(unmarked)}"
            " (mark them and run perfcast taint again)"
        )
    if lost:
        why.append(
            f"kept at all their values and joined to every product: {', '.join(lost)} reached "
            "no loop, branch or MPI call in the taint run, which says their labels were "
            "probably lost (see the profile's warnings), not that they cost nothing; give a "
            "parameter one value in [parameters] to drop it"
        )
    saved = len(plan.points) - kept
    note = (
        f"taint profile {source}: {len(plan.points)} -> {kept} points "
        f"({saved * plan.repetitions} runs saved)"
        + ("; " + "; ".join(why) if why else "; every point is needed")
    )
    kind = plan.kind
    if saved and plan.kind == "full":
        kind = "lines" if not products else "product grids"
    return replace(plan.subset(keep, note), kind=kind)


def _joint_variations(
    active: Sequence[str], found: Interactions, unknown: set[str]
) -> list[frozenset[str]]:
    """The parameter sets a model needs varied together: each product of the profile
    (restricted to ``active``), every single parameter, the unknown ones joined to all."""
    candidates = {frozenset(t & set(active)) | unknown for t in found.terms}
    candidates |= {frozenset({n}) | unknown for n in active}
    maximal = [g for g in candidates if not any(g < other for other in candidates)]
    return sorted(maximal, key=lambda g: (-len(g), sorted(g))) or [frozenset()]


def _product_text(names: Sequence[str], found: Interactions) -> str:
    """``iterations*size (main)``: a product and the functions that have it."""
    witnesses = sorted(
        {w for a, b in itertools.combinations(names, 2) for w in found.witnesses(a, b)}
    )
    shown = ", ".join(witnesses[:PRODUCT_WITNESSES])
    more = len(witnesses) - PRODUCT_WITNESSES
    return "*".join(names) + (f" ({shown}{f' +{more} more' if more > 0 else ''})" if shown else "")


def _cheapness(parameters: Sequence[Parameter], point: Iterable[float]) -> tuple[int, float]:
    """Order points by how far up each parameter's value list they are (index sum), then
    by the product of the values: small problems on few ranks first."""
    indices = 0
    product = 1.0
    for parameter, value in zip(parameters, point, strict=True):
        indices += parameter.values.index(value)
        product *= value
    return indices, product


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


@dataclass(frozen=True)
class WallTimeEstimate:
    """Wall time of a plan, one run at a time, estimated from the runs already stored.

    A planned point that was measured takes its stored runs' median; any other point a
    power law in each varied parameter fitted to the stored runs (their median when too few
    points were measured for a fit). The timeout only bounds a run; measured runs say what
    one costs.
    """

    total: float
    remaining: float
    runs_left: int
    measured: int
    """Successful stored runs the estimate rests on."""
    store: Path

    def describe(self) -> str:
        left = (
            f"; {self.runs_left} runs left: about {_duration(self.remaining)}"
            if self.runs_left
            else "; every run is stored"
        )
        return (
            f"about {_duration(self.total)} wall time one run at a time (from {self.measured} "
            f"runs stored in {self.store.name}){left}"
        )


def estimate_wall_time(plan: ExperimentPlan, store: Path) -> WallTimeEstimate | None:
    """The plan's wall time from the successful runs in ``store`` (None: no store, or no
    run in it at a point of this plan's parameters)."""
    if not store.is_file():
        return None
    try:
        with CampaignStore.open(store) as opened:
            runs = opened.runs(OK)
            stored_keys = opened.finished_keys()
    except PerfcastError:
        return None
    seconds: dict[Coordinate, list[float]] = {}
    for run in runs:
        if run.seconds is None or any(name not in run.point for name in plan.parameters):
            continue
        point = tuple(float(run.point[name]) for name in plan.parameters)
        seconds.setdefault(point, []).append(run.seconds)
    if not seconds:
        return None
    predict = run_time_model(plan.parameters, seconds)
    total = remaining = 0.0
    runs_left = 0
    for planned in plan.runs():
        point = tuple(float(planned.point[name]) for name in plan.parameters)
        estimate = predict(point)
        total += estimate
        if planned.key not in stored_keys:
            remaining += estimate
            runs_left += 1
    measured = sum(len(values) for values in seconds.values())
    return WallTimeEstimate(total, remaining, runs_left, measured, store)


def run_time_model(
    parameters: Sequence[str], seconds: Mapping[Coordinate, list[float]]
) -> Callable[[Coordinate], float]:
    """Seconds of one run at a point: the median of its stored runs, else a power law
    ``c * prod(x_i^e_i)`` least-squares fitted in log space to the stored points' medians."""
    medians = {point: float(np.median(values)) for point, values in seconds.items()}
    varied = [
        i
        for i in range(len(parameters))
        if len({point[i] for point in medians}) > 1 and all(point[i] > 0 for point in medians)
    ]
    fallback = float(np.median(list(medians.values())))
    coefficients = None
    if len(medians) > len(varied) and varied:
        design = np.array([[1.0, *(np.log(point[i]) for i in varied)] for point in medians])
        target = np.log(np.maximum(list(medians.values()), 1e-9))
        coefficients = np.linalg.lstsq(design, target, rcond=None)[0]

    def predict(point: Coordinate) -> float:
        if point in medians:
            return medians[point]
        if coefficients is None or any(point[i] <= 0 for i in varied):
            return fallback
        row = np.array([1.0, *(np.log(point[i]) for i in varied)])
        return float(np.exp(row @ coefficients))

    return predict


def describe_plan(spec: AppSpec, plan: ExperimentPlan) -> str:
    """What ``perfcast design`` prints: the design, the points and the cost."""
    full_points = math.prod(len(p.values) for p in spec.parameters)  # never listed
    cost = plan.cost(expected_seconds=spec.run.expected_seconds, timeout=spec.run.timeout)
    lines_out = [
        f"design: {plan.kind} over {', '.join(plan.varied) or 'no varied parameter'}"
        + (f" (fixed: {format_point(spec.fixed)})" if spec.fixed else ""),
        plan.table(),
        f"cost: {cost.describe()}; {plan.repetitions} repetitions per point",
    ]
    wall = estimate_wall_time(plan, spec.store)
    if wall is not None:
        lines_out.append(f"time: {wall.describe()}")
    if len(plan.points) < full_points:
        saved = full_points - len(plan.points)
        lines_out.append(
            f"saves {saved} of {full_points} points of the full factorial design "
            f"({saved * plan.repetitions} runs)"
        )
    lines_out += [f"note: {note}" for note in plan.notes]
    return "\n".join(lines_out)
