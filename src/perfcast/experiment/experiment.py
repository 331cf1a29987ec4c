"""The Experiment: every measurement perfcast knows about, in one long-form table.

One row per (call path, metric, coordinate, repetition) with its value, so nothing a
reader saw is averaged away before modeling; the modeler decides how to aggregate and
uses the repetitions' scatter to judge noise (:mod:`perfcast.modeling.robust`).
Parameters are columns named after the parameter, which keeps selections readable:
``exp.data.query("p == 64")``.

The Experiment keeps that table as NumPy arrays (:class:`Columns`: call path and metric
codes with their names, one float array per parameter, repetition, value) and builds the
DataFrame only when ``data`` is first read. Reading a file, selecting call paths and
modeling work on the arrays, so ``perfcast model`` never imports pandas (0.2 s of a
one-second run on a thousand call paths).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from perfcast.appspec import CALLPATH, METRIC, REPETITION, RESERVED_NAMES, VALUE
from perfcast.errors import InputError
from perfcast.experiment.calltree import CallTree, join_callpath, split_callpath
from perfcast.experiment.points import format_point

if TYPE_CHECKING:
    import pandas as pd


AGGREGATIONS = ("median", "mean", "min", "max")

MAX_MAGNITUDE = 1e150
"""Largest magnitude of a measured value, and the inverse of the smallest non-zero one,
the modeler accepts: fits square values, and relative weights square their inverses, so
beyond it the sums leave the doubles (1.7e308 made NumPy print overflow warnings and the
fit meaningless). No time or count comes near it; a value that does is a unit error."""


@dataclass(frozen=True)
class Metric:
    """A measured quantity; the unit is carried through to reports ("s", "bytes", "")."""

    name: str
    unit: str = ""


Row = tuple[str, str, Sequence[float], float]
"""(call path, metric, coordinate, value): what readers emit, one per repetition."""


@dataclass(frozen=True)
class Columns:
    """The measurement table as arrays, one entry per row (a single repetition).

    Names are stored once and rows hold codes into them; every name is used by some row
    and names are listed in the order of their first row, which is the order
    ``pd.factorize`` would give, so code that groups by these codes sees the same order
    as code that groups the DataFrame.
    """

    callpaths: list[str]
    callpath: np.ndarray
    """Code of each row's call path in ``callpaths`` (int64)."""
    metrics: list[str]
    metric: np.ndarray
    """Code of each row's metric in ``metrics`` (int64)."""
    coordinates: list[np.ndarray]
    """One float array per parameter, in the experiment's parameter order."""
    repetition: np.ndarray
    value: np.ndarray

    def __len__(self) -> int:
        return len(self.value)

    def masked(self, mask: np.ndarray) -> Columns:
        """The rows where ``mask`` holds, names no row uses any more dropped."""
        callpaths, callpath = _compact(self.callpaths, self.callpath[mask])
        metrics, metric = _compact(self.metrics, self.metric[mask])
        return Columns(
            callpaths,
            callpath,
            metrics,
            metric,
            [values[mask] for values in self.coordinates],
            self.repetition[mask],
            self.value[mask],
        )

    def points(self) -> tuple[np.ndarray, np.ndarray]:
        """Each row's point index and the distinct points in lexicographic order, shape
        (n_points, n_parameters).

        Coding each parameter by its sorted distinct values and sorting one integer key
        is much faster than ``np.unique(axis=0)`` on float rows.
        """
        key = np.zeros(len(self), dtype=np.int64)
        levels = []
        for values in self.coordinates:
            uniques, codes = np.unique(values, return_inverse=True)
            key = key * len(uniques) + codes.ravel()
            levels.append(uniques)
        keys, point = np.unique(key, return_inverse=True)
        digits = []
        for uniques in reversed(levels):
            keys, digit = np.divmod(keys, len(uniques))
            digits.append(uniques[digit])
        if not digits:
            return point.ravel(), np.empty((len(keys), 0))
        return point.ravel(), np.column_stack(digits[::-1])


