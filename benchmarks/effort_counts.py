"""perfcast's count modeler against its time modeler and Extra-P 4.2.5 on measured counts
(issue #6, noise-resilient priors).

The exponents of the effort priors come from models of deterministic counters
(``noise-resilient-priors.txt`` III-B): a wrong count exponent is a wrong time model. perfcast
models counts with :class:`~perfcast.effort.CountModeler` (every term picks its own shape per
parameter, so ``a*n^2 + b*p*n`` is expressible) instead of its time modeler
:class:`~perfcast.modeling.PMNFModeler`, which searches Extra-P's one-shape-per-parameter
space. This benchmark checks that choice on real measurements with a known truth.

**Data.** The noise study's cached campaigns (``benchmarks/noise_study.py``): 10 generated C++
MPI programs x 5 kernels, built with counters and measured on p in 2..6 x n in 1000..5000, 5
repetitions, plus the test point (p=7, n=6000). Nothing is measured here; without the cache
the script says how to create it and exits non-zero. A series is one (call path, counter
metric) with a truth (``perfcast.synth.programs`` documents what the truth promises):

* **computation**: the ``basic_blocks`` of a kernel's call path; truth ``KernelTruth.effort``,
  the loop nests' iterations. The counted blocks are ``c0 + iterations + 2 * outer
  iterations``, summed over every loop nest of the kernel: the truth's terms with other
  coefficients plus a constant, and a lower-order ``outer`` part within 0.1 %.
* **communication**: the MPI call path's ``KernelTruth.bytes_metric`` (bytes sent, or received
  for a receive-only routine); truth ``KernelTruth.bytes``.

**Approaches**, all on the same Extra-P text file (the series' repetitions as measured):
perfcast's ``CountModeler`` as :meth:`EffortModeler.counter_modeler` builds it, perfcast's
``PMNFModeler()`` (the time modeler), and Extra-P's default model generator in its venv
(``_extrap.py``; its models translated back and checked against Extra-P's own value at the
test point).

**Metrics.** Share of series whose leading exponent of ``p`` / ``n`` / both matches the
truth's (exponent deviation 0, Eq. 4; logarithms count as exponent 0), share whose leading
(exponent, log exponent) matches for both parameters, share whose set of term shapes is the
truth's exactly (the constant aside), the relative error (Eq. 5) of the predicted count at the
test point against the measured one, and seconds per series. Seconds cover reading the text
file plus modeling, perfcast in-process (one untimed warm-up first), Extra-P as it reports
them from inside its subprocess (no interpreter start-up); the best of ``--repeats`` runs.
Speed is timed twice: on the measured series, and on a batch of them replicated to about
``--batch`` call paths (the accuracy is the same there: every copy is the same series).
Ratio columns are perfcast / Extra-P: above 1 is better for shares, below 1 for errors and
seconds.

::

    python3 benchmarks/effort_counts.py --output benchmarks/results/effort_counts.txt
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _extrap  # the sibling helpers; benchmarks/ is not a package
import modeler_vs_extrap
import noise_study

from perfcast.effort import EffortModeler
from perfcast.experiment import read_experiment
from perfcast.experiment.experiment import CALLPATH, METRIC, VALUE, Experiment
from perfcast.experiment.io.text import read_text
from perfcast.experiment.metrics import COMPUTATION_METRIC
from perfcast.modeling import PMNFModeler
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.pmnf import Model
from perfcast.synth import (
    SyntheticBenchmark,
    exponent_deviation,
    leading_exponent_matches,
    relative_error,
)
from perfcast.synth.programs import read_truth

COUNT, TIME_MODELER, EXTRAP = "CountModeler", "PMNFModeler", "Extra-P"
APPROACHES = (COUNT, TIME_MODELER, EXTRAP)
PARAMETERS = noise_study.PARAMETERS
COMPUTATION, COMMUNICATION = noise_study.COMPUTATION, noise_study.COMMUNICATION
BATCH_CALLPATHS = 1000
"""Call paths of the speed batch (the measured series replicated), the scale of
``modeler_vs_extrap.py``'s largest configuration."""
REPEATS = 3
"""Timed runs per approach and input; the fastest counts (the machine is shared)."""
EXTRAP_MEASURE = "mean"
"""Extra-P's aggregation of repetitions (its default); counts are identical across
repetitions, so every aggregation gives the same values."""
EXTRAP_SHAPES = frozenset(modeler_vs_extrap.EXTRAP_SHAPES)
"""The single-parameter shapes Extra-P's default modeler searches: a truth outside them is
beyond its reach whatever its search does."""
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")
"""Settings that change how many threads NumPy's BLAS uses in Extra-P's process (the header
shows them); perfcast's modelers fit with one BLAS thread whatever they say
(:mod:`perfcast.modeling.blas`)."""


