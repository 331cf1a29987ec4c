"""``perfcast predict models.json p=4096 n=48000``: evaluate saved models anywhere.

A number from a model looks equally sure wherever it comes from, so the notes beside the
table (on stderr, so that the table stays machine-readable) say when it should not be:
how far a point lies beyond the measured range, which models rest on wall time of runs
that shared cores, and where a call path's inclusive time is predicted above its caller's,
which no program can do and which therefore marks a model extrapolated past its validity.

Beside each value the table prints its prediction interval, ``1330.48 [1280, 1381]``:
where one new measurement falls with the probability ``--level`` (0.95), from the fit, the
repetitions' spread and the alternative models the measurements could not tell apart
(:mod:`perfcast.modeling.intervals`); a note states the level and what the interval leaves
out.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from perfcast.cli import probability
from perfcast.columns import aligned
from perfcast.errors import InputError
from perfcast.experiment.calltree import join_callpath, split_callpath
from perfcast.experiment.metrics import INCLUSIVE_SUFFIX, base_metric
from perfcast.experiment.names import display_names, select_callpaths
from perfcast.experiment.points import format_point, format_value
from perfcast.modeling import ModelSet
from perfcast.modeling.extrapolation import unfit_reasons
from perfcast.modeling.intervals import DEFAULT_LEVEL, prediction_interval
from perfcast.modeling.provenance import Provenance

CONTRADICTION_TOLERANCE = 0.10
"""How far a callee's inclusive prediction may exceed its caller's before it is reported:
a caller that does little besides calling one callee has nearly the same time, and two
independently fitted models of nearly equal data differ by their noise (a few percent)."""

SHOWN = 5
"""Notes of one kind listed one by one; the rest are counted."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "predict",
        description="Evaluate the models of a model file at parameter values given as "
        "NAME=VALUE; a comma list (p=64,128,256) evaluates several points, and a single "
        "value (size=30) is used at every one of them.",
    )
    parser.add_argument("models", type=Path, help="model file written by `perfcast model -o`")
    parser.add_argument("point", nargs="+", metavar="NAME=VALUE")
    parser.add_argument("--metric", action="append", help="only this metric (repeatable)")
    parser.add_argument(
        "--callpath",
        action="append",
        help="only these call paths (repeatable): a call path, a function name, or a glob",
    )
    parser.add_argument(
        "--level",
        type=probability,
        default=DEFAULT_LEVEL,
        help="probability of the prediction interval printed beside each value "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--full-names",
        action="store_true",
        help="print call paths in full (default: function names, C++ signatures shortened)",
    )
    parser.set_defaults(handler=run)


def parse_value_lists(items: list[str]) -> dict[str, list[float]]:
    """``["p=64,512", "size=30"]`` -> ``{"p": [64, 512], "size": [30, 30]}``: the values of
    each parameter at several points, so here the comma separates points (a single point,
    whose comma separates coordinates, is :func:`perfcast.experiment.points.parse_point`);
    lists of one value are repeated to the length of the others."""
    point: dict[str, list[float]] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise InputError(f"cannot read {item!r}: write parameter values as NAME=VALUE")
        if name in point:
            raise InputError(f"{name!r} is given twice: give all its values in one {name}=A,B,C")
        try:
            values = [float(v) for v in text.split(",")]
        except ValueError:
            raise InputError(f"value of {name!r} is not a number: {text!r}") from None
        if not all(math.isfinite(v) for v in values):
            raise InputError(f"value of {name!r} is not a finite number: {text!r}")
        point[name] = values
    lengths = {len(v) for v in point.values()} - {1}
    if len(lengths) > 1:
        given = ", ".join(f"{name}: {len(values)}" for name, values in point.items())
        raise InputError(
            f"give every parameter the same number of comma-separated values, or a single "
            f"value to use at every point ({given})"
        )
    count = max(lengths, default=1)
    return {name: values * count if len(values) == 1 else values for name, values in point.items()}