def _compact(names: list[str], codes: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The names ``codes`` use, in order of first use, and the codes renumbered to them."""
    renumbered, used = first_use_codes(codes)
    if len(used) == len(names) and (used == np.arange(len(names))).all():
        return names, codes  # all still used, first in the same order
    return [names[int(i)] for i in used], renumbered


def first_use_codes(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Integer keys coded by first occurrence: each key's code and the distinct keys in
    order of first occurrence (what ``pd.factorize`` gives, without pandas)."""
    distinct, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    order = np.argsort(first)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank[inverse.ravel()], distinct[order]


def intern(names: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Distinct names in order of first occurrence, and each name's code among them."""
    index: dict[str, int] = {}
    codes = np.fromiter(
        (index.setdefault(n, len(index)) for n in names), dtype=np.int64, count=len(names)
    )
    return list(index), codes


class Experiment:
    """Measurements of one program over a set of parameters.

    ``data`` columns: ``callpath``, ``metric``, one float column per parameter, then
    ``repetition`` (0-based, per call path, metric and coordinate) and ``value``. Built
    on first access from :attr:`columns`, which the modeler and the readers use directly.
    Experiments are not changed in place: every method that selects or adds returns a new
    one.
    """

    def __init__(
        self,
        parameters: Sequence[str],
        data: pd.DataFrame,
        metrics: Iterable[Metric] = (),
        *,
        source: str | None = None,
    ):
        import pandas as pd

        parameters = list(parameters)
        _check_parameter_names(parameters, source)
        columns = [CALLPATH, METRIC, *parameters, REPETITION, VALUE]
        missing = [c for c in columns if c not in data.columns]
        if missing:
            raise InputError(f"measurement table lacks columns {missing}", path=source)
        if not (list(data.columns) == columns and data.index.equals(pd.RangeIndex(len(data)))):
            data = data[columns].reset_index(drop=True)
        callpath, callpaths = pd.factorize(data[CALLPATH])
        metric, metric_names = pd.factorize(data[METRIC])
        table = Columns(
            list(callpaths),
            callpath.astype(np.int64),
            list(metric_names),
            metric.astype(np.int64),
            [data[name].to_numpy(dtype=float) for name in parameters],
            data[REPETITION].to_numpy(),
            data[VALUE].to_numpy(dtype=float),
        )
        self._setup(parameters, table, metrics, source)
        self.__dict__["data"] = data  # as given: a rebuilt copy would double the peak

    @classmethod
    def from_columns(
        cls,
        parameters: Sequence[str],
        columns: Columns,
        metrics: Iterable[Metric] = (),
        *,
        source: str | None = None,
    ) -> Experiment:
        """An experiment over arrays a reader built (names in order of first use)."""
        parameters = list(parameters)
        _check_parameter_names(parameters, source)
        if len(columns.coordinates) != len(parameters):
            raise ValueError(
                f"{len(columns.coordinates)} coordinate arrays for parameters {parameters}"
            )
        experiment = cls.__new__(cls)
        experiment._setup(parameters, columns, metrics, source)
        return experiment

    def _setup(
        self,
        parameters: list[str],
        columns: Columns,
        metrics: Iterable[Metric],
        source: str | None,
    ) -> None:
        self.parameters: list[str] = parameters
        self.source = source
        self.columns = columns
        known = {m.name: m for m in metrics}
        self.metrics: dict[str, Metric] = {
            name: known.get(name, Metric(name)) for name in columns.metrics
        }
        for name, metric in known.items():
            self.metrics.setdefault(name, metric)

    @cached_property
    def data(self) -> pd.DataFrame:
        """The long-form table (see the class docstring), built once from :attr:`columns`."""
        import pandas as pd

        table = self.columns
        frame: dict[str, object] = {
            CALLPATH: np.array(table.callpaths, dtype=object)[table.callpath],
            METRIC: np.array(table.metrics, dtype=object)[table.metric],
        }
        frame.update(zip(self.parameters, table.coordinates, strict=True))
        frame[REPETITION] = table.repetition
        frame[VALUE] = table.value
        return pd.DataFrame(frame)

    # -- construction -------------------------------------------------------------------

    @classmethod
    def from_rows(
        cls,
        parameters: Sequence[str],
        rows: Iterable[Row],
        metrics: Iterable[Metric] = (),
        *,
        source: str | None = None,
    ) -> Experiment:
        """Build from (call path, metric, coordinate, value) rows, one per repetition.

        Repetitions are numbered in the order rows arrive for the same call path, metric
        and coordinate. Call paths are normalised to the ``a->b->c`` spelling.
        """
        parameters = list(parameters)
        callpaths: list[str] = []
        metric_names: list[str] = []
        coordinates: list[tuple[float, ...]] = []
        values: list[float] = []
        repetitions: list[int] = []
        seen: dict[tuple, int] = {}
        for callpath, metric, coordinate, value in rows:
            if len(coordinate) != len(parameters):
                raise InputError(
                    f"coordinate {tuple(coordinate)} has {len(coordinate)} values but the "
                    f"experiment has {len(parameters)} parameters {parameters}",
                    path=source,
                )
            point = tuple(float(v) for v in coordinate)
            name = _normalise(callpath)
            key = (name, metric, point)
            repetitions.append(seen.get(key, 0))
            seen[key] = repetitions[-1] + 1
            callpaths.append(name)
            metric_names.append(metric)
            coordinates.append(point)
            values.append(float(value))
        points = np.array(coordinates, dtype=float).reshape(len(values), len(parameters))
        columns = Columns(
            *intern(callpaths),
            *intern(metric_names),
            [points[:, i].copy() for i in range(len(parameters))],
            np.array(repetitions, dtype=np.int64),
            np.array(values, dtype=float),
        )
        return cls.from_columns(parameters, columns, metrics, source=source)

    # -- views -----------------------------------------------------------------------------

    @property
    def callpaths(self) -> list[str]:
        """Call paths in the order they were first measured."""
        return list(self.columns.callpaths)

    @property
    def call_tree(self) -> CallTree:
        return CallTree(self.callpaths)

    def coordinates(self) -> np.ndarray:
        """The distinct measurement points, shape (n_points, n_parameters), sorted."""
        return self.columns.points()[1]

    def ranges(self) -> dict[str, tuple[float, float]]:
        """Each parameter's smallest and largest measured value."""
        return {
            name: (float(values.min()), float(values.max()))
            for name, values in zip(self.parameters, self.columns.coordinates, strict=True)
        }

    def select(self, callpath: str | None = None, metric: str | None = None) -> pd.DataFrame:
        """Rows of one call path and/or metric."""
        mask = np.ones(len(self), dtype=bool)
        if callpath is not None:
            mask &= self._rows_of(CALLPATH, [_normalise(callpath)])
        if metric is not None:
            mask &= self._rows_of(METRIC, [metric])
        return self.data[mask]

    def _rows_of(self, column: str, wanted: Sequence[str]) -> np.ndarray:
        """Which rows have one of the ``wanted`` names in ``column`` (call path or metric)."""
        names, codes = (
            (self.columns.callpaths, self.columns.callpath)
            if column == CALLPATH
            else (self.columns.metrics, self.columns.metric)
        )
        chosen = set(wanted)
        selected = np.array([name in chosen for name in names], dtype=bool)
        return selected[codes] if len(names) else np.zeros(len(codes), dtype=bool)

    def restricted(
        self, callpaths: Sequence[str] | None = None, metrics: Sequence[str] | None = None
    ) -> Experiment:
        """The experiment with only the given call paths and metrics (``None`` keeps all).
        Experiments are not changed in place, so where nothing is left out this is the
        experiment itself, not a copy of a table that may hold millions of rows."""
        mask = np.ones(len(self), dtype=bool)
        for column, wanted, known in (
            (CALLPATH, callpaths, self.columns.callpaths),
            (METRIC, metrics, self.columns.metrics),
        ):
            if wanted is None:
                continue
            wanted = [_normalise(w) for w in wanted] if column == CALLPATH else list(wanted)
            present = set(known)
            missing = [w for w in wanted if w not in present]
            if missing:
                raise InputError(
                    f"no {column} {missing} in the experiment; it has {sorted(present)[:20]}",
                    path=self.source,
                )
            mask &= self._rows_of(column, wanted)
        if mask.all():
            return self
        kept = self.columns.masked(mask)
        present = set(kept.metrics)
        return Experiment.from_columns(
            self.parameters,
            kept,
            [m for m in self.metrics.values() if m.name in present],
            source=self.source,
        )

    def aggregate(self, how: str = "median") -> pd.DataFrame:
        """One row per (call path, metric, coordinate): the aggregated value plus the
        repetition count and the repetitions' ``spread``, their sample standard deviation
        over the absolute value of their mean (0 for a single repetition). That is what
        "spread" means in perfcast; the modeler judges noise by a robust relative noise
        instead (:func:`~perfcast.modeling.robust.robust_noise`), and the effort check by
        the relative range (:data:`~perfcast.effort.waiting.RELATIVE_RANGE`)."""
        if how not in AGGREGATIONS:
            raise InputError(f"unknown aggregation {how!r}; choose one of {AGGREGATIONS}")
        keys = [CALLPATH, METRIC, *self.parameters]
        grouped = self.data.groupby(keys, sort=False)[VALUE]
        table = grouped.agg([how, "count", "mean", "std"]).reset_index()
        table = table.rename(columns={how: VALUE, "count": "repetitions"})
        scale = table["mean"].abs().where(table["mean"] != 0, 1.0)
        table["spread"] = (table["std"].fillna(0.0) / scale).astype(float)
        return table.drop(columns=["mean", "std"])

    def with_absent_as_zero(self) -> tuple[Experiment, int]:
        """A copy in which every (call path, metric) has a value at every measured point, and
        how many (call path, metric, point) cells were added.

        A call path absent from a run that completed was not called in it: it ran zero
        times and took zero time (MPI calls at ``p = 1``). Extra-P's formats need every
        call path at every point, so exports write those zeros, once per repetition the
        other call paths have at that point. Points no call path has are not invented."""
        import pandas as pd

        keys = [CALLPATH, METRIC]
        series = self.data[keys].drop_duplicates()
        repetitions = (
            self.data.groupby(self.parameters, sort=False)[REPETITION].max().rename("count") + 1
        ).reset_index()
        grid = series.merge(repetitions, how="cross")
        measured = self.data[[*keys, *self.parameters]].drop_duplicates()
        grid = grid.merge(measured, on=[*keys, *self.parameters], how="left", indicator=True)
        absent = grid[grid["_merge"] == "left_only"].drop(columns="_merge")
        if absent.empty:
            return self, 0
        counts = absent["count"].to_numpy(dtype=int)
        zeros = absent.loc[absent.index.repeat(counts)].drop(columns="count")
        zeros[REPETITION] = np.concatenate([np.arange(c) for c in counts])
        zeros[VALUE] = 0.0
        data = pd.concat([self.data, zeros[self.data.columns]], ignore_index=True)
        filled = Experiment(self.parameters, data, self.metrics.values(), source=self.source)
        return filled, len(absent)

    def __len__(self) -> int:
        return len(self.columns)

    def __repr__(self) -> str:
        return (
            f"Experiment(parameters={self.parameters}, metrics={list(self.metrics)}, "
            f"callpaths={len(self.callpaths)}, points={len(self.coordinates())}, rows={len(self)})"
        )

    # -- checks ----------------------------------------------------------------------------

    def validate(self) -> None:
        """Reject data the modeler cannot use, naming the call path, metric and point."""
        table = self.columns
        bad = ~np.isfinite(table.value)
        for values in table.coordinates:
            bad |= ~np.isfinite(values)
        if bad.any():
            row = int(np.argmax(bad))
            at = [v[row] for v in table.coordinates]
            where = format_point(zip(self.parameters, at, strict=True))
            raise InputError(
                f"{int(bad.sum())} measurement(s) are NaN or infinite, first at call path "
                f"{table.callpaths[table.callpath[row]]!r}, metric "
                f"{table.metrics[table.metric[row]]!r}, "
                f"{where}; "
                "remove or re-measure them",
                path=self.source,
            )
        magnitude = np.abs(table.value)
        bad = (magnitude > MAX_MAGNITUDE) | ((magnitude > 0) & (magnitude < 1 / MAX_MAGNITUDE))
        if bad.any():
            row = int(np.argmax(bad))
            at = [v[row] for v in table.coordinates]
            raise InputError(
                f"{int(bad.sum())} measurement(s) lie beyond what a fit can square (magnitude "
                f"above {MAX_MAGNITUDE:g} or, other than zero, below {1 / MAX_MAGNITUDE:g}), "
                f"first {table.value[row]:g} at call path "
                f"{table.callpaths[table.callpath[row]]!r}, metric "
                f"{table.metrics[table.metric[row]]!r}, "
                f"{format_point(zip(self.parameters, at, strict=True))}; "
                "express the metric in other units or remove them",
                path=self.source,
            )

    @staticmethod
    def concat(experiments: Sequence[Experiment]) -> Experiment:
        """Merge experiments over the same parameters (e.g. one per Cube profile)."""
        if not experiments:
            raise InputError("nothing to merge: no experiments given")
        parameters = experiments[0].parameters
        for exp in experiments[1:]:
            if exp.parameters != parameters:
                raise InputError(
                    f"cannot merge experiments over {parameters} and {exp.parameters}",
                    path=exp.source,
                )
        import pandas as pd

        data = pd.concat([e.data for e in experiments], ignore_index=True)
        keys = [CALLPATH, METRIC, *parameters]
        data[REPETITION] = data.groupby(keys, sort=False).cumcount()
        metrics = [m for e in experiments for m in e.metrics.values()]
        return Experiment(parameters, data, metrics, source=experiments[0].source)


def _normalise(callpath: str) -> str:
    return join_callpath(split_callpath(callpath))


def _check_parameter_names(parameters: Sequence[str], source: str | None) -> None:
    seen: set[str] = set()
    for name in parameters:
        if not name or name in RESERVED_NAMES:
            raise InputError(
                f"parameter name {name!r} is not allowed (empty or one of {RESERVED_NAMES}); "
                "rename the parameter",
                path=source,
            )
        if name in seen:
            raise InputError(f"parameter {name!r} is declared twice", path=source)
        seen.add(name)