@dataclass(frozen=True)
class Series:
    """One counter of one call path, with its truth and the measured count at the test point."""

    callpath: str  # prefixed with the program's name, as in the noise study
    metric: str
    kind: str
    truth: Model
    measured: float
    """Median of the repetitions at the test point."""


class CacheMissing(Exception):
    """The noise study's measurements are not (all) there."""


# -- the data -------------------------------------------------------------------------------


def load_series(
    config: noise_study.Configuration, cache: Path
) -> tuple[list[Path], Experiment, list[Series]]:
    """The programs' directories, the training counts of every series, and the series."""
    option = "" if cache == noise_study.CACHE else f" --cache {shlex.quote(str(cache))}"
    hint = (
        f"run `python3 benchmarks/noise_study.py{option}` first (it measures the campaigns "
        f"into {cache}, about 16 minutes; an interrupted run resumes)"
    )
    if not cache.is_dir():
        raise CacheMissing(f"no noise-study cache at {cache}: {hint}")
    directories = noise_study.generate(config, cache)
    frames: list[pd.DataFrame] = []
    series: list[Series] = []
    for directory in directories:
        missing = [s for s in ("train.sqlite", "test.sqlite") if not (directory / s).exists()]
        if missing:
            raise CacheMissing(f"{directory} has no {' or '.join(missing)}: {hint}")
        name = directory.name.split("-")[0]
        train = read_experiment(directory / "train.sqlite").data
        test = read_experiment(directory / "test.sqlite").data
        test = test[test["n"] == config.test_point["n"]]  # p is fixed there, not a column
        for truth in read_truth(directory / f"{name}.truth.json").values():
            wanted = []
            if truth.effort is not None:
                wanted.append((truth.callpath, COMPUTATION_METRIC, COMPUTATION, truth.effort))
            if truth.mpi_callpath is not None:
                assert truth.bytes_metric is not None and truth.bytes is not None
                wanted.append((truth.mpi_callpath, truth.bytes_metric, COMMUNICATION, truth.bytes))
            for callpath, metric, kind, model in wanted:
                rows = train[(train[CALLPATH] == callpath) & (train[METRIC] == metric)]
                at_test = test[(test[CALLPATH] == callpath) & (test[METRIC] == metric)][VALUE]
                expected = config.points * config.repetitions
                if len(rows) != expected or at_test.empty:
                    raise CacheMissing(
                        f"{directory}: {callpath} {metric} has {len(rows)} of {expected} "
                        f"training values and {len(at_test)} at the test point: {hint}"
                    )
                key = f"{name}:{callpath}"
                frames.append(rows.assign(**{CALLPATH: key}))
                series.append(Series(key, metric, kind, model, float(at_test.median())))
    experiment = Experiment(list(PARAMETERS), pd.concat(frames, ignore_index=True))
    return directories, experiment, series


def replicated(experiment: Experiment, copies: int) -> Experiment:
    """``copies`` copies of every series under prefixed call paths."""
    frames = [noise_study.prefixed(experiment, f"c{k:02d}#") for k in range(copies)]
    return noise_study.stack(experiment.parameters, frames)


# -- the three approaches ------------------------------------------------------------------


Runner = Callable[[Path, SyntheticBenchmark], tuple[float, dict[str, Model]]]
"""Models one Extra-P text file: the seconds it took and the models by call path."""


def perfcast_fit(fit: Callable[[Experiment], ModelSet | list[Model]]) -> Runner:
    """Read the text file and model it in-process; the clock covers both, as Extra-P's."""

    def run(text_file: Path, bench: SyntheticBenchmark) -> tuple[float, dict[str, Model]]:
        start = time.perf_counter()
        models = fit(read_text(text_file))
        seconds = time.perf_counter() - start
        return seconds, {m.callpath: m for m in models}

    return run


def extrap_fit(text_file: Path, bench: SyntheticBenchmark) -> tuple[float, dict[str, Model]]:
    return modeler_vs_extrap.run_extrap(text_file, bench, EXTRAP_MEASURE)


