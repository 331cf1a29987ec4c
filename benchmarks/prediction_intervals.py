"""Coverage of the prediction intervals of PMNF models on synthetic data with known noise.

``perfcast.modeling.intervals`` derives a prediction interval from the fit (the scaled
design of the selected terms, the residuals, the repetitions' spread) and states a level.
This benchmark checks the statement: known functions (1 and 2 parameters, sums, products,
logarithms, fractional powers) are sampled at 5 values per parameter with ``r`` repetitions,
perturbed by known noise (:class:`perfcast.synth.Noise`: uniform and truncated normal
with random sign, and upward-only uniform, at 1 to 20 %), modeled with
:class:`~perfcast.modeling.PMNFModeler` as shipped, and the interval of every model is
evaluated inside the measured range and 2, 4 and 8 times beyond it (every parameter at once).

Per model and point it counts:

* **PI**: new noisy measurements (one repetition each, drawn like the training data) that
  fall inside the prediction interval: the interval's promise;
* **CI mean**: whether the expected measurement (the truth times ``1 + E[noise]``) lies
  inside the confidence interval (the interval without the new measurement's noise);
* **CI truth**: the same for the noiseless truth. Upward-only noise moves every
  measurement up, so the model of the measurements estimates the expected measurement,
  not the noiseless value; that column shows by how much this matters.

Coverage is shown for all models and apart for those whose terms are the truth's ("right")
and the others ("other terms"): the interval assumes the selected terms are right, and
where coverage fails beyond the measured range, the other column shows that model
selection is why. A last table compares the two groups' miss against the interval's
half-width and their leave-one-out SMAPE (the cross-validation error the modeler selects
by): whether widening the interval by it could cover the other models.

The interval's quantile is Student's, exact for normal noise (the unbounded Gaussian
settings). :class:`Noise`'s patterns are bounded (uniform within the intensity, its normal
truncated there), so a normal-theory interval of the same standard deviation reaches past
every draw at 95 % (coverage near 100 %) and falls short of the flat middle at 80 %
(about 75 %): a property of the noise, visible in the summary.

::

    python3 benchmarks/prediction_intervals.py --output benchmarks/results/prediction_intervals.txt
    python3 benchmarks/prediction_intervals.py --quick     # fewer copies: seconds
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from perfcast.experiment.experiment import VALUE, Experiment
from perfcast.modeling import Model, PMNFModeler, search
from perfcast.modeling.intervals import confidence_interval, prediction_interval
from perfcast.synth import Noise
from perfcast.synth.functions import pmnf_function
from perfcast.synth.measurements import sample

GRIDS = {
    1: {"p": (4.0, 8.0, 16.0, 32.0, 64.0)},
    2: {"p": (4.0, 8.0, 16.0, 32.0, 64.0), "n": (10.0, 20.0, 30.0, 40.0, 50.0)},
}
"""5 values per parameter: ranks doubling, a problem size in equal steps."""

INSIDE = {"p": (6.0, 12.0, 24.0, 48.0), "n": (15.0, 25.0, 35.0, 45.0)}
"""Points between the measured values (the i-th value of every parameter together)."""

BEYOND = (2, 4, 8)
"""Extrapolation: every parameter at this multiple of its largest measured value."""

TRUTHS: dict[int, list[tuple[str, float, list]]] = {
    1: [
        ("3 + 2 p", 3.0, [(2.0, {"p": (1, 0)})]),
        ("1 + 0.5 p^2 log2(p)", 1.0, [(0.5, {"p": (2, 1)})]),
        ("7 + 4 p^(1/3)", 7.0, [(4.0, {"p": ("1/3", 0)})]),
        ("2 + 3 log2(p)^2", 2.0, [(3.0, {"p": (0, 2)})]),
        ("10 + p^(3/2)", 10.0, [(1.0, {"p": ("3/2", 0)})]),
        ("0.1 + 1e-3 p^3", 0.1, [(1e-3, {"p": (3, 0)})]),
    ],
    2: [
        (
            "5 + 2 p^2 + 3 n^(1/2) log2(n)",
            5.0,
            [(2.0, {"p": (2, 0)}), (3.0, {"n": ("1/2", 1)})],
        ),
        ("1 + 0.25 p log2(p) n^2", 1.0, [(0.25, {"p": (1, 1), "n": (2, 0)})]),
        ("2 + p n + 4 p", 2.0, [(1.0, {"p": (1, 0), "n": (1, 0)}), (4.0, {"p": (1, 0)})]),
    ],
}

INTENSITIES = (0.01, 0.05, 0.10, 0.20)


@dataclass(frozen=True)
class Gaussian:
    """Unbounded normal noise, ``1 + N(0, sd)``: :class:`Noise`'s patterns are all bounded
    (its normal is truncated to ``[-1, 1]``), and a bounded pattern hides whether an
    interval's tails are right. ``sd = intensity / 2``, so that 95 % of the draws lie within
    the intensity, as uniform noise of that intensity does."""

    intensity: float

    def perturbation(self, size: int | tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return rng.normal(0.0, self.intensity / 2, size)

    def label(self) -> str:
        return f"gaussian sd {self.intensity / 2:.1%}"


NOISES: list[Noise | Gaussian] = [
    *(Gaussian(intensity) for intensity in INTENSITIES),
    *(
        Noise(pattern, intensity, symmetric=symmetric)
        for pattern, symmetric in (("uniform", True), ("normal", True), ("uniform", False))
        for intensity in INTENSITIES
    ),
]

LEVELS = (0.95, 0.80)
NEW_MEASUREMENTS = 20
"""New noisy measurements drawn per model and point to test the prediction interval."""


@dataclass(frozen=True)
class Setting:
    parameters: int
    noise: Noise | Gaussian
    repetitions: int


def perturb(
    experiment: Experiment, noise: Noise | Gaussian, rng: np.random.Generator
) -> Experiment:
    """Every repetition times ``1 + perturbation``, drawn independently."""
    data = experiment.data.copy()
    data[VALUE] = data[VALUE].to_numpy() * (1.0 + noise.perturbation(len(data), rng))
    return Experiment(experiment.parameters, data, experiment.metrics.values())


def truth_models(parameters: int, copies: int) -> tuple[list[Model], dict[str, Model]]:
    """``copies`` independent call paths per truth, and each call path's truth."""
    truths = []
    for name, constant, terms in TRUTHS[parameters]:
        for copy in range(copies):
            truths.append(pmnf_function(f"{name}#{copy}", constant, terms))
    return truths, {t.callpath: t for t in truths}


