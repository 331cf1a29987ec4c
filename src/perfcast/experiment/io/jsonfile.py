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
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfcast.errors import InputError
from perfcast.experiment.experiment import Experiment
from perfcast.experiment.io.jsonlines import read_jsonlines
from perfcast.experiment.io.registry import Format
from perfcast.experiment.io.table import Cells, MeasurementTable

UNITS_KEY = "units"

_NON_FINITE = re.compile(r"-?\b(?:NaN|Infinity)\b")


class _NonFiniteConstant(ValueError):
    pass


def _reject_constant(name: str) -> float:
    raise _NonFiniteConstant(name)


def read_json(path: Path) -> Experiment:
    """Read an Extra-P JSON file (current or legacy form)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not a text file ({exc.reason})", path=path) from None
    try:
        document = json.loads(text, parse_constant=_reject_constant)
    except _NonFiniteConstant as exc:
        match = _NON_FINITE.search(text)
        line = text.count("\n", 0, match.start()) + 1 if match else None
        raise InputError(
            f"{exc.args[0]} is not a measured value; only finite numbers are allowed",
            path=path,
            line=line,
        ) from None
    except json.JSONDecodeError as exc:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if len(lines) > 1 and all(line.startswith("{") for line in lines):
            return read_jsonlines(path)
        raise InputError(f"not valid JSON: {exc.msg}", path=path, line=exc.lineno) from None
    if not isinstance(document, dict):
        raise InputError("the JSON document must be an object {...}", path=path)
    if "callpaths" in document:
        table = _read_legacy(document, path)
    else:
        table = _read_current(document, path)
    table.require_complete()
    units = document.get(UNITS_KEY, {})
    return table.to_experiment(units if isinstance(units, dict) else {})


def _get(container: Any, key: str | int, where: str, path: Path) -> Any:
    """``container[key]`` or an InputError naming the JSON location."""
    try:
        return container[key]
    except (KeyError, IndexError, TypeError):
        raise InputError(f"{where} lacks the entry {key!r}", path=path) from None


def _read_current(document: dict, path: Path) -> MeasurementTable:
    parameters = _get(document, "parameters", "the document", path)
    measurements = _get(document, "measurements", "the document", path)
    if not isinstance(parameters, list) or not isinstance(measurements, dict):
        raise InputError(
            '"parameters" must be a list of names and "measurements" an object', path=path
        )
    table = MeasurementTable([str(p) for p in parameters], path=path)
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
                point_id = table.point(point if isinstance(point, list) else [point])
                table.add(
                    callpath, metric, point_id, values if isinstance(values, list) else [values]
                )
    return table


def _by_id(document: dict, key: str, path: Path) -> dict[int, dict]:
    entries = _get(document, key, "the document", path)
    table: dict[int, dict] = {}
    for index, entry in enumerate(entries):
        entry_id = _get(entry, "id", f"{key}[{index}]", path)
        if not isinstance(entry_id, int):
            raise InputError(f"{key}[{index}] has the id {entry_id!r}; ids are integers", path=path)
        if entry_id in table:
            raise InputError(f"{key} has the id {entry_id} twice", path=path)
        table[entry_id] = entry
    return dict(sorted(table.items()))


def _lookup(table: dict[int, Any], key: Any, where: str, path: Path) -> Any:
    if key not in table:
        raise InputError(f"{where} refers to the unknown id {key!r}", path=path)
    return table[key]


def _read_legacy(document: dict, path: Path) -> MeasurementTable:
    parameters = _by_id(document, "parameters", path)
    callpaths = {
        i: str(_get(e, "name", f"callpaths id {i}", path))
        for i, e in _by_id(document, "callpaths", path).items()
    }
    metrics = {
        i: str(_get(e, "name", f"metrics id {i}", path))
        for i, e in _by_id(document, "metrics", path).items()
    }
    table = MeasurementTable(
        [str(_get(e, "name", f"parameters id {i}", path)) for i, e in parameters.items()],
        path=path,
    )
    points: dict[int, int] = {}
    for coordinate_id, entry in _by_id(document, "coordinates", path).items():
        where = f"coordinates id {coordinate_id}"
        pairs = _get(entry, "parameter_value_pairs", where, path)
        values = {
            _get(p, "parameter_id", where, path): _get(p, "parameter_value", where, path)
            for p in pairs
        }
        if set(values) != set(parameters):
            raise InputError(
                f"{where} gives parameter ids {sorted(values)}, expected {sorted(parameters)}",
                path=path,
            )
        points[coordinate_id] = table.point(values[i] for i in parameters)
    for index, entry in enumerate(_get(document, "measurements", "the document", path)):
        where = f"measurements[{index}]"
        table.add(
            _lookup(callpaths, _get(entry, "callpath_id", where, path), where, path),
            _lookup(metrics, _get(entry, "metric_id", where, path), where, path),
            _lookup(points, _get(entry, "coordinate_id", where, path), where, path),
            [_get(entry, "value", where, path)],
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
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _plain(value: float) -> float | int:
    """Whole numbers as JSON integers (``4`` rather than ``4.0``), the rest unchanged."""
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else float(value)


def _sniff(head: str) -> bool:
    """A JSON document (not a JSON Lines record, not Talpas)."""
    if not head.startswith("{"):
        return False
    try:
        record = json.loads(head)
    except json.JSONDecodeError:
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