def timed(
    runners: dict[str, Runner], inputs: Sequence[Path], bench: SyntheticBenchmark, repeats: int
) -> tuple[list[dict[str, float]], list[dict[str, dict[str, Model]]]]:
    """Per input, the best seconds and the models of every approach. Every round runs
    every input with every approach in turn, so the best of each is taken over the same
    stretch of the shared machine's changing load."""
    seconds = [dict.fromkeys(runners, math.inf) for _ in inputs]
    models: list[dict[str, dict[str, Model]]] = [{} for _ in inputs]
    for round_ in range(repeats):
        for index, text_file in enumerate(inputs):
            for approach, run in runners.items():
                took, models[index][approach] = run(text_file, bench)
                seconds[index][approach] = min(seconds[index][approach], took)
                print(
                    f"  round {round_ + 1}, {text_file.stem}, {approach}: {took:.2f} s",
                    file=sys.stderr,
                    flush=True,
                )
    return seconds, models


# -- scoring --------------------------------------------------------------------------------


def shapes(model: Model) -> frozenset[frozenset]:
    return frozenset(frozenset(term.shape) for term in model.terms)


def score(series: Series, model: Model, test_point: dict[str, float]) -> dict[str, float]:
    deviations = {p: exponent_deviation(model, series.truth, p) for p in PARAMETERS}
    leading = leading_exponent_matches(model, series.truth, PARAMETERS)
    predicted = float(model.evaluate(test_point))
    return {
        **{f"ed0_{p}": float(d == 0) for p, d in deviations.items()},
        "ed0_both": float(all(d == 0 for d in deviations.values())),
        "leading_both": float(all(leading.values())),
        "terms": float(shapes(model) == shapes(series.truth)),
        "re": float(relative_error(predicted, series.measured)),
    }


def scores(
    series: Sequence[Series], models: dict[str, dict[str, Model]], test_point: dict[str, float]
) -> pd.DataFrame:
    rows = [
        {"series": s.callpath, "kind": s.kind, "approach": approach}
        | score(s, fitted[s.callpath], test_point)
        for approach, fitted in models.items()
        for s in series
    ]
    return pd.DataFrame(rows)


# -- the report -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    label: str
    values: dict[str, float]
    kind: str  # "share", "error" or "seconds"


def table_lines(
    frame: pd.DataFrame,
    seconds: dict[str, float],
    batch_seconds: dict[str, float],
    counts: dict[str, int],
    batch: int,
) -> list[Line]:
    lines: list[Line] = []
    groups = [("all", frame)] + [(kind, frame[frame["kind"] == kind]) for kind in counts]

    def stat(part: pd.DataFrame, column: str, how: str) -> dict[str, float]:
        return {a: float(part[part["approach"] == a][column].agg(how)) for a in APPROACHES}

    for group, part in groups:
        size = part["series"].nunique()
        title = f"{group} ({size})"
        for column, label in (
            ("ed0_p", "ED p = 0"),
            ("ed0_n", "ED n = 0"),
            ("ed0_both", "ED p, n = 0"),
            ("leading_both", "leading shapes exact"),
            ("terms", "term set exact"),
        ):
            lines.append(Line(f"{title} {label}", stat(part, column, "mean"), "share"))
        for how in ("median", "mean", "max"):
            lines.append(Line(f"{title} RE% at test point, {how}", stat(part, "re", how), "error"))
    total = frame["series"].nunique()
    lines.append(Line(f"seconds per series ({total} series)", per(seconds, total), "seconds"))
    lines.append(
        Line(f"seconds per series (batch of {batch})", per(batch_seconds, batch), "seconds")
    )
    lines.append(Line(f"seconds, batch of {batch}", batch_seconds, "seconds"))
    return lines


def per(seconds: dict[str, float], count: int) -> dict[str, float]:
    return {a: s / count for a, s in seconds.items()}


def format_table(lines: Sequence[Line]) -> list[str]:
    width = max(len(line.label) for line in lines)
    header = (
        f"{'':<{width}} | {COUNT:>12} {TIME_MODELER:>12} {EXTRAP:>10} | "
        f"{'Count/E-P':>9} {'PMNF/E-P':>9}"
    )
    out = [header, "-" * len(header)]
    for line in lines:
        cells = [_cell(line.values[a], line.kind) for a in APPROACHES]
        ratios = [_ratio(line.values[a], line.values[EXTRAP]) for a in (COUNT, TIME_MODELER)]
        out.append(
            f"{line.label:<{width}} | {cells[0]:>12} {cells[1]:>12} {cells[2]:>10} | "
            f"{ratios[0]:>9} {ratios[1]:>9}"
        )
    return out


