"""The prediction workflow: a model set and points in, values, intervals and notes out.

``perfcast predict`` prints what :func:`predict` returns, so that a library user evaluating
a model set gets the numbers and the warnings the command prints, and acts on a warning by
its kind (:attr:`~perfcast.modeling.findings.Note.check`) instead of parsing its text.

A number from a model looks equally sure wherever it comes from, so the notes say when it
should not be: how far a point lies beyond the measured range, which models rest on wall
time of runs that shared cores, a simulated platform or another compiler
(:func:`perfcast.modeling.provenance.provenance_notes`), which models are not fit to
extrapolate that far, values below zero, and a call path's inclusive time predicted above
its caller's, which no program can do and which therefore marks a model extrapolated past
its validity.

Beside each value stands its prediction interval: where one new measurement falls with the
probability ``level`` (0.95), from the fit, the repetitions' spread and the alternative
models the measurements could not tell apart (:mod:`perfcast.modeling.intervals`); a note
states the level and what the interval leaves out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from perfcast.errors import InputError
from perfcast.experiment.calltree import join_callpath, split_callpath
from perfcast.experiment.metrics import INCLUSIVE_SUFFIX, base_metric
from perfcast.experiment.names import select_callpaths
from perfcast.experiment.points import format_point, format_value
from perfcast.modeling.extrapolation import unfit_reasons
from perfcast.modeling.findings import Note
from perfcast.modeling.intervals import DEFAULT_LEVEL, prediction_interval
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.provenance import Provenance, runs_notes, shared_cores_notes

CONTRADICTION_TOLERANCE = 0.10
"""How far a callee's inclusive prediction may exceed its caller's before it is reported:
a caller that does little besides calling one callee has nearly the same time, and two
independently fitted models of nearly equal data differ by their noise (a few percent)."""

SHOWN = 5
"""Notes of one kind listed one by one; the rest are counted (in one note that still names
every model it concerns in :attr:`~perfcast.modeling.findings.Note.models`)."""

Key = tuple[str, str]
"""(call path, metric)"""


@dataclass(frozen=True)
class PredictRequest:
    """One prediction job, as ``perfcast predict`` describes it.

    Attributes:
        models: the model set to evaluate.
        points: each parameter's values, one per point (``{"p": [64, 512], "n": [30, 30]}``
            is two points); every parameter of the model set, equally many values each.
        metrics: only these metrics (``None``: every one).
        callpaths: only these call paths: call paths, function names or globs, as
            :func:`~perfcast.experiment.names.select_callpaths` reads them (``None``: all).
        level: the probability of the prediction intervals.
        source: what errors and notes call the model set (its file); ``None``: "the model
            set".
    """

    models: ModelSet
    points: Mapping[str, Sequence[float]]
    metrics: tuple[str, ...] | None = None
    callpaths: tuple[str, ...] | None = None
    level: float = DEFAULT_LEVEL
    source: str | Path | None = None


@dataclass(frozen=True)
class Prediction:
    """One model evaluated at every point, with its prediction interval (``low`` and
    ``high`` are nan where the model carries no uncertainty: its file predates it)."""

    callpath: str
    metric: str
    values: tuple[float, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]


@dataclass(frozen=True)
class Predictions:
    """What :func:`predict` returns: what ``perfcast predict`` prints.

    Attributes:
        points: each point, its parameters in the model set's order.
        level: the probability of the intervals.
        predictions: the models selected, in the model set's order.
        notes: the checks' notes, in the order the command prints them: the intervals,
            where the runs came from, extrapolation, shared cores, models not fit to
            extrapolate that far, negative values, callees above their callers.
    """

    points: tuple[dict[str, float], ...]
    level: float
    predictions: tuple[Prediction, ...]
    notes: tuple[Note, ...]


def predict(request: PredictRequest) -> Predictions:
    """The models of ``request`` evaluated at its points, with the notes on them. A point
    the models cannot be evaluated at (an unknown or missing parameter, a value at or below
    zero that was not measured) and a selection that matches nothing are InputErrors."""
    models, path = request.models, request.source
    point = {name: [float(v) for v in values] for name, values in request.points.items()}
    _check_point(point, models, path)
    try:
        predictions = models.predict(point)
    except InputError as exc:
        raise InputError(exc.reason, path=path) from None
    callpaths = (
        set(select_callpaths(request.callpaths, (key[0] for key in predictions), _str(path)))
        if request.callpaths
        else None
    )
    selected = {
        key: values
        for key, values in predictions.items()
        if (not request.metrics or key[1] in request.metrics)
        and (callpaths is None or key[0] in callpaths)
    }
    if not selected:
        raise InputError("no model matches the --callpath/--metric selection", path=path)
    count = len(next(iter(point.values())))
    points = tuple({p: point[p][i] for p in models.parameters} for i in range(count))
    intervals = {key: prediction_interval(models[key], point, request.level) for key in selected}
    named = "the model set" if path is None else str(path)
    notes = [
        *_interval_notes(intervals, request.level, named),
        *_provenance_notes(models.provenance, point, set(selected), named),
        *_unfit(models, point, set(selected)),
        *_negative(points, predictions, set(selected)),
        *_contradictions(points, predictions, set(selected)),
    ]
    return Predictions(
        points,
        request.level,
        tuple(
            Prediction(
                callpath,
                metric,
                _floats(values),
                *(_floats(bound) for bound in intervals[callpath, metric]),
            )
            for (callpath, metric), values in selected.items()
        ),
        tuple(notes),
    )


def _str(path: str | Path | None) -> str | None:
    return None if path is None else str(path)


def _floats(values: np.ndarray) -> tuple[float, ...]:
    return tuple(float(v) for v in values.reshape(-1))


def _check_point(
    point: Mapping[str, list[float]], models: ModelSet, path: str | Path | None
) -> None:
    """Refuse points the models cannot be evaluated at: parameters they do not have,
    parameters with unequal numbers of values, and values outside their domain."""
    unknown = sorted(set(point) - set(models.parameters))
    if unknown:
        raise InputError(
            f"the models have parameters {models.parameters}, not {unknown}", path=path
        )
    if len({len(values) for values in point.values()}) > 1:
        given = ", ".join(f"{name}: {len(values)}" for name, values in point.items())
        raise InputError(f"give every parameter one value per point ({given})", path=path)
    _check_positive(point, models.provenance, path)


def _check_positive(
    point: Mapping[str, list[float]], provenance: Provenance | None, path: str | Path | None
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


def _interval_notes(
    intervals: Mapping[Key, tuple[np.ndarray, np.ndarray]], level: float, named: str
) -> list[Note]:
    """What the brackets mean, and which models have none (their files predate it)."""
    without = [key for key, (low, _) in intervals.items() if np.isnan(low).all()]
    notes = []
    if len(without) < len(intervals):
        notes.append(
            Note(
                "interval",
                f"[low, high] is the {100 * level:g} % prediction interval of one new "
                "measurement, from the fit's coefficients, the repetitions' spread and the "
                "alternative models the measurements could not tell apart; far beyond the "
                "measured range a truth outside those can lie outside it (see "
                "benchmarks/prediction_intervals.py)",
            )
        )
    if without:
        shown = ", ".join(f"{metric} of {callpath}" for callpath, metric in without[:SHOWN])
        more = f" and {len(without) - SHOWN} more" if len(without) > SHOWN else ""
        notes.append(
            Note(
                "no-interval",
                f"{len(without)} model(s) in {named} carry no uncertainty ({shown}{more}): "
                "no prediction interval; models written before perfcast stored it, or imported "
                "from Extra-P, have none: fit them again with `perfcast model ... -o`",
                tuple(without),
            )
        )
    return notes


def _provenance_notes(
    provenance: Provenance | None,
    point: Mapping[str, list[float]],
    selected: set[Key],
    named: str,
) -> list[Note]:
    """Where the runs came from and how far the points reach beyond them; without a
    provenance, that the file cannot tell."""
    if provenance is None:
        return [
            Note(
                "extrapolation",
                f"{named} does not record the measured range of its parameters (written "
                "before perfcast kept it), so predict cannot tell how far these points "
                "extrapolate; write it again with `perfcast model ... -o`",
            )
        ]
    return [
        *runs_notes(provenance),
        *_extrapolation(point, provenance),
        *shared_cores_notes(provenance, selected, predicted=True),
    ]


def _extrapolation(point: Mapping[str, list[float]], provenance: Provenance) -> list[Note]:
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
                Note(
                    "extrapolation",
                    f"{format_point({name: largest})} is {how_far} the largest measured "
                    f"{name} ({format_value(high)}): an extrapolation, to be trusted less the "
                    "farther it reaches",
                )
            )
        if smallest < low:
            notes.append(
                Note(
                    "extrapolation",
                    f"{format_point({name: smallest})} is below the smallest measured {name} "
                    f"({format_value(low)}): an extrapolation",
                )
            )
    return notes


def _times(ratio: float) -> str:
    """``1.5x``, ``64x``, ``1,024x``"""
    return f"{ratio:,.0f}x" if ratio >= 10 else f"{ratio:.2g}x"


def _unfit(models: ModelSet, point: Mapping[str, list[float]], selected: set[Key]) -> list[Note]:
    """The models not fit to extrapolate to the farthest point asked for, each with its
    reasons (:mod:`perfcast.modeling.extrapolation`; the model file does not keep how many
    values of each parameter were measured, so that reason is the summary's alone)."""
    farthest = {p: max(values) for p, values in point.items()}
    found = []
    for key in sorted(selected):
        reasons = unfit_reasons(models[key], farthest, {}, models.provenance)
        if reasons:
            said = " ".join(f"{u.text()}." for u in reasons)
            text = f"{key[0]} [{key[1]}] is not fit to extrapolate that far: {said}"
            found.append(Note("unfit", text, (key,)))
    return _at_most_shown(found, "more model(s) not fit to extrapolate that far")


def _negative(
    points: Sequence[Mapping[str, float]],
    predictions: Mapping[Key, np.ndarray],
    selected: set[Key],
) -> list[Note]:
    """Models predicting below zero: what perfcast measures (times, visits, bytes, counts)
    never is, so such a model is used outside the range where it holds."""
    found = []
    for (callpath, metric), values in predictions.items():
        flat = values.reshape(-1)
        if (callpath, metric) in selected and (flat < 0).any():
            i = int(np.argmin(flat))
            text = (
                f"{metric} of {callpath} is predicted negative ({flat[i]:.6g} at "
                f"{format_point(points[i])}), "
                "which no measured quantity can be: the model does not hold there"
            )
            found.append(Note("negative", text, ((callpath, metric),)))
    return _at_most_shown(found, "more models predict negative values")


def _contradictions(
    points: Sequence[Mapping[str, float]],
    predictions: Mapping[Key, np.ndarray],
    selected: set[Key],
) -> list[Note]:
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
            text = (
                f"{metric} of {callpath} is predicted at {values.reshape(-1)[i]:.6g} at "
                f"{format_point(points[i])}, more than its caller {caller} "
                f"({caller_values[i]:.6g}), which an inclusive metric cannot be: at least one of "
                "the two models does not hold there"
            )
            found.append(Note("callee-above-caller", text, ((callpath, metric), (caller, metric))))
    return _at_most_shown(found, "more callees are predicted above their callers likewise")


def _at_most_shown(notes: list[Note], rest: str) -> list[Note]:
    """The first :data:`SHOWN` notes, and one that counts the rest and names their models."""
    if len(notes) <= SHOWN:
        return notes
    hidden = notes[SHOWN:]
    models = tuple(key for note in hidden for key in note.models)
    return [*notes[:SHOWN], Note(hidden[0].check, f"{len(hidden)} {rest}", models)]
