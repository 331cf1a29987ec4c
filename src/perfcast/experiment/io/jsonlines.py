"""Extra-P's JSON Lines format: one measurement (or a list of repetitions) per line.

::

    {"params": {"p": 4, "size": 100}, "callpath": "main->solve", "metric": "time", "value": 1.2}
    {"params": {"p": 4, "size": 100}, "metric": "time", "value": [1.2, 1.3]}

``callpath`` and ``metric`` are optional (Extra-P's defaults ``<root>`` and
``<default>``). Lines with the same call path, metric and point are repetitions. The
Talpas format is the same record with other key names, so it reuses :func:`read_records`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfcast.errors import InputError
from perfcast.experiment.experiment import Experiment
from perfcast.experiment.io.registry import Format
from perfcast.experiment.io.table import MeasurementTable

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
    decode: Callable[[str], Any] = json.loads,
) -> Experiment:
    """Read a file of one-record-per-line measurements into an Experiment.

    The parameter names and their order come from the first record, as in Extra-P; later
    records must name the same parameters.
    """
    table: MeasurementTable | None = None
    try:
        with open(path, encoding="utf-8") as file:
            for number, line in enumerate(file, start=1):
                if line.isspace() or not line:
                    continue
                try:
                    record = decode(line)
                except json.JSONDecodeError as exc:
                    raise InputError(
                        f"not a JSON record: {exc.msg} (column {exc.colno})",
                        path=path,
                        line=number,
                    ) from None
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
                    table = MeasurementTable([str(p) for p in params], path=path)
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
                    str(_field(record, keys.callpath, keys.default_callpath, path, number)),
                    str(_field(record, keys.metric, keys.default_metric, path, number)),
                    point,
                    value if isinstance(value, list) else [value],
                    line=number,
                )
    except UnicodeDecodeError as exc:
        raise InputError(f"not a text file ({exc.reason})", path=path) from None
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


def read_jsonlines(path: Path) -> Experiment:
    """Read an Extra-P JSON Lines file."""
    return read_records(path, JSONL_KEYS)


def looks_like_jsonlines(head: str) -> bool:
    """True if the first line is a complete JSON Lines record."""
    try:
        record = json.loads(head)
    except json.JSONDecodeError:
        return False
    return isinstance(record, dict) and JSONL_KEYS.parameters in record


FORMAT = Format(
    name="jsonl",
    summary="Extra-P JSON Lines (params/callpath/metric/value per line)",
    reader=read_jsonlines,
    suffixes=(".jsonl",),
    sniff=looks_like_jsonlines,
)
