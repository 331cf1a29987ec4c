"""Issue 28's evidence: core-hours to a held-out prediction, full factorial vs adaptive designs.

A simulated campaign on a known truth: "running" a point draws its run time from a random
PMNF function of 2 or 3 parameters (:mod:`perfcast.synth`, one call path, ``main->solve``)
perturbed by symmetric uniform noise (+-2, 5, 10 or 20 %), and a run costs its drawn run
time times ``p`` (core-hours). Every strategy may run the points of the same grid, 5 values
per parameter (``p`` 64..1024, ``n`` 8000..40000, ``m`` 10..50, the machine's limits); the
prediction is for a target beyond it (``p`` = 4096, ``n`` = 48000, ``m`` = 60), and its
held-out error is ``|model(target) - truth(target)| / truth(target)``, the model fitted as
``perfcast model`` fits (:func:`~perfcast.workflows.model.model_campaign`, no priors), on
whatever each strategy measured:

``full``
    The full factorial: every grid point, 5 repetitions. Its core-hours are the budget
    ``B`` of the adaptive strategies, and its error the one to reach.
``sparse``
    Extra-P's recommended static design (``perfcast design`` kind ``sparse``): the cross
    (5 values per parameter on lines through the cheapest corner) plus one cheapest point
    off the lines per parameter, 5 repetitions.
``perfcast``
    ``perfcast measure --until``'s loop: the cross at 3 repetitions, then rounds of the
    :data:`~perfcast.measure.design.DEFAULT_PER_ROUND` best grid points of
    :func:`~perfcast.workflows.design.rank_runs` (costed as ``suggest_runs`` costs them,
    by :func:`~perfcast.measure.design.run_time_model` of the runs so far), each measured
    with the runs it suggests, until ``B`` is spent or nothing is worth running.
``extrap``
    Extra-P 4.2.5's measurement-point advisor (``extrap.mpa``, the GUI's "measurement
    point wizard", driven headless through ``_extrap.py advise``; Extra-P's own models
    and cost, the grid as its manual value series): from the same cross at 3 repetitions,
    it is given the budgets ``f x B`` in turn and every run it suggests within each is
    measured as the wizard lists them: one run per suggestion (its "add" mode lists the
    cheapest new points that fit, "gpr" mode the points its Gaussian process rates best
    per cost, numbering their repetitions; it is asked again within the same budget until
    it suggests nothing, at most 10 times). Extra-P 4.2.5 falls back from "gpr" to "add"
    once every point lies on some full line of 5 (``extrap.mpa.util.check_additional_point``).

The adaptive strategies are read at the budget fractions ``f`` in :data:`FRACTIONS`: the
error of the model fitted to what was measured within ``f x B``. The summary gives, per
strategy, the smallest ``f`` whose median error over the seeds is at most the full
factorial's median error -- the core-hours needed for the same held-out error -- and
``B`` over that (the saving), and where ``perfcast measure --until width=W`` would have
stopped (the first round at which the 95 % prediction interval at the target is within
``W``) with what it had spent and the error it had then. Nothing here is a timing: costs
are the simulated campaigns' core-hours, compared as ratios within the same run.

Run (the full run takes about ten minutes on two cores)::

    python3 benchmarks/adaptive_design.py --quick
    python3 benchmarks/adaptive_design.py --output benchmarks/results/adaptive_design.txt
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _extrap  # the sibling helper; benchmarks/ is not a package

from perfcast.appspec import Parameter
from perfcast.experiment.experiment import Experiment
from perfcast.experiment.metrics import TIME_METRIC
from perfcast.measure.design import (
    DEFAULT_PER_ROUND,
    MAX_SUGGESTIONS,
    cross,
    full_factorial,
    run_time_model,
    sparse,
)
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.pmnf import Model
from perfcast.synth import FunctionSpace, Noise, random_function
from perfcast.workflows.design import MIN_REPETITIONS, Suggestion, rank_runs
from perfcast.workflows.model import ModelRequest, model_campaign

CALLPATH = "main->solve"
GRID: dict[str, tuple[float, ...]] = {
    "p": (64.0, 128.0, 256.0, 512.0, 1024.0),
    "n": (8000.0, 16000.0, 24000.0, 32000.0, 40000.0),
    "m": (10.0, 20.0, 30.0, 40.0, 50.0),
}
TARGET = {"p": 4096.0, "n": 48000.0, "m": 60.0}
FULL_REPETITIONS = 5
"""Repetitions of the static designs (Extra-P's recommendation)."""
SEED_REPETITIONS = MIN_REPETITIONS
"""Repetitions of the adaptive strategies' starting cross (perfcast's minimum per point)."""
NOISE_LEVELS = (0.02, 0.05, 0.10, 0.20)
PARAMETER_COUNTS = (2, 3)
FRACTIONS = (0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
"""Budget fractions of the full factorial's core-hours at which the adaptive strategies
are read (and Extra-P's advisor is given its budgets)."""
WIDTHS = (0.25, 0.5)
"""``--until width=W`` stopping points reported."""
MAX_ROUNDS = 200
SPACE = FunctionSpace(scale_range=(1.0, 10.0))
"""Truths of 1 to 10 s (times 1 + 10 x terms) at the largest grid point."""


@dataclass
class Campaign:
    """A simulated campaign: runs drawn from ``truth`` with ``noise``, their core-hours."""

    truth: Model
    parameters: tuple[str, ...]
    noise: Noise
    rng: np.random.Generator
    runs: dict[tuple[float, ...], list[float]] = field(default_factory=dict)
    core_hours: float = 0.0

    def run(self, point: Sequence[float], times: int) -> None:
        point = tuple(float(v) for v in point)
        columns = {
            name: np.full(times, value) for name, value in zip(self.parameters, point, strict=True)
        }
        seconds = self.noise.apply(np.asarray(self.truth.evaluate(columns), float), self.rng)
        seconds = np.broadcast_to(seconds, times)
        self.runs.setdefault(point, []).extend(float(s) for s in seconds)
        self.core_hours += float(np.sum(seconds)) * point[0] / 3600.0

    def experiment(self) -> Experiment:
        rows = [
            (CALLPATH, TIME_METRIC, list(point), value)
            for point, values in self.runs.items()
            for value in values
        ]
        return Experiment.from_rows(list(self.parameters), rows, source="synthetic")


def fit(experiment: Experiment) -> ModelSet:
    return model_campaign(ModelRequest(experiment, priors=())).models


def error(models: ModelSet, truth: Model, target: Mapping[str, float]) -> float:
    """Relative error of the call path's model at the target (inf without one)."""
    model = models.get((CALLPATH, TIME_METRIC))
    if model is None:
        return math.inf
    true = float(truth.evaluate(target))
    return abs(float(model.evaluate(target)) - true) / true


@dataclass
class Outcome:
    """One campaign (truth x noise x seed) under every strategy."""

    parameters: int
    noise: float
    seed: int
    full_core_hours: float
    full_error: float
    sparse_core_hours: float
    sparse_error: float
    perfcast: list[tuple[float, float, float]]
    """(core-hours, error, widest relative 95 % interval at the target) after each round."""
    perfcast_stop: str
    extrap: list[tuple[float, float]]
    """(core-hours, error) after each budget of :data:`FRACTIONS`."""
    extrap_modes: list[str]
    seconds: float


def static(truth: Model, grid: Mapping[str, Sequence[float]], noise: Noise, seed: int, kind: str):
    parameters = [Parameter(name, tuple(values)) for name, values in grid.items()]
    if kind == "full":
        plan = full_factorial(parameters, FULL_REPETITIONS)
    else:
        plan = sparse(parameters, FULL_REPETITIONS, len(parameters))
    campaign = Campaign(truth, tuple(grid), noise, np.random.default_rng([seed, 1]))
    for point in plan.points:
        campaign.run(point, FULL_REPETITIONS)
    return campaign.core_hours, error(fit(campaign.experiment()), truth, target_of(grid))


def target_of(grid: Mapping[str, Sequence[float]]) -> dict[str, float]:
    return {name: TARGET[name] for name in grid}


def seeded(truth: Model, grid: Mapping[str, Sequence[float]], noise: Noise, seed: int) -> Campaign:
    """The adaptive strategies' start: the cross at :data:`SEED_REPETITIONS`."""
    parameters = [Parameter(name, tuple(values)) for name, values in grid.items()]
    campaign = Campaign(truth, tuple(grid), noise, np.random.default_rng([seed, 2]))
    for point in cross(parameters, SEED_REPETITIONS).points:
        campaign.run(point, SEED_REPETITIONS)
    return campaign


def _costed(
    names: Sequence[str], runs: Mapping[tuple[float, ...], list[float]]
) -> Callable[[Mapping[str, float]], float]:
    """Seconds of a run as ``suggest_runs`` predicts them from the runs so far."""
    predict = run_time_model(names, {point: list(values) for point, values in runs.items()})
    return lambda point: predict(tuple(float(point[n]) for n in names))


def perfcast_loop(
    truth: Model, grid: Mapping[str, Sequence[float]], noise: Noise, seed: int, budget: float
) -> tuple[list[tuple[float, float, float]], str]:
    """``--until``'s rounds with the width never reached: the trajectory up to ``budget``."""
    campaign = seeded(truth, grid, noise, seed)
    names = list(grid)
    target = target_of(grid)
    allowed = {name: set(values) for name, values in grid.items()}
    trajectory = []
    stopped = f"{MAX_ROUNDS} rounds"
    for _ in range(MAX_ROUNDS):
        experiment = campaign.experiment()
        models = fit(experiment)
        found = rank_runs(
            models,
            experiment,
            target,
            seconds=_costed(names, campaign.runs),
            count=MAX_SUGGESTIONS,
            grid=grid,
        )
        width = max((w.relative if not w.few else math.inf for w in found.widths), default=math.inf)
        trajectory.append((campaign.core_hours, error(models, truth, target), width))
        left = budget - campaign.core_hours
        chosen: list[Suggestion] = []
        for s in found.suggestions:
            if len(chosen) == DEFAULT_PER_ROUND:
                break
            if all(s.point[n] in allowed[n] for n in names) and s.core_hours <= left:
                chosen.append(s)
                left -= s.core_hours
        if not chosen:
            stopped = "budget spent" if found.suggestions else "nothing left worth running"
            break
        for s in chosen:
            campaign.run([s.point[n] for n in names], s.runs)
    return trajectory, stopped


def extrap_loop(
    truth: Model,
    grid: Mapping[str, Sequence[float]],
    noise: Noise,
    seed: int,
    budget: float,
    advisor: _extrap.Advisor,
) -> tuple[list[tuple[float, float]], list[str]]:
    """Extra-P's advisor given ``f x budget`` for each ``f`` of :data:`FRACTIONS`."""
    campaign = seeded(truth, grid, noise, seed)
    names = list(grid)
    target = target_of(grid)
    trajectory = []
    modes = []
    for fraction in FRACTIONS:
        for _ in range(10):  # base and add modes: ask again within the same budget
            answer = advisor.ask(
                {
                    "parameters": names,
                    "measurements": [[list(p), v] for p, v in campaign.runs.items()],
                    "budget": fraction * budget * 3600.0,
                    "series": [list(v) for v in grid.values()],
                    "process": 0,
                    "target": [target[n] for n in names],
                }
            )
            points = answer["points"]
            if not points:
                break
            modes.append(answer["mode"])
            if answer["mode"] == "gpr":
                for point in points:
                    campaign.run(point, 1)
                break
            runs = SEED_REPETITIONS if answer["mode"] == "base" else 1
            for point in points:
                campaign.run(point, runs)
        trajectory.append((campaign.core_hours, error(fit(campaign.experiment()), truth, target)))
    return trajectory, modes


def campaign(parameters: int, level: float, seed: int, with_extrap: bool) -> Outcome:
    start = time.perf_counter()
    grid = dict(list(GRID.items())[:parameters])
    rng = np.random.default_rng([seed, parameters])
    largest = {name: max(values) for name, values in grid.items()}
    truth = random_function(CALLPATH, largest, rng, space=SPACE)
    noise = Noise("uniform", level, symmetric=True)
    full_core_hours, full_error = static(truth, grid, noise, seed, "full")
    sparse_core_hours, sparse_error = static(truth, grid, noise, seed, "sparse")
    trajectory, stopped = perfcast_loop(truth, grid, noise, seed, full_core_hours)
    extrap: list[tuple[float, float]] = []
    modes: list[str] = []
    if with_extrap:
        with _extrap.Advisor() as advisor:
            extrap, modes = extrap_loop(truth, grid, noise, seed, full_core_hours, advisor)
    return Outcome(
        parameters,
        level,
        seed,
        full_core_hours,
        full_error,
        sparse_core_hours,
        sparse_error,
        trajectory,
        stopped,
        extrap,
        modes,
        time.perf_counter() - start,
    )


def _campaign(arguments: tuple[int, float, int, bool]) -> Outcome:
    return campaign(*arguments)


# -- the tables ------------------------------------------------------------------------------


def at_fraction(trajectory: Sequence[tuple[float, ...]], limit: float) -> tuple[float, float]:
    """(core-hours, error) of the last state within ``limit`` core-hours (nan: none)."""
    within = [state for state in trajectory if state[0] <= limit * (1 + 1e-9)]
    if not within:
        return math.nan, math.nan
    return within[-1][0], within[-1][1]


def until(trajectory: Sequence[tuple[float, float, float]], width: float):
    """Where ``--until width=W`` stops: (core-hours, error, reached)."""
    for core_hours, err, reached in trajectory:
        if reached <= width:
            return core_hours, err, True
    return trajectory[-1][0], trajectory[-1][1], False


def median(values: Sequence[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return float(np.median(finite)) if finite else math.nan


def percent(value: float) -> str:
    return "-" if math.isnan(value) else f"{100 * value:.1f}"


def needed(errors: Mapping[float, float], goal: float) -> float:
    """The smallest budget fraction whose median error is at most ``goal`` (nan: none)."""
    for fraction in FRACTIONS:
        if errors[fraction] <= goal:
            return fraction
    return math.nan


def tables(outcomes: Sequence[Outcome], with_extrap: bool) -> str:
    groups: dict[tuple[int, float], list[Outcome]] = {}
    for outcome in outcomes:
        groups.setdefault((outcome.parameters, outcome.noise), []).append(outcome)
    strategies = ["perfcast", *(["extrap"] if with_extrap else [])]
    head = ["par noise strategy  |", *(f"{f:>6.0%}" for f in FRACTIONS), "| spent%B"]
    lines = [
        "Median held-out error (%) at the target, over the seeds, of the model fitted to what "
        "each adaptive strategy measured within f x the full factorial's core-hours "
        "(spent%B: the median share of it spent in all):",
        "",
        " ".join(head),
        "-" * len(" ".join(head)),
    ]
    summary = []
    for (parameters, level), group in sorted(groups.items()):
        full = median([o.full_error for o in group])
        trajectories: dict[str, list[Sequence[tuple[float, ...]]]] = {
            "perfcast": [o.perfcast for o in group],
            "extrap": [o.extrap for o in group],
        }
        reach: dict[str, float] = {}
        for strategy in strategies:
            errors = {
                f: median(
                    [
                        at_fraction(t, f * o.full_core_hours)[1]
                        for t, o in zip(trajectories[strategy], group, strict=True)
                    ]
                )
                for f in FRACTIONS
            }
            reach[strategy] = needed(errors, full)
            spent = median(
                [
                    t[-1][0] / o.full_core_hours
                    for t, o in zip(trajectories[strategy], group, strict=True)
                ]
            )
            lines.append(
                f"{parameters:>3} {level:>5.0%} {strategy:<9} | "
                + " ".join(f"{percent(errors[f]):>6}" for f in FRACTIONS)
                + f" | {percent(spent):>7}"
            )
        stops = []
        for width in WIDTHS:
            stopped = [until(o.perfcast, width) for o in group]
            spent = median([s[0] / o.full_core_hours for s, o in zip(stopped, group, strict=True)])
            err = median([s[1] for s in stopped])
            reached = sum(s[2] for s in stopped)
            stops.append(f"{percent(spent):>5} {percent(err):>5} {reached}/{len(group)}")
        sparse_share = median([o.sparse_core_hours / o.full_core_hours for o in group])
        row = [
            f"{parameters:>3} {level:>5.0%} {len(group):>5} |",
            f"{median([o.full_core_hours for o in group]):>8.3g} {percent(full):>6} |",
            f"{percent(sparse_share):>5} {percent(median([o.sparse_error for o in group])):>6} |",
        ]
        for strategy in strategies:
            fraction = reach[strategy]
            saving = "-" if math.isnan(fraction) else f"{1 / fraction:.0f}x"
            row.append(f"{percent(fraction):>5} {saving:>5} |")
        row.append(" | ".join(stops))
        summary.append(" ".join(row))
    adaptive = " ".join(f"{s:^13}|" for s in strategies)
    until_head = " | ".join(f"--until width={w:g}" for w in WIDTHS)
    header = "par noise seeds | full c-h  err% | sparse%B err% | " + adaptive + " " + until_head
    sub = (
        "                |                |              | "
        + " ".join("  %B to reach |" for _ in strategies)
        + " "
        + " | ".join(" %B  err% reached" for _ in WIDTHS)
    )
    legend = [
        "",
        "Summary: full = full factorial (its median core-hours and error); %B = core-hours "
        "as a share of the full factorial's (the budget B); 'to reach' = the smallest budget "
        "share at which the strategy's median error is at most the full factorial's, and B "
        "over it; --until width=W = where perfcast measure --until would have stopped "
        "(median spent share, median error, campaigns whose interval reached W within B).",
        "",
        header,
        sub,
        "-" * len(header),
    ]
    return "\n".join(lines + legend + summary)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5, help="seeds of 2-parameter truths")
    parser.add_argument("--seeds3", type=int, default=3, help="seeds of 3-parameter truths")
    parser.add_argument("--parameters", type=int, nargs="+", default=list(PARAMETER_COUNTS))
    parser.add_argument("--noise", type=float, nargs="+", default=list(NOISE_LEVELS))
    parser.add_argument("--no-extrap", action="store_true", help="leave Extra-P's advisor out")
    parser.add_argument("--quick", action="store_true", help="2 parameters, 2 seeds, 5 %% noise")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.seeds3, args.parameters, args.noise = 2, 1, [2], [0.05]
    with_extrap = not args.no_extrap
    jobs = [
        (parameters, level, seed, with_extrap)
        for parameters in args.parameters
        for level in args.noise
        for seed in range(args.seeds if parameters == 2 else args.seeds3)
    ]
    start = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        outcomes = []
        for outcome in pool.map(_campaign, jobs):
            outcomes.append(outcome)
            print(
                f"{outcome.parameters} params {outcome.noise:.0%} seed {outcome.seed}: "
                f"{outcome.seconds:.0f} s, perfcast {len(outcome.perfcast)} rounds "
                f"({outcome.perfcast_stop}), Extra-P modes {dict(Counter(outcome.extrap_modes))}",
                file=sys.stderr,
                flush=True,
            )
    elapsed = time.perf_counter() - start
    command = "$ python3 benchmarks/" + Path(__file__).name
    if argv is None:
        argv = sys.argv[1:]
    command += "".join(" " + shlex.quote(a) for a in argv)
    text = "\n".join(
        [
            command,
            "",
            "random PMNF truths (perfcast.synth, 1 call path) of "
            f"{'/'.join(map(str, args.parameters))} parameters, symmetric uniform noise, "
            f"{args.seeds} seeds of 2 parameters and "
            f"{args.seeds3} of 3 per noise level; grid 5 values per "
            f"parameter up to {', '.join(f'{k}={v[-1]:g}' for k, v in GRID.items())}; target "
            f"{', '.join(f'{k}={v:g}' for k, v in TARGET.items())} (only the parameters used); "
            f"full factorial and sparse at {FULL_REPETITIONS} repetitions, the adaptive "
            f"strategies from the cross at {SEED_REPETITIONS}; "
            + (
                f"Extra-P {_extrap.EXTRAP_VERSION}'s measurement-point advisor as the peer"
                if with_extrap
                else "Extra-P's advisor left out (--no-extrap)"
            )
            + f"; {elapsed:.0f} s",
            "",
            tables(outcomes, with_extrap),
        ]
    )
    print(text)
    if args.output is not None:
        args.output.write_text(text + "\n")


if __name__ == "__main__":
    main()
