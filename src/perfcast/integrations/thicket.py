"""thicket and hatchet, both ways: their structures in, perfcast's models out as columns.

A thicket user holds an ensemble of profiles (a ``Thicket``: a performance DataFrame
indexed by call-tree node and profile, and a metadata table of one row per profile, the
Adiak globals among its columns). :func:`from_thicket` makes it one
:class:`~perfcast.experiment.Experiment`, the chosen metadata columns as parameters, and
:func:`model_thicket` fits it the way ``perfcast model`` does
(:func:`perfcast.workflows.model.model_campaign`), for any number of parameters, where
``thicket.model_extrap`` models one. :func:`model_columns` gives the models back as columns
indexed like the thicket's statsframe (formula, SMAPE, adjusted R^2, the value at a target
with its interval, the growth there), and :func:`add_model_columns` joins them in.
:func:`from_graphframes` does the same for hatchet GraphFrames, each with its parameters,
and :func:`to_thicket` goes the other way: perfcast's own measurements (a campaign store)
as a Thicket a thicket user explores.

Profiles that differ in a metadata column not chosen as a parameter are refused at a
shared point, as the Caliper reader refuses them (:mod:`perfcast.experiment.io.caliper`):
``where={"compiler": "intel"}`` keeps one configuration.

thicket and hatchet are imported by the user, not here: the functions take the objects
and read them through their public attributes (``dataframe``, ``metadata``,
``exc_metrics``, ``inc_metrics``, a node's ``path()`` and ``frame``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from perfcast.errors import InputError
from perfcast.experiment.calltree import SEPARATOR, recorded_callpath
from perfcast.experiment.experiment import Experiment, Metric, Row
from perfcast.experiment.io.caliper import RunSettings, check_settings
from perfcast.experiment.metrics import is_max
from perfcast.workflows.model import ModelRequest, model_campaign

if TYPE_CHECKING:
    import pandas as pd

    from perfcast.modeling.modelset import ModelSet

MODEL_TAG = "_perfcast"
"""Columns :func:`model_columns` adds end ``<metric>_perfcast-<what>``, apart from
thicket's own ``_extrap-model`` columns, so both can sit side by side."""


def callpath_of(node: Any) -> str:
    """A hatchet node's call path: the names from its root, ``main->solve``."""
    return recorded_callpath(ancestor.frame.get("name", ancestor.frame) for ancestor in node.path())


def from_thicket(
    thicket: Any,
    parameters: Sequence[str] | str,
    metrics: Sequence[str] | None = None,
    where: Mapping[str, Any] | None = None,
) -> Experiment:
    """The thicket's profiles as one Experiment over the metadata columns ``parameters``.

    ``metrics`` defaults to the thicket's exclusive and inclusive metrics; several
    profiles at one point are repetitions; ``where`` keeps the profiles whose metadata
    has these values."""
    chosen = [parameters] if isinstance(parameters, str) else list(parameters)
    metadata = thicket.metadata
    missing = [name for name in chosen if name not in metadata.columns]
    if missing:
        raise InputError(
            f"no metadata column {', '.join(map(repr, missing))} in the thicket; columns: "
            + ", ".join(map(str, metadata.columns[:40]))
        )
    for key, value in (where or {}).items():
        if key not in metadata.columns:
            raise InputError(f"where: no metadata column {key!r} in the thicket")
        metadata = metadata[metadata[key].astype(str) == str(value)]
    if metadata.empty:
        raise InputError(f"no profile of the thicket has {dict(where or {})}")
    names = _metrics(thicket, metrics)
    frame = thicket.dataframe
    profiles = frame.index.get_level_values("profile")
    runs: list[RunSettings] = []
    coordinates: list[tuple[float, ...]] = []
    rows: list[Row] = []
    for profile, settings in metadata.iterrows():
        point = _point(settings, chosen, profile)
        runs.append(_settings(profile, settings, metadata))
        coordinates.append(point)
        subset = frame[profiles == profile]
        for (node, _), values in subset[names].iterrows():
            rows.extend(_rows(callpath_of(node), values, point))
    check_settings(runs, coordinates, chosen)
    return Experiment.from_rows(chosen, rows, [Metric(n) for n in names], source="thicket")


