"""The Talpas format: JSON-like records whose fields are separated by ``;``.

::

    {"parameters":{"x":20};"metric":"time";"callpath":"compute";"value":82.0}

Each line is one repetition; call path and metric are required. Like Extra-P, the
reader turns every ``;`` into ``,`` and reads the line as JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from perfcast.experiment.experiment import Experiment
from perfcast.experiment.io.jsonlines import RecordKeys, read_records
from perfcast.experiment.io.registry import Format

TALPAS_KEYS = RecordKeys(parameters="parameters", default_callpath=None, default_metric=None)


def _decode(line: str) -> Any:
    return json.loads(line.replace(";", ","))


def read_talpas(path: Path) -> Experiment:
    """Read a Talpas file."""
    return read_records(path, TALPAS_KEYS, _decode)


def looks_like_talpas(head: str) -> bool:
    """A ``;``-separated record: not JSON as is, a record once ``;`` becomes ``,``."""
    if not head.startswith("{") or ";" not in head:
        return False
    try:
        json.loads(head)
        return False
    except json.JSONDecodeError:
        pass
    try:
        record = _decode(head)
    except json.JSONDecodeError:
        return False
    return isinstance(record, dict) and TALPAS_KEYS.parameters in record


FORMAT = Format(
    name="talpas",
    summary="Talpas (';'-separated JSON-like records)",
    reader=read_talpas,
    suffixes=(".txt",),
    sniff=looks_like_talpas,
)