def points(parameters: int) -> dict[str, dict[str, np.ndarray]]:
    grid = GRIDS[parameters]
    out = {"inside": {p: np.asarray(INSIDE[p]) for p in grid}}
    for factor in BEYOND:
        out[f"{factor}x beyond"] = {p: np.asarray([factor * max(grid[p])]) for p in grid}
    return out


def terms_of(model: Model) -> frozenset:
    return frozenset(frozenset(t.factors) for t in model.terms)


def mean_noise(noise: Noise | Gaussian, rng: np.random.Generator) -> float:
    """E[eta], estimated from a million draws (exact values exist only per pattern)."""
    return float(noise.perturbation(1_000_000, rng).mean())


def run_setting(
    setting: Setting, copies: int, rng: np.random.Generator
) -> tuple[list[dict], tuple[float, float, int]]:
    """One row per (model, where, level); the seconds to fit, the seconds to evaluate the
    intervals, and how many (model, place, level) were evaluated (both intervals each)."""
    truths, truth_of = truth_models(setting.parameters, copies)
    experiment = perturb(
        sample(truths, GRIDS[setting.parameters], repetitions=setting.repetitions),
        setting.noise,
        rng,
    )
    bias = 1.0 + mean_noise(setting.noise, rng)
    start = time.perf_counter()
    models = PMNFModeler().fit(experiment)
    fitted = time.perf_counter()
    intervals = {}
    for model in models:
        for where, point in points(setting.parameters).items():
            for level in LEVELS:
                key = (model.callpath, where, level)
                intervals[key] = (
                    prediction_interval(model, point, level),
                    confidence_interval(model, point, level),
                    prediction_interval(model, point, level, selection=False),
                )
    seconds = (fitted - start, time.perf_counter() - fitted, len(intervals))
    rows = []
    for model in models:
        truth = truth_of[model.callpath]
        right = terms_of(model) == terms_of(truth)
        for where, point in points(setting.parameters).items():
            true = truth.evaluate(point)
            new = true[:, None] * (
                1.0 + setting.noise.perturbation((len(true), NEW_MEASUREMENTS), rng)
            )
            for level in LEVELS:
                (low, high), (c_low, c_high), (k_low, k_high) = intervals[
                    (model.callpath, where, level)
                ]
                rows.append(
                    {
                        "truth": truth.callpath.split("#")[0],
                        "where": where,
                        "level": level,
                        "right": right,
                        "pi": float(((new >= low[:, None]) & (new <= high[:, None])).mean()),
                        "pi_classic": float(
                            ((new >= k_low[:, None]) & (new <= k_high[:, None])).mean()
                        ),
                        "width_classic": float(np.median((k_high - k_low) / 2 / np.abs(true))),
                        "alternatives": len(model.uncertainty.alternatives)
                        if model.uncertainty
                        else 0,
                        "ci_mean": float(((true * bias >= c_low) & (true * bias <= c_high)).mean()),
                        "ci_truth": float(((true >= c_low) & (true <= c_high)).mean()),
                        "width": float(np.median((high - low) / 2 / np.abs(true))),
                        "missing": bool(np.isnan(low).any()),
                        "miss": float(np.median(np.abs(model.evaluate(point) / (true * bias) - 1))),
                        "cv_error": model.statistics.cv_error,
                    }
                )
    return rows, seconds


