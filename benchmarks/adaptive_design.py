"""Issue 28's evidence: core-hours to a held-out prediction, full factorial vs adaptive designs.

A simulated campaign on a known truth: "running" a point draws its run time from a random
PMNF function of 2 or 3 parameters (:mod:`perfcast.synth`, one call path, ``main->solve``)
perturbed by symmetric uniform noise (+-2, 5, 10 or 20 %), and a run costs its drawn run
time times ``p`` (core-hours). Every strategy may run the points of the same grid, 5 values
per parameter (``p`` 64..1024, ``n`` 8000..40000, ``m`` 10..50, the machine's limits); the
prediction is for a target beyond it (``p`` = 4096, ``n`` = 48000, ``m`` = 60), and its
held-out error is ``|model(target) - truth(target)| / truth(target)``, the model fitted as
``perfcast model`` fits (:func:`~perfcast.workflows.model.model_campaign`, no priors), on
whatever each strategy measured. The k-th run at a point is the same draw in every
strategy of a seed (common random numbers, :func:`run_stream`), so strategies differ by
the runs they chose, not by the luck of their draws:

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

The same comparison on one real application through the virtual cluster (:data:`APP`,
CoMD; on by default, off with ``--quick`` or ``--no-app``, alone with ``--app-only``): the
same strategy functions (:func:`compare`) on a :class:`Problem` per held-out target of
:data:`APP_TARGETS` (p = 1024 past the grid p = 32..512, where CoMD's time turns up again;
p = 512 past the grid p = 16..256, before the turn, where the time still falls; n = 8,
the grids' largest, in both), whose runs come from a pool measured once by ``perfcast
measure --backend smpi`` (:func:`measure_pool`: the campaigns :data:`APP_CAMPAIGNS` at
:data:`POOL_REPETITIONS` repetitions, kept in ``benchmarks/.adaptive-design-cache/``).
A run's value and cost are its simulated time (``main`` on the slowest rank) and that
times ``p``; a campaign draws a point's measured repetitions in an order its seed picks
(:func:`pooled`). SMPI adds no noise of its own: it charges each compute burst the CPU
time it took on this machine, so the repetitions differ by this machine's compute noise,
which the section reports.

Run (the committed tables: the synthetic truths took 35 minutes on two cores, Extra-P's
advisor most of it; the application under 2 minutes from its cached pool, plus about 20 to
measure the pool the first time). 40 and 16 seeds, because the medians of 20 and 8 moved by
a row's verdict from one set of seeds to the next (2 parameters at 10 % noise: 1x at 20
seeds, 2x at 40)::

    python3 benchmarks/adaptive_design.py --quick
    python3 benchmarks/adaptive_design.py --seeds 40 --seeds3 16 --no-app \\
        --output benchmarks/results/adaptive_design.txt
    python3 benchmarks/adaptive_design.py --app-only \\
        --output benchmarks/results/adaptive_design_virtual.txt
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import os
import shlex
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _extrap  # the sibling helpers; benchmarks/ is not a package
import apps_matrix

from perfcast.appspec import Parameter
from perfcast.experiment.experiment import Experiment
from perfcast.experiment.metrics import TIME_METRIC
from perfcast.inputs import decode_text
from perfcast.measure.design import (
    DEFAULT_PER_ROUND,
    MAX_SUGGESTIONS,
    cross,
    full_factorial,
    run_time_model,
    sparse,
)
from perfcast.measure.profiles import PROFILE_HINT, PROFILE_KIND, parse_rank_profile
from perfcast.measure.store import OK, CampaignStore
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
FRACTIONS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0)
"""Budget fractions of the full factorial's core-hours at which the adaptive strategies
are read (and Extra-P's advisor is given its budgets)."""
GOAL_FRACTION = 0.5
"""The issue's goal, 2x fewer core-hours than the full factorial: the share of ``B`` at
which the summary pairs each seed's error with the full factorial's."""
WIDTHS = (0.25, 0.5)
"""``--until width=W`` stopping points reported."""
MAX_ROUNDS = 200
SPACE = FunctionSpace(scale_range=(1.0, 10.0))
"""Truths of 1 to 10 s (times 1 + 10 x terms) at the largest grid point."""


Draw = Callable[[tuple[float, ...], int], np.ndarray]
"""Seconds of ``times`` runs at a point, in a campaign (the synthetic truth with its noise,
or the next repetitions of a measured pool)."""


@dataclass(frozen=True)
class Problem:
    """What every strategy runs against: the grid it may measure (``p`` first), the target
    and the true value there, and where a campaign's runs come from."""

    grid: Mapping[str, Sequence[float]]
    target: Mapping[str, float]
    truth: float
    """The value at the target the held-out error is measured against."""
    source: Callable[[int], Draw]
    """A campaign's run times, each drawn from the seed's stream of that run
    (:func:`run_stream`)."""
    callpath: str = CALLPATH
    repetitions: int = FULL_REPETITIONS
    """Repetitions of the static designs."""


def run_stream(seed: int, point: Sequence[float], repetition: int) -> np.random.Generator:
    """The random numbers of the ``repetition``-th run at ``point`` in the campaigns of
    ``seed`` (0 for the order of an application's pool there): common random numbers.
    Every strategy's k-th run at a point is the same measurement, whatever batches and
    order it asks for them in, so the strategies of one seed differ by which runs they
    chose, not by the luck of the draw. With a stream per campaign instead, the full
    factorial drawn twice missed its own median error (2 parameters, 40 seeds: 4.5 against
    2.7 % at 10 % noise), so 'to reach' measured the draw more than the design; with one
    stream per point, a batch of 3 runs and then 2 drew other values than 5 at once (the
    symmetric noise draws its magnitudes, then its signs)."""
    key = hashlib.blake2b(repr(tuple(float(v) for v in point)).encode(), digest_size=8)
    return np.random.default_rng([seed, int.from_bytes(key.digest(), "little"), repetition])


def synthetic(truth: Model, grid: Mapping[str, Sequence[float]], noise: Noise) -> Problem:
    """A random truth perturbed by ``noise``; the target of :data:`TARGET`."""
    target = {name: TARGET[name] for name in grid}

    def source(seed: int) -> Draw:
        taken: Counter[tuple[float, ...]] = Counter()

        def draw(point: tuple[float, ...], times: int) -> np.ndarray:
            columns = {name: np.full(1, value) for name, value in zip(grid, point, strict=True)}
            value = np.asarray(truth.evaluate(columns), float).reshape(1)
            start = taken[point]
            taken[point] += times
            return np.concatenate(
                [noise.apply(value, run_stream(seed, point, start + k)) for k in range(times)]
            )

        return draw

    return Problem(grid, target, float(truth.evaluate(target)), source)


@dataclass
class Campaign:
    """A simulated campaign on ``problem``: the runs each point got, their core-hours."""

    problem: Problem
    seed: int
    runs: dict[tuple[float, ...], list[float]] = field(default_factory=dict)
    core_hours: float = 0.0

    def __post_init__(self) -> None:
        self._draw = self.problem.source(self.seed)

    def run(self, point: Sequence[float], times: int) -> None:
        point = tuple(float(v) for v in point)
        seconds = self._draw(point, times)
        self.runs.setdefault(point, []).extend(float(s) for s in seconds)
        self.core_hours += float(np.sum(seconds)) * point[0] / 3600.0

    def experiment(self) -> Experiment:
        rows = [
            (self.problem.callpath, TIME_METRIC, list(point), value)
            for point, values in self.runs.items()
            for value in values
        ]
        return Experiment.from_rows(list(self.problem.grid), rows, source="adaptive_design")


def fit(experiment: Experiment) -> ModelSet:
    return model_campaign(ModelRequest(experiment, priors=())).models


def error(models: ModelSet, problem: Problem) -> float:
    """Relative error of the call path's model at the target (inf without one)."""
    model = models.get((problem.callpath, TIME_METRIC))
    if model is None:
        return math.inf
    return abs(float(model.evaluate(problem.target)) - problem.truth) / problem.truth


@dataclass
class Outcome:
    """One campaign (a problem x seed) under every strategy."""

    group: tuple[int, float]
    """What the tables group it by: (parameters, noise level), on the application
    (parameters, the target's p)."""
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


def static(problem: Problem, seed: int, kind: str) -> tuple[float, float]:
    """(core-hours, error) of a static design at the problem's repetitions."""
    parameters = [Parameter(name, tuple(values)) for name, values in problem.grid.items()]
    if kind == "full":
        plan = full_factorial(parameters, problem.repetitions)
    else:
        plan = sparse(parameters, problem.repetitions, len(parameters))
    campaign = Campaign(problem, seed)
    for point in plan.points:
        campaign.run(point, problem.repetitions)
    return campaign.core_hours, error(fit(campaign.experiment()), problem)


def seeded(problem: Problem, seed: int) -> Campaign:
    """The adaptive strategies' start: the cross at :data:`SEED_REPETITIONS`."""
    parameters = [Parameter(name, tuple(values)) for name, values in problem.grid.items()]
    campaign = Campaign(problem, seed)
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
    problem: Problem, seed: int, budget: float
) -> tuple[list[tuple[float, float, float]], str]:
    """``--until``'s rounds with the width never reached: the trajectory up to ``budget``."""
    campaign = seeded(problem, seed)
    names = list(problem.grid)
    allowed = {name: set(values) for name, values in problem.grid.items()}
    trajectory = []
    stopped = f"{MAX_ROUNDS} rounds"
    for _ in range(MAX_ROUNDS):
        experiment = campaign.experiment()
        models = fit(experiment)
        found = rank_runs(
            models,
            experiment,
            problem.target,
            seconds=_costed(names, campaign.runs),
            count=MAX_SUGGESTIONS,
            grid=problem.grid,
        )
        width = max((w.relative if not w.few else math.inf for w in found.widths), default=math.inf)
        trajectory.append((campaign.core_hours, error(models, problem), width))
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
    problem: Problem, seed: int, budget: float, advisor: _extrap.Advisor
) -> tuple[list[tuple[float, float]], list[str]]:
    """Extra-P's advisor given ``f x budget`` for each ``f`` of :data:`FRACTIONS`."""
    campaign = seeded(problem, seed)
    names = list(problem.grid)
    trajectory = []
    modes = []
    for fraction in FRACTIONS:
        for _ in range(10):  # base and add modes: ask again within the same budget
            answer = advisor.ask(
                {
                    "parameters": names,
                    "measurements": [[list(p), v] for p, v in campaign.runs.items()],
                    "budget": fraction * budget * 3600.0,
                    "series": [list(v) for v in problem.grid.values()],
                    "process": 0,
                    "target": [problem.target[n] for n in names],
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
        trajectory.append((campaign.core_hours, error(fit(campaign.experiment()), problem)))
    return trajectory, modes


def compare(problem: Problem, group: tuple[int, float], seed: int, with_extrap: bool) -> Outcome:
    """Every strategy on ``problem``, the adaptive ones within the full factorial's
    core-hours: the one comparison both the synthetic truths and the application run."""
    start = time.perf_counter()
    full_core_hours, full_error = static(problem, seed, "full")
    sparse_core_hours, sparse_error = static(problem, seed, "sparse")
    trajectory, stopped = perfcast_loop(problem, seed, full_core_hours)
    extrap: list[tuple[float, float]] = []
    modes: list[str] = []
    if with_extrap:
        with _extrap.Advisor() as advisor:
            extrap, modes = extrap_loop(problem, seed, full_core_hours, advisor)
    return Outcome(
        group,
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


def campaign(parameters: int, level: float, seed: int, with_extrap: bool) -> Outcome:
    """A random truth of ``parameters`` parameters with ``level`` noise, every strategy."""
    grid = dict(list(GRID.items())[:parameters])
    rng = np.random.default_rng([seed, parameters])
    largest = {name: max(values) for name, values in grid.items()}
    truth = random_function(CALLPATH, largest, rng, space=SPACE)
    problem = synthetic(truth, grid, Noise("uniform", level, symmetric=True))
    return compare(problem, (parameters, level), seed, with_extrap)


def _progress(label: str, outcome: Outcome) -> None:
    """One finished campaign on standard error: what it was, its time, how each loop ended."""
    print(
        f"{label} seed {outcome.seed}: {outcome.seconds:.0f} s, perfcast "
        f"{len(outcome.perfcast)} rounds ({outcome.perfcast_stop}), Extra-P modes "
        f"{dict(Counter(outcome.extrap_modes))}",
        file=sys.stderr,
        flush=True,
    )


def _campaign(arguments: tuple[int, float, int, bool]) -> Outcome:
    return campaign(*arguments)


# -- one application on the virtual cluster ---------------------------------------------------


APP = "comd"
"""The application (``benchmarks/apps_matrix.py``'s CoMD: how it is copied, prepared and
built): the cheapest of the four at 1024 ranks under SMPI with a size parameter of its own.
NAS IS has no size but its compiled-in class and an alltoallv of p^2 messages; miniFE's CG
runs 200 iterations of allreduces and halo exchanges; LULESH takes cubes only (1000, not
1024) and exchanges with 26 neighbours."""
APP_COMMAND = "bin/CoMD-mpi -i {p} -j 1 -k 1 -x 3328 -y {n} -z {n} -N 1"
"""Strong scaling over ``p`` ranks along x (the command can only pass ``p`` itself, so the
decomposition is 1-D) of a 3328 x n x n lattice (4 atoms per unit cell): CoMD wants every
rank's domain at least 11.57 A wide, 3.25 unit cells of 3.615 A at p = 1024. One time step
(two force computations with the initial one): a run at p = 1024, n = 8 took 71 to 89 s here
(two simulations at once beside another worker's jobs, load 4 to 5), most of it the ranks'
own compute, which SMPI runs one after another; one at p = 32 about 20 s."""
APP_N = (4.0, 5.0, 6.0, 7.0, 8.0)
APP_TARGETS: tuple[tuple[dict[str, tuple[float, ...]], dict[str, float]], ...] = (
    ({"p": (32.0, 64.0, 128.0, 256.0, 512.0), "n": APP_N}, {"p": 1024.0, "n": 8.0}),
    ({"p": (16.0, 32.0, 64.0, 128.0, 256.0), "n": APP_N}, {"p": 512.0, "n": 8.0}),
)
"""The application's problems, (grid, held-out target) each: twice the grid's largest p at
its largest n. CoMD's time falls from p = 32 to 512 and rises again at 1024, so the first
target lies past a turn no model of its grid can see (it shows how far off every design
is there); the second lies before it, where the time still falls. Both grids have 5 values
of each parameter: Extra-P's advisor suggests nothing until it has 5 of each
(``MeasurementPointAdvisor.min_points``; on p = 32..256 it stays in its "base" mode and
returns no point at any budget), and perfcast gives no interval at the target with fewer
than 5 values of a parameter (``--until`` would never stop), hence the second grid's p = 16,
measured for it."""
APP_CALLPATH = "main"
"""The modeled value: a run's simulated time, ``main``'s inclusive time on its slowest rank."""
APP_FILTER = ("main", "initSimulation", "timestep", "computeForce", "redistributeAtoms")
"""The functions the build measures (``[build] filter``): CoMD's phases, each called a few
times per rank. Unfiltered, every call of its per-atom helpers (``sortAtomsById``,
``putAtomInBox``: 820 000 calls on rank 0 at p = 32, n = 4) reads the clock twice, which
made that point's simulated time 0.72 s against 0.15 s filtered, and its run 35 s."""
POOL_REPETITIONS = 3
"""Runs measured per point, and the static designs' repetitions on the application: the
first grid's and target's runs took 1900 s of wall time here (about 16 minutes two at a
time); 5 (:data:`FULL_REPETITIONS`) would take it to about 27."""
APP_NODES = 1024
CACHE = Path(__file__).resolve().parent / ".adaptive-design-cache"
"""Where the application is copied, built and measured, and its pool kept."""
POOL_FILE = CACHE / f"{APP}-pool.json"
APP_CAMPAIGNS: dict[str, dict[str, tuple[float, ...]]] = {
    "pool": APP_TARGETS[0][0],
    "target": {"p": (32.0, 1024.0), "n": (8.0,)},
    "small": {"p": (16.0,), "n": APP_N},
}
"""The ``perfcast measure`` campaigns that make up the pool, each a store of its own: the
first grid (the second target, p = 512, is one of its points), the first target (perfcast
measure refuses a campaign in which no parameter varies, so it also runs p = 32 at n = 8;
those runs are not used) and the second grid's p = 16, added after the other two."""


@dataclass
class Pool:
    """The measured runs: simulated seconds per point (the targets' included), in the order
    their repetitions were stored."""

    runs: dict[tuple[float, ...], list[float]]
    run_seconds: float
    """The wall times of every run measured for it (the target's unused ones included)."""
    longest_run: float


def _pool_spec() -> dict:
    """What the cached pool was measured with; another spec measures it again."""
    return {
        "app": APP,
        "command": APP_COMMAND,
        "campaigns": APP_CAMPAIGNS,
        "repetitions": POOL_REPETITIONS,
        "nodes": APP_NODES,
        "filter": APP_FILTER,
    }


def measure_pool(parallel: int) -> Pool:
    """The pool, from :data:`POOL_FILE` when it was measured with this spec, else measured:
    ``perfcast measure --backend smpi`` of each of :data:`APP_CAMPAIGNS` into a store of its
    own in a copy of the application (a killed measurement, or one whose spec gained a
    campaign, resumes from its stores). A point two campaigns measured keeps the first's."""
    if POOL_FILE.is_file():
        cached = json.loads(POOL_FILE.read_text())
        if cached["spec"] == json.loads(json.dumps(_pool_spec())):
            cached_runs = {tuple(point): values for point, values in cached["runs"]}
            return Pool(cached_runs, cached["run_seconds"], cached["longest_run"])
    app = apps_matrix.APPLICATIONS[APP]
    directory = CACHE / APP
    if not (directory / ".prepared").is_file():
        shutil.rmtree(directory, ignore_errors=True)
        shutil.copytree(apps_matrix.APPS / app.source, directory)
        for path in [directory, *directory.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)  # the shared tree is read-only
        for name, text in app.files:
            (directory / name).write_text(text)
        (directory / "phases.txt").write_text("".join(f"{name}\n" for name in APP_FILTER))
        for command in app.prepare:
            apps_matrix.shell(f"prepare ({command})", command, directory, 120)
        (directory / ".prepared").write_text("")
    platform = CACHE / "cluster.xml"
    if not platform.is_file():
        apps_matrix.shell(
            "perfcast platform describe",
            f"{apps_matrix.PERFCAST} platform describe -o {platform} --name cluster "
            f"--nodes {APP_NODES}",
            CACHE,
            120,
        )
    runs: dict[tuple[float, ...], list[float]] = {}
    walls: list[float] = []
    for name, values in APP_CAMPAIGNS.items():
        parameters = "".join(
            f"{key} = [{', '.join(f'{v:g}' for v in axis)}]\n" for key, axis in values.items()
        )
        (directory / f"{name}.toml").write_text(
            f'[app]\nname = "{APP}"\nstore = "{name}.sqlite"\n\n[build]\n{app.spec_build}\n'
            'filter = "phases.txt"\n\n'
            f'[run]\ncommand = "{APP_COMMAND}"\nrepetitions = {POOL_REPETITIONS}\n'
            f"timeout = 900\n\n[parameters]\n{parameters}"
        )
        store = directory / f"{name}.sqlite"
        resume = " --resume" if store.is_file() else ""
        print(f"measuring the {APP} {name} (perfcast measure --backend smpi)", file=sys.stderr)
        apps_matrix.shell(
            f"perfcast measure {name}",
            f"{apps_matrix.PERFCAST} measure {name}.toml --backend smpi --platform {platform} "
            f"--no-counting-pass --parallel {parallel}{resume}",
            directory,
            7200,
            log=directory / f"{name}.log",
        )
        for point, seconds in simulated_seconds(store, list(values), walls).items():
            runs.setdefault(point, seconds)
    pool = Pool(runs, sum(walls), max(walls))
    POOL_FILE.write_text(
        json.dumps(
            {
                "spec": _pool_spec(),
                "runs": [[list(point), values] for point, values in pool.runs.items()],
                "run_seconds": pool.run_seconds,
                "longest_run": pool.longest_run,
            }
        )
    )
    return pool


def simulated_seconds(
    store: Path, names: Sequence[str], walls: list[float]
) -> dict[tuple[float, ...], list[float]]:
    """Each successful run's simulated time (:data:`APP_CALLPATH` on its slowest rank), per
    point, in repetition order; the runs' wall times are added to ``walls``."""
    seconds: dict[tuple[float, ...], list[float]] = {}
    with CampaignStore.open(store) as opened:
        for run in sorted(opened.runs(OK), key=lambda r: r.repetition):
            walls.append(run.seconds or 0.0)
            slowest = 0
            for name, data in opened.profiles(run.id).items():
                source = f"{store}[{run.key}]/{name}"
                text = decode_text(data, source, PROFILE_KIND, PROFILE_HINT)
                profile = parse_rank_profile(text, source)
                slowest = max(slowest, profile.callpaths[APP_CALLPATH].inclusive_ns)
            point = tuple(float(run.point[name]) for name in names)
            seconds.setdefault(point, []).append(slowest / 1e9)
    return seconds


def pooled(pool: Pool, grid: Mapping[str, Sequence[float]], target: Mapping[str, float]) -> Problem:
    """The application as a problem on ``grid``: a run at one of its points is the next of
    the point's measured repetitions, in an order drawn from the seed's stream of the point
    (:func:`run_stream`: the same for every strategy of a seed; seeds differ in which
    repetitions a strategy gets first); past the last, the order starts
    again. A point off the grid is refused, so no strategy sees the held-out target."""
    points = set(itertools.product(*grid.values()))

    def source(seed: int) -> Draw:
        orders: dict[tuple[float, ...], np.ndarray] = {}
        taken: Counter[tuple[float, ...]] = Counter()

        def draw(point: tuple[float, ...], times: int) -> np.ndarray:
            if point not in points:
                raise ValueError(f"{point} is not a point of the {APP} grid")
            runs = pool.runs[point]
            order = orders.setdefault(point, run_stream(seed, point, 0).permutation(len(runs)))
            start = taken[point]
            taken[point] += times
            return np.array([runs[order[(start + i) % len(runs)]] for i in range(times)])

        return draw

    truth = float(np.mean(pool.runs[tuple(target.values())]))
    return Problem(grid, target, truth, source, APP_CALLPATH, POOL_REPETITIONS)


def _app_campaign(arguments: tuple[Pool, int, int, bool]) -> Outcome:
    """Target ``index`` of :data:`APP_TARGETS` at one seed; its group in the tables is
    (parameters, the target's p)."""
    pool, index, seed, with_extrap = arguments
    grid, target = APP_TARGETS[index]
    return compare(pooled(pool, grid, target), (len(grid), target["p"]), seed, with_extrap)


def spread(values: Sequence[float]) -> float:
    """(largest - smallest) / mean of a point's repetitions."""
    return (max(values) - min(values)) / float(np.mean(values))


def _axes(grid: Mapping[str, Sequence[float]]) -> str:
    return "; ".join(f"{k} = {', '.join(f'{v:g}' for v in values)}" for k, values in grid.items())


def application(seeds: int, with_extrap: bool, jobs: int) -> str:
    """The application section: the pool (measured or cached), its noise, every strategy
    on each of :data:`APP_TARGETS` for ``seeds`` orders of the repetitions, and the tables."""
    pool = measure_pool(jobs)
    start = time.perf_counter()
    with ProcessPoolExecutor(jobs) as executor:
        outcomes = []
        arguments = [
            (pool, index, seed, with_extrap)
            for index in range(len(APP_TARGETS))
            for seed in range(seeds)
        ]
        for outcome in executor.map(_app_campaign, arguments):
            outcomes.append(outcome)
            _progress(f"{APP} p={outcome.group[1]:g}", outcome)
    elapsed = time.perf_counter() - start
    spreads = [spread(values) for values in pool.runs.values()]
    runs = sum(len(values) for values in pool.runs.values())
    n = APP_TARGETS[0][1]["n"]
    by_p = sorted((point[0], values) for point, values in pool.runs.items() if point[1] == n)
    last = APP_TARGETS[-1][1]["p"]

    def halving(p: float) -> float:
        """The mean time at ``p`` over that at ``p / 2``, at the targets' ``n``."""
        return float(np.mean(pool.runs[(p, n)]) / np.mean(pool.runs[(p / 2, n)]))

    targets = []
    for grid, target in APP_TARGETS:
        at = pool.runs[tuple(target.values())]
        targets.append(
            f"p={target['p']:g}, n={target['n']:g}: {float(np.mean(at)):.4g} s (spread "
            f"{percent(spread(at))} %) held out from grid {_axes(grid)}"
        )
    lines = [
        f"One real application on the virtual cluster: {APP} (`{APP_COMMAND}`), built and "
        f"run by perfcast measure --backend smpi on a {APP_NODES}-node SimGrid platform "
        "(perfcast platform describe --nodes "
        f"{APP_NODES}: 1 Gflop/s cores, 1.25e9 B/s links, 1 us); the modeled value is a run's "
        f"simulated time ({APP_CALLPATH}'s inclusive time on the slowest rank), a run costs "
        "it x p.",
        f"Pool: {POOL_REPETITIONS} repetitions of each of {len(pool.runs)} points, {runs} "
        f"runs (the target's campaign also ran p={APP_CAMPAIGNS['target']['p'][0]:g}, unused), "
        f"whose wall times add to {pool.run_seconds:.0f} s on two shared cores (the longest "
        f"{pool.longest_run:.0f} s), cached in "
        f"benchmarks/.adaptive-design-cache/{POOL_FILE.name}.",
        "Noise: SMPI charges each compute burst the CPU time it took here, so repetitions "
        "differ by this machine's own compute noise (nothing is added): spread (max - min) / "
        f"mean of a point's runs {percent(median(spreads))} % at the median point, "
        f"{percent(max(spreads))} % at most.",
        f"Mean simulated seconds at n={n:g} by p: "
        + ", ".join(f"{p:g}: {float(np.mean(values)):.4g}" for p, values in by_p)
        + ": the time falls to p=512 and rises at 1024.",
        "Two held-out targets (the mean of their runs), a row each in the tables (app and "
        "the target's p): "
        + "; ".join(targets)
        + ". The first lies past the turn, which no model of its grid can see; the second "
        f"before it, where the time still falls (if by less: {halving(last):.2f}x from "
        f"{last / 2:g} to {last:g}, {halving(last / 2):.2f}x from {last / 4:g} to {last / 2:g}).",
        f"Static designs at the pool's {POOL_REPETITIONS} repetitions (the full factorial is "
        "the whole grid), the adaptive ones from the cross at "
        f"{SEED_REPETITIONS}; a seed is an order in which a campaign draws each point's "
        f"repetitions, and a run past the pool's {POOL_REPETITIONS} at a point draws them "
        f"again in the same order; {seeds} seeds per target, {elapsed:.0f} s.",
        "",
        tables(outcomes, with_extrap, label=lambda key: f"{APP} {key[1]:>4g}", title="app    p "),
    ]
    overspent = [o for o in outcomes if o.extrap and o.extrap[-1][0] > o.full_core_hours]
    if overspent:
        lines += [
            "",
            f"Extra-P's advisor spent more than B in {len(overspent)} of {len(outcomes)} "
            "campaigns: it costs a candidate run by its model of the runs so far, and the runs "
            "it suggested within a budget cost more once run than that model said; its error "
            "at f is read at its last state within f x B.",
        ]
    return "\n".join(lines)


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


def synthetic_label(group: tuple[int, float]) -> str:
    """A synthetic group in the tables: parameters and noise level."""
    parameters, level = group
    return f"{parameters:>3} {level:>5.0%}"


def tables(
    outcomes: Sequence[Outcome],
    with_extrap: bool,
    label: Callable[[tuple[int, float]], str] = synthetic_label,
    title: str = "par noise",
) -> str:
    """The trajectories' table and the summary, a row per group (``label``, under ``title``:
    both 9 characters wide)."""
    groups: dict[tuple[int, float], list[Outcome]] = {}
    for outcome in outcomes:
        groups.setdefault(outcome.group, []).append(outcome)
    strategies = ["perfcast", *(["extrap"] if with_extrap else [])]
    head = [f"{title} strategy  |", *(f"{f:>6.0%}" for f in FRACTIONS), "| spent%B"]
    lines = [
        "Median held-out error (%) at the target, over the seeds, of the model fitted to what "
        "each adaptive strategy measured within f x the full factorial's core-hours "
        "(spent%B: the median share of it spent in all):",
        "",
        " ".join(head),
        "-" * len(" ".join(head)),
    ]
    summary = []
    for key, group in sorted(groups.items()):
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
                f"{label(key)} {strategy:<9} | "
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
            f"{label(key)} {len(group):>5} |",
            f"{median([o.full_core_hours for o in group]):>8.3g} {percent(full):>6} |",
            f"{percent(sparse_share):>5} {percent(median([o.sparse_error for o in group])):>6} |",
        ]
        for strategy in strategies:
            fraction = reach[strategy]
            saving = "-" if math.isnan(fraction) else f"{1 / fraction:.2g}x"
            paired = sum(
                at_fraction(t, GOAL_FRACTION * o.full_core_hours)[1] <= o.full_error
                for t, o in zip(trajectories[strategy], group, strict=True)
            )
            row.append(f"{percent(fraction):>5} {saving:>5} {paired:>3}/{len(group):<3}|")
        row.append(" | ".join(stops))
        summary.append(" ".join(row))
    adaptive = " ".join(f"{s:^21}|" for s in strategies)
    until_head = " | ".join(f"--until width={w:g}" for w in WIDTHS)
    header = f"{title} seeds | full c-h  err% | sparse%B err% | " + adaptive + " " + until_head
    sub = (
        "                |                |              | "
        + " ".join("  %B to reach  <=full|" for _ in strategies)
        + " "
        + " | ".join(" %B  err% reached" for _ in WIDTHS)
    )
    legend = [
        "",
        "Summary: full = full factorial (its median core-hours and error); %B = core-hours "
        "as a share of the full factorial's (the budget B); 'to reach' = the smallest budget "
        "share at which the strategy's median error is at most the full factorial's, and B "
        f"over it; <=full = the seeds whose error at {GOAL_FRACTION:.0%} of B is at most the "
        "full factorial's error on the same seed (the same draws: paired); --until width=W "
        "= where perfcast measure --until would have stopped "
        "(median spent share, median error, campaigns whose interval reached W within B).",
        "",
        header,
        sub,
        "-" * len(header),
    ]
    return "\n".join(lines + legend + summary)


def synthetic_section(args: argparse.Namespace, with_extrap: bool) -> str:
    """The synthetic truths: every configuration of ``args``, and the tables."""
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
            _progress(f"{outcome.group[0]} params {outcome.group[1]:.0%}", outcome)
    elapsed = time.perf_counter() - start
    return "\n".join(
        [
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


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5, help="seeds of 2-parameter truths")
    parser.add_argument("--seeds3", type=int, default=3, help="seeds of 3-parameter truths")
    parser.add_argument("--parameters", type=int, nargs="+", default=list(PARAMETER_COUNTS))
    parser.add_argument("--noise", type=float, nargs="+", default=list(NOISE_LEVELS))
    parser.add_argument("--no-extrap", action="store_true", help="leave Extra-P's advisor out")
    parser.add_argument(
        "--quick", action="store_true", help="2 parameters, 2 seeds, 5 %% noise, no application"
    )
    parser.add_argument("--no-app", action="store_true", help=f"leave the application ({APP}) out")
    parser.add_argument(
        "--app-only", action="store_true", help="the application alone, no synthetic truths"
    )
    parser.add_argument(
        "--app-seeds", type=int, default=5, help="orders of the application's repetitions"
    )
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.seeds3, args.parameters, args.noise = 2, 1, [2], [0.05]
        args.no_app = True
    if args.no_app and args.app_only:
        parser.error("--app-only and --no-app (or --quick) leave nothing to run")
    with_extrap = not args.no_extrap
    command = "$ python3 benchmarks/" + Path(__file__).name
    if argv is None:
        argv = sys.argv[1:]
    command += "".join(" " + shlex.quote(a) for a in argv)
    sections = [command]
    if not args.app_only:
        sections.append(synthetic_section(args, with_extrap))
    if not args.no_app:
        sections.append(application(args.app_seeds, with_extrap, args.jobs))
    text = "\n\n".join(sections)
    print(text)
    if args.output is not None:
        args.output.write_text(text + "\n")


if __name__ == "__main__":
    main()
