"""Noise study: classic vs effort-prior models of generated MPI benchmarks under artificial
noise (``noise-resilient-priors.txt`` V-B, at this machine's scale).

A fixed-seed population of generated programs (:mod:`perfcast.synth.programs`, 5 kernels
each, at least 50 kernels) is built with ``perfcast build --counters`` and measured with
perfcast's own campaign machinery (``perfcast.toml`` per program, SQLite store, resumable)
on a full grid of 5 rank counts x 5 problem sizes, 5 repetitions, plus the test point one
step beyond both ranges (paper V-A5: RE is measured there). Measurements are cached in
``benchmarks/.noise-study/`` (gitignored): an interrupted run resumes, a second run only
analyses.

The analysis (paper V-A6, V-B2, V-B3):

* **Noise.** The four patterns (uniform, truncated normal, scaled Poisson, scaled
  exponential; additive, :class:`perfcast.synth.Noise`) at 2, 5, 10, 50 and 75 % are
  injected into the measured time, many times with independent seeds; the counters stay
  as measured (they are deterministic). The main tables perturb every repetition; the
  paper perturbs "randomly selected" measurements without saying how many, so a last table
  perturbs a random half (:data:`SHARE`).
* **Time.** Computation kernels are modeled from their CPU time (``cpu_time``, measured
  with ``PERFCAST_CPU_TIME=1``), communication kernels from wall time (``time``). Ranks
  beyond the two cores are oversubscribed, so a kernel's wall time grows with ``p`` where
  its work does not (a rank gets ``2/p`` of a core); its CPU time does not. The header
  shows both per counted unit, and both metrics modeled for both kinds of kernel: CPU
  time is far better for computation. For communication neither is good here: a
  collective needs every rank to run, ranks beyond the cores wait for time slices, so
  the time per byte sent jumps by one to two orders of magnitude from p=2 to p=3 (header)
  and is scheduling, not transfer. Table I's laws (one rank per core) cannot express
  that; this part of the study needs a machine with a core per rank.
* **Models.** Both as shipped: classic is :class:`~perfcast.modeling.PMNFModeler` on time
  (its Huber centre of the repetitions); the effort prior is
  :class:`~perfcast.effort.EffortModeler`, whose priors are derived once from the counts
  and whose coefficients are fitted to each noisy copy, on each point's fastest
  repetition. Two more tables give both the same points: the time modeler's centre (as
  the paper fits both to the median) and the fastest repetition. The effort prior's
  policy for terms whose coefficient comes out negative is compared with the others
  (:data:`perfcast.effort.priors.NEGATIVE_TERM_POLICIES`, the paper's "whatever the sign"
  among them) in a table of its own.
* **The aggregation under heavy upward noise** (computation; the report's decomposition
  lines measure it). Noise that multiplies every repetition by ``1 + eta >= 1`` puts its
  mean factor ``F`` (1.375 at uniform +75 %) on every model, on top of the model's own
  signed error ``e0`` without injected noise: ``RE ~ F (1 + e0) - 1``, linear in ``e0``.
  At the centre, classic's larger errors (|e0| 9.6 %) lean low (-5.0 %), the effort
  prior's smaller ones (6.7 %) lean high (+2.1 %: short points carry more of the machine's
  own interference than long ones, +12.8 % against +6.3 % of the median over the fastest
  repetition, and fixed exponents cannot bend to it), so the effort prior loses at
  50-75 %. The fastest repetition removes most of ``F`` (1.125) and that lean; that is why
  the effort prior uses it. Scaled Poisson noise is
  almost a constant factor (1.5/1.75 on every repetition) that no aggregation removes:
  with both on the minimum, RE there rewards whichever approach under-predicts.
* **Metrics.** ED (Eq. 4) per parameter against the kernel's theoretical complexity (its
  generated loop nests for computation, its Table I law applied to its generated message
  for communication); RE (Eq. 5) at the test point against the measured time there.
  Means over kernels and injections, computation and communication apart.
* **Repetitions.** Models from every subset of 1..5 of the measured repetitions (no
  injected noise), with the measurement counts: classic ``k * 5^2`` time runs; effort
  prior one counting run per point plus ``k`` timing runs: ``5^2 + k * 5^2``, so
  ``2 * 5^2`` at one repetition against ``5^3`` (the paper's accounting).
* **Two builds.** Counts come from a build with counters (``train``/``test`` campaigns),
  time from the same program built without them (``train-light``/``test-light``), as the
  paper measures and as ``perfcast model --priors effort --effort-counts`` combines them:
  the counters' overhead stays out of every time. The header shows that overhead.
* **The virtual cluster** (``--backend smpi``, :data:`VIRTUAL`): the communication half at
  the paper's scale, p = 64..1024 and the test point 2048, one rank per simulated host of
  SimGrid SMPI (:func:`virtual_cluster`: HDR100 links to a non-blocking switch, Table I's
  collective algorithms, :data:`COLLECTIVE_ALGORITHMS`). The programs are
  communication-only, their buffers shared (:data:`SHARED_BUFFERS`), and one build gives
  counts and time (:data:`VIRTUAL_BUILD`): the counting/timing split exists for the
  counters' overhead, and SMPI builds have no counters. Every kernel starts from a barrier
  (:data:`SEPARATED_CALL`): without one the effort prior's RE was 26.3 % against classic's
  8.8 %, mostly allreduces timing the skew a binomial scatter or gather before them left
  (-57 to -84 %; alone, rab_rdb follows its law: 16.8 kB in 27/35/43 us at p = 64/256/1024),
  with them 11.3 % against 3.2 %. What is left is the metric: ``time`` is the rank mean,
  Table I the collective's completion time. A binomial gather's leaves leave after their
  own ``|x| beta``, so its rank mean grows like ``|x| log p``, not ``p |x|`` (the effort
  prior +20 to +50 % on four gathers); on ``time:max`` (the root) every gather is within
  1 % and the effort prior's RE is 6.1 % against classic's 7.3 %. The 2-6 kB MPI_Send is
  detached by SMPI (returns in nanoseconds, no ``alpha + B beta``): no law fits it.

Measurements are cached per program and campaign under a hash of the generated source,
its truth, the campaign specs and the runtime settings (and the platform, virtually): a
changed generator or metric set measures anew.

::

    python3 benchmarks/noise_study.py --quick      # 2 programs, 3 x 3 grid: a few minutes
    python3 benchmarks/noise_study.py --output benchmarks/results/noise_study.txt
    python3 benchmarks/noise_study.py --backend smpi --output \\
        benchmarks/results/noise_study_virtual.txt  # about 25 min here
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import re
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, cast

import numpy as np
import pandas as pd

from perfcast.appspec import load_spec
from perfcast.cli.measure import BACKENDS, make_backend
from perfcast.effort import EffortModeler
from perfcast.effort.laws import CommunicationLaw
from perfcast.effort.priors import DISAGREEMENT_WARNING, NEGATIVE_TERM_POLICIES
from perfcast.experiment import read_experiment
from perfcast.experiment.experiment import CALLPATH, METRIC, REPETITION, VALUE, Experiment
from perfcast.measure.campaign import measure
from perfcast.measure.local import available_cores
from perfcast.measure.store import OK, CampaignStore
from perfcast.modeling import PMNFModeler
from perfcast.modeling.pmnf import Model, Term
from perfcast.modeling.prior import Prior
from perfcast.modeling.space import DEFAULT_EXPONENTS
from perfcast.simulate.platform import PlatformSpec
from perfcast.synth import Noise, NoisePattern, exponent_deviation, next_point, relative_error
from perfcast.synth.programs import (
    KernelTruth,
    ProgramGenerator,
    read_truth,
    render_program,
    write_program,
)
from perfcast.synth.programs.truth import truth_json
from perfcast.workflows.model import fit_models

TIME = "time"
"""The modeled time of every kernel, whichever measured metric it is (see ``Study.metrics``)."""
WALL_TIME, CPU_TIME = "time", "cpu_time"
TIMES = (WALL_TIME, CPU_TIME)
SLOWEST_RANK = "time:max"
"""A call path's time on its slowest rank. Table I's laws give the time until a collective
completes, which is the slowest rank's (a binomial gather's root); the rank mean (``time``)
grows more slowly, since most ranks of such a tree leave after sending their own part
(measured on the virtual cluster: every gather +20 to +50 % off its law on ``time``, within
1 % on ``time:max``). The virtual study models communication on it."""
COUNTERS = ("basic_blocks", "mpi_bytes_sent", "mpi_bytes_received")
PARAMETERS = ("p", "n")
INTENSITIES = (0.02, 0.05, 0.10, 0.50, 0.75)
COMPUTATION, COMMUNICATION = "computation", "communication"
CLASSIC, EFFORT = "classic", "effort"
"""Both as shipped: the time modeler with its default centre of the repetitions (Huber,
anchored at the median), and the effort prior with its coefficients fitted to each point's
fastest repetition (:data:`perfcast.effort.priors.COEFFICIENT_AGGREGATION`)."""
MINIMUM = "min"
CLASSIC_MIN = f"classic, aggregation {MINIMUM}"
"""The classic modeler given each point's fastest repetition too, so that the effort prior
as shipped also meets a classic model of the same points."""
EFFORT_CENTRE = "effort, the time modeler's centre"
"""The effort prior fitted to the time modeler's centre of the repetitions, as the paper
fits both approaches to the median: the same points as :data:`CLASSIC`."""
SAME_POINTS = ((CLASSIC, EFFORT_CENTRE, "centre"), (CLASSIC_MIN, EFFORT, MINIMUM))
"""Pairs of approaches fitted to the same aggregated points, and what the points are."""
SHARE = 0.5
"""The share of measurements the second noise table perturbs: the paper injects noise into
"randomly selected" measurements without saying how many; the main table perturbs every
one (the harder case, which no aggregation escapes), this one half of them."""
DEFAULT_POLICY = EffortModeler().negative_terms
POLICIES = {policy: f"effort, negative terms: {policy}" for policy in NEGATIVE_TERM_POLICIES}
"""The approaches that fit the effort prior under another negative-term policy than the
default (which is :data:`EFFORT`, perfcast as shipped)."""
CACHE = Path(__file__).resolve().parent / ".noise-study"


@dataclass(frozen=True)
class Configuration:
    """What is generated and measured, and how much noise is injected."""

    programs: int = 10
    kernels: int = 5
    ranks: tuple[int, ...] = (2, 3, 4, 5, 6)
    sizes: tuple[int, ...] = (1000, 2000, 3000, 4000, 5000)
    repetitions: int = 5
    repeat: int = 5
    """Calls of each kernel per run (the program's REPEAT argument): ten or more
    milliseconds of kernel time per run, well above the timer's resolution."""
    injections: int = 30
    seed: int = 2026
    timeout: float = 120.0
    computation_metric: str = CPU_TIME
    """What computation kernels' time is: the rank's CPU time inside the kernel does not
    grow when ranks share a core, its wall time does (the header's two ratio lines)."""
    communication_metric: str = WALL_TIME
    """What communication kernels' time is (the report's metric table compares both)."""
    backend: str = "local"
    """Where the runs go: ``local`` (this machine), ``slurm`` (a cluster; the cache,
    ``--cache``, must be on a file system the compute nodes share) or ``smpi`` (a virtual
    cluster simulated by SimGrid, :data:`VIRTUAL`)."""
    slurm: str = ""
    """A ``[slurm]`` table (TOML, as in ``perfcast.toml``) written into every campaign, for
    ``backend="slurm"``: partition, account, ``sbatch_args``."""
    platform: Path | None = None
    """The SimGrid platform of ``backend="smpi"``; ``None``: :func:`virtual_cluster`,
    written into the cache."""

    @property
    def virtual(self) -> bool:
        """Runs on a simulated cluster: communication-only programs, one build (counts and
        time from the same runs), no CPU time (:data:`VIRTUAL`)."""
        return self.backend == SMPI

    @property
    def times(self) -> tuple[str, ...]:
        """The time metrics read and compared: on the virtual cluster the rank mean and the
        slowest rank (:data:`SLOWEST_RANK`; SMPI's CPU time is not this machine's)."""
        return (WALL_TIME, SLOWEST_RANK) if self.virtual else TIMES

    @property
    def metrics(self) -> dict[str, str]:
        return {COMPUTATION: self.computation_metric, COMMUNICATION: self.communication_metric}

    @property
    def test_point(self) -> dict[str, float]:
        return {"p": next_point(self.ranks), "n": next_point(self.sizes)}

    @property
    def points(self) -> int:
        return len(self.ranks) * len(self.sizes)


QUICK = Configuration(
    programs=2, ranks=(2, 3, 4), sizes=(1000, 2000, 3000), repetitions=3, injections=5
)

SMPI = "smpi"
VIRTUAL = Configuration(
    programs=2,
    kernels=10,
    ranks=(64, 128, 256, 512, 1024),
    sizes=(8000, 16000, 24000, 32000, 40000),
    repetitions=2,
    repeat=1,
    timeout=900.0,
    backend=SMPI,
    communication_metric=SLOWEST_RANK,
)
"""The communication half at the paper's scale (``--backend smpi``), one rank per
simulated host. Programs are communication-only (:func:`generator`): SMPI runs every
rank's compute for real, one burst after another on this machine, and the counts that
model computation (basic blocks) cannot be collected under SMPI at all. The size grid is
the paper's, the ranks half of it (its 2048 is the test point here: a simulated run costs
about p log p of this machine's time). Twenty kernels as in the 2-core table, ten per
program because a run's cost is mostly starting its p ranks. SimGrid's time is simulated:
a kernel called once per run (``repeat``) has no timer resolution to average out, and two
repetitions show how far a run differs from the next (the header's spread line)."""
QUICK_VIRTUAL = replace(
    VIRTUAL, programs=1, kernels=5, ranks=(64, 128, 256), sizes=(8000, 16000, 24000)
)


# -- the data: what the analysis needs, however it was measured ----------------------------


@dataclass(frozen=True)
class Kernel:
    """One analysed call path and the complexity theory gives it (coefficients 1)."""

    callpath: str
    kind: str
    truth: Model


@dataclass
class Study:
    """Training measurements (wall and CPU time, counters, every repetition), the measured
    times at the test point, the kernels with their truths, and which measured metric is
    each kind of kernel's time."""

    train: Experiment
    test_point: dict[str, float]
    test_values: dict[str, dict[str, float]]
    """Median at the test point, by metric and call path."""
    kernels: list[Kernel]
    beyond: pd.DataFrame
    """Measurements at the test point's rank count (long form, as ``train.data``)."""
    metrics: dict[str, str] = field(
        default_factory=lambda: {COMPUTATION: WALL_TIME, COMMUNICATION: WALL_TIME}
    )
    """Kernel kind -> the measured metric modeled as its time."""

    def metric_of(self, kernel: Kernel) -> str:
        return self.metrics[kernel.kind]

    @property
    def time(self) -> Experiment:
        """Every kernel's modeled time, under the one metric name :data:`TIME`."""
        data = self.train.data
        parts = []
        for metric in sorted(set(self.metrics.values())):
            paths = [k.callpath for k in self.kernels if self.metric_of(k) == metric]
            rows = data[(data[METRIC] == metric) & data[CALLPATH].isin(paths)]
            parts.append(rows.assign(**{METRIC: TIME}))
        return Experiment(self.train.parameters, pd.concat(parts, ignore_index=True))

    @property
    def test_time(self) -> dict[str, float]:
        """The measured time at the test point of every kernel, in its modeled metric."""
        return {k.callpath: self.test_values[self.metric_of(k)][k.callpath] for k in self.kernels}


def kernels_of(program: str, truths: dict[str, KernelTruth]) -> list[Kernel]:
    """The analysed call paths of one program: a kernel's own loops (computation) and its
    MPI call (communication), each with its theoretical complexity. Call paths are
    prefixed with the program's name so that programs can share one Experiment."""
    kernels = []
    for truth in truths.values():
        if truth.effort is not None:
            kernels.append(Kernel(f"{program}:{truth.callpath}", COMPUTATION, truth.effort))
        if truth.mpi_callpath is not None:
            law = CommunicationLaw.for_callpath(truth.mpi_callpath)
            assert law is not None, truth.mpi_callpath
            shapes = law.structure(truth.bytes, list(PARAMETERS))
            model = Model(truth.mpi_callpath, TIME, 0.0, tuple(Term(1.0, s) for s in shapes))
            kernels.append(Kernel(f"{program}:{truth.mpi_callpath}", COMMUNICATION, model))
    return kernels


def prefixed(experiment: Experiment, prefix: str) -> pd.DataFrame:
    data = experiment.data.copy()
    data[CALLPATH] = prefix + data[CALLPATH]
    return data


def stack(parameters: Sequence[str], frames: Sequence[pd.DataFrame]) -> Experiment:
    return Experiment(parameters, pd.concat(frames, ignore_index=True))


# -- the analysis ---------------------------------------------------------------------------


class Comparison:
    """Classic and effort-prior models of many variants of a study's time, batched: each
    variant's call paths get a prefix and all variants are fitted in one call per approach
    (the modelers batch across call paths). Priors come from the counts, once."""

    def __init__(self, study: Study, modeler: PMNFModeler | None = None, *, policies: bool = True):
        self.study = study
        time_modeler = modeler or PMNFModeler()
        self.classic = {
            CLASSIC: time_modeler,
            CLASSIC_MIN: time_modeler.with_params(aggregation=MINIMUM),
        }
        # perfcast as shipped, the same prior fitted to the classic modeler's points, and
        # (``policies``) the other treatments of effort terms whose time coefficient comes
        # out negative, the paper's "fit whatever the sign" among them
        self.effort = {
            EFFORT: EffortModeler(time_modeler),
            EFFORT_CENTRE: EffortModeler(time_modeler, aggregation=None),
        }
        if policies:
            for policy, approach in POLICIES.items():
                if policy != DEFAULT_POLICY:
                    self.effort[approach] = EffortModeler(time_modeler, negative_terms=policy)
        self.priors, self.counts, _ = self.effort[EFFORT].derive(study.train)
        self.without_prior = [k.callpath for k in study.kernels if k.callpath not in self.priors]

    def evaluate(
        self, variants: Sequence[Experiment], approaches: Sequence[str] | None = None
    ) -> pd.DataFrame:
        """One row per (variant, kernel, approach): ED per parameter and RE; every
        approach, or those named. A kernel without an effort prior gets the classic model
        in every effort approach, as :class:`EffortModeler` models it."""
        wanted = set(approaches) if approaches is not None else {*self.classic, *self.effort}
        prefixes = [f"v{index}#" for index in range(len(variants))]
        batched = stack(
            self.study.train.parameters,
            [prefixed(v, prefix) for v, prefix in zip(variants, prefixes, strict=True)],
        )
        needed = wanted | ({CLASSIC} if wanted & set(self.effort) else set())
        classic = {a: m.fit(batched) for a, m in self.classic.items() if a in needed}
        priors: dict[str, Prior] = {
            prefix + callpath: entry.prior
            for prefix in prefixes
            for callpath, entry in self.priors.items()
        }
        effort = {
            approach: {m.callpath: m for m in modeler.fit_coefficients(batched, priors)}
            for approach, modeler in self.effort.items()
            if approach in wanted
        }
        rows = []
        test_time = self.study.test_time
        for index, prefix in enumerate(prefixes):
            for kernel in self.study.kernels:
                key = prefix + kernel.callpath
                models = {
                    approach: fitted[(key, TIME)]
                    for approach, fitted in classic.items()
                    if approach in wanted
                }
                for approach, fitted in effort.items():
                    models[approach] = fitted.get(key, classic[CLASSIC][(key, TIME)])
                measured = test_time[kernel.callpath]
                for approach, model in models.items():
                    predicted = float(model.evaluate(self.study.test_point))
                    rows.append(
                        {
                            "variant": index,
                            "callpath": kernel.callpath,
                            "kind": kernel.kind,
                            "approach": approach,
                            **{
                                f"ed_{p}": float(exponent_deviation(model, kernel.truth, p))
                                for p in PARAMETERS
                            },
                            "re": float(relative_error(predicted, measured)),
                            "signed": (predicted - measured) / measured * 100.0,
                        }
                    )
        return pd.DataFrame(rows)

    def disagreements(self, time_data: Experiment) -> dict[str, tuple[int, int]]:
        """Per kind of kernel, how many of the measured (noise-free) time models under the
        effort prior get :class:`EffortModeler`'s flag "time and effort disagree: waiting
        time or noise": ``perfcast model --priors effort`` itself
        (:func:`~perfcast.workflows.model.fit_models`), on the time beside the counts."""
        counts = self.study.train.data
        counts = counts[counts[METRIC].isin(COUNTERS)]
        measured = stack(time_data.parameters, [time_data.data, counts])
        fitted = fit_models(measured, self.effort[EFFORT], ("effort",))
        (derived,) = fitted.fit.derived
        result: dict[str, tuple[int, int]] = {}
        for kernel in self.study.kernels:
            if (kernel.callpath, TIME) not in derived.priors:
                continue
            warnings = fitted.models.notes((kernel.callpath, TIME))
            flagged, total = result.get(kernel.kind, (0, 0))
            flag = any(DISAGREEMENT_WARNING in warning for warning in warnings)
            result[kernel.kind] = (flagged + flag, total + 1)
        return result


def noisy_variants(
    time_data: Experiment, noise: Noise, copies: int, rng: np.random.Generator
) -> list[Experiment]:
    return [noise.apply_to(time_data, rng) for _ in range(copies)]


def repetition_variants(time_data: Experiment, size: int) -> list[Experiment]:
    """Every subset of ``size`` of the measured repetitions."""
    measured = sorted(time_data.data[REPETITION].unique())
    variants = []
    for subset in itertools.combinations(measured, size):
        data = time_data.data[time_data.data[REPETITION].isin(subset)]
        variants.append(Experiment(time_data.parameters, data))
    return variants


@dataclass
class Results:
    noise: pd.DataFrame  # rows: setting (pattern, intensity) x kernel x approach x variant
    shared: pd.DataFrame  # the same with noise on a share of the measurements (:data:`SHARE`)
    repetitions: pd.DataFrame  # rows: k x kernel x approach x variant
    misfits: list[str]  # kernels whose prior's exponents differ from the truth's, and how
    without_prior: list[str]
    disagreements: dict[str, tuple[int, int]]  # kind -> (kernels flagged, kernels)


def misfits(comparison: Comparison) -> list[str]:
    """Kernels whose effort prior (from the measured counts) has other leading exponents
    than the theory: every effort-prior model of them inherits that deviation."""
    lines = []
    for kernel in comparison.study.kernels:
        entry = comparison.priors.get(kernel.callpath)
        if entry is None:
            continue
        structure = entry.prior.structure or ()
        prior = Model(kernel.callpath, TIME, 0.0, tuple(Term(1.0, s) for s in structure))
        deviation = {p: exponent_deviation(prior, kernel.truth, p) for p in PARAMETERS}
        if any(deviation.values()):
            shown = ", ".join(f"{p} {d}" for p, d in deviation.items() if d)
            lines.append(
                f"{kernel.callpath}: ED {shown}; theory {_shapes(kernel.truth)}, "
                f"counts {entry.effort.text(3)}"
            )
    return lines


def _shapes(model: Model) -> str:
    return " + ".join(" * ".join(f.text() for f in t.factors) for t in model.terms) or "1"


def analyse(
    study: Study, injections: int, seed: int, stream: IO[str] | None = sys.stderr
) -> Results:
    comparison = Comparison(study)
    rng = np.random.default_rng(seed)
    time_data = study.time
    settings: list[tuple[str, float]] = [("none", 0.0)]
    settings += [(str(p), i) for p in NoisePattern for i in INTENSITIES]
    tables: dict[float, list[pd.DataFrame]] = {1.0: [], SHARE: []}
    for share, parts in tables.items():
        # the share table compares perfcast as shipped only
        approaches = None if share == 1.0 else (CLASSIC, EFFORT)
        for pattern, intensity in settings:
            started = time.perf_counter()
            noise = Noise(pattern, intensity, share=share) if pattern != "none" else None
            variants = (
                [time_data] if noise is None else noisy_variants(time_data, noise, injections, rng)
            )
            frame = comparison.evaluate(variants, approaches)
            frame["pattern"], frame["intensity"] = pattern, intensity
            parts.append(frame)
            _say(
                stream,
                f"  {pattern:>11} {intensity:4.0%} on {share:.0%}: {len(variants)} variant(s) "
                f"modeled in {time.perf_counter() - started:.1f} s",
            )
    reps = []
    measured = len(time_data.data[REPETITION].unique())
    for size in range(1, measured + 1):
        frame = comparison.evaluate(repetition_variants(time_data, size))
        frame["repetitions"] = size
        reps.append(frame)
    return Results(
        pd.concat(tables[1.0], ignore_index=True),
        pd.concat(tables[SHARE], ignore_index=True),
        pd.concat(reps, ignore_index=True),
        misfits(comparison),
        comparison.without_prior,
        comparison.disagreements(time_data),
    )


def _say(stream: IO[str] | None, message: str) -> None:
    if stream is not None:
        print(message, file=stream, flush=True)


# -- the report -----------------------------------------------------------------------------

METRICS = (("ed_p", "ED p", "{:.3f}"), ("ed_n", "ED n", "{:.3f}"), ("re", "RE% mean", "{:.1f}"))


def summarise(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Means of ED and RE (and the median RE) per keys x kind x approach."""
    grouped = frame.groupby([*keys, "kind", "approach"], sort=False)
    table = grouped[["ed_p", "ed_n", "re"]].mean()
    table["re_median"] = grouped["re"].median()
    return pd.DataFrame(table.unstack(["kind", "approach"]))


def _cells(
    row: pd.Series, kinds: Sequence[str], approaches: tuple[str, str] = (CLASSIC, EFFORT)
) -> list[str]:
    cells = []
    for kind in kinds:
        for metric, _, fmt in (*METRICS, ("re_median", "", "{:.1f}")):
            for approach in approaches:
                value = row.get((metric, kind, approach), np.nan)
                cells.append(fmt.format(value) if np.isfinite(value) else "-")
    return cells


def render(study: Study, results: Results, config: Configuration, header: list[str]) -> str:
    kinds = [k for k in (COMPUTATION, COMMUNICATION) if any(x.kind == k for x in study.kernels)]
    counts = {k: sum(x.kind == k for x in study.kernels) for k in kinds}
    lines = [*header, ""]
    columns = ["ED p", "ED n", "RE% mean", "RE% med"]
    sub = " ".join(f"{c:>15}" for c in columns)
    group_width = len(sub)
    title = "".join(f" | {f'{k} ({counts[k]} kernels)':^{group_width}}" for k in kinds)
    label = f"{'noise':<18}"
    table_head = [label + title, " " * len(label) + "".join(f" | {sub}" for _ in kinds)]
    table_head.append("-" * len(table_head[-1]))
    noise = summarise(results.noise, ["pattern", "intensity"])
    tables = (
        (
            noise,
            (CLASSIC, EFFORT),
            "classic / effort prior, both as shipped (classic: the time modeler's centre of "
            "the repetitions; effort: each point's fastest repetition); noise on every "
            "measurement; mean over kernels and injections",
        ),
        (
            noise,
            (CLASSIC, EFFORT_CENTRE),
            "the same points for both, the time modeler's centre (the paper fits both to the "
            "median): classic / effort prior",
        ),
        (
            noise,
            (CLASSIC_MIN, EFFORT),
            f"the same points for both, aggregation {MINIMUM} (each point's fastest "
            "repetition): classic / effort prior",
        ),
        (
            summarise(results.shared, ["pattern", "intensity"]),
            (CLASSIC, EFFORT),
            f"noise on a random {SHARE:.0%} of the measurements (the paper's \"randomly "
            'selected" ones), both as shipped: classic / effort prior',
        ),
    )
    for summary, pair, caption in tables:
        lines += [caption, *table_head, *_setting_rows(summary, kinds, pair), ""]
    if COMPUTATION in kinds:
        lines += decomposition(results.noise, config.repetitions)
        lines.append(interference_by_duration(study))
        lines.append("")
    lines += policy_table(results.noise, kinds)
    lines.append("")
    # the effort prior's counting runs: one per point, but none where the timed runs count
    counting = 0 if config.virtual else config.points
    lines.append(
        "repetitions: models from every subset of k measured repetitions (no injected noise); "
        "runs C = classic's timing runs, runs E = effort's counting runs "
        + ("(none: the timed runs count) plus " if counting == 0 else "(one per point) plus ")
        + "its timing runs"
    )
    runs_title = f"{'k':>2} {'runs C':>7} {'runs E':>7}"
    lines.append(runs_title + title)
    lines.append(" " * len(runs_title) + "".join(f" | {sub}" for _ in kinds))
    lines.append("-" * len(lines[-1]))
    reps = summarise(results.repetitions, ["repetitions"])
    points = config.points
    for key, row in reps.iterrows():
        k = int(cast(int, key))
        prefix = f"{k:>2} {k * points:>7} {counting + k * points:>7}"
        lines.append(prefix + _group(_cells(row, kinds), len(kinds)))
    lines.append("")
    lines += targets(results, kinds, points, int(reps.index.max()), counting)
    flagged = ", ".join(
        f"{kind} {flags} of {total}" for kind, (flags, total) in results.disagreements.items()
    )
    lines.append(
        "waiting-time diagnosis (paper III-C, V-C), without injected noise: time models flagged "
        f'"{DISAGREEMENT_WARNING}" by EffortModeler: {flagged}'
    )
    if results.without_prior:
        lines.append(
            f"kernels without an effort prior (modeled classically): {results.without_prior}"
        )
    lines.append(
        f"effort priors whose exponents differ from the theory ({len(results.misfits)}; "
        "every effort-prior model of them carries this ED, whatever the noise):"
    )
    lines += [f"  {line}" for line in results.misfits] or ["  (none)"]
    return "\n".join(lines)


def _setting_rows(noise: pd.DataFrame, kinds: list[str], approaches: tuple[str, str]) -> list[str]:
    lines = []
    for key, row in noise.iterrows():
        pattern, intensity = cast(tuple[str, float], key)
        cells = _cells(row, kinds, approaches)
        setting = "none (measured)" if pattern == "none" else f"{pattern} +{intensity:.0%}"
        lines.append(f"{setting:<18}" + _group(cells, len(kinds)))
    return lines


MOST_LISTED = 4
"""Settings named per kind where a target is not met (the tables above have them all)."""

DECOMPOSED = ("uniform", 0.75)
"""The heavy-noise setting whose RE :func:`decomposition` takes apart."""


def decomposition(noise: pd.DataFrame, repetitions: int) -> list[str]:
    """What the aggregation does to computation under heavy upward noise: the noise
    multiplies every repetition by ``1 + eta >= 1``, so every model's prediction carries
    about the mean factor ``F`` of the aggregated repetitions on top of its own signed error
    ``e0`` without injected noise, and once ``F`` dominates, ``|F (1 + e0) - 1|`` is linear in
    ``e0``: symmetric errors cancel in the mean, a consistent over-prediction does not. At
    the centre ``F`` is about ``E[1 + eta]``; with aggregation min it is the mean of the
    smallest of ``repetitions`` factors. The spread (standard deviation) of one kernel's
    predictions over the injections is the coefficient variance the noise adds,
    extrapolated to the test point."""
    pattern, intensity = DECOMPOSED
    factors = 1.0 + Noise(pattern, intensity).perturbation(
        (100_000, repetitions), np.random.default_rng(0)
    )
    factor_of = {"centre": float(factors.mean()), MINIMUM: float(factors.min(axis=1).mean())}
    computation = noise[noise["kind"] == COMPUTATION]
    clean = computation[computation["pattern"] == "none"]
    heavy = computation[
        (computation["pattern"] == pattern) & (computation["intensity"] == intensity)
    ]
    lines = [
        f"the aggregation under heavy upward noise (computation, {pattern} +{intensity:.0%}): "
        "RE ~ |F (1 + e0) - 1|, F = the noise's mean factor on the aggregated repetitions, "
        "e0 = signed error without injected noise; spread = sd of a kernel's prediction over "
        "injections (% of measured)"
    ]
    for classic, effort, how in SAME_POINTS:
        factor = factor_of[how]
        cells = []
        for approach in (classic, effort):
            e0 = clean[clean["approach"] == approach].set_index("callpath")["signed"] / 100.0
            mine = heavy[heavy["approach"] == approach]
            expected = (factor * (1.0 + e0) - 1.0).abs().mean() * 100.0
            spread = mine.groupby("callpath")["signed"].std().mean() / 100.0
            cells.append(
                f"e0 {e0.mean():+.1%} (|e0| {e0.abs().mean():.1%}), RE from e0 {expected:.1f} "
                f"% measured {mine['re'].mean():.1f} %, spread {spread:.1%}"
            )
        label = f"{how}, F = {factor:.3f}"
        lines.append(f"  {label:<21} classic: {cells[0]}")
        lines.append(f"  {'':<21} effort:  {cells[1]}")
    return lines


def interference_by_duration(study: Study, groups: int = 5) -> str:
    """The machine's own interference on computation kernels (no injected noise): how far
    each point's median repetition lies above its fastest, by duration quintile. Larger at
    short points, it leans a fit of fixed exponents to the median towards over-prediction
    at the (longer) test point."""
    data = study.time.data
    computation = [k.callpath for k in study.kernels if k.kind == COMPUTATION]
    data = data[data[CALLPATH].isin(computation)]
    grouped = data.groupby([CALLPATH, *PARAMETERS])[VALUE]
    excess = grouped.median() / grouped.min() - 1.0
    quantile = pd.qcut(grouped.min(), groups, labels=False, duplicates="drop")
    means = excess.groupby(quantile).mean()
    return (
        "machine interference (computation, no injected noise): median over fastest "
        "repetition per point, by duration quintile (shortest first): "
        + ", ".join(f"+{v:.1%}" for v in means)
    )


def policy_table(noise: pd.DataFrame, kinds: list[str]) -> list[str]:
    """The effort prior under each policy for terms whose time coefficient comes out
    negative, per intensity (mean over patterns; the default is perfcast as shipped)."""
    approach_of = {
        policy: EFFORT if policy == DEFAULT_POLICY else POLICIES[policy]
        for policy in NEGATIVE_TERM_POLICIES
    }
    frame = noise[noise["approach"].isin(approach_of.values())]
    grouped = frame.groupby(["intensity", "approach", "kind"])
    table = grouped[["ed_p", "ed_n", "re"]].mean()
    table["re_median"] = grouped["re"].median()
    value = cast(dict[tuple[float, str, str, str], float], table.stack().to_dict())
    columns = "ED p   ED n  RE% mean  RE% med"
    lines = [
        "effort prior by policy for terms whose time coefficient comes out negative "
        "(drop-lower: keep each parameter's leading term, drop negative lower-order ones; "
        "drop: drop every negative one; keep: fit whatever the sign, as the paper), mean over "
        "patterns:",
        f"{'noise':>6} {'policy':<22}" + "".join(f" | {k + ': ' + columns:>47}" for k in kinds),
    ]
    for intensity in sorted(frame["intensity"].unique()):
        for policy, approach in approach_of.items():
            label = policy + (" (default)" if policy == DEFAULT_POLICY else "")
            cells = ""
            for kind in kinds:
                row = {c: value[(intensity, approach, kind, c)] for c in table.columns}
                cells += (
                    f" | {row['ed_p']:>21.3f} {row['ed_n']:>6.3f} {row['re']:>9.1f} "
                    f"{row['re_median']:>8.1f}"
                )
            lines.append(f"{intensity:>6.0%} {label:<22}" + cells)
    return lines


def _group(cells: list[str], kinds: int) -> str:
    per_kind = len(cells) // kinds
    out = ""
    for k in range(kinds):
        mine = cells[k * per_kind : (k + 1) * per_kind]
        pairs = [f"{mine[i]:>7}/{mine[i + 1]:<7}" for i in range(0, len(mine), 2)]
        out += " | " + " ".join(pairs)
    return out


def targets(results: Results, kinds: list[str], points: int, most: int, counting: int) -> list[str]:
    """The issue's three targets, each met or not, with the numbers behind it; ``counting``
    is the effort prior's runs for its counts (beside one timed run per point)."""
    noise = results.noise
    effort = noise[noise["approach"] == EFFORT]
    lines = ["targets:"]
    worst = effort[["ed_p", "ed_n"]].to_numpy().max()
    per_setting = effort.groupby(["pattern", "intensity"])[["ed_p", "ed_n"]].mean()
    stable = bool((per_setting.max() - per_setting.min()).max() == 0)
    wrong = effort[(effort["ed_p"] > 0) | (effort["ed_n"] > 0)]["callpath"].unique()
    lines.append(
        f"  ED = 0 for effort-prior models in every noise setting: "
        f"{'met' if worst == 0 else 'NOT met'} (largest ED {worst:.3f}; the same in every "
        f"setting: {'yes' if stable else 'no'}; kernels with ED > 0: {len(wrong)} of "
        f"{effort['callpath'].nunique()})"
    )
    means = noise.groupby(["pattern", "intensity", "kind", "approach"])["re"].mean().unstack()
    shared = results.shared.groupby(["pattern", "intensity", "kind", "approach"])["re"]
    for table, baseline, prior, how in (
        (means, CLASSIC, EFFORT, " (as shipped)"),
        (means, CLASSIC, EFFORT_CENTRE, " (both at the centre)"),
        (means, CLASSIC_MIN, EFFORT, f" (both with aggregation {MINIMUM})"),
        (shared.mean().unstack(), CLASSIC, EFFORT, f" (as shipped, noise on {SHARE:.0%})"),
    ):
        failing = table[~(table[prior] < table[baseline])]
        lines.append(
            f"  RE(effort) < RE(classic) at every noise level{how}: "
            f"{'met' if failing.empty else 'NOT met'} ({len(table) - len(failing)} of "
            f"{len(table)} (setting, kind) pairs)"
        )
        for kind in kinds:
            lost = failing[failing.index.get_level_values("kind") == kind]
            if lost.empty:
                lines.append(f"    {kind}: met in all {len(table) // len(kinds)} settings")
                continue
            settings = []
            for key, row in lost.iterrows():
                pattern, intensity, _ = cast(tuple[str, float, str], key)
                settings.append(
                    f"{pattern} +{intensity:.0%} ({row[prior]:.1f} vs {row[baseline]:.1f} %)"
                )
            shown = "; ".join(settings[:MOST_LISTED])
            more = len(settings) - MOST_LISTED
            lines.append(
                f"    {kind}, {len(lost)} of {len(table) // len(kinds)} settings not: {shown}"
                + (f"; and {more} more" if more > 0 else "")
            )
    reps = results.repetitions
    verdicts = []
    for kind in kinds:
        mine = reps[reps["kind"] == kind]
        one = mine[(mine["approach"] == EFFORT) & (mine["repetitions"] == 1)]
        full = mine[(mine["approach"] == CLASSIC) & (mine["repetitions"] == most)]
        ok = (
            one["re"].mean() <= full["re"].mean()
            and one[["ed_p", "ed_n"]].mean().sum() <= full[["ed_p", "ed_n"]].mean().sum()
        )
        verdicts.append(ok)
        lines.append(
            f"    {kind}: effort with 1 repetition RE {one['re'].mean():.1f} %, ED "
            f"{one['ed_p'].mean():.3f}/{one['ed_n'].mean():.3f}; classic with {most} RE "
            f"{full['re'].mean():.1f} %, ED {full['ed_p'].mean():.3f}/{full['ed_n'].mean():.3f}"
        )
    lines.insert(
        len(lines) - len(kinds),
        f"  one repetition enough ({counting + points} measurements instead of "
        f"{most * points}): "
        f"{'met' if all(verdicts) else 'NOT met'}",
    )
    return lines


# -- generating and measuring ---------------------------------------------------------------

MESSAGE_EXPONENTS = tuple(e for e in DEFAULT_EXPONENTS if e <= 1)
"""The virtual study's exponent set for messages (I up to 1; J as always): over its rank
range (64 to 2048, 32x) a message drawn from all of I shrinks up to ~10^4-fold from the
test point to the smallest point, so messages sized for the large points round to one
double at the small ones and the recorded bytes stop following the truth; up to 1, every
message keeps ~30 or more doubles at (64, 8000) and at most ~60,000 at the test point."""

VIRTUAL_MESSAGES = (2.0**8, 2.0**13)
"""Doubles per message at the largest training point in the virtual study (the 2-core one:
2^10-2^15): at most ~15,000 at the test point, so the p x message buffers stay within
SimGrid's shared mappings, and 7 or more at (64, 8000)."""

COLLECTIVE_ALGORITHMS = (
    ("smpi/allgather", "rdb"),
    ("smpi/bcast", "scatter_rdb_allgather"),
    ("smpi/allreduce", "rab_rdb"),
    ("smpi/reduce", "rab"),
    ("smpi/gather", "ompi_binomial"),
    ("smpi/scatter", "ompi_binomial"),
    ("smpi/barrier", "ompi_recursivedoubling"),
)
"""The collective algorithms of the virtual cluster: those whose costs Table I states
(:mod:`perfcast.effort.laws`): recursive doubling for allgather and barrier
(``log2(p) alpha + (p-1)/p B beta``, ``log2(p) alpha``), binomial trees for gather and
scatter, scatter + allgather for bcast (``log2(p) alpha + B beta``), Rabenseifner's
reduce-scatter + allgather/gather for allreduce/reduce (``log2(p) alpha + (beta + gamma)
B``). SMPI's default selector runs naive algorithms (a rank sends to every other: p^2
messages, no Table I law, and minutes per run at p = 2048)."""

SHARED_BUFFERS_BLOCK = 1 << 26
"""``smpi/shared-malloc-blocksize``: the shared buffers map blocks of this size (64 MiB);
SimGrid's default 1 MiB maps a p x message buffer in so many pieces per rank that p = 1024
already exceeds the kernel's limit on mappings (``vm.max_map_count``, 65530)."""

FILLED_BUFFERS = """\
    std::vector<double> send(capacity * ranks, 1.0), recv(capacity * ranks, 0.0);
    frame.send = send.data();
    frame.recv = recv.data();
"""
SHARED_BUFFERS = """\
    /* noise_study.py, SimGrid SMPI: one physical block behind every rank's buffers */
    double* send = static_cast<double*>(SMPI_SHARED_MALLOC(capacity * ranks * sizeof(double)));
    double* recv = static_cast<double*>(SMPI_SHARED_MALLOC(capacity * ranks * sizeof(double)));
    frame.send = send;
    frame.recv = recv;
"""
"""The generated program's message buffers on the virtual cluster: SMPI_SHARED_MALLOC
memory, never filled, instead of two filled vectors of ``p x`` the largest message per
rank. Filled, a run at p = 2048 writes ``2 p^2`` messages' worth of memory (terabytes for
the larger messages) before its first call; shared, SMPI still times every transfer by its
size and skips the copy. The data become garbage, which communication-only kernels never
read (only the checksum does)."""


KERNEL_CALL = re.compile(r"^( {8})(kernel_\w+\(&frame\);|\{  /\* the matching side)", re.M)
"""A kernel's call in the generated program's loop (its statements' indentation), or the
block that posts a point-to-point kernel's partner side first."""
SEPARATED_CALL = r"\1MPI_Barrier(MPI_COMM_WORLD);  /* noise_study.py: no skew carried in */\n\1\2"
"""Every kernel starts from a barrier on the virtual cluster. Without one a collective's
rank-mean time is mostly waiting for the ranks the previous kernel released last: the
binomial scatter's root leaves after ``p |x| beta``, the other ranks on average after half
of it, so the allreduce after it (16.8 kB, 43 us alone at p = 1024) measured 2.88 ms, all
but 1.5 % of it waiting, and grew like the scatter (``p n^(4/5)``), which no Table I law of
an allreduce has. The barrier is a call path of its own and is not analysed."""


def virtual_source(source: str) -> str:
    """The generated program with :data:`SHARED_BUFFERS` (:func:`render_program`'s buffers
    replaced; refused if the generator changed them) and a barrier before every kernel
    (:data:`SEPARATED_CALL`)."""
    if source.count(FILLED_BUFFERS) != 1:
        raise SystemExit(
            "noise_study.py: the generated program's message buffers changed; update "
            "FILLED_BUFFERS for the virtual study"
        )
    shared = source.replace(FILLED_BUFFERS, SHARED_BUFFERS)
    separated, calls = KERNEL_CALL.subn(SEPARATED_CALL, shared)
    if not calls:
        raise SystemExit(
            "noise_study.py: no kernel call found in the generated program's loop; update "
            "KERNEL_CALL for the virtual study"
        )
    return separated


BANDWIDTH, LATENCY = 1.25e10, 1e-6
"""The virtual cluster's links: InfiniBand HDR100 (100 Gbit/s, about 1 us), as both of the
paper's systems."""
SPEED = 1e12
"""flop/s of a simulated core: 1000x this machine (``smpi/host-speed`` is 1 Gf), so that
what SMPI times for real, each rank's compute between MPI calls (a kernel's message-size
arithmetic, the frame's loop), is charged at a thousandth of its length. At 1 Gf it is
charged as measured on this shared 2-core machine, where another process's time slice
turns a microsecond burst into milliseconds: two repetitions of the same run differed by a
median 4 % and up to 148 % per kernel and point (benchmarks/results/noise_study_virtual.txt
was first measured so), which is this machine's load, not the simulated cluster's noise."""


def write_platform(platform: PlatformSpec, cache: Path) -> Path:
    """The platform's file in the cache, named by its content (a changed cluster is another
    file, so the programs measured on it get another hash)."""
    text = platform.to_xml()
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    path = cache / f"{platform.name}-{digest}.xml"
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return path.resolve()


def virtual_cluster(config: Configuration) -> PlatformSpec:
    """One single-core node per rank up to the test point's rank count, each with its
    HDR100 link to a non-blocking switch (backbone = every link at once), the paper's
    "1:1 non-blocking" network; a flat SimGrid cluster is exactly that, a fat tree would add
    oversubscribed uplinks the paper's systems do not have. The collective algorithms and
    the shared buffers' block size travel in the file."""
    nodes = int(config.test_point["p"])
    return PlatformSpec(
        name="noise-study-cluster",
        nodes=nodes,
        speed=SPEED,
        bandwidth=BANDWIDTH,
        latency=LATENCY,
        backbone_bandwidth=nodes * BANDWIDTH,
        config=(
            *COLLECTIVE_ALGORITHMS,
            ("smpi/shared-malloc-blocksize", str(SHARED_BUFFERS_BLOCK)),
        ),
        origin="benchmarks/noise_study.py",
    )


def generator(config: Configuration) -> ProgramGenerator:
    """The programs' generator, loops sized for the grid: budgets at its largest point,
    floors at its smallest. The virtual study's programs are communication-only, their
    messages drawn from :data:`MESSAGE_EXPONENTS`."""
    sized = ProgramGenerator(
        parameters=PARAMETERS,
        reference=(float(max(config.ranks)), float(max(config.sizes))),
        smallest=(float(min(config.ranks)), float(min(config.sizes))),
    )
    if not config.virtual:
        return sized
    return replace(
        sized,
        communication_share=1.0,
        computation_after_communication=0.0,
        exponents=MESSAGE_EXPONENTS,
        message_elements=VIRTUAL_MESSAGES,
    )


SPEC = """\
# written by benchmarks/noise_study.py{purpose}
[app]
name = "{app}"
store = "{store}"

[build]
sources = {sources}
compiler = "mpicxx"
flags = ["-O2"]
output = "{app}"{counters}

[run]
command = "./{app} {{n}} {repeat}"
repetitions = {repetitions}
timeout = {timeout}

[parameters]
p = {ranks}
n = {sizes}

[metrics]
collect = {collect}
{slurm}"""
"""A campaign of one generated program, counting or timing (:data:`BUILDS`)."""
BUILDS = {
    "counting": {
        "purpose": "",
        "suffix": "",
        "counters": "\ncounters = true",
        "collect": '["time", "cpu_time", "basic_blocks", "mpi_bytes_sent", "mpi_bytes_received"]',
    },
    "timing": {
        "purpose": ": time from a build without counters",
        "suffix": "-light",
        "counters": "",
        "collect": '["time", "cpu_time"]',
    },
}
"""Counts come from a build with basic-block counters; time from the same program, grid,
repetitions and runtime settings built without them, whose overhead (3.3-3.5x,
``benchmarks/results/instrumentation_overhead.txt``) would otherwise be in every time. As
the paper measures: effort once, time with the light instrumentation."""
VIRTUAL_BUILD = {
    "purpose": ": counts and time from one SimGrid SMPI build",
    "suffix": "",
    "counters": "",
    "collect": '["time", "mpi_bytes_sent", "mpi_bytes_received"]',
}
"""The virtual study's one campaign per store: ``perfcast build --smpi`` refuses basic-block
counters, and without them nothing in the build changes the time (the MPI wrapper that
counts bytes is in the light build too), so each run gives both counts and time and the
effort prior costs no extra run per point."""
COUNTING, TIMING = ("train", "test"), ("train-light", "test-light")
"""Campaign file stems of a program: counts come from the first, time from the second (in
the virtual study both from the first)."""
RUNTIME_SETTINGS = {"PERFCAST_CPU_TIME": "1"}
"""The measurement runtime's settings for every run (CPU time next to wall time)."""


def runtime_settings(config: Configuration) -> dict[str, str]:
    """:data:`RUNTIME_SETTINGS`, but none on the virtual cluster: a rank's CPU time there
    is this machine's, spent simulating, not the simulated host's."""
    return {} if config.virtual else RUNTIME_SETTINGS


def stems(config: Configuration) -> tuple[str, ...]:
    """The campaigns of each program (:data:`COUNTING`, and :data:`TIMING` but for the
    virtual study, whose one build gives both)."""
    return COUNTING if config.virtual else (*COUNTING, *TIMING)


def _values(values: Sequence[float]) -> str:
    return "[" + ", ".join(f"{v:g}" for v in values) + "]"


def generate(config: Configuration, cache: Path) -> list[Path]:
    """The programs' directories, one per program *and* what is measured of it: the name
    holds a hash of the generated source, its truth, the campaign specs and the runtime's
    settings, so measurements of other programs (an older generator) or other settings are
    never reused, and are kept beside the new ones."""
    rng = np.random.default_rng(config.seed)
    programs = generator(config)
    builds = {"virtual": VIRTUAL_BUILD} if config.virtual else BUILDS
    directories = []
    for index in range(config.programs):
        name = f"bench{index:02d}"
        spec = programs.random_program(name, config.kernels, rng)
        sources = [f"{name}.cpp"]
        campaigns: dict[str, str] = {}
        timing: dict[str, str] = {}
        for store, ranks, sizes in (
            ("train.sqlite", config.ranks, config.sizes),
            # A campaign must vary a parameter: the test point's line also holds the last
            # training size (a few extra runs at the test point's rank count).
            ("test.sqlite", [config.test_point["p"]], [config.sizes[-1], config.test_point["n"]]),
        ):
            values = {
                "name": name,
                "repeat": config.repeat,
                "repetitions": config.repetitions,
                "timeout": config.timeout,
                "ranks": _values(ranks),
                "sizes": _values(sizes),
                "slurm": config.slurm,
                "sources": json.dumps(sources),
            }
            stem = store.removesuffix(".sqlite")
            for build, target in zip(builds, (campaigns, timing), strict=False):
                settings = builds[build]
                suffix = settings["suffix"]
                target[f"{stem}{suffix}.toml"] = SPEC.format(
                    store=f"{stem}{suffix}.sqlite",
                    app=f"{name}{suffix}",
                    **{k: v for k, v in settings.items() if k != "suffix"},
                    **values,
                )
        # The timing campaigns follow from the same values, so the counting ones identify
        # what is measured (and caches measured before they existed stay valid).
        source = render_program(spec)
        if config.virtual:
            source = virtual_source(source)
        identity = [source, json.dumps(truth_json(spec), sort_keys=True)]
        identity += [campaigns[k] for k in sorted(campaigns)]
        identity += [f"{k}={v}" for k, v in sorted(runtime_settings(config).items())]
        if config.virtual:
            assert config.platform is not None
            identity.append(config.platform.read_text())
        digest = hashlib.sha256("\0".join(identity).encode()).hexdigest()[:12]
        directory = cache / f"{name}-{digest}"
        if not (directory / f"{name}.truth.json").exists():
            write_program(spec, directory)
            (directory / f"{name}.cpp").write_text(source)
        for file, text in {**campaigns, **timing}.items():
            (directory / file).write_text(text)
        directories.append(directory)
    return directories


def measure_all(
    directories: list[Path], config: Configuration, stream: IO[str] | None = sys.stderr
) -> float:
    """Measure what is missing with the configuration's backend (as ``perfcast measure
    --backend``, with ``--platform`` for ``smpi``); the seconds this took."""
    started = time.perf_counter()
    settings = runtime_settings(config)
    previous = {name: os.environ.get(name) for name in RUNTIME_SETTINGS}
    for name in RUNTIME_SETTINGS:  # the backend forwards them to every rank
        os.environ.pop(name, None)
    os.environ.update(settings)
    try:
        _measure_each(directories, config, stream)
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return time.perf_counter() - started


def _measure_each(directories: list[Path], config: Configuration, stream: IO[str] | None) -> None:
    for directory in directories:
        for campaign in stems(config):
            spec = load_spec(directory / f"{campaign}.toml")
            built = (directory / spec.name).exists()
            _say(stream, f"{directory.name} {campaign}:")
            runner = make_backend(config.backend, spec, spec.store, platform=config.platform)
            result = measure(spec, runner, resume=True, build=not built, stream=stream)
            if result.failed:
                print(result.summary(), file=sys.stderr)
                raise SystemExit(f"{directory.name}: {len(result.failed)} runs failed")


def stored_seconds(directories: list[Path], config: Configuration) -> tuple[int, float]:
    """Runs in the stores and their summed wall time (every run, however many sessions)."""
    runs, seconds = 0, 0.0
    for directory in directories:
        for campaign in stems(config):
            with CampaignStore.open(directory / f"{campaign}.sqlite") as opened:
                stored = opened.runs(OK)
            runs += len(stored)
            seconds += sum(run.seconds or 0.0 for run in stored)
    return runs, seconds


def load(directories: list[Path], config: Configuration) -> Study:
    """The measured study: every program's kernels in one Experiment."""
    frames: list[pd.DataFrame] = []
    beyond: list[pd.DataFrame] = []
    kernels: list[Kernel] = []
    test_values: dict[str, dict[str, float]] = {metric: {} for metric in config.times}
    for directory in directories:
        name = directory.name.split("-")[0]
        truths = read_truth(directory / f"{name}.truth.json")
        mine = kernels_of(name, truths)
        kernels += mine
        wanted = {k.callpath.split(":", 1)[1] for k in mine}
        frames.append(_measured(directory, "train", wanted, name, config))
        test = _measured(directory, "test", wanted, name, config)
        test["p"] = config.test_point["p"]  # fixed in the test campaign, so not a column
        beyond.append(test[test["n"] == config.sizes[-1]])
        at_point = test[test["n"] == config.test_point["n"]]
        for (metric, callpath), values in at_point.groupby([METRIC, CALLPATH])[VALUE]:
            if metric in test_values:
                test_values[str(metric)][str(callpath)] = float(values.median())
    train = stack(list(PARAMETERS), frames)
    return Study(train, config.test_point, test_values, kernels, pd.concat(beyond), config.metrics)


def _measured(
    directory: Path, campaign: str, callpaths: set[str], program: str, config: Configuration
) -> pd.DataFrame:
    """The counts of ``callpaths`` from the counting campaign and their times from the
    timing one, or both from the one campaign of the virtual study (long form, call paths
    prefixed with the program's name)."""
    parts = []
    sources = (
        ((campaign, (*COUNTERS, *config.times)),)
        if config.virtual
        else ((campaign, COUNTERS), (f"{campaign}-light", TIMES))
    )
    for stem, metrics in sources:
        data = read_experiment(directory / f"{stem}.sqlite").data
        parts.append(data[data[CALLPATH].isin(callpaths) & data[METRIC].isin(metrics)])
    data = pd.concat(parts, ignore_index=True)
    return data.assign(**{CALLPATH: program + ":" + data[CALLPATH]})


def counter_overhead(directories: list[Path], study: Study) -> str:
    """The counters' overhead the timing campaigns keep out: each kernel's median time in
    the counting build over its median time in the light build, at every training point
    (median over points and kernels), per kind of kernel and time metric."""
    ratios: dict[tuple[str, str], list[float]] = {}
    kind_of = {k.callpath: k.kind for k in study.kernels}
    for directory in directories:
        name = directory.name.split("-")[0]
        both = []
        for stem in ("train", "train-light"):
            data = read_experiment(directory / f"{stem}.sqlite").aggregate("median")
            data = data[data[METRIC].isin(TIMES)]
            both.append(data.set_index([CALLPATH, METRIC, *PARAMETERS])[VALUE])
        ratio = (both[0] / both[1]).dropna()
        for key, value in ratio.items():
            callpath, metric = cast(tuple[str, str], key)[:2]
            kind = kind_of.get(f"{name}:{callpath}")
            if kind is not None:
                ratios.setdefault((kind, str(metric)), []).append(float(value))
    return ", ".join(
        f"{kind} {metric} x{np.median(values):.2f}"
        for (kind, metric), values in sorted(ratios.items())
    )


def oversubscription(study: Study, config: Configuration, metric: str, kind: str) -> str:
    """How much ``metric`` per counted unit (basic block for computation, byte sent for
    communication) grows with p on this machine at the largest size (median over the kind's
    kernels; the last value is the test point's rank count): 1.0 everywhere would be a core
    per rank and a transfer time that follows the bytes."""
    measured = pd.concat([study.train.data, study.beyond], ignore_index=True)
    measured = measured[measured["n"] == config.sizes[-1]]
    data = Experiment(list(PARAMETERS), measured).aggregate("median")
    unit = "basic_blocks" if kind == COMPUTATION else "mpi_bytes_sent"
    time = data[data[METRIC] == metric].set_index([CALLPATH, *PARAMETERS])[VALUE]
    counted = data[data[METRIC] == unit].set_index([CALLPATH, *PARAMETERS])[VALUE]
    mine = [k.callpath for k in study.kernels if k.kind == kind]
    ratio = (time / counted[counted > 0]).dropna()
    ratio = ratio[ratio.index.get_level_values(CALLPATH).isin(mine)]
    if ratio.empty:
        return "-"
    per_p = ratio.groupby([CALLPATH, "p"]).median().unstack("p")
    relative = per_p.div(per_p[min(config.ranks)], axis=0).median()
    return ", ".join(f"p={p:g}: {v:.2f}" for p, v in relative.items())


def metric_choice(study: Study, times: tuple[str, ...] = TIMES) -> list[str]:
    """Each kind of kernel modeled from wall time and from CPU time, on the measured data
    (no injected noise): the numbers behind ``Configuration.metrics``."""
    kinds = [k for k in (COMPUTATION, COMMUNICATION) if any(x.kind == k for x in study.kernels)]
    lines = [
        "time metric, on the measured data without injected noise (classic / effort): "
        "ED p, ED n, RE% mean, RE% median"
    ]
    for metric in times:
        variant = replace(study, metrics=dict.fromkeys(kinds, metric))
        frame = Comparison(variant, policies=False).evaluate([variant.time])
        table = frame.groupby(["kind", "approach"])
        summary = table[["ed_p", "ed_n", "re"]].mean()
        summary["re_median"] = table["re"].median()
        value = cast(dict[tuple[str, str, str], float], summary.stack().to_dict())
        cells = []
        for kind in kinds:
            pairs = " ".join(
                f"{value[(kind, CLASSIC, column)]:{fmt}}/{value[(kind, EFFORT, column)]:{fmt}}"
                for column, fmt in (
                    ("ed_p", ".2f"),
                    ("ed_n", ".2f"),
                    ("re", ".1f"),
                    ("re_median", ".1f"),
                )
            )
            cells.append(f"{kind} {pairs}")
        lines.append(f"  {metric:<9} " + " | ".join(cells))
    chosen = ", ".join(f"{kind}: {metric}" for kind, metric in study.metrics.items())
    lines.append(f"  modeled below: {chosen}")
    return lines


def machine_header(directories: list[Path], study: Study, config: Configuration) -> list[str]:
    """What measuring on this machine does to time: the counters' overhead the light build
    keeps out, oversubscription, and which time metric each kind of kernel is modeled on."""
    return [
        "time in the counting build over time in the light one (the overhead kept out): "
        + counter_overhead(directories, study),
        f"this machine: {available_cores()} cores; per counted block (comp) or byte sent "
        f"(comm) relative to p={min(config.ranks)} at n={config.sizes[-1]} (oversubscription):",
        *(
            f"  {kind[:4]} {m:<9} {oversubscription(study, config, m, kind)}"
            for kind in (COMPUTATION, COMMUNICATION)
            for m in TIMES
        ),
        *metric_choice(study),
    ]


def virtual_header(directories: list[Path], study: Study, config: Configuration) -> list[str]:
    """What the virtual cluster is, what its runs cost here, and how far one repetition
    differs from the next."""
    assert config.platform is not None
    text = config.platform.read_text()
    described = re.search(r"<!-- (.*?) -->", text)
    settings = re.findall(r'<prop id="(smpi/[^"]+)" value="([^"]+)"/>', text)
    return [
        f"virtual cluster (SimGrid SMPI, rank i on host i, one core each): {config.platform.name}"
        + (f": {described[1]}" if described else ""),
        "  SimGrid settings in the platform: "
        + (", ".join(f"{key}={value}" for key, value in settings) or "none (SMPI's defaults)"),
        "  programs: communication only (one MPI call per kernel, no loops), messages of "
        f"{VIRTUAL_MESSAGES[0]:g}-{VIRTUAL_MESSAGES[1]:g} doubles at p={max(config.ranks)}, "
        f"n={max(config.sizes)}, exponents I <= {max(MESSAGE_EXPONENTS)} "
        "(MESSAGE_EXPONENTS), buffers SMPI_SHARED_MALLOC (SHARED_BUFFERS), a barrier "
        "before every kernel (SEPARATED_CALL: no skew of the kernel before timed as waiting)",
        "  one build: counts and time from the same runs (no basic-block counters under "
        "SMPI, so no counter overhead to keep out of the time and no extra run per point)",
        f"  time per byte sent relative to p={min(config.ranks)} at n={config.sizes[-1]} "
        "(median over kernels; Table I's byte terms alone would keep it near 1): "
        + oversubscription(study, config, WALL_TIME, COMMUNICATION),
        "  " + repetition_spread(study),
        "  this machine's seconds per simulated run, median by p: " + run_cost(directories, config),
        *metric_choice(study, config.times),
    ]


def repetition_spread(study: Study) -> str:
    """How much a repeated run differs: per kernel and point, (max - min) / median of the
    repetitions' time, without injected noise."""
    data = study.time.data
    grouped = data.groupby([CALLPATH, *PARAMETERS])[VALUE]
    spread = ((grouped.max() - grouped.min()) / grouped.median()).dropna()
    if spread.empty or grouped.size().max() < 2:
        return "spread between repetitions: one repetition measured"
    return (
        f"spread between repetitions ((max - min) / median per kernel and point, "
        f"{len(spread)} of them): median {spread.median():.2%}, 95th percentile "
        f"{spread.quantile(0.95):.2%}, largest {spread.max():.2%}; identical at "
        f"{(spread == 0).mean():.0%} of them"
    )


def run_cost(directories: list[Path], config: Configuration) -> str:
    """Median wall seconds of a stored run by rank count: what a simulated run costs on
    this machine (SimGrid runs all ranks in one process)."""
    seconds: dict[int, list[float]] = {}
    for directory in directories:
        for campaign in stems(config):
            with CampaignStore.open(directory / f"{campaign}.sqlite") as opened:
                for run in opened.runs(OK):
                    if run.seconds is not None:
                        seconds.setdefault(int(run.point["p"]), []).append(run.seconds)
    return ", ".join(f"p={p}: {np.median(values):.1f}" for p, values in sorted(seconds.items()))


def _integers(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected integers like 2,3,4,5,6, got {text!r}"
        ) from None
    if len(values) < 3 or len(set(values)) != len(values) or list(values) != sorted(values):
        raise argparse.ArgumentTypeError(f"expected at least 3 increasing values, got {text!r}")
    return values


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _slurm_table(path: Path) -> str:
    """The ``[slurm]`` table of ``path`` as TOML text; checked when the campaigns load."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SystemExit(f"{path}: {exc.strerror}; give a TOML file with a [slurm] table") from None
    if "[slurm]" not in text:
        raise SystemExit(f'{path}: no [slurm] table; write e.g. [slurm] partition = "batch"')
    return "\n" + text.strip() + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 programs, 3 x 3 grid")
    parser.add_argument("--injections", type=int, help="noise injections per setting")
    parser.add_argument("--cache", type=Path, help=f"measurement cache (default {CACHE})")
    parser.add_argument("--output", type=Path, help="also write the report to this file")
    grid = parser.add_argument_group("where and at which scale (default: this machine's)")
    grid.add_argument("--programs", type=_positive, help="generated programs (default 10)")
    grid.add_argument("--kernels", type=_positive, help="kernels per program (default 5)")
    grid.add_argument("--repetitions", type=_positive, help="runs per point (default 5)")
    grid.add_argument("--seed", type=int, help="seed of the generated programs (default 2026)")
    grid.add_argument("--ranks", type=_integers, help="5 rank counts, e.g. 128,256,512,1024,2048")
    grid.add_argument("--sizes", type=_integers, help="5 sizes, e.g. 8000,16000,24000,32000,40000")
    grid.add_argument(
        "--backend",
        choices=BACKENDS,
        help="where runs go (default local); smpi: the communication half on a simulated "
        "cluster, p in 64..1024 (with --quick 64..256), see VIRTUAL",
    )
    grid.add_argument(
        "--platform",
        type=Path,
        help="with --backend smpi: a SimGrid platform of its own (default: the study's virtual "
        "cluster, written into the cache)",
    )
    grid.add_argument(
        "--slurm",
        type=Path,
        help="TOML file with a [slurm] table (partition, account, sbatch_args) for --backend slurm",
    )
    args = parser.parse_args(argv)
    if args.platform is not None and args.backend != SMPI:
        parser.error("--platform describes the virtual cluster of --backend smpi")
    if args.backend == SMPI:
        config = QUICK_VIRTUAL if args.quick else VIRTUAL
    else:
        config = QUICK if args.quick else Configuration()
    chosen = {
        "injections": args.injections,
        "programs": args.programs,
        "kernels": args.kernels,
        "repetitions": args.repetitions,
        "seed": args.seed,
        "ranks": args.ranks,
        "sizes": args.sizes,
        "backend": args.backend,
        "slurm": _slurm_table(args.slurm) if args.slurm else None,
        "platform": args.platform.resolve() if args.platform else None,
    }
    config = replace(config, **{k: v for k, v in chosen.items() if v is not None})
    cache = args.cache or (CACHE.with_name(CACHE.name + "-quick") if args.quick else CACHE)
    if config.virtual and config.platform is None:
        config = replace(config, platform=write_platform(virtual_cluster(config), cache))
    directories = generate(config, cache)
    print(f"measuring into {cache} (resumes; cached runs are not repeated)", file=sys.stderr)
    now = measure_all(directories, config)
    runs, seconds = stored_seconds(directories, config)
    study = load(directories, config)
    started = time.perf_counter()
    results = analyse(study, config.injections, config.seed)
    analysis = time.perf_counter() - started
    arguments = sys.argv[1:] if argv is None else list(argv)
    command = shlex.join(["python3", "benchmarks/noise_study.py", *arguments])
    header = [
        f"$ {command}",
        "",
        f"{len(directories)} generated programs (seed {config.seed}) x {config.kernels} kernels: "
        f"{sum(k.kind == COMPUTATION for k in study.kernels)} computation and "
        f"{sum(k.kind == COMMUNICATION for k in study.kernels)} communication call paths",
        f"p in {list(config.ranks)}, n in {list(config.sizes)}, {config.repetitions} repetitions, "
        f"each kernel called {config.repeat} times per run; test point {config.test_point}",
        f"measurement: {runs} runs, {seconds / 60:.1f} min of run time in the stores "
        f"({now / 60:.1f} min measured by this invocation); analysis {analysis:.0f} s",
        f"noise: 4 patterns x {list(f'{i:.0%}' for i in INTENSITIES)} additive, "
        f"{config.injections} injections each, on the modeled time only; classic = "
        "PMNFModeler, effort = EffortModeler as shipped (counts fix the terms; negative "
        f"terms: {DEFAULT_POLICY})",
        *(
            virtual_header(directories, study, config)
            if config.virtual
            else machine_header(directories, study, config)
        ),
    ]
    report = render(study, results, config, header)
    print(report)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(report + "\n")


if __name__ == "__main__":
    main()