def run(args: argparse.Namespace) -> int:
    models = ModelSet.load(args.models)
    point = parse_value_lists(args.point)
    unknown = sorted(set(point) - set(models.parameters))
    if unknown:
        raise InputError(
            f"the models have parameters {models.parameters}, not {unknown}", path=args.models
        )
    _check_positive(point, models.provenance, args.models)
    try:
        predictions = models.predict(point)
    except InputError as exc:
        raise InputError(exc.reason, path=args.models) from None
    callpaths = (
        set(select_callpaths(args.callpath, (key[0] for key in predictions), str(args.models)))
        if args.callpath
        else None
    )
    selected = {
        key: values
        for key, values in predictions.items()
        if (not args.metric or key[1] in args.metric) and (callpaths is None or key[0] in callpaths)
    }
    if not selected:
        raise InputError("no model matches the --callpath/--metric selection", path=args.models)
    count = len(next(iter(point.values())))
    header = ["callpath", "metric"] + [
        _nth_point(point, models.parameters, i) for i in range(count)
    ]
    names = (
        {callpath: callpath for callpath, _ in selected}
        if args.full_names
        else display_names(callpath for callpath, _ in selected)
    )
    intervals = {key: prediction_interval(models[key], point, args.level) for key in selected}
    rows = [
        [names[callpath], metric]
        + [
            _with_interval(v, low, high)
            for v, low, high in zip(
                values.reshape(-1),
                *(b.reshape(-1) for b in intervals[callpath, metric]),
                strict=True,
            )
        ]
        for (callpath, metric), values in selected.items()
    ]
    print("\n".join(aligned([header, *rows])))
    notes = _interval_notes(intervals, args.level, args.models)
    for note in notes + _notes(models, point, predictions, set(selected), args.models):
        print(f"note: {note}", file=sys.stderr)
    return 0


def _nth_point(point: Mapping[str, list[float]], parameters: list[str], index: int) -> str:
    """The ``index``-th of the points ``point`` lists one value per parameter for."""
    return format_point((p, point[p][index]) for p in parameters)


def _with_interval(value: float, low: float, high: float) -> str:
    """``12.5 [11.9, 13.1]``; the value alone where the model has no interval."""
    if math.isnan(low):
        return f"{value:.6g}"
    return f"{value:.6g} [{low:.4g}, {high:.4g}]"


def _interval_notes(
    intervals: Mapping[tuple[str, str], tuple[np.ndarray, np.ndarray]], level: float, path: Path
) -> list[str]:
    """What the brackets mean, and which models have none (their files predate it)."""
    without = [key for key, (low, _) in intervals.items() if np.isnan(low).all()]
    notes = []
    if len(without) < len(intervals):
        notes.append(
            f"[low, high] is the {100 * level:g} % prediction interval of one new measurement, "
            "from the fit's coefficients, the repetitions' spread and the alternative models "
            "the measurements could not tell apart; far beyond the measured range a truth "
            "outside those can lie outside it (see benchmarks/prediction_intervals.py)"
        )
    if without:
        shown = ", ".join(f"{metric} of {callpath}" for callpath, metric in without[:SHOWN])
        more = f" and {len(without) - SHOWN} more" if len(without) > SHOWN else ""
        notes.append(
            f"{len(without)} model(s) in {path} carry no uncertainty ({shown}{more}): "
            "no prediction interval; models written before perfcast stored it, or imported "
            "from Extra-P, have none: fit them again with `perfcast model ... -o`"
        )
    return notes


def _check_positive(
    point: Mapping[str, list[float]], provenance: Provenance | None, path: Path
) -> None:
    """PMNF describes parameters that count something (ranks, elements, iterations), all
    positive; a zero or negative value is refused unless such values were measured."""
    for name, values in point.items():
        low = provenance.ranges.get(name, (1.0, 1.0))[0] if provenance else 1.0
        bad = [v for v in values if v <= 0 and v < low]
        if bad:
            measured = (
                f"; the models were fitted on {name} from {format_value(low)} to "
                f"{format_value(provenance.ranges[name][1])}"
                if provenance and name in provenance.ranges
                else ""
            )
            raise InputError(
                f"{format_point({name: bad[0]})} is outside the models' domain: PMNF models are "
                f"defined for positive parameter values{measured}",
                path=path,
            )


def _notes(
    models: ModelSet,
    point: Mapping[str, list[float]],
    predictions: Mapping[tuple[str, str], np.ndarray],
    selected: set[tuple[str, str]],
    path: Path,
) -> list[str]:
    provenance = models.provenance
    if provenance is None:
        notes = [
            f"{path} does not record the measured range of its parameters (written before "
            "perfcast kept it), so predict cannot tell how far these points extrapolate; "
            "write it again with `perfcast model ... -o`"
        ]
    else:
        notes = _extrapolation(point, provenance)
        if provenance.platform is not None:
            notes.insert(
                0,
                f"the models rest on runs on {provenance.platform.describe()} "
                "(a virtual cluster, SimGrid SMPI): the predictions describe that platform's "
                "machine, not one that was measured",
            )
        if provenance.compilers is not None:
            notes.insert(0, provenance.compilers.describe("the program the models rest on"))
        shared = provenance.shared_cores
        if shared is not None and shared.models & selected:
            # Imported here: the measure stage's module reads experiments (pandas), and
            # only models fitted on shared cores need its wording.
            from perfcast.measure.oversubscription import models_note

            notes.append(models_note(shared.models & selected, shared, predicted=True))
    return (
        notes
        + _unfit(models, point, selected)
        + _negative(point, predictions, selected, models.parameters)
        + _contradictions(point, predictions, selected, models.parameters)
    )


