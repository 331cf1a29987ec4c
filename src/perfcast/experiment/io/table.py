"""Shared by readers and writers: the measurements of a file as groups of repetitions.

Readers meet measurements as groups (one call path, metric and point with any number of
repetitions). :class:`MeasurementTable` interns the names and points, keeps the group ids
in typed arrays and the values as float arrays (converted from text a chunk at a time),
and builds the Experiment's columns with a few NumPy operations at the end: no per-row
Python work beyond splitting lines, and a peak of twice the finished table's memory.
Writers go the other way with :class:`Cells`: the table regrouped per call path, metric
and point, again without a Python loop over rows.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from perfcast.errors import InputError
from perfcast.experiment.calltree import join_callpath, split_callpath
from perfcast.experiment.experiment import (
    Columns,
    Experiment,
    Metric,
    first_use_codes,
    intern,
)
from perfcast.experiment.points import format_point

Point = tuple[float, ...]

CHUNK_VALUES = 1 << 16
"""Values a :class:`MeasurementTable` keeps as read before converting them to floats."""


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
        self._groups = array("q")
        """(call path id, metric id, point id) of each group, flat."""
        self._counts = array("q")
        self._lines = array("q")
        """The line of each group (0: none), to name the place of a bad value."""
        self._wheres: dict[int, str] = {}
        """The JSON key path of each group that has one, by group index."""
        self._numbers: list[np.ndarray] = []
        """The values converted so far, a chunk at a time."""
        self._pending: list[object] = []
        """Values still as read (text or numbers), at most :data:`CHUNK_VALUES`."""

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

        Values may still be text (``"1.5"``); they are converted and checked many at a
        time (:meth:`_convert`), which names the line (or JSON key path) of a bad one.
        """
        if not values:
            raise InputError(
                locate("a measurement has no values", where), path=self.path, line=line
            )
        cp = self._callpaths.setdefault(callpath, len(self._callpaths))
        mt = self._metrics.setdefault(metric, len(self._metrics))
        if where is not None:
            self._wheres[len(self._counts)] = where
        self._groups.extend((cp, mt, point))
        self._counts.append(len(values))
        self._lines.append(line or 0)
        self._pending.extend(values)
        if len(self._pending) >= CHUNK_VALUES:
            self._convert()

    def _convert(self) -> None:
        """Turn the pending values into finite floats, or raise an InputError naming the
        first bad one. A chunk at a time: text kept until the end took 70 bytes a value,
        eight times its float, and bounded the files that fit in memory."""
        pending, self._pending = self._pending, []
        try:
            numbers = np.asarray(pending, dtype=float)
            bad = np.flatnonzero(~np.isfinite(numbers)) if numbers.ndim == 1 else [0]
        except (TypeError, ValueError, OverflowError):  # OverflowError: ints over 1e308
            numbers, bad = np.empty(0), [-1]
        if len(bad):  # slow path: convert one by one to find and name the culprit
            first = sum(len(chunk) for chunk in self._numbers)
            ends = np.cumsum(self._counts)
            numbers = np.empty(len(pending))
            for index, value in enumerate(pending):
                group = int(np.searchsorted(ends, first + index, side="right"))
                numbers[index] = to_number(
                    value,
                    "measured value",
                    path=self.path,
                    line=self._lines[group] or None,
                    where=self._wheres.get(group),
                )
        self._numbers.append(numbers)

    def _values(self) -> np.ndarray:
        """All values as finite floats, in the order they were added."""
        self._convert()
        return np.concatenate(self._numbers)

    # -- checks ------------------------------------------------------------------------

    def require_complete(self) -> None:
        """Every (call path, metric) must be measured at every point of the file.

        Extra-P rejects such files too (its ``validate_experiment``); the message names
        the first gap so the user can fill or drop it.
        """
        if not self._counts:
            return
        groups = self._group_ids()
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
        first = format_point(zip(self.parameters, missing[0], strict=True))
        raise InputError(
            f"call path {callpaths[cp]!r}, metric {metrics[mt]!r} has no measurement at "
            f"{len(missing)} of the {n_points} points, first at {first} "
            f"({len(incomplete)} call path/metric "
            "pair(s) incomplete); every call path must be measured at every point, as in "
            "Extra-P: add the missing measurements or remove the call path",
            path=self.path,
        )

    # -- result ------------------------------------------------------------------------

    def to_experiment(self, units: Mapping[str, str] | None = None) -> Experiment:
        """The long-form Experiment; repetitions numbered in reading order."""
        if not self._counts:
            raise InputError("the file contains no measurements", path=self.path)
        groups = self._group_ids()
        counts = np.frombuffer(self._counts, dtype=np.int64)
        # spellings of one call path ("a -> b", "a->b") become one name, at its first spelling
        callpaths, spelling = intern([join_callpath(split_callpath(c)) for c in self._callpaths])
        points = np.asarray(list(self._points), dtype=float).reshape(-1, len(self.parameters))
        columns = Columns(
            callpaths=callpaths,
            callpath=np.repeat(spelling[groups[:, 0]], counts),
            metrics=list(self._metrics),
            metric=np.repeat(groups[:, 1], counts),
            coordinates=[
                np.repeat(points[groups[:, 2], i], counts) for i in range(points.shape[1])
            ],
            repetition=_repetitions(groups, counts, len(self._metrics), len(points)),
            value=self._values(),
        )
        units = units or {}
        return Experiment.from_columns(
            self.parameters,
            columns,
            [Metric(name, units.get(name, "")) for name in self._metrics],
            source=str(self.path),
        )

    def _group_ids(self) -> np.ndarray:
        """(call path id, metric id, point id) per group, shape (n_groups, 3)."""
        return np.frombuffer(self._groups, dtype=np.int64).reshape(-1, 3)


def _repetitions(
    groups: np.ndarray, counts: np.ndarray, n_metrics: int, n_points: int
) -> np.ndarray:
    """Each value's repetition number: its place among the values of its call path, metric
    and point in reading order, also when a file gives one point's values in several
    entries. Counted per group, not per value, which is five times fewer rows to group."""
    key = (groups[:, 0] * n_metrics + groups[:, 1]) * n_points + groups[:, 2]
    order = np.argsort(key, kind="stable")  # a key's groups together, in reading order
    running = np.cumsum(counts[order])
    first = np.ones(len(order), dtype=bool)
    first[1:] = key[order][1:] != key[order][:-1]
    before_key = np.maximum.accumulate(np.where(first, running - counts[order], 0))
    earlier = np.empty_like(counts)
    earlier[order] = running - counts[order] - before_key
    starts = np.cumsum(counts) - counts
    within = np.arange(int(counts.sum())) - np.repeat(starts, counts)
    return within + np.repeat(earlier, counts)


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
        table = experiment.columns
        n_metrics = len(table.metrics)
        series, firsts = first_use_codes(table.callpath * n_metrics + table.metric)
        point, points = table.points()
        cells = series * len(points) + point
        counts = np.bincount(cells, minlength=len(firsts) * len(points))
        rows = np.lexsort((table.repetition, cells))
        return cls(
            series=[
                (table.callpaths[int(k) // n_metrics], table.metrics[int(k) % n_metrics])
                for k in firsts
            ],
            points=points,
            counts=counts.reshape(len(firsts), len(points)),
            values=table.value[rows].tolist(),
            ends=np.cumsum(counts),
        )

    def values_at(self, series: int, point: int) -> list[float]:
        end = int(self.ends[series * len(self.points) + point])
        return self.values[end - int(self.counts[series, point]) : end]