def from_graphframes(
    frames: Iterable[tuple[Any, Mapping[str, float]]],
    metrics: Sequence[str] | None = None,
) -> Experiment:
    """hatchet GraphFrames, each with its parameters (``[(gf, {"p": 64, "n": 30}), ...]``),
    as one Experiment. A GraphFrame indexed by node and rank gives each node's mean over
    ranks, the value perfcast's own runtime reports per call path."""
    rows: list[Row] = []
    parameters: list[str] | None = None
    names: list[str] = []
    for number, (graphframe, point) in enumerate(frames):
        if parameters is None:
            parameters = list(point)
        elif sorted(point) != sorted(parameters):
            raise InputError(
                f"GraphFrame {number} has parameters {sorted(point)}, the first had "
                f"{sorted(parameters)}: give every GraphFrame the same parameters"
            )
        names = _metrics(graphframe, metrics)
        frame = graphframe.dataframe[names]
        if frame.index.nlevels > 1:
            frame = frame.groupby(level=0, sort=False).mean()
        coordinate = tuple(
            _number(point[name], name, f"GraphFrame {number}") for name in parameters
        )
        for node, values in frame.iterrows():
            rows.extend(_rows(callpath_of(node), values, coordinate))
    if parameters is None:
        raise InputError("no GraphFrame given")
    return Experiment.from_rows(parameters, rows, [Metric(n) for n in names], source="hatchet")


def thicket_literals(
    experiment: Experiment, metrics: Sequence[str] | None = None, aggregation: str = "median"
) -> list[tuple[list[dict[str, Any]], dict[str, float]]]:
    """perfcast's measurements the other way: one hatchet literal (the nested-dict tree
    ``GraphFrame.from_literal`` and ``Thicket.from_literal`` read) per measured point, with
    the point as metadata. Each node carries the exclusive value of every metric
    (aggregated over repetitions) and, for metrics that add up over the call tree (not the
    ``:max`` over ranks), the inclusive value as hatchet names it, ``<metric> (inc)``; a
    call path not measured at a point is 0 there. Plain data: it travels as JSON to an
    interpreter that has thicket but not perfcast."""
    names = list(metrics) if metrics is not None else list(experiment.metrics)
    missing = [name for name in names if name not in experiment.metrics]
    if missing:
        raise InputError(
            f"no metric {', '.join(map(repr, missing))}; metrics: {', '.join(experiment.metrics)}"
        )
    table = experiment.restricted(metrics=names).aggregate(aggregation)
    parameters = experiment.parameters
    points = table[parameters].to_numpy(dtype=float)
    by_point: dict[tuple[float, ...], dict[tuple[str, str], float]] = {}
    for point, callpath, metric, value in zip(
        map(tuple, points),
        table["callpath"].astype(str),
        table["metric"].astype(str),
        table["value"].to_numpy(dtype=float),
        strict=True,
    ):
        by_point.setdefault(point, {})[(callpath, metric)] = float(value)
    callpaths = experiment.callpaths
    literals = [
        (_literal(callpaths, names, values), dict(zip(parameters, point, strict=True)))
        for point, values in sorted(by_point.items())
    ]
    return literals


def to_thicket(
    experiment: Experiment, metrics: Sequence[str] | None = None, aggregation: str = "median"
) -> Any:
    """perfcast's measurements as a Thicket: one profile per measured point
    (:func:`thicket_literals`), the parameters as metadata columns."""
    import pandas as pd
    import thicket

    profiles = []
    for literal, point in thicket_literals(experiment, metrics, aggregation):
        profile = thicket.Thicket.from_literal(literal)
        index = pd.Index(profile.profile, name="profile")
        profile.metadata = pd.DataFrame({k: [v] for k, v in point.items()}, index=index)
        profiles.append(profile)
    ids = [p for profile in profiles for p in profile.profile]
    if len(set(ids)) != len(ids):
        raise InputError(
            "two points have the same measurements, so thicket gives them one profile id; "
            "leave out the metrics that do not change (counts) or model them with perfcast"
        )
    return thicket.Thicket.concat_thickets(profiles, disable_tqdm=True)


def _literal(
    callpaths: Sequence[str], metrics: Sequence[str], values: Mapping[tuple[str, str], float]
) -> list[dict[str, Any]]:
    nodes: dict[str, dict[str, Any]] = {}
    roots: list[dict[str, Any]] = []
    for callpath in sorted(callpaths, key=lambda c: c.count(SEPARATOR)):
        parent, _, name = callpath.rpartition(SEPARATOR)
        node = {
            "frame": {"name": name, "type": "function"},
            "metrics": {m: values.get((callpath, m), 0.0) for m in metrics},
            "children": [],
        }
        nodes[callpath] = node
        (nodes[parent]["children"] if parent in nodes else roots).append(node)
    additive = [m for m in metrics if not is_max(m)]

    def inclusive(node: dict[str, Any]) -> dict[str, float]:
        below = [inclusive(child) for child in node["children"]]
        totals = {m: node["metrics"][m] + sum(b[m] for b in below) for m in additive}
        node["metrics"].update({f"{m} (inc)": v for m, v in totals.items()})
        return totals

    for root in roots:
        inclusive(root)
    return roots


