"""Shared by readers and writers: the measurements of a file as groups of repetitions.

Readers meet measurements as groups (one call path, metric and point with any number of
repetitions). :class:`MeasurementTable` interns the names and points, keeps the values in
one flat list (still as text where the file had text), and builds the long-form DataFrame
with a few NumPy operations at the end: no per-row Python work beyond splitting lines.
Writers go the other way with :class:`Cells`: the table regrouped per call path, metric
and point, again without a Python loop over rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from perfcast.errors import InputError
from perfcast.experiment.calltree import join_callpath, split_callpath
from perfcast.experiment.experiment import (
    CALLPATH,
    METRIC,
    REPETITION,
    VALUE,
    Experiment,
    Metric,
    point_label,
)

Point = tuple[float, ...]


def describe(token: object) -> str:
    """A short, safe spelling of a value read from a file, for messages.

    ``repr`` of a nested list recurses (a deep one raises), ``repr`` of an integer over
    4,300 digits raises, and a long string would flood a one-line message; containers
    are named by kind instead.
    """
    if token is None:
        return "null"
    if isinstance(token, bool):
        return "true" if token else "false"
    if isinstance(token, list | tuple):
        return f"a list of {len(token)}"
    if isinstance(token, dict):
        return "an object {...}"
    if isinstance(token, int) and token.bit_length() > 64:
        return f"an integer of about {int(token.bit_length() * 0.30103) + 1} digits"
    text = repr(token)
    return text if len(text) <= 40 else text[:37] + "..."


def describe_point(values: Sequence[object]) -> str:
    """A point as read, e.g. ``('3',)``, every coordinate spelled by :func:`describe`."""
    return "(" + ", ".join(map(describe, values)) + ("," if len(values) == 1 else "") + ")"


def locate(what: str, where: str | None) -> str:
    """``what`` prefixed by the key path of a JSON document, if there is one."""
    return f"{where}: {what}" if where else what


def to_number(
    token: object, what: str, *, path: Path, line: int | None = None, where: str | None = None
) -> float:
    """A finite float from a file token, or an InputError saying which token is wrong.

    Only numbers and number text count: ``float(True)`` would quietly make a coordinate
    of 1. ``where`` is the JSON key path when the format has no useful line numbers.
    """
    if isinstance(token, bool) or not isinstance(token, int | float | str):
        raise InputError(
            locate(f"{what} is {describe(token)}, not a number", where), path=path, line=line
        )
    try:
        value = float(token)
    except ValueError:
        raise InputError(
            locate(f"{what} {describe(token)} is not a number", where), path=path, line=line
        ) from None
    except OverflowError:  # an integer beyond the float range, e.g. 10**400
        value = math.inf
    if not math.isfinite(value):
        raise InputError(
            locate(
                f"{what} is {describe(token)}; only finite numbers are allowed (remove or "
                "re-measure it)",
                where,
            ),
            path=path,
            line=line,
        )
    return value


def to_name(
    token: object, what: str, *, path: Path, line: int | None = None, where: str | None = None
) -> str:
    """A parameter, call path or metric name: text, or a whole number spelled as text.

    Anything else (a list, an object, null) is a broken file rather than a name, and
    turning it into one with ``str`` would hide that.
    """
    if isinstance(token, str):
        return token
    if isinstance(token, int) and not isinstance(token, bool) and token.bit_length() <= 64:
        return str(token)
    raise InputError(
        locate(f"{what} is {describe(token)}; names are text", where), path=path, line=line
    )


def repetitions(
    entry: object, *, path: Path, line: int | None = None, where: str | None = None
) -> list[object]:
    """A JSON measurement entry as its list of repetitions (a lone value is one).

    Booleans are refused here because the bulk conversion in
    :meth:`MeasurementTable.to_experiment` would quietly read ``true`` as 1.
    """
    values = entry if isinstance(entry, list) else [entry]
    for value in values:
        if isinstance(value, bool):
            raise InputError(
                locate(f"measured value is {describe(value)}, not a number", where),
                path=path,
                line=line,
            )
    return values


class MeasurementTable:
    """Measurements of one file, gathered group by group, turned into an Experiment."""

    def __init__(self, parameters: Sequence[str], *, path: Path, line: int | None = None):
        if not parameters:
            raise InputError(
                "no parameters are declared; a model needs at least one parameter that "
                "varies between the measurements",
                path=path,
                line=line,
            )
        self.parameters = list(parameters)
        self.path = path
        self._callpaths: dict[str, int] = {}
        self._metrics: dict[str, int] = {}
        self._points: dict[Point, int] = {}
        self._groups: list[tuple[int, int, int]] = []
        self._counts: list[int] = []
        self._locations: list[tuple[int | None, str | None]] = []
        """(line, JSON key path) of each group, to name the place of a bad value."""
        self._values: list[object] = []

    # -- filling -----------------------------------------------------------------------

    def point(
        self, values: Iterable[object], *, line: int | None = None, where: str | None = None
    ) -> int:
        """Intern a measurement point (validated against the parameters); returns its id."""
        raw = tuple(values)
        if all(type(v) is float or type(v) is int for v in raw):  # hashable; 4 == 4.0 hits
            known = self._points.get(raw)  # type: ignore[arg-type]
            if known is not None:
                return known
        if len(raw) != len(self.parameters):
            raise InputError(
                locate(
                    f"point {describe_point(raw)} has {len(raw)} value(s) but there are "
                    f"{len(self.parameters)} parameters ({', '.join(self.parameters)})",
                    where,
                ),
                path=self.path,
                line=line,
            )
        point = tuple(
            to_number(v, f"value of parameter {p!r}", path=self.path, line=line, where=where)
            for p, v in zip(self.parameters, raw, strict=True)
        )
        return self._points.setdefault(point, len(self._points))

    @property
    def points(self) -> list[Point]:
        return list(self._points)

    def add(
        self,
        callpath: str,
        metric: str,
        point: int,
        values: Sequence[object],
        *,
        line: int | None = None,
        where: str | None = None,
    ) -> None:
        """Add the repetitions measured for one call path and metric at a point.

        Values may still be text (``"1.5"``); they are converted and checked all at once
        in :meth:`to_experiment`, which names the line (or JSON key path) of a bad one.
        """
        if not values:
            raise InputError(
                locate("a measurement has no values", where), path=self.path, line=line
            )
        cp = self._callpaths.setdefault(callpath, len(self._callpaths))
        mt = self._metrics.setdefault(metric, len(self._metrics))
        self._groups.append((cp, mt, point))
        self._counts.append(len(values))
        self._locations.append((line, where))
        self._values.extend(values)

    def _numbers(self) -> np.ndarray:
        """All values as finite floats, or an InputError at the first bad one."""
        try:
            numbers = np.asarray(self._values, dtype=float)
            bad = np.flatnonzero(~np.isfinite(numbers)) if numbers.ndim == 1 else [0]
        except (TypeError, ValueError, OverflowError):  # OverflowError: ints over 1e308
            numbers, bad = np.empty(0), [-1]
        if len(bad):  # slow path: convert one by one to find and name the culprit
            ends = np.cumsum(self._counts)
            numbers = np.empty(len(self._values))
            for index, value in enumerate(self._values):
                line, where = self._locations[int(np.searchsorted(ends, index, side="right"))]
                numbers[index] = to_number(
                    value, "measured value", path=self.path, line=line, where=where
                )
        return numbers

    # -- checks ------------------------------------------------------------------------

    def require_complete(self) -> None:
        """Every (call path, metric) must be measured at every point of the file.

        Extra-P rejects such files too (its ``validate_experiment``); the message names
        the first gap so the user can fill or drop it.
        """
        if not self._groups:
            return
        groups = np.asarray(self._groups, dtype=np.int64)
        n_points = len(self._points)
        series, inverse = np.unique(groups[:, :2], axis=0, return_inverse=True)
        seen = np.zeros((len(series), n_points), dtype=bool)
        seen[inverse.ravel(), groups[:, 2]] = True
        incomplete = np.flatnonzero(~seen.all(axis=1))
        if not len(incomplete):
            return
        cp, mt = series[incomplete[0]]
        missing = [p for p, i in self._points.items() if not seen[incomplete[0], i]]
        callpaths, metrics = list(self._callpaths), list(self._metrics)
        raise InputError(
            f"call path {callpaths[cp]!r}, metric {metrics[mt]!r} has no measurement at "
            f"{len(missing)} of the {n_points} points, first at "
            f"{point_label(self.parameters, missing[0])} ({len(incomplete)} call path/metric "
            "pair(s) incomplete); every call path must be measured at every point, as in "
            "Extra-P: add the missing measurements or remove the call path",
            path=self.path,
        )

    # -- result ------------------------------------------------------------------------

    def to_experiment(self, units: Mapping[str, str] | None = None) -> Experiment:
        """The long-form Experiment; repetitions numbered in reading order."""
        if not self._groups:
            raise InputError("the file contains no measurements", path=self.path)
        groups = np.asarray(self._groups, dtype=np.int64)
        counts = np.asarray(self._counts, dtype=np.int64)
        rows = np.repeat(groups, counts, axis=0)
        callpaths = np.array(
            [join_callpath(split_callpath(c)) for c in self._callpaths], dtype=object
        )
        metrics = np.array(list(self._metrics), dtype=object)
        points = np.asarray(list(self._points), dtype=float).reshape(-1, len(self.parameters))
        columns: dict[str, object] = {
            CALLPATH: callpaths[rows[:, 0]],
            METRIC: metrics[rows[:, 1]],
        }
        for i, name in enumerate(self.parameters):
            columns[name] = points[rows[:, 2], i]
        key = (rows[:, 0] * len(metrics) + rows[:, 1]) * len(points) + rows[:, 2]
        columns[REPETITION] = pd.Series(key).groupby(key, sort=False).cumcount().to_numpy()
        columns[VALUE] = self._numbers()
        units = units or {}
        return Experiment(
            self.parameters,
            pd.DataFrame(columns),
            [Metric(name, units.get(name, "")) for name in self._metrics],
            source=str(self.path),
        )


@dataclass(frozen=True)
class Cells:
    """An Experiment regrouped for writing: one cell per (call path, metric) and point."""

    series: list[tuple[str, str]]
    """(call path, metric) pairs in the order they were first measured."""
    points: np.ndarray
    """Distinct points, sorted, shape (n_points, n_parameters)."""
    counts: np.ndarray
    """Repetitions per cell, shape (n_series, n_points); 0 where nothing was measured."""
    values: list[float]
    """All values, ordered by series, point, repetition."""
    ends: np.ndarray
    """Where each cell's values end in ``values`` (flat, row-major over ``counts``)."""

    @classmethod
    def of(cls, experiment: Experiment) -> Cells:
        data = experiment.data
        callpath, callpaths = pd.factorize(data[CALLPATH])
        metric, metrics = pd.factorize(data[METRIC])
        series, firsts = pd.factorize(callpath * len(metrics) + metric)
        point, points = _sorted_points(data, experiment.parameters)
        cells = series * len(points) + point
        counts = np.bincount(cells, minlength=len(firsts) * len(points))
        rows = np.lexsort((data[REPETITION].to_numpy(), cells))
        return cls(
            series=[
                (callpaths[int(k) // len(metrics)], metrics[int(k) % len(metrics)]) for k in firsts
            ],
            points=points,
            counts=counts.reshape(len(firsts), len(points)),
            values=data[VALUE].to_numpy(dtype=float)[rows].tolist(),
            ends=np.cumsum(counts),
        )

    def values_at(self, series: int, point: int) -> list[float]:
        end = int(self.ends[series * len(self.points) + point])
        return self.values[end - int(self.counts[series, point]) : end]


def _sorted_points(data: pd.DataFrame, parameters: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Each row's point index and the distinct points in lexicographic order.

    Factorising column by column and sorting one integer key is much faster than
    ``np.unique(axis=0)`` on float rows.
    """
    key = np.zeros(len(data), dtype=np.int64)
    levels = []
    for name in parameters:
        codes, uniques = pd.factorize(data[name], sort=True)
        key = key * len(uniques) + codes
        levels.append(np.asarray(uniques, dtype=float))
    keys, point = np.unique(key, return_inverse=True)
    digits = []
    for uniques in reversed(levels):
        keys, digit = np.divmod(keys, len(uniques))
        digits.append(uniques[digit])
    return point.ravel(), np.column_stack(digits[::-1]) if digits else np.empty((1, 0))