def _cell(value: float, kind: str) -> str:
    if kind == "share":
        return f"{value:.1%}"
    if kind == "error":
        return f"{value:.3g}"
    return f"{value:.4f}" if value < 1 else f"{value:.2f}"


def _ratio(ours: float, theirs: float) -> str:
    if theirs == 0:
        return "-" if ours == 0 else "inf"
    ratio = ours / theirs
    return f"{ratio:.2f}" if ratio >= 0.1 else f"{ratio:.1g}"


def misses(
    frame: pd.DataFrame, models: dict[str, dict[str, Model]], series: Sequence[Series]
) -> list[str]:
    """Every series where CountModeler misses an exponent or the term set, with the truth
    and each approach's model, so a reader can see why."""
    ours = frame[frame["approach"] == COUNT].set_index("series")
    by_name = {s.callpath: s for s in series}
    wrong = ours[(ours["ed0_both"] < 1) | (ours["terms"] < 1)]
    lines = [f"{COUNT} misses (exponent or term set), {len(wrong)} of {len(ours)} series:"]
    if wrong.empty:
        lines[0] += " none"
    for name, row in wrong.iterrows():
        s = by_name[str(name)]
        what = "exponents" if row["ed0_both"] < 1 else "term set only"
        lines.append(f"  {name} {s.metric} ({what}; RE {row['re']:.2g} %)")
        lines.append(f"    truth        {s.truth.text()}")
        for approach in APPROACHES:
            model = models[approach][s.callpath]
            warning = f"   [{'; '.join(model.warnings)}]" if model.warnings else ""
            lines.append(f"    {approach:<12} {model.text()}{warning}")
    return lines


def exponent_misses(frame: pd.DataFrame, series: Sequence[Series]) -> list[str]:
    """How many series the one-shape-per-parameter searches miss, and how many of those
    truths they could have expressed at all."""
    one_shape = {s.callpath for s in series if _one_shape_per_parameter(s.truth)}
    in_extrap = {s.callpath for s in series if _in_extrap_space(s.truth)} & one_shape
    kinds = {s.callpath: s.kind for s in series}
    lines = []
    for approach, expressible, space in (
        (TIME_MODELER, one_shape, "one shape per parameter"),
        (EXTRAP, in_extrap, "one shape per parameter, each among its 42 default shapes"),
    ):
        mine = frame[frame["approach"] == approach]
        missed = mine[mine["ed0_both"] < 1]
        by_kind = missed["series"].map(kinds).value_counts().to_dict()
        reachable = mine[mine["series"].isin(expressible)]
        lines.append(
            f"{approach} exponent misses: {len(missed)} of {len(mine)} series "
            f"({', '.join(f'{k} {v}' for k, v in sorted(by_kind.items())) or 'none'}); "
            f"truths its search can express ({space}): {len(reachable)}, ED p, n = 0 on "
            f"those {reachable['ed0_both'].mean():.1%}, on the others "
            f"{mine[~mine['series'].isin(expressible)]['ed0_both'].mean():.1%}"
        )
    return lines


def _one_shape_per_parameter(truth: Model) -> bool:
    shapes: dict[str, set[tuple]] = {}
    for term in truth.terms:
        for factor in term.factors:
            shapes.setdefault(factor.parameter, set()).add((factor.exponent, factor.log_exponent))
    return all(len(s) == 1 for s in shapes.values())


def _in_extrap_space(truth: Model) -> bool:
    return all(
        (factor.exponent, factor.log_exponent) in EXTRAP_SHAPES
        for term in truth.terms
        for factor in term.factors
    )