def model_thicket(
    thicket: Any,
    parameters: Sequence[str] | str,
    metrics: Sequence[str] | None = None,
    where: Mapping[str, Any] | None = None,
    priors: Sequence[str] | None = None,
) -> ModelSet:
    """The models ``perfcast model`` would fit to the thicket's profiles. ``priors``
    as ``--priors``: by default chosen as ``perfcast model`` chooses them, which for a
    thicket means effort priors where its profiles carry perfcast's counters
    (``basic_blocks``, a Thicket made by :func:`to_thicket`) and black-box models
    otherwise (Caliper's profiles carry no exact counts)."""
    experiment = from_thicket(thicket, parameters, metrics, where)
    chosen = None if priors is None else tuple(priors)
    asked = tuple(metrics) if metrics is not None else None  # the time metric effort fixes
    return model_campaign(ModelRequest(experiment, priors=chosen, metrics=asked)).models


def model_columns(
    models: ModelSet,
    thicket: Any,
    target: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """The models as columns indexed like ``thicket.statsframe.dataframe``: per metric,
    ``<metric>_perfcast-model`` (the formula), ``-smape``, ``-adjusted_r2``, ``-notes``
    and, with a ``target``, ``-at_target``, ``-lower``, ``-upper`` (its 95 % prediction
    interval), ``-growth`` from the largest measured point and ``-unfit``, every reason
    the model cannot be read at the target (empty: it can)."""
    import pandas as pd

    table = models.to_dataframe(target)
    index = thicket.statsframe.dataframe.index
    by_callpath = {callpath_of(node): node for node in index}
    table = table[table["callpath"].isin(by_callpath)]
    columns: dict[str, pd.Series] = {}
    for metric, group in table.groupby("metric", sort=False):
        group = group.set_index(group["callpath"].map(by_callpath))
        for what in group.columns.drop(["callpath", "metric", "points"]):
            columns[f"{metric}{MODEL_TAG}-{what}"] = group[what]
    return pd.DataFrame(columns, index=index)


def add_model_columns(
    thicket: Any, models: ModelSet, target: Mapping[str, float] | None = None
) -> list[str]:
    """Join :func:`model_columns` into the thicket's statsframe; the names added."""
    columns = model_columns(models, thicket, target)
    stats = thicket.statsframe.dataframe.drop(columns=columns.columns, errors="ignore")
    thicket.statsframe.dataframe = stats.join(columns)
    return list(columns.columns)


def _metrics(structure: Any, metrics: Sequence[str] | None) -> list[str]:
    available = [*structure.exc_metrics, *structure.inc_metrics]
    if metrics is None:
        if not available:
            raise InputError("the structure names no metrics (exc_metrics, inc_metrics)")
        return list(dict.fromkeys(available))
    missing = [m for m in metrics if m not in structure.dataframe.columns]
    if missing:
        raise InputError(
            f"no metric {', '.join(map(repr, missing))}; metrics: {', '.join(map(str, available))}"
        )
    return list(metrics)


def _point(settings: pd.Series, chosen: Sequence[str], profile: Any) -> tuple[float, ...]:
    return tuple(_number(settings[name], name, f"profile {profile}") for name in chosen)


def _number(value: Any, name: str, where: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(
            f"{where}: {name} is {str(value)[:40]!r}, not a number: a parameter must be "
            f"numeric; keep one value with where={{{name!r}: ...}}"
        ) from None
    if not math.isfinite(number):
        raise InputError(f"{where}: {name} is {value!r}, not a finite number")
    return number


def _settings(profile: Any, settings: pd.Series, metadata: pd.DataFrame) -> RunSettings:
    """A profile's metadata as the settings the Caliper reader compares; numeric
    columns of floats are measured results (``elapsed_time``), not settings."""
    types = {name: "double" for name in metadata.columns if metadata[name].dtype.kind == "f"}
    values = {str(name): str(value) for name, value in settings.items()}
    return RunSettings(f"profile {profile}", values, types)


def _rows(callpath: str, values: pd.Series, point: tuple[float, ...]) -> Iterable[Row]:
    for metric, value in values.items():
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            yield callpath, str(metric), point, float(value)