def _unfit(
    models: ModelSet, point: Mapping[str, list[float]], selected: set[tuple[str, str]]
) -> list[str]:
    """The models not fit to extrapolate to the farthest point asked for, each with its
    reasons (:mod:`perfcast.modeling.extrapolation`; the model file does not keep how many
    values of each parameter were measured, so that reason is the summary's alone)."""
    farthest = {p: max(values) for p, values in point.items()}
    found = []
    for key in sorted(selected):
        reasons = unfit_reasons(models[key], farthest, {}, models.provenance)
        if reasons:
            said = " ".join(f"{u.text()}." for u in reasons)
            found.append(f"{key[0]} [{key[1]}] is not fit to extrapolate that far: {said}")
    return _at_most_shown(found, "more model(s) not fit to extrapolate that far")


def _negative(
    point: Mapping[str, list[float]],
    predictions: Mapping[tuple[str, str], np.ndarray],
    selected: set[tuple[str, str]],
    parameters: list[str],
) -> list[str]:
    """Models predicting below zero: what perfcast measures (times, visits, bytes, counts)
    never is, so such a model is used outside the range where it holds."""
    found = []
    for (callpath, metric), values in predictions.items():
        flat = values.reshape(-1)
        if (callpath, metric) in selected and (flat < 0).any():
            i = int(np.argmin(flat))
            found.append(
                f"{metric} of {callpath} is predicted negative ({flat[i]:.6g} at "
                f"{_nth_point(point, parameters, i)}), "
                "which no measured quantity can be: the model does not hold there"
            )
    return _at_most_shown(found, "more models predict negative values")


def _extrapolation(point: Mapping[str, list[float]], provenance: Provenance) -> list[str]:
    """Per parameter, how far the points lie beyond (or below) the measured values."""
    notes = []
    for name, values in point.items():
        if name not in provenance.ranges:
            continue
        low, high = provenance.ranges[name]
        largest, smallest = max(values), min(values)
        if largest > high:
            how_far = _times(largest / high) if high > 0 else "beyond"
            notes.append(
                f"{format_point({name: largest})} is {how_far} the largest measured {name} "
                f"({format_value(high)}): an extrapolation, to be trusted less the farther it "
                "reaches"
            )
        if smallest < low:
            notes.append(
                f"{format_point({name: smallest})} is below the smallest measured {name} "
                f"({format_value(low)}): an "
                "extrapolation"
            )
    return notes


def _times(ratio: float) -> str:
    """``1.5x``, ``64x``, ``1,024x``"""
    return f"{ratio:,.0f}x" if ratio >= 10 else f"{ratio:.2g}x"


def _contradictions(
    point: Mapping[str, list[float]],
    predictions: Mapping[tuple[str, str], np.ndarray],
    selected: set[tuple[str, str]],
    parameters: list[str],
) -> list[str]:
    """Callees whose inclusive metric is predicted above their caller's (the nearest
    ancestor with a model of that metric, when the direct caller has none)."""
    found = []
    for (callpath, metric), values in predictions.items():
        frames = split_callpath(callpath)
        # Only inclusive metrics are bounded by the caller's: a callee can be *visited* more
        # often than its caller, and exclusive time has no such order.
        if len(frames) < 2 or not base_metric(metric).endswith(INCLUSIVE_SUFFIX):
            continue
        callers = (join_callpath(frames[:depth]) for depth in range(len(frames) - 1, 0, -1))
        caller = next((c for c in callers if (c, metric) in predictions), None)
        if caller is None:  # no modeled ancestor (uninstrumented or inlined callers)
            continue
        if (callpath, metric) not in selected and (caller, metric) not in selected:
            continue
        caller_values = predictions[(caller, metric)].reshape(-1)
        excess = values.reshape(-1) - caller_values * (1 + CONTRADICTION_TOLERANCE)
        if (excess > 0).any():
            i = int(np.argmax(excess))
            found.append(
                f"{metric} of {callpath} is predicted at {values.reshape(-1)[i]:.6g} at "
                f"{_nth_point(point, parameters, i)}, more than its caller {caller} "
                f"({caller_values[i]:.6g}), which an inclusive metric cannot be: at least one of "
                "the two models does not hold there"
            )
    return _at_most_shown(found, "more callees are predicted above their callers likewise")


def _at_most_shown(notes: list[str], rest: str) -> list[str]:
    if len(notes) <= SHOWN:
        return notes
    return [*notes[:SHOWN], f"{len(notes) - SHOWN} {rest}"]
