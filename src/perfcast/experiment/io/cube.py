"""Score-P Cube profile directories, read with pycubexr the way Extra-P reads them.

A set is a directory with one sub-directory per run, each holding one or more
``*.cubex`` profiles (several profiles, or several runs at the same point, are
repetitions). The parameter values are spelled in the run directory's name:
``<prefix>.<name><value><name><value>...[.r<repetition>]``, e.g. ``mm.x10y1z25.r1``.
As in Extra-P the part after the first ``.`` and before the first ``.r`` holds the
name/value pairs; values may use ``,`` or ``.`` as decimal mark and may be followed by
a ``.`` or ``,`` separator (``mm.x20,5.y20,5.z1,5.r1`` is x=20.5, y=20.5, z=1.5).
Parameters that never change across the set are dropped.

Every metric the profiles measured is read (time, visits, min/max time, bytes, PAPI
counters, ...) unless ``metrics=`` names some. Values are exclusive per call path
(``main->solve->MPI_Allreduce``). With weak scaling (default, as in Extra-P) every
process/thread value of a profile is one repetition; with strong scaling one repetition
is the sum over all processes. A call path missing at some points is folded into its
nearest ancestor measured at every point, as Extra-P does; perfcast adds the exclusive
values per repetition, which is exact where Extra-P adds summary statistics.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from perfcast.errors import InputError
from perfcast.experiment.calltree import SEPARATOR
from perfcast.experiment.experiment import CALLPATH, METRIC, REPETITION, VALUE, Experiment, Metric
from perfcast.experiment.io.registry import Format

if TYPE_CHECKING:  # imported where a Cube set is read: every other format's reading skips them
    import pandas as pd

SCALING = ("weak", "strong")

PROFILE_NAMES = "[!.]*.cubex"
"""Profiles in a run directory, hidden files excluded (as in Extra-P)."""
PROFILE_GLOB = "*/" + PROFILE_NAMES
"""Profiles one level below the set directory."""

CUBE_UNITS = {"sec": "s", "occ": "", "#": ""}
"""Cube's unit names mapped to perfcast's (unlisted units are kept as they are)."""

_NAME_VALUE = re.compile(r"([^0-9.,]+)([0-9.,]+)")


def parse_run_directory(name: str) -> tuple[list[str], list[float]]:
    """Parameter names and values from a run directory name, as Extra-P reads them."""
    start = name.find(".") + 1
    end = name.find(".r")
    spec = name[start : None if end == -1 else end]
    pairs = _NAME_VALUE.findall(spec)
    if not pairs or "".join(n + v for n, v in pairs) != spec:
        raise InputError(
            f"cannot read parameters from the directory name {name!r}: expected "
            "<prefix>.<name><value>...[.r<repetition>], e.g. mm.x10y1z25.r1"
        )
    names = [n for n, _ in pairs]
    try:
        values = [float(v.replace(",", ".").rstrip(".")) for _, v in pairs]
    except ValueError:
        raise InputError(
            f"a parameter value in the directory name {name!r} is not a number"
        ) from None
    return names, values


def read_cube(
    path: Path, *, metrics: Sequence[str] | None = None, scaling: str = "weak"
) -> Experiment:
    """Read a directory of Cube profiles: every metric, or only the ``metrics`` named."""
    import pandas as pd

    if isinstance(metrics, str):
        metrics = (metrics,)
    if scaling not in SCALING:
        raise InputError(f"unknown scaling {scaling!r}; choose one of {SCALING}", path=path)
    if not path.is_dir():
        raise InputError("a Cube profile set must be a directory of run directories", path=path)
    files = _profile_files(path)
    if not files:
        raise InputError(f"no Cube profiles ({PROFILE_GLOB}) in this directory", path=path)
    parameters, points = _points_of(files, path)
    frames: list[pd.DataFrame] = []
    units: dict[str, str] = {}
    declared: set[str] = set()
    offsets: dict[tuple[float, ...], int] = {}
    for file, point in zip(files, points, strict=True):
        frame, file_units, file_metrics = _read_profile(file, metrics, strong=scaling == "strong")
        declared.update(file_metrics)
        frame[REPETITION] += offsets.get(point, 0)
        offsets[point] = int(frame[REPETITION].max()) + 1 if len(frame) else offsets.get(point, 0)
        for name, value in zip(parameters, point, strict=True):
            frame[name] = value
        frames.append(frame)
        units.update(file_units)
    data = pd.concat(frames, ignore_index=True)
    missing = [m for m in metrics or () if m not in units]
    if missing or not len(data):
        wanted = f"the metric(s) {missing}" if missing else "any measured metric"
        raise InputError(
            f"the profiles hold no values of {wanted}; they declare {sorted(declared)}",
            path=path,
        )
    data = _fold_incomplete_callpaths(data, parameters, n_points=len(offsets))
    return Experiment(
        parameters,
        data,
        [Metric(m, units.get(m, "")) for m in pd.unique(data[METRIC])],
        source=str(path),
    )


def _profile_files(root: Path) -> list[Path]:
    """The profiles of a set (``PROFILE_GLOB``), sorted, with nothing dropped unsaid.

    A glob skips a run directory it cannot list and one without profiles (a failed run)
    without a word, and the model would quietly lack those points: a directory that
    cannot be read is an error, one without profiles a warning naming it. Plain files
    and hidden entries beside the run directories are ignored, as in Extra-P.
    """
    try:
        runs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError as exc:
        raise InputError(f"cannot list the directory: {exc.strerror}", path=root) from None
    files: list[Path] = []
    for run in runs:
        if not os.access(run, os.R_OK | os.X_OK):
            raise InputError(
                "cannot read the run directory (permission denied); make it readable or "
                "move it out of the set",
                path=run,
            )
        profiles = sorted(run.glob(PROFILE_NAMES))
        if not profiles:
            warnings.warn(
                f"{run}: no Cube profile (*.cubex) in this run directory; it is left out "
                "of the model",
                stacklevel=3,
            )
        files.extend(profiles)
    return files


def _points_of(files: list[Path], root: Path) -> tuple[list[str], list[tuple[float, ...]]]:
    """Parameter names and each file's point; parameters with one value are dropped."""
    names: list[str] | None = None
    values: list[list[float]] = []
    for file in files:
        try:
            file_names, file_values = parse_run_directory(file.parent.name)
        except InputError as exc:
            raise InputError(exc.reason, path=file.parent) from None
        if names is None:
            names, first = file_names, file.parent.name
        elif file_names != names:
            raise InputError(
                f"run directories must name the same parameters in the same order: "
                f"{file.parent.name!r} has {file_names}, {first!r} has {names}",
                path=root,
            )
        values.append(file_values)
    assert names is not None
    table = np.asarray(values)
    varying = [i for i in range(len(names)) if len(np.unique(table[:, i])) > 1]
    if not varying:
        raise InputError(
            f"no parameter changes across the run directories (parameters {names}); "
            "name them <prefix>.<name><value>...[.r<repetition>], e.g. mm.x10y1z25.r1",
            path=root,
        )
    return [names[i] for i in varying], [tuple(row) for row in table[:, varying].tolist()]


