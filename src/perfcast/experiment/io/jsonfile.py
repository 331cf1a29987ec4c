"""Extra-P's JSON format, current and legacy.

Current form (what :func:`write_json` writes)::

    {"parameters": ["p", "size"],
     "measurements": {"main->solve": {"time": [{"point": [4, 100], "values": [1.2, 1.3]}]}}}

Legacy form: id-numbered lists ``parameters``, ``callpaths``, ``metrics``,
``coordinates`` (``parameter_value_pairs``) and ``measurements`` (one value each, with
``coordinate_id``/``callpath_id``/``metric_id``); a file is legacy if it has
``callpaths``, as in Extra-P. A ``.json`` file that is really JSON Lines is read as such.

perfcast adds one optional key, ``"units": {"time": "s"}``, so metric units survive a
round trip; Extra-P ignores it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from perfcast.errors import InputError, PerfcastError
from perfcast.experiment.experiment import Experiment
from perfcast.experiment.io.jsonlines import read_jsonlines
from perfcast.experiment.io.jsontext import JSONSyntaxError, decode, try_decode
from perfcast.experiment.io.registry import Format, read_utf8
from perfcast.experiment.io.table import (
    Cells,
    MeasurementTable,
    describe,
    repetitions,
    to_name,
)
from perfcast.experiment.points import format_point
from perfcast.outputs import OutputKind, write_output

UNITS_KEY = "units"


def read_json(path: Path) -> Experiment:
    """Read an Extra-P JSON file (current or legacy form)."""
    text = read_utf8(path)
    try:
        document = decode(text, path=path)
    except JSONSyntaxError:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if len(lines) > 1 and all(line.startswith("{") for line in lines):
            return read_jsonlines(path)
        raise
    if not isinstance(document, dict):
        raise InputError("the JSON document must be an object {...}", path=path)
    if {"columns", "column_metadata", "nodes"} <= document.keys():
        raise InputError(
            "a Caliper profile in json-split form, not Extra-P's JSON: read it with "
            "--format caliper --parameters NAME,... (the Adiak globals that are parameters)",
            path=path,
        )
    if "callpaths" in document:
        table = _read_legacy(document, path)
    else:
        table = _read_current(document, path)
    table.require_complete()
    return table.to_experiment(_units(document, path))


def _units(document: dict, path: Path) -> dict[str, str]:
    """perfcast's optional ``"units"`` entry: metric name -> unit text."""
    units = document.get(UNITS_KEY, {})
    if not isinstance(units, dict) or not all(isinstance(u, str) for u in units.values()):
        raise InputError(
            f'"{UNITS_KEY}" must map metric names to unit text, e.g. {{"time": "s"}}; '
            "fix or remove it",
            path=path,
        )
    return units


def _get(container: Any, key: str | int, where: str, path: Path) -> Any:
    """``container[key]`` or an InputError naming the JSON location."""
    if isinstance(container, dict) and key in container:
        return container[key]
    raise InputError(f"{where} lacks the entry {key!r}", path=path)


def _list(value: Any, where: str, path: Path) -> list:
    if not isinstance(value, list):
        raise InputError(f"{where} must be a list, not {describe(value)}", path=path)
    return value


def _read_current(document: dict, path: Path) -> MeasurementTable:
    parameters = _get(document, "parameters", "the document", path)
    measurements = _get(document, "measurements", "the document", path)
    if not isinstance(parameters, list) or not isinstance(measurements, dict):
        raise InputError(
            '"parameters" must be a list of names and "measurements" an object', path=path
        )
    table = MeasurementTable(
        [
            to_name(p, "parameter name", path=path, where=f"parameters[{i}]")
            for i, p in enumerate(parameters)
        ],
        path=path,
    )
    for callpath, by_metric in measurements.items():
        if not isinstance(by_metric, dict):
            raise InputError(f"measurements[{callpath!r}] must map metrics to lists", path=path)
        for metric, entries in by_metric.items():
            if not isinstance(entries, list):
                raise InputError(
                    f"measurements[{callpath!r}][{metric!r}] must be a list", path=path
                )
            for index, entry in enumerate(entries):
                where = f"measurements[{callpath!r}][{metric!r}][{index}]"
                point = _get(entry, "point", where, path)
                values = _get(entry, "values", where, path)
                point_id = table.point(point if isinstance(point, list) else [point], where=where)
                table.add(
                    callpath,
                    metric,
                    point_id,
                    repetitions(values, path=path, where=where),
                    where=where,
                )
    return table


