"""The Experiment: every measurement perfcast knows about, in one long-form table.

One row per (call path, metric, coordinate, repetition) with its value, so nothing a
reader saw is averaged away before modeling; the modeler decides how to aggregate and
uses the spread of the repetitions to judge noise. Parameters are columns named after
the parameter, which keeps selections readable: ``exp.data.query("p == 64")``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from perfcast.errors import InputError
from perfcast.experiment.calltree import CallTree, join_callpath, split_callpath

CALLPATH, METRIC, REPETITION, VALUE = "callpath", "metric", "repetition", "value"
RESERVED_COLUMNS = (CALLPATH, METRIC, REPETITION, VALUE)

AGGREGATIONS = ("median", "mean", "min", "max")


@dataclass(frozen=True)
class Metric:
    """A measured quantity; the unit is carried through to reports ("s", "bytes", "")."""

    name: str
    unit: str = ""


Row = tuple[str, str, Sequence[float], float]
"""(call path, metric, coordinate, value): what readers emit, one per repetition."""


class Experiment:
    """Measurements of one program over a set of parameters.

    ``data`` columns: ``callpath``, ``metric``, one float column per parameter, then
    ``repetition`` (0-based, per call path, metric and coordinate) and ``value``.
    """

    def __init__(
        self,
        parameters: Sequence[str],
        data: pd.DataFrame,
        metrics: Iterable[Metric] = (),
        *,
        source: str | None = None,
    ):
        self.parameters: list[str] = list(parameters)
        self.source = source
        _check_parameter_names(self.parameters, source)
        columns = [CALLPATH, METRIC, *self.parameters, REPETITION, VALUE]
        missing = [c for c in columns if c not in data.columns]
        if missing:
            raise InputError(f"measurement table lacks columns {missing}", path=source)
        self.data: pd.DataFrame = data[columns].reset_index(drop=True)
        known = {m.name: m for m in metrics}
        self.metrics: dict[str, Metric] = {
            name: known.get(name, Metric(name)) for name in pd.unique(self.data[METRIC])
        }
        for name, metric in known.items():
            self.metrics.setdefault(name, metric)

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
        records: list[tuple] = []
        for callpath, metric, coordinate, value in rows:
            if len(coordinate) != len(parameters):
                raise InputError(
                    f"coordinate {tuple(coordinate)} has {len(coordinate)} values but the "
                    f"experiment has {len(parameters)} parameters {parameters}",
                    path=source,
                )
            records.append((_normalise(callpath), metric, *coordinate, value))
        frame = pd.DataFrame.from_records(records, columns=[CALLPATH, METRIC, *parameters, VALUE])
        frame[parameters] = frame[parameters].astype(float)
        frame[VALUE] = frame[VALUE].astype(float)
        keys = [CALLPATH, METRIC, *parameters]
        frame[REPETITION] = frame.groupby(keys, sort=False).cumcount() if len(frame) else []
        return cls(parameters, frame, metrics, source=source)

    # -- views -----------------------------------------------------------------------------

    @property
    def callpaths(self) -> list[str]:
        """Call paths in the order they were first measured."""
        return list(pd.unique(self.data[CALLPATH]))

    @property
    def call_tree(self) -> CallTree:
        return CallTree(self.callpaths)

    def coordinates(self) -> np.ndarray:
        """The distinct measurement points, shape (n_points, n_parameters), sorted."""
        points = self.data[self.parameters].drop_duplicates().to_numpy(dtype=float)
        order = np.lexsort(points.T[::-1]) if len(points) else np.arange(0)
        return points[order]

    def select(self, callpath: str | None = None, metric: str | None = None) -> pd.DataFrame:
        """Rows of one call path and/or metric."""
        mask = np.ones(len(self.data), dtype=bool)
        if callpath is not None:
            mask &= (self.data[CALLPATH] == _normalise(callpath)).to_numpy()
        if metric is not None:
            mask &= (self.data[METRIC] == metric).to_numpy()
        return self.data[mask]

    def restricted(
        self, callpaths: Sequence[str] | None = None, metrics: Sequence[str] | None = None
    ) -> Experiment:
        """A copy with only the given call paths and metrics (``None`` keeps all)."""
        mask = np.ones(len(self.data), dtype=bool)
        for column, wanted in ((CALLPATH, callpaths), (METRIC, metrics)):
            if wanted is None:
                continue
            wanted = [_normalise(w) for w in wanted] if column == CALLPATH else list(wanted)
            known = set(self.data[column])
            missing = [w for w in wanted if w not in known]
            if missing:
                raise InputError(
                    f"no {column} {missing} in the experiment; it has {sorted(known)[:20]}",
                    path=self.source,
                )
            mask &= self.data[column].isin(wanted).to_numpy()
        kept = self.data[mask]
        return Experiment(
            self.parameters,
            kept,
            [m for m in self.metrics.values() if m.name in set(kept[METRIC])],
            source=self.source,
        )

    def aggregate(self, how: str = "median") -> pd.DataFrame:
        """One row per (call path, metric, coordinate): the aggregated value plus the
        repetition count and the repetitions' relative spread (std / |mean|), which the
        modeler uses to tell real variation from measurement noise."""
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
        return len(self.data)

    def __repr__(self) -> str:
        return (
            f"Experiment(parameters={self.parameters}, metrics={list(self.metrics)}, "
            f"callpaths={len(self.callpaths)}, points={len(self.coordinates())}, rows={len(self)})"
        )

    # -- checks ----------------------------------------------------------------------------

    def validate(self) -> None:
        """Reject data the modeler cannot use, naming the call path, metric and point."""
        values = self.data[VALUE].to_numpy(dtype=float)
        coords = self.data[self.parameters].to_numpy(dtype=float)
        bad = ~np.isfinite(values) | ~np.isfinite(coords).all(axis=1)
        if bad.any():
            row = self.data[bad].iloc[0]
            raise InputError(
                f"{int(bad.sum())} measurement(s) are NaN or infinite, first at call path "
                f"{row[CALLPATH]!r}, metric {row[METRIC]!r}, "
                f"{_format_point(self.parameters, row[self.parameters])}; "
                "remove or re-measure them",
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
        data = pd.concat([e.data for e in experiments], ignore_index=True)
        keys = [CALLPATH, METRIC, *parameters]
        data[REPETITION] = data.groupby(keys, sort=False).cumcount()
        metrics = [m for e in experiments for m in e.metrics.values()]
        return Experiment(parameters, data, metrics, source=experiments[0].source)


def _normalise(callpath: str) -> str:
    return join_callpath(split_callpath(callpath))


def _format_point(parameters: Sequence[str], values: Iterable[float]) -> str:
    return ", ".join(f"{p}={v:g}" for p, v in zip(parameters, values, strict=True))


def _check_parameter_names(parameters: Sequence[str], source: str | None) -> None:
    seen: set[str] = set()
    for name in parameters:
        if not name or name in RESERVED_COLUMNS:
            raise InputError(
                f"parameter name {name!r} is not allowed (empty or one of {RESERVED_COLUMNS}); "
                "rename the parameter",
                path=source,
            )
        if name in seen:
            raise InputError(f"parameter {name!r} is declared twice", path=source)
        seen.add(name)


def point_label(parameters: Sequence[str], point: Mapping[str, float] | Sequence[float]) -> str:
    """``p=64, size=1000``: how errors and reports name a coordinate."""
    values = [point[p] for p in parameters] if isinstance(point, Mapping) else list(point)
    return _format_point(parameters, values)