def percent(values: Sequence[float]) -> str:
    return f"{100 * np.mean(values):.1f}" if len(values) else "-"


COLUMNS = (
    "models",
    "right",
    "PI",
    "PI:right",
    "PI:other",
    "PI:classic",
    "CI:mean",
    "CI:right",
    "CI:truth",
    "half-w%",
    "classic%",
    "nan",
)
HEADER = f"{'setting':<26} {'where':<10}" + "".join(f"{c:>11}" for c in COLUMNS)


def summary_rows(rows: list[dict], level: float, label: str) -> list[str]:
    lines = []
    for where in _places():
        chosen = [r for r in rows if r["level"] == level and r["where"] == where]
        right = [r for r in chosen if r["right"]]
        other = [r for r in chosen if not r["right"]]
        cells = [
            str(len(chosen)),
            percent([r["right"] for r in chosen]),
            percent([r["pi"] for r in chosen]),
            percent([r["pi"] for r in right]),
            percent([r["pi"] for r in other]),
            percent([r["pi_classic"] for r in chosen]),
            percent([r["ci_mean"] for r in chosen]),
            percent([r["ci_mean"] for r in right]),
            percent([r["ci_truth"] for r in chosen]),
            f"{100 * np.median([r['width'] for r in chosen]):.2f}",
            f"{100 * np.median([r['width_classic'] for r in chosen]):.2f}",
            str(sum(r["missing"] for r in chosen)),
        ]
        lines.append(f"{label:<26} {where:<10}" + "".join(f"{c:>11}" for c in cells))
    return lines


def per_truth(rows: list[dict], level: float) -> list[str]:
    """Coverage of the prediction interval per truth and place, over all noise settings:
    where it fails, which function it is."""
    lines = [f"{'truth':<32}" + "".join(f"{w:>11}" for w in _places())]
    for name in dict.fromkeys(r["truth"] for r in rows):
        cells = []
        for where in _places():
            chosen = [
                r
                for r in rows
                if r["truth"] == name and r["where"] == where and r["level"] == level
            ]
            cells.append(f"{percent([r['pi'] for r in chosen]):>11}")
        lines.append(f"{name:<32}" + "".join(cells))
    return lines


def family(noise: Noise | Gaussian) -> str:
    """The noise's pattern without its intensity: ``uniform +-``, ``gaussian``."""
    if isinstance(noise, Gaussian):
        return "gaussian"
    return f"{noise.pattern} {'+-' if noise.symmetric else '+'}"


def summary(results: dict[Setting, list[dict]]) -> list[str]:
    """Per noise family and stated level, the PI coverage of the models with the true terms
    (every place pooled) and of all models inside the range and farthest beyond it."""
    places = ("inside", f"{BEYOND[-1]}x beyond")
    names = [
        "true terms",
        *(f"all, {where}" for where in places),
        *(f"classic, {where}" for where in places),
    ]
    lines = [f"{'noise':<12} {'level':>6}" + "".join(f"{n:>19}" for n in names)]
    for name in dict.fromkeys(family(s.noise) for s in results):
        rows = [
            r
            for s, rs in results.items()
            if s.repetitions == 5 and family(s.noise) == name
            for r in rs
        ]
        for level in LEVELS:
            at = [r for r in rows if r["level"] == level]
            cells = [percent([r["pi"] for r in at if r["right"]])]
            cells += [percent([r["pi"] for r in at if r["where"] == where]) for where in places]
            cells += [
                percent([r["pi_classic"] for r in at if r["where"] == where]) for where in places
            ]
            lines.append(f"{name:<12} {level:>6.0%}" + "".join(f"{c:>19}" for c in cells))
    return lines