def _id(value: Any, where: str, path: Path) -> int:
    """An id of the legacy form: a JSON integer (a list or text would never match one)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{where} has the id {describe(value)}; ids are integers", path=path)
    return value


def _by_id(document: dict, key: str, path: Path) -> dict[int, dict]:
    entries = _list(_get(document, key, "the document", path), f'"{key}"', path)
    table: dict[int, dict] = {}
    for index, entry in enumerate(entries):
        entry_id = _id(_get(entry, "id", f"{key}[{index}]", path), f"{key}[{index}]", path)
        if entry_id in table:
            raise InputError(f"{key} has the id {entry_id} twice", path=path)
        table[entry_id] = entry
    return dict(sorted(table.items()))


def _lookup(table: dict[int, Any], key: Any, where: str, path: Path) -> Any:
    key = _id(key, where, path)
    if key not in table:
        raise InputError(f"{where} refers to the unknown id {key}", path=path)
    return table[key]


def _names(document: dict, key: str, path: Path) -> dict[int, str]:
    return {
        i: to_name(_get(e, "name", f"{key} id {i}", path), "name", path=path, where=f"{key} id {i}")
        for i, e in _by_id(document, key, path).items()
    }


def _read_legacy(document: dict, path: Path) -> MeasurementTable:
    parameters = _names(document, "parameters", path)
    callpaths = _names(document, "callpaths", path)
    metrics = _names(document, "metrics", path)
    table = MeasurementTable(list(parameters.values()), path=path)
    points: dict[int, int] = {}
    for coordinate_id, entry in _by_id(document, "coordinates", path).items():
        where = f"coordinates id {coordinate_id}"
        pairs = _list(_get(entry, "parameter_value_pairs", where, path), where, path)
        values = {
            _id(_get(p, "parameter_id", where, path), where, path): _get(
                p, "parameter_value", where, path
            )
            for p in pairs
        }
        if set(values) != set(parameters):
            raise InputError(
                f"{where} gives parameter ids {sorted(values)}, expected {sorted(parameters)}",
                path=path,
            )
        points[coordinate_id] = table.point((values[i] for i in parameters), where=where)
    measurements = _list(
        _get(document, "measurements", "the document", path), '"measurements"', path
    )
    for index, entry in enumerate(measurements):
        where = f"measurements[{index}]"
        table.add(
            _lookup(callpaths, _get(entry, "callpath_id", where, path), where, path),
            _lookup(metrics, _get(entry, "metric_id", where, path), where, path),
            _lookup(points, _get(entry, "coordinate_id", where, path), where, path),
            repetitions([_get(entry, "value", where, path)], path=path, where=where),
            where=where,
        )
    return table


def write_json(experiment: Experiment, path: Path) -> None:
    """Write the current JSON form, which Extra-P reads back.

    Laid out by hand, one measurement per line, because ``json.dump`` with indentation
    runs in pure Python and takes seconds on a large experiment; leaves go through
    ``json.dumps``, so the output is still exact JSON (floats as ``repr``).
    """
    experiment.validate()
    cells = Cells.of(experiment)
    gaps = np.argwhere(cells.counts == 0)
    if len(gaps):  # Extra-P (and perfcast's reader) reject such a file: refuse to write it
        (callpath, metric), point = cells.series[gaps[0][0]], cells.points[gaps[0][1]]
        where = format_point(zip(experiment.parameters, point, strict=True))
        raise PerfcastError(
            f"call path {callpath!r}, metric {metric!r} has no measurement at {where}; "
            "Extra-P's JSON needs every call path measured at every point (a call path absent "
            "from a completed run was not called there: Experiment.with_absent_as_zero and "
            "perfcast export write it as 0)"
        )
    points = [json.dumps([_plain(v) for v in point]) for point in cells.points.tolist()]
    by_callpath: dict[str, list[int]] = {}
    for index, (callpath, _) in enumerate(cells.series):
        by_callpath.setdefault(callpath, []).append(index)
    callpath_blocks = []
    for callpath, indices in by_callpath.items():
        metric_blocks = []
        for index in indices:
            entries = ",\n".join(
                f'    {{"point": {points[p]}, "values": {json.dumps(cells.values_at(index, p))}}}'
                for p in range(len(points))
                if cells.counts[index, p]
            )
            metric_blocks.append(f"   {json.dumps(cells.series[index][1])}: [\n{entries}\n   ]")
        callpath_blocks.append(
            f"  {json.dumps(callpath)}: {{\n" + ",\n".join(metric_blocks) + "\n  }"
        )
    units = {m.name: m.unit for m in experiment.metrics.values() if m.unit}
    lines = ['{"parameters": ' + json.dumps(experiment.parameters) + ","]
    if units:
        lines.append(f' "{UNITS_KEY}": {json.dumps(units)},')
    lines += [' "measurements": {', ",\n".join(callpath_blocks), " }", "}"]
    write_output(path, "\n".join(lines) + "\n", JSON_FILE)


def _plain(value: float) -> float | int:
    """Whole numbers as JSON integers (``4`` rather than ``4.0``), the rest unchanged."""
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else float(value)


def _extrap_json(head: bytes) -> bool:
    """An existing file :func:`write_json` may replace: an Extra-P JSON document (its keys
    near the start), not one of perfcast's own model or taint-profile JSON files."""
    if not head.lstrip().startswith(b"{"):
        return False
    if b'"perfcast_models"' in head or b"perfcast-taint-profile" in head:
        return False
    return any(key in head for key in (b'"parameters"', b'"measurements"', b'"callpaths"'))


JSON_FILE = OutputKind("an Extra-P JSON file", _extrap_json)


def _sniff(head: str) -> bool:
    """A JSON document (not a JSON Lines record, not Talpas)."""
    if not head.startswith("{"):
        return False
    record = try_decode(head)
    if record is None:
        return ";" not in head
    return isinstance(record, Mapping) and ("measurements" in record or "callpaths" in record)


FORMAT = Format(
    name="json",
    summary="Extra-P JSON (current and legacy id-based form)",
    reader=read_json,
    writer=write_json,
    suffixes=(".json",),
    sniff=_sniff,
)