# -- the run --------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> str:
    config = noise_study.Configuration()
    started = time.perf_counter()
    directories, experiment, series = load_series(config, args.cache)
    _extrap.ensure_extrap()
    load_before = os.getloadavg()
    grid = {"p": tuple(map(float, config.ranks)), "n": tuple(map(float, config.sizes))}
    bench = SyntheticBenchmark(experiment, {s.callpath: s.truth for s in series}, grid)
    if bench.test_point != config.test_point:
        raise RuntimeError(f"test point {bench.test_point} is not the study's {config.test_point}")
    copies = max(1, round(args.batch / len(series)))
    runners = {
        COUNT: perfcast_fit(EffortModeler().counter_modeler().fit),
        TIME_MODELER: perfcast_fit(PMNFModeler().fit),
        EXTRAP: extrap_fit,
    }
    with tempfile.TemporaryDirectory(prefix="perfcast-effort-counts-") as workdir:
        measured = Path(workdir) / "counts.txt"
        modeler_vs_extrap.write_extrap_text(experiment, measured)
        batch_file = Path(workdir) / "batch.txt"
        modeler_vs_extrap.write_extrap_text(replicated(experiment, copies), batch_file)
        for warm_up in (runners[COUNT], runners[TIME_MODELER]):  # lazy imports off the clock
            warm_up(measured, bench)
        (seconds, batch_seconds), (models, _) = timed(
            runners, [measured, batch_file], bench, args.repeats
        )
    load_after = os.getloadavg()
    frame = scores(series, models, config.test_point)
    counts = {k: sum(s.kind == k for s in series) for k in (COMPUTATION, COMMUNICATION)}
    metrics = sorted({s.metric for s in series})
    lines = table_lines(frame, seconds, batch_seconds, counts, copies * len(series))
    command = shlex.join(["python3", "benchmarks/effort_counts.py", *args.argv])
    report = [
        f"$ {command}",
        "",
        f"{len(directories)} generated programs of the noise study (seed {config.seed}, cache "
        f"{args.cache.name}/), {len(series)} counter series with a truth: "
        f"{counts[COMPUTATION]} computation ({COMPUTATION_METRIC}), {counts[COMMUNICATION]} "
        f"communication (bytes); metrics {', '.join(metrics)}",
        f"measured on p in {list(config.ranks)} x n in {list(config.sizes)}, "
        f"{config.repetitions} repetitions ({repeated(experiment)}); "
        f"test point {config.test_point} (measured, median)",
        f"{COUNT} = EffortModeler().counter_modeler(), {TIME_MODELER} = PMNFModeler() (the time "
        f"modeler), Extra-P {_extrap.EXTRAP_VERSION} default modeler ({EXTRAP_MEASURE}); all "
        "read the same Extra-P text file",
        f"seconds = reading the file + modeling, best of {args.repeats}; Extra-P's as it reports "
        f"them (no interpreter start-up); batch = the series replicated {copies} times",
        f"machine load (1/5/15-min average) {_load(load_before)} at the start, "
        f"{_load(load_after)} at the end, on {os.cpu_count()} cores shared with other work; "
        f"whole run {time.perf_counter() - started:.0f} s; BLAS threads: perfcast 1, Extra-P "
        + (", ".join(f"{k}={os.environ[k]}" for k in BLAS_THREADS if k in os.environ) or "default"),
        "ratios: perfcast / Extra-P (shares: > 1 is better; RE and seconds: < 1 is better)",
        "",
        *format_table(lines),
        "",
        *exponent_misses(frame, series),
        "",
        *misses(frame, models, series),
    ]
    return "\n".join(report) + "\n"


def repeated(experiment: Experiment) -> str:
    """Whether the counts are the same in every repetition, as deterministic counts are."""
    spread = experiment.data.groupby([CALLPATH, METRIC, *experiment.parameters])[VALUE].nunique()
    varying = int((spread > 1).sum())
    return "identical at every point" if varying == 0 else f"differing at {varying} points"


def _load(values: tuple[float, float, float]) -> str:
    return "/".join(f"{v:.1f}" for v in values)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cache",
        type=Path,
        default=noise_study.CACHE,
        help=f"the noise study's measurement cache (default {noise_study.CACHE})",
    )
    parser.add_argument(
        "--batch",
        type=int,
        default=BATCH_CALLPATHS,
        help="call paths of the speed batch (default %(default)s)",
    )
    parser.add_argument(
        "--repeats", type=int, default=REPEATS, help="timed runs, the fastest counts"
    )
    parser.add_argument("--output", type=Path, help="also write the report to this file")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        report = run(args)
    except CacheMissing as missing:
        print(f"effort_counts: {missing}", file=sys.stderr)
        return 2
    print(report, end="")
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
