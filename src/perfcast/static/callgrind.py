"""Exact per-instruction execution counts from valgrind's callgrind, for validation.

``valgrind --tool=callgrind --dump-instr=yes`` writes, per function, one cost line per
executed instruction address. Lines right after ``calls=`` carry the inclusive cost of a
call and are not the instruction's own cost. Names and files may be compressed as
``(id) name`` on first use and ``(id)`` afterwards.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from perfcast.errors import PerfcastError

_COMPRESSED = re.compile(r"^\((\d+)\)(?:\s+(.*))?$")


@dataclass
class CallgrindProfile:
    """Own instruction counts of one object file: per address and per function name.

    Addresses are the object's own (link-time) addresses, as callgrind reports them."""

    by_address: dict[int, int]
    functions: dict[str, dict[int, int]]

    def function_addresses(self, name: str) -> dict[int, int]:
        if name not in self.functions:
            raise PerfcastError(f"callgrind saw no function {name!r}")
        return self.functions[name]


def run_callgrind(command: Sequence[str], output: Path, timeout: float = 600) -> CallgrindProfile:
    """Run a program under callgrind and read the per-instruction counts of its own code
    (``command[0]``; shared libraries are left out)."""
    if shutil.which("valgrind") is None:
        raise PerfcastError("valgrind is not installed (apt-get install valgrind)")
    result = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--dump-instr=yes",
            "--compress-strings=no",
            "--compress-pos=no",
            f"--callgrind-out-file={output}",
            *command,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if result.returncode != 0:
        raise PerfcastError(f"callgrind run failed: {result.stderr[-800:]}")
    return read_callgrind(output, command[0])


def read_callgrind(path: Path, binary: str | Path) -> CallgrindProfile:
    by_address: dict[int, int] = defaultdict(int)
    functions: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    names: dict[str, str] = {}
    function = ""
    wanted = str(Path(binary).resolve())
    inside = False
    skip_next = False
    positions = ["line"]
    last = [0, 0]
    for raw in Path(path).read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("positions:"):
            positions = line.split()[1:]
            continue
        if line.startswith("ob="):
            inside = str(Path(_name(line[3:], names)).resolve()) == wanted
            continue
        if line.startswith("fn="):
            function = _name(line[3:], names)
            continue
        if line.startswith("calls="):
            skip_next = True
            continue
        if "=" in line.split()[0]:
            continue
        if line[0] not in "0123456789+-*":
            continue
        fields = line.split()
        values = []
        for index, _kind in enumerate(positions):
            token = fields[index]
            if token == "*":
                values.append(last[index])
            elif token[0] in "+-":
                values.append(last[index] + int(token, 0))
            else:
                values.append(int(token, 0))
        last[: len(values)] = values
        if skip_next:
            skip_next = False
            continue
        cost = int(fields[len(positions)]) if len(fields) > len(positions) else 0
        if positions[0] == "instr" and inside:
            by_address[values[0]] += cost
            functions[function][values[0]] += cost
    return CallgrindProfile(dict(by_address), {k: dict(v) for k, v in functions.items()})


def _name(text: str, table: dict[str, str]) -> str:
    match = _COMPRESSED.match(text.strip())
    if not match:
        return text.strip()
    key, name = match.groups()
    if name:
        table[key] = name
    return table.get(key, text)
