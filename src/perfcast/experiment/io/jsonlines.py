"""Extra-P's JSON Lines format: one measurement (or a list of repetitions) per line.

::

    {"params": {"p": 4, "size": 100}, "callpath": "main->solve", "metric": "time", "value": 1.2}
    {"params": {"p": 4, "size": 100}, "metric": "time", "value": [1.2, 1.3]}

``callpath`` and ``metric`` are optional (Extra-P's defaults ``<root>`` and
``<default>``). Lines with the same call path, metric and point are repetitions. The
Talpas format is the same record with other key names, so it reuses :func:`read_records`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfcast.errors import InputError
from perfcast.experiment.experiment import Experiment
from perfcast.experiment.io.jsontext import decode, try_decode
from perfcast.experiment.io.registry import Format, read_lines
from perfcast.experiment.io.table import MeasurementTable, repetitions, to_name

DEFAULT_CALLPATH = "<root>"
DEFAULT_METRIC = "<default>"


@dataclass(frozen=True)
class RecordKeys:
    """Where a one-line record keeps its parts; ``None`` default means required."""

    parameters: str
    value: str = "value"
    callpath: str = "callpath"
    metric: str = "metric"
    default_callpath: str | None = DEFAULT_CALLPATH
    default_metric: str | None = DEFAULT_METRIC


JSONL_KEYS = RecordKeys(parameters="params")


def read_records(
    path: Path,
    keys: RecordKeys,
    to_json: Callable[[str], str] = lambda line: line,
    record_name: str = "a JSON record",
) -> Experiment:
    """Read a file of one-record-per-line measurements into an Experiment.

    ``to_json`` turns a line into JSON text (Talpas: ``;`` to ``,``), ``record_name``
    names such a line in messages. The parameter names and their order come from the
    first record, as in Extra-P; later records must name the same parameters.
    """
    table: MeasurementTable | None = None
    for number, line in read_lines(path):
        if not line or line.isspace():
            continue
        record = decode(to_json(line), path=path, line=number, what=record_name)
        if not isinstance(record, dict):
            raise InputError("a record must be a JSON object {...}", path=path, line=number)
        params = _field(record, keys.parameters, None, path, number)
        if not isinstance(params, dict):
            raise InputError(
                f"{keys.parameters!r} must map parameter names to values",
                path=path,
                line=number,
            )
        if table is None:
            table = MeasurementTable(list(params), path=path, line=number)
        if set(params) != set(table.parameters):
            raise InputError(
                f"parameters {sorted(params)} differ from {table.parameters} of the "
                "first record; every record needs the same parameters",
                path=path,
                line=number,
            )
        point = table.point((params[p] for p in table.parameters), line=number)
        value = _field(record, keys.value, None, path, number)
        table.add(
            _name(record, keys.callpath, keys.default_callpath, path, number),
            _name(record, keys.metric, keys.default_metric, path, number),
            point,
            repetitions(value, path=path, line=number),
            line=number,
        )
    if table is None:
        raise InputError("the file contains no measurements", path=path)
    table.require_complete()
    return table.to_experiment()


def _field(record: dict, key: str, default: str | None, path: Path, line: int) -> Any:
    if key in record:
        return record[key]
    if default is None:
        raise InputError(f"record lacks the {key!r} entry", path=path, line=line)
    return default


def _name(record: dict, key: str, default: str | None, path: Path, line: int) -> str:
    return to_name(_field(record, key, default, path, line), repr(key), path=path, line=line)


def read_jsonlines(path: Path) -> Experiment:
    """Read an Extra-P JSON Lines file."""
    return read_records(path, JSONL_KEYS)


def looks_like_jsonlines(head: str) -> bool:
    """True if the first line is a complete JSON Lines record."""
    record = try_decode(head)
    return isinstance(record, dict) and JSONL_KEYS.parameters in record


FORMAT = Format(
    name="jsonl",
    summary="Extra-P JSON Lines (params/callpath/metric/value per line)",
    reader=read_jsonlines,
    suffixes=(".jsonl",),
    sniff=looks_like_jsonlines,
)