def selection_table(rows: list[dict], level: float) -> list[str]:
    """Why the other-term models miss beyond the range, whether the cross-validation error
    the modeler computes could tell them, and what the alternatives kept with each model
    recover: median relative miss of the model against the expected measurement, the
    classic interval's half-width, how often the miss exceeds it, the leave-one-out SMAPE,
    the number of alternatives kept, and the coverage of the classic interval and of the
    one stretched over the alternatives, for the models with the true terms and the others."""
    names = ("models", "miss%", "classic%", "miss>half", "LOO SMAPE", "alternat.", "PI:classic")
    lines = [f"{'where':<10} {'terms':<6}" + "".join(f"{c:>11}" for c in (*names, "PI"))]
    for where in ("inside", f"{BEYOND[-1]}x beyond"):
        for label, right in (("true", True), ("other", False)):
            chosen = [
                r
                for r in rows
                if r["where"] == where and r["level"] == level and r["right"] == right
            ]
            if not chosen:
                continue
            cells = [
                str(len(chosen)),
                f"{100 * np.median([r['miss'] for r in chosen]):.2f}",
                f"{100 * np.median([r['width_classic'] for r in chosen]):.2f}",
                percent([r["miss"] > r["width_classic"] for r in chosen]),
                f"{np.median([r['cv_error'] for r in chosen]):.2f}",
                f"{np.mean([r['alternatives'] for r in chosen]):.1f}",
                percent([r["pi_classic"] for r in chosen]),
                percent([r["pi"] for r in chosen]),
            ]
            lines.append(f"{where:<10} {label:<6}" + "".join(f"{c:>11}" for c in cells))
    return lines


def _places() -> list[str]:
    return ["inside", *(f"{f}x beyond" for f in BEYOND)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, help="also write the report here")
    parser.add_argument("--copies", type=int, default=60, help="data sets per truth and setting")
    parser.add_argument("--quick", action="store_true", help="10 copies, 5 repetitions only")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument(
        "--rival-tolerance",
        type=float,
        default=search.RIVAL_TOLERANCE,
        help="noise standard errors within which the modeler keeps alternatives "
        "(default %(default)s, the modeler's RIVAL_TOLERANCE); to measure other choices",
    )
    args = parser.parse_args(argv)
    search.RIVAL_TOLERANCE = args.rival_tolerance
    copies = 10 if args.quick else args.copies
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    repetitions = (5,) if args.quick else (5, 3)
    results: dict[Setting, list[dict]] = {}
    fit_seconds, interval_seconds, evaluated = 0.0, 0.0, 0
    for parameters in GRIDS:
        for noise in NOISES:
            for r in repetitions:
                if r != 5 and noise.intensity not in (0.05, 0.20):
                    continue
                setting = Setting(parameters, noise, r)
                rows, (fitting, evaluating, count) = run_setting(setting, copies, rng)
                results[setting] = rows
                fit_seconds += fitting
                interval_seconds += evaluating
                evaluated += count
    command = "python3 benchmarks/prediction_intervals.py " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    lines = [
        f"$ {command.strip()}",
        "",
        f"{copies} noisy data sets per truth and setting (seed {args.seed}); truths at "
        f"5 values per parameter: {GRIDS[2]}; in range at {INSIDE}, beyond at "
        f"{', '.join(f'{f}x' for f in BEYOND)} the largest value of every parameter; "
        f"{NEW_MEASUREMENTS} new measurements per model and point; alternatives kept within "
        f"{search.RIVAL_TOLERANCE:g} noise standard errors of the best screening score.",
        f"{sum(len(rows) for rows in results.values()) // (len(LEVELS) * len(_places()))} "
        f"models fitted in {fit_seconds:.1f} s (PMNFModeler, uncertainty included); "
        f"{3 * evaluated} intervals (prediction, confidence and classic prediction interval "
        f"per model, place and level; 4 points inside, 1 beyond) in {interval_seconds:.1f} s; "
        "whole benchmark "
        f"{time.perf_counter() - started:.1f} s with data generation and scoring",
        "",
        "Columns: right = share of models with the truth's terms; PI = share of new "
        "measurements inside the prediction interval (all models, right ones, others; "
        "classic: the selected terms' interval alone, without the alternatives); "
        "CI:mean / CI:truth = share of models whose confidence interval holds the expected "
        "measurement / the noiseless truth; half-w% = median half-width relative to the "
        "truth (classic%: of the classic interval); nan = models without an interval.",
    ]
    lines += [
        "",
        "== summary: PI coverage per noise family, r=5, all intensities and truths ==",
        *summary(results),
    ]
    for level in LEVELS:
        lines += ["", f"== stated level {level:.0%} ==", HEADER]
        for setting, rows in results.items():
            label = f"{setting.parameters}p {setting.noise.label()} r={setting.repetitions}"
            lines += summary_rows(rows, level, label)
    lines += [
        "",
        "== PI coverage (95 %) per truth, all settings with r=5 ==",
        *per_truth([r for s, rows in results.items() if s.repetitions == 5 for r in rows], 0.95),
    ]
    lines += ["", "== model selection, 95 %, r=5: the true terms against the others =="]
    for intensity in INTENSITIES[1:]:
        chosen = [
            r
            for s, rows in results.items()
            if s.repetitions == 5 and s.noise.intensity == intensity
            for r in rows
        ]
        lines += [
            f"-- noise intensity {intensity:.0%}, all patterns --",
            *selection_table(chosen, 0.95),
        ]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.output:
        args.output.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