def _read_profile(
    file: Path, metrics: Sequence[str] | None, *, strong: bool
) -> tuple[pd.DataFrame, dict[str, str], list[str]]:
    """Exclusive values of one profile: one row per (call path, metric, repetition),
    the units of the metrics read, and the names of all metrics the profile declares."""
    import pandas as pd
    from pycubexr import CubexParser
    from pycubexr.utils.exceptions import MissingMetricError

    columns: dict[str, list[np.ndarray]] = {CALLPATH: [], METRIC: [], REPETITION: [], VALUE: []}
    units: dict[str, str] = {}
    declared: list[str] = []
    try:
        with CubexParser(str(file)) as cube:
            callpaths = _callpath_names(cube.get_root_cnodes())
            for metric in cube.get_metrics():
                declared.append(metric.name)
                if metrics is not None and metric.name not in metrics:
                    continue
                try:
                    values = cube.get_metric_values(metric=metric, cache=False)
                except MissingMetricError:
                    continue  # declared but never measured (e.g. bytes_put without RMA)
                units[metric.name] = CUBE_UNITS.get(metric.units, metric.units)
                for cnode_id in values.cnode_indices:
                    cnode = cube.get_cnode(cnode_id)
                    exclusive = values.cnode_values(cnode, convert_to_exclusive=True)
                    samples = np.asarray(exclusive.astype(float))  # Min/MaxValues too
                    if strong:
                        samples = samples.sum(keepdims=True)
                    columns[CALLPATH].append(np.full(len(samples), callpaths[cnode_id], object))
                    columns[METRIC].append(np.full(len(samples), metric.name, object))
                    columns[REPETITION].append(np.arange(len(samples)))
                    columns[VALUE].append(samples)
    except Exception as exc:  # pycubexr raises bare KeyErrors, tar errors, XML errors
        raise InputError(f"cannot read the Cube profile: {exc!r}", path=file) from None
    frame = pd.DataFrame(
        {k: np.concatenate(v) if v else np.array([], dtype=object) for k, v in columns.items()}
    )
    frame[REPETITION] = frame[REPETITION].astype(np.int64)
    frame[VALUE] = frame[VALUE].astype(float)
    return frame, units, declared


def _callpath_names(roots: list) -> dict[int, str]:
    names: dict[int, str] = {}
    stack = [(root, root.region.name) for root in reversed(roots)]
    while stack:
        cnode, name = stack.pop()
        names[cnode.id] = name
        stack.extend((c, name + SEPARATOR + c.region.name) for c in reversed(cnode.get_children()))
    return names


def _fold_incomplete_callpaths(
    data: pd.DataFrame, parameters: list[str], n_points: int
) -> pd.DataFrame:
    """Move call paths not measured at every point into their nearest complete ancestor,
    then sum what lands on the same (call path, metric, point, repetition)."""
    import pandas as pd

    points_per_series = (
        data.drop_duplicates([CALLPATH, METRIC, *parameters])
        .groupby([CALLPATH, METRIC], sort=False)
        .size()
    )
    complete = {key for key, n in points_per_series.items() if n == n_points}
    target: dict[tuple[str, str], str | None] = {}
    for callpath, metric in points_per_series.index:
        frames = callpath.split(SEPARATOR)
        while frames and (SEPARATOR.join(frames), metric) not in complete:
            frames.pop()
        target[(callpath, metric)] = SEPARATOR.join(frames) if frames else None
    lost = sorted({c for (c, _), t in target.items() if t is None})
    if lost:
        warnings.warn(
            f"{len(lost)} call path(s) not measured at every point and without a complete "
            f"ancestor were dropped, first {lost[0]!r}",
            stacklevel=3,
        )
    keys = zip(data[CALLPATH], data[METRIC], strict=True)
    data = data.assign(**{CALLPATH: pd.Series([target[k] for k in keys], index=data.index)})
    data = data.dropna(subset=[CALLPATH])
    summed = data.groupby([CALLPATH, METRIC, *parameters, REPETITION], sort=False)[VALUE].sum()
    return summed.reset_index()


FORMAT = Format(
    name="cube",
    summary="Score-P Cube profile directories (<prefix>.<name><value>...[.r<n>]/*.cubex)",
    reader=read_cube,
    suffixes=(".cubex",),  # a single profile: detected, then refused with a hint
    directory=True,
)
