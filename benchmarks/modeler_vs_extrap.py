"""perfcast's PMNF modeler against Extra-P 4.2.5 on identical synthetic inputs.

For 1, 2 and 3 parameters and 10, 100 and 1000 call paths, random PMNF truths (one per
call path, :mod:`perfcast.synth`) are sampled on a full-factorial grid of 5 values per
parameter with 5 repetitions, perturbed at 0 %, 5 % and 20 % noise, and written once as an
Extra-P text file. Both tools model that same file with their defaults, timed two ways:

- in-process: reading the file plus modeling, nothing else (Extra-P's model generator in
  its own venv, ``_extrap.py``; perfcast's ``PMNFModeler`` in this interpreter);
- whole process: each tool's command line as a user runs it, start-up and imports
  included, every model written to a file (``perfcast model FILE --style json -o OUT`` and
  ``extrap --text FILE --out OUT``). Both run with Python's bytecode cache, as installed
  packages have it, warmed by one untimed run on a small file.

The table reports per configuration both times and their ratio (Extra-P / perfcast) and,
for each tool, the share of (call path, parameter) pairs whose leading (exponent, log exponent)
equals the truth's, the share of call paths where that holds for every parameter, the mean
exponent deviation ED (Eq. 4 of noise-resilient-priors.txt) and the median relative error
RE (Eq. 5) at the unseen test point one grid step beyond the measurements.

Noise is the paper's additive pattern by default (5 % uniform: every value moves up by 0 to
5 %); ``--symmetric`` perturbs within +-5 % instead. Truths are drawn from the PMNF sets
I x J by default; ``--truths extrap`` restricts them to the 42 shapes Extra-P's default
modeler searches, so that every truth is reachable for both tools. The full run takes
about an hour on two cores, almost all of it Extra-P at 1000 call paths (once in-process,
``--runs`` times whole); ``--parameters``, ``--callpaths`` and ``--noise`` select a subset::

    python3 benchmarks/modeler_vs_extrap.py --quick            # about five minutes
    python3 benchmarks/modeler_vs_extrap.py --output benchmarks/results/modeler_vs_extrap.txt

(``benchmarks/results/modeler_vs_extrap_extrap_shapes.txt`` is the same with ``--truths
extrap``; ``modeler_vs_extrap_whole_process.txt`` is the subset ``--parameters 1 2 --noise
0.05``, whose whole-process column at 1000 call paths is the speed target.) Each results
file starts with the command that wrote it.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _extrap  # the sibling helper; benchmarks/ is not a package

from perfcast.experiment import Experiment
from perfcast.experiment.experiment import CALLPATH, METRIC, REPETITION, VALUE
from perfcast.modeling.pmnf import Model
from perfcast.synth import (
    FunctionSpace,
    Noise,
    NoisePattern,
    SyntheticBenchmark,
    exponent_deviations,
    generate,
    leading_exponent,
    leading_exponent_matches,
    model_relative_error,
)

PARAMETER_COUNTS = (1, 2, 3)
CALLPATH_COUNTS = (10, 100, 1000)
QUICK_CALLPATH_COUNTS = (10, 100)
NOISE_LEVELS = (0.0, 0.05, 0.20)
REPETITIONS = 5

SPEEDUP_TARGET = 50.0
"""Extra-P / perfcast whole-process wall time required at 1000 call paths with 2 and 3
parameters: what a user waits for, start-up included."""
SPEEDUP_TARGET_CALLPATHS = 1000
MATCH_TARGET = 0.85
"""Exact leading-exponent match per parameter aimed at with 2 parameters and 5 % noise."""
MATCH_TARGET_NOISE = 0.05

_EXTRAP_LOG_EXPONENTS: dict[str, tuple[int, ...]] = {
    "0": (1, 2),
    **{e: (0, 1, 2) for e in ("1/4", "1/3", "1/2", "2/3", "3/4", "1", "3/2", "2", "5/2")},
    **{e: (0, 1) for e in ("5/4", "4/3", "3")},
    **{e: (0,) for e in ("4/5", "5/3", "7/4", "9/4", "7/3", "8/3", "11/4")},
}
EXTRAP_SHAPES: tuple[tuple[Fraction, int], ...] = tuple(
    (Fraction(e), j) for e, logs in _EXTRAP_LOG_EXPONENTS.items() for j in logs
)
"""The 42 single-parameter shapes Extra-P 4.2.5's default modeler searches. It is a
hand-picked subset of I x J (the paper's preset), lacking e.g. ``x^(7/4) * log2(x)``;
``--truths extrap`` draws truths from it so that every truth is reachable for both tools."""


@dataclass
class Accuracy:
    """How well one tool's models recover the truths of one configuration."""

    match_per_parameter: float
    match_all_parameters: float
    mean_ed: float
    median_re: float
    misses: Counter[tuple[str, str]]


@dataclass
class Seconds:
    """One tool's wall time on one file, in-process (reading + modeling) and as a whole
    process (its command line, start-up and output included)."""

    in_process: float
    whole_process: float


@dataclass
class Row:
    parameters: int
    callpaths: int
    noise: float
    extrap_seconds: Seconds
    perfcast_seconds: Seconds
    extrap: Accuracy
    perfcast: Accuracy

    @property
    def speedup(self) -> float:
        return self.extrap_seconds.in_process / self.perfcast_seconds.in_process

    @property
    def process_speedup(self) -> float:
        return self.extrap_seconds.whole_process / self.perfcast_seconds.whole_process


# -- inputs ----------------------------------------------------------------------------------


def write_extrap_text(experiment: Experiment, path: Path) -> None:
    """Extra-P's text format: PARAMETER lines, one POINTS line, then per call path a REGION,
    METRIC and one DATA line (all repetitions) per point, in POINTS order."""
    parameters = experiment.parameters
    points = experiment.coordinates()
    data = experiment.data.sort_values([CALLPATH, METRIC, *parameters, REPETITION])
    lines = [f"PARAMETER {p}" for p in parameters]
    lines.append(
        "POINTS " + " ".join("( " + " ".join(repr(float(v)) for v in pt) + " )" for pt in points)
    )
    for (callpath, metric), rows in data.groupby([CALLPATH, METRIC], sort=False):
        lines += ["", f"REGION {callpath}", f"METRIC {metric}"]
        values = rows[VALUE].to_numpy().reshape(len(points), -1)
        lines += ["DATA " + " ".join(repr(float(v)) for v in row) for row in values]
    path.write_text("\n".join(lines) + "\n")


# -- the two tools ---------------------------------------------------------------------------


def run_perfcast(text_file: Path) -> tuple[float, dict[str, Model]]:
    """Read the text file and model it with perfcast's defaults; the clock covers both."""
    from perfcast.experiment.io.text import read_text
    from perfcast.modeling import PMNFModeler

    start = time.perf_counter()
    experiment = read_text(text_file)
    models = PMNFModeler().fit(experiment)
    seconds = time.perf_counter() - start
    return seconds, {m.callpath: m for m in models}


def run_perfcast_process(text_file: Path, environment: dict[str, str]) -> float:
    """Seconds of ``perfcast model`` as a user runs it, models written as JSON."""
    output = text_file.with_suffix(".perfcast.json")
    command = [sys.executable, "-m", "perfcast", "model", str(text_file), "--style", "json"]
    start = time.perf_counter()
    subprocess.run(
        [*command, "-o", str(output)], check=True, stdout=subprocess.DEVNULL, env=environment
    )
    return time.perf_counter() - start


def run_extrap_process(text_file: Path, measure: str, environment: dict[str, str]) -> float:
    """Seconds of Extra-P's command line on the same file."""
    output = text_file.with_suffix(".extrap.out")
    return _extrap.run_extrap_cli(text_file, output, measure=measure, environment=environment)


def process_environment(workdir: Path) -> dict[str, str]:
    """The environment of both tools' whole-process runs: Python's bytecode cache on, kept in
    ``workdir``. An installed package has its modules compiled; a checkout run with
    PYTHONDONTWRITEBYTECODE would compile every perfcast module on every start, a cost no
    user pays."""
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    environment["PYTHONPYCACHEPREFIX"] = str(workdir / "pycache")
    return environment


def run_extrap(
    text_file: Path, bench: SyntheticBenchmark, measure: str
) -> tuple[float, dict[str, Model]]:
    """Extra-P in its venv; its models come back as perfcast Models, checked against
    Extra-P's own evaluation at the test point so a translation error cannot go unnoticed."""
    point = bench.test_point
    result = _extrap.run_extrap(
        text_file, text_file.with_suffix(".extrap.json"), measure=measure, at=list(point.values())
    )
    models = {}
    for entry in result["models"]:
        model = Model.from_json(entry)
        ours = float(model.evaluate(point))
        if not np.isclose(ours, entry["value_at"], rtol=1e-6, atol=0.0):
            raise RuntimeError(
                f"translated Extra-P model of {model.callpath} gives {ours}, Extra-P says "
                f"{entry['value_at']}: the translation in _extrap.py is wrong"
            )
        models[model.callpath] = model
    return result["seconds"], models


# -- scoring ---------------------------------------------------------------------------------


def score(models: dict[str, Model], bench: SyntheticBenchmark) -> Accuracy:
    parameters = list(bench.grid)
    per_parameter: list[bool] = []
    all_parameters: list[bool] = []
    deviations: list[float] = []
    errors: list[float] = []
    misses: Counter[tuple[str, str]] = Counter()
    for callpath, truth in bench.truths.items():
        model = models[callpath]
        matches = leading_exponent_matches(model, truth, parameters)
        per_parameter += matches.values()
        all_parameters.append(all(matches.values()))
        deviations += (float(d) for d in exponent_deviations(model, truth, parameters).values())
        errors.append(model_relative_error(model, truth, bench.test_point))
        for parameter, ok in matches.items():
            if not ok:
                misses[(_shape(truth, parameter), _shape(model, parameter))] += 1
    return Accuracy(
        float(np.mean(per_parameter)),
        float(np.mean(all_parameters)),
        float(np.mean(deviations)),
        float(np.median(errors)),
        misses,
    )


def _shape(model: Model, parameter: str) -> str:
    exponent, log_exponent = leading_exponent(model, parameter)
    text = "1" if exponent == 0 else f"x^{exponent}"
    return text if log_exponent == 0 else f"{text}*log^{log_exponent}"


# -- the run ---------------------------------------------------------------------------------


def warm_up(workdir: Path, measure: str, environment: dict[str, str]) -> None:
    """Untimed runs of both tools on a small file: perfcast's lazy imports (SciPy for the
    noise test) happen before the in-process clock, as Extra-P's imports do in its
    subprocess, and both command lines find their bytecode compiled and their files in the
    page cache."""
    from perfcast.modeling import PMNFModeler

    bench = generate(2, np.random.default_rng(0), n_parameters=1, repetitions=REPETITIONS)
    PMNFModeler().fit(bench.experiment)
    text_file = workdir / "warm_up.txt"
    write_extrap_text(bench.experiment, text_file)
    run_perfcast_process(text_file, environment)
    run_extrap_process(text_file, measure, environment)


def run(args: argparse.Namespace, workdir: Path) -> list[Row]:
    space = FunctionSpace(EXTRAP_SHAPES) if args.truths == "extrap" else FunctionSpace()
    environment = process_environment(workdir)
    warm_up(workdir, args.extrap_measure, environment)
    callpath_counts = args.callpaths or (QUICK_CALLPATH_COUNTS if args.quick else CALLPATH_COUNTS)
    rows = []
    for n_parameters in args.parameters:
        for n_callpaths in callpath_counts:
            rng = np.random.default_rng([args.seed, n_parameters, n_callpaths])
            bench = generate(
                n_callpaths, rng, n_parameters=n_parameters, repetitions=REPETITIONS, space=space
            )
            for level, intensity in enumerate(NOISE_LEVELS):
                if intensity not in args.noise:
                    continue  # skipping a level changes no other: each has its own seed
                noise = Noise(args.noise_pattern, intensity, symmetric=args.symmetric)
                noise_rng = np.random.default_rng([args.seed, n_parameters, n_callpaths, level])
                text_file = workdir / f"synth_{n_parameters}p_{n_callpaths}cp_{level}.txt"
                write_extrap_text(noise.apply_to(bench.experiment, noise_rng), text_file)
                extrap_seconds, extrap_models = run_extrap(text_file, bench, args.extrap_measure)
                perfcast_seconds, perfcast_models = run_perfcast(text_file)
                row = Row(
                    n_parameters,
                    n_callpaths,
                    intensity,
                    Seconds(
                        extrap_seconds,
                        statistics.median(
                            run_extrap_process(text_file, args.extrap_measure, environment)
                            for _ in range(args.runs)
                        ),
                    ),
                    Seconds(
                        perfcast_seconds,
                        statistics.median(
                            run_perfcast_process(text_file, environment) for _ in range(args.runs)
                        ),
                    ),
                    score(extrap_models, bench),
                    score(perfcast_models, bench),
                )
                rows.append(row)
                print(format_row(row), file=sys.stderr, flush=True)
    return rows


HEADER = (
    f"{'':>22} | {'in-process s':^25} | {'whole process s':^25} |\n"
    f"{'params':>6} {'callpaths':>9} {'noise':>5} | {'Extra-P':>7} {'perfcast':>8} "
    f"{'speedup':>8} | {'Extra-P':>7} {'perfcast':>8} {'speedup':>8} | "
    f"{'match/param E':>13} {'P':>5} | {'match/all E':>11} {'P':>5} | "
    f"{'mean ED E':>9} {'P':>5} | {'med RE% E':>9} {'P':>6}"
)


def format_row(row: Row) -> str:
    e, p = row.extrap, row.perfcast
    extrap, perfcast = row.extrap_seconds, row.perfcast_seconds
    return (
        f"{row.parameters:>6} {row.callpaths:>9} {row.noise:>5.0%} | "
        f"{extrap.in_process:>7.2f} {perfcast.in_process:>8.3f} {row.speedup:>7.1f}x | "
        f"{extrap.whole_process:>7.2f} {perfcast.whole_process:>8.3f} "
        f"{row.process_speedup:>7.1f}x | "
        f"{e.match_per_parameter:>13.1%} {p.match_per_parameter:>5.0%} | "
        f"{e.match_all_parameters:>11.1%} {p.match_all_parameters:>5.0%} | "
        f"{e.mean_ed:>9.3f} {p.mean_ed:>5.3f} | {e.median_re:>9.2f} {p.median_re:>6.2f}"
    )


def summarize(rows: Sequence[Row], misses_shown: int) -> list[str]:
    """The targets, met or missed, and perfcast's most frequent misses."""
    lines = []
    for n_parameters in (2, 3):
        for row in rows:
            if (row.parameters, row.callpaths) == (n_parameters, SPEEDUP_TARGET_CALLPATHS):
                met = _verdict(row.process_speedup >= SPEEDUP_TARGET)
                lines.append(
                    f"speedup, {n_parameters} parameters, {row.callpaths} call paths, "
                    f"{row.noise:.0%} noise: whole process {row.process_speedup:.1f}x "
                    f"(target >= {SPEEDUP_TARGET:.0f}x: {met}), in-process {row.speedup:.1f}x"
                )
    for noise in NOISE_LEVELS:
        at = [r for r in rows if r.noise == noise]
        if not at:
            continue
        weights = [r.callpaths * r.parameters for r in at]
        e = np.average([r.extrap.match_per_parameter for r in at], weights=weights)
        p = np.average([r.perfcast.match_per_parameter for r in at], weights=weights)
        lines.append(
            f"match per parameter at {noise:.0%} noise, all configurations: Extra-P {e:.1%}, "
            f"perfcast {p:.1%} (target perfcast >= Extra-P: {_verdict(p >= e)})"
        )
    target = [r for r in rows if r.parameters == 2 and r.noise == MATCH_TARGET_NOISE]
    if target:
        weights = [r.callpaths for r in target]
        p = np.average([r.perfcast.match_per_parameter for r in target], weights=weights)
        lines.append(
            f"match per parameter, 2 parameters, {MATCH_TARGET_NOISE:.0%} noise: perfcast {p:.1%} "
            f"(aim >= {MATCH_TARGET:.0%}: {_verdict(p >= MATCH_TARGET)})"
        )
    if misses_shown:
        lines.append("")
        lines.append(
            f"perfcast's most frequent misses (truth -> model, leading shape of one parameter, "
            f"summed over parameters and call paths), {MATCH_TARGET_NOISE:.0%} noise:"
        )
        total: Counter[tuple[str, str]] = Counter()
        for row in rows:
            if row.noise == MATCH_TARGET_NOISE:
                total.update(row.perfcast.misses)
        for (truth, model), count in total.most_common(misses_shown):
            lines.append(f"  {count:>5}  {truth:<18} -> {model}")
    return lines


def _verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10 and 100 call paths only")
    parser.add_argument(
        "--callpaths",
        type=int,
        nargs="+",
        metavar="N",
        help=f"call path counts (default: {CALLPATH_COUNTS}, or {QUICK_CALLPATH_COUNTS} "
        "with --quick)",
    )
    parser.add_argument(
        "--noise",
        type=float,
        nargs="+",
        default=list(NOISE_LEVELS),
        choices=NOISE_LEVELS,
        metavar="LEVEL",
        help=f"noise levels, among {NOISE_LEVELS} (default: all)",
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of every random draw")
    parser.add_argument(
        "--parameters", type=int, nargs="+", default=list(PARAMETER_COUNTS), metavar="N"
    )
    parser.add_argument(
        "--truths",
        choices=("pmnf", "extrap"),
        default="pmnf",
        help="draw truth shapes from the PMNF sets I x J (default) or only from the shapes "
        "Extra-P's default modeler searches",
    )
    parser.add_argument(
        "--noise-pattern", default=NoisePattern.UNIFORM.value, choices=list(NoisePattern)
    )
    parser.add_argument(
        "--symmetric",
        action="store_true",
        help="perturb values within +- intensity; default: the paper's additive noise "
        "(eta >= 0, values move up by 0 to intensity)",
    )
    parser.add_argument(
        "--extrap-measure", default="mean", help="Extra-P's aggregation (its default: mean)"
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=3,
        metavar="N",
        help="whole-process runs per tool and file, the median reported (default: 3): one "
        "second of perfcast samples a shared machine's load where a minute of Extra-P "
        "averages it",
    )
    parser.add_argument("--misses", type=int, default=12, help="perfcast misses to list")
    parser.add_argument("--output", type=Path, help="also write the report to this file")
    args = parser.parse_args(argv)

    _extrap.ensure_extrap()
    load_before = os.getloadavg()[1]
    with tempfile.TemporaryDirectory(prefix="perfcast-vs-extrap-") as workdir:
        rows = run(args, Path(workdir))
    load_after = os.getloadavg()[1]
    noise = Noise(args.noise_pattern, 0.05, symmetric=args.symmetric)
    report = [
        "$ " + shlex.join(["python3", "benchmarks/modeler_vs_extrap.py", *(argv or sys.argv[1:])]),
        "",
        f"Extra-P {_extrap.EXTRAP_VERSION} (default modeler, {args.extrap_measure}) vs perfcast "
        f"PMNFModeler (defaults); seed {args.seed}; truths from "
        f"{'Extra-P default shapes' if args.truths == 'extrap' else 'PMNF sets I x J'}; "
        f"5 values per parameter, {REPETITIONS} repetitions; noise {noise.pattern} "
        f"{'symmetric (+-)' if args.symmetric else 'additive (eta >= 0, as in the paper)'}",
        "E = Extra-P, P = perfcast; in-process seconds = reading the text file + modeling; "
        "whole process = `perfcast model FILE --style json -o OUT` vs `extrap --text FILE "
        f"--out OUT`, start-up included, median of {args.runs} runs;",
        f"machine load (5-min average) {load_before:.1f} at the start, {load_after:.1f} at the "
        f"end, on {os.cpu_count()} cores shared with other work",
        "",
        HEADER,
        "-" * len(HEADER.splitlines()[-1]),
        *(format_row(r) for r in rows),
        "",
        *summarize(rows, args.misses),
    ]
    text = "\n".join(report) + "\n"
    print(text)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text)


if __name__ == "__main__":
    main()
