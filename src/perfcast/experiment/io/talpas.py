"""The Talpas format: JSON-like records whose fields are separated by ``;``.

::

    {"parameters":{"x":20};"metric":"time";"callpath":"compute";"value":82.0}

Each line is one repetition; call path and metric are required. Like Extra-P, the
reader turns every ``;`` into ``,`` and reads the line as JSON.
"""

from __future__ import annotations

from pathlib import Path

from perfcast.experiment.experiment import Experiment
from perfcast.experiment.io.jsonlines import RecordKeys, read_records
from perfcast.experiment.io.jsontext import try_decode
from perfcast.experiment.io.registry import Format

TALPAS_KEYS = RecordKeys(parameters="parameters", default_callpath=None, default_metric=None)


def _to_json(line: str) -> str:
    return line.replace(";", ",")


def read_talpas(path: Path) -> Experiment:
    """Read a Talpas file."""
    return read_records(path, TALPAS_KEYS, _to_json, "a Talpas record")


def looks_like_talpas(head: str) -> bool:
    """A ``;``-separated record: not JSON as is, a record once ``;`` becomes ``,``."""
    if not head.startswith("{") or ";" not in head:
        return False
    if try_decode(head) is not None:
        return False
    record = try_decode(_to_json(head))
    return isinstance(record, dict) and TALPAS_KEYS.parameters in record


FORMAT = Format(
    name="talpas",
    summary="Talpas (';'-separated JSON-like records)",
    reader=read_talpas,
    suffixes=(".txt",),
    sniff=looks_like_talpas,
)
