"""Simulation results for the report (``perfcast report ... --simulation results.json``).

``perfcast simulate TRACE --platform a.xml [--platform b.xml] --json`` prints one JSON
object per run: the predicted time of the traced run on each platform, split into compute
and communication. Users collect several runs (``>>`` into one file, or a JSON list), so
a file may hold one object, a list of them, or objects one after the other.

The file is read as data from another program, possibly edited by hand: every value the
page draws is checked here, and a bad one is refused with the key that holds it
(``runs[1].platforms[0].time``), never drawn as a wrong bar.

``--native`` is not stored by ``perfcast simulate``, only the slowdown it gives: the
measured native time is recovered from its definition (traced run plus every replay,
over native: :meth:`perfcast.simulate.simulation.Simulation.slowdown`).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from perfcast.errors import InputError
from perfcast.inputs import JsonChecker, read_text

KIND = "simulation result"
HINT = "write it with perfcast simulate TRACE --platform FILE.xml --json > FILE.json"


@dataclass(frozen=True)
class PlatformTime:
    """One platform's prediction of a run."""

    name: str
    time: float
    compute: float
    communication: float
    slowest_rank: int | None


@dataclass(frozen=True)
class SimulatedRun:
    """One ``perfcast simulate --json`` object."""

    trace: str
    ranks: int
    trace_seconds: float
    native: float | None
    """The measured native run time (``--native``), None where it was not given."""
    platforms: list[PlatformTime]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class _Reader(JsonChecker):
    def number(self, table: dict[str, Any], key: str, where: str) -> float:
        """A finite number >= 0 at ``table[key]``."""
        value = self.required(table, key, where)
        if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
            raise self.fail(f"{where}.{key}", "a number >= 0")
        if not math.isfinite(value):
            raise self.fail(f"{where}.{key}", "a finite number")
        return float(value)

    def platform(self, value: Any, where: str) -> PlatformTime:
        table = self.table(value, where)
        slowest = table.get("slowest_rank")
        if slowest is not None and (isinstance(slowest, bool) or not isinstance(slowest, int)):
            raise self.fail(f"{where}.slowest_rank", "an integer")
        return PlatformTime(
            name=self.text(self.required(table, "name", where), f"{where}.name"),
            time=self.number(table, "time", where),
            compute=self.number(table, "compute", where),
            communication=self.number(table, "communication", where),
            slowest_rank=slowest,
        )

    def run(self, value: Any, where: str) -> SimulatedRun:
        table = self.table(value, where)
        entries = self.required(table, "platforms", where)
        if not isinstance(entries, list) or not entries:
            raise self.fail(f"{where}.platforms", "a non-empty list")
        platforms = [self.platform(p, f"{where}.platforms[{i}]") for i, p in enumerate(entries)]
        trace_seconds = self.number(table, "trace_seconds", where)
        native = None
        slowdown = table.get("slowdown")
        if slowdown is not None:
            if isinstance(slowdown, bool) or not isinstance(slowdown, int | float):
                raise self.fail(f"{where}.slowdown", "a number > 0 or null")
            if not (math.isfinite(slowdown) and slowdown > 0):
                raise self.fail(f"{where}.slowdown", "a number > 0 or null")
            replays = sum(
                self.number(p, "simulation_seconds", f"{where}.platforms[{i}]")
                for i, p in enumerate(entries)
            )
            native = (trace_seconds + replays) / slowdown
        ranks = self.required(table, "ranks", where)
        if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
            raise self.fail(f"{where}.ranks", "an integer >= 1")
        trace = self.text(self.required(table, "trace", where), f"{where}.trace")
        return SimulatedRun(trace, ranks, trace_seconds, native, platforms)


def _objects(text: str, path: Path) -> list[Any]:
    """The JSON values of ``text``: one, or several one after the other."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text):
            return values
        try:
            value, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            raise InputError(f"not JSON: {exc.msg}", path=path, line=exc.lineno) from None
        except (ValueError, RecursionError):
            raise InputError(f"not a {KIND}; {HINT}", path=path) from None
        values.append(value)


def read_simulations(path: Path) -> list[SimulatedRun]:
    """Every run in the file at ``path`` (see the module docstring)."""
    values = _objects(read_text(path, KIND, HINT), path)
    reader = _Reader(path, HINT)
    if len(values) == 1 and isinstance(values[0], list):
        runs = values[0]
    elif len(values) == 1:
        return [reader.run(values[0], "run")]
    else:
        runs = values
    if not runs:
        raise InputError(f"holds no simulation results; {HINT}", path=path)
    return [reader.run(value, f"runs[{index}]") for index, value in enumerate(runs)]
