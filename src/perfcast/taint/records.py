"""Reading what the runtime wrote, and merging processes and label batches.

Each process writes ``taint.<pid>.txt`` (format in ``runtime/perfcast_taint_rt.c``) with
label *bits*; here they become parameter *names* using the ``param`` lines of the same file,
so records of different batches (different bit assignments) merge by plain set union.
Calling contexts are identified by their path of (function id, caller's loop, call site)
triples, which is the same in every process and every batch: two calls of one function
from one loop of one caller are two contexts, so their dependencies add.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from perfcast.errors import PerfcastError

Context = tuple[tuple[int, int, int], ...]
"""A calling context: ((fid, loop of the caller it was called from, call site in the caller),
...) from main down; the call site is -1 where the caller did not announce it."""


@dataclass
class SiteRecord:
    labels: set[str] = field(default_factory=set)
    count: int = 0
    taken: int = 0
    positional: bool = False
    """The condition also carried a position label (``rank``), removed from ``labels``."""


@dataclass
class CallRecord:
    labels: set[str] = field(default_factory=set)
    count: int = 0


@dataclass
class ContextRecord:
    sites: dict[int, SiteRecord] = field(default_factory=dict)
    calls: dict[tuple[str, int, int], CallRecord] = field(default_factory=dict)
    """Library calls keyed by (routine, caller's loop, call site)."""
    recursive: bool = False


@dataclass
class RunRecords:
    """Everything observed in one batch (all processes of one run)."""

    tracked: list[str] = field(default_factory=list)
    untracked: set[str] = field(default_factory=set)
    missing: set[str] = field(default_factory=set)
    contexts: dict[Context, ContextRecord] = field(default_factory=dict)
    processes: int = 0
    reads: dict[str, set[str]] = field(default_factory=dict)
    """Per parameter, the conversion routines the runtime watches (``atoi``, ``sscanf``)
    that read a value carrying its label: where a label was last seen."""

    def merge(self, other: RunRecords, *, counts: bool) -> None:
        """Union of labels; counts are added only when ``counts`` (processes of one run),
        not across batches, which repeat the same run."""
        for name in other.tracked:
            if name not in self.tracked:
                self.tracked.append(name)
        self.untracked |= other.untracked
        self.missing |= other.missing
        for name, routines in other.reads.items():
            self.reads.setdefault(name, set()).update(routines)
        self.processes = (
            max(self.processes, other.processes)
            if not counts
            else (self.processes + other.processes)
        )
        for context, record in other.contexts.items():
            mine = self.contexts.setdefault(context, ContextRecord())
            mine.recursive |= record.recursive
            for index, site in record.sites.items():
                target = mine.sites.setdefault(index, SiteRecord())
                target.labels |= site.labels
                if counts or not target.count:
                    target.count += site.count
                    target.taken += site.taken
            for key, call in record.calls.items():
                target_call = mine.calls.setdefault(key, CallRecord())
                target_call.labels |= call.labels
                if counts or not target_call.count:
                    target_call.count += call.count


def _names(bits: int, params: dict[int, str]) -> set[str]:
    return {name for bit, name in params.items() if bits & (1 << bit)}


def read_process_file(path: Path) -> RunRecords:
    records = RunRecords(processes=1)
    params: dict[int, str] = {}
    paths: dict[int, Context] = {0: ()}
    lines = path.read_text().splitlines()
    if not lines or lines[0] != "perfcast-taint-raw 2":
        raise PerfcastError(f"{path}: not a perfcast taint record (was it cut short?)")
    for number, line in enumerate(lines[1:], start=2):
        fields = line.split()
        try:
            kind = fields[0]
            if kind == "param":
                params[int(fields[1])] = fields[2]
                records.tracked.append(fields[2])
            elif kind == "untracked":
                records.untracked.add(fields[1])
            elif kind == "missing":
                records.missing.add(fields[1])
            elif kind == "read":
                records.reads.setdefault(fields[1], set()).add(fields[2])
            elif kind == "node":
                node, parent, fid, loop, site, recursive = (int(f) for f in fields[1:7])
                paths[node] = (*paths[parent], (fid, loop, site))
                context = records.contexts.setdefault(paths[node], ContextRecord())
                context.recursive |= bool(recursive)
            elif kind == "site":
                node, index, bits, count, taken = (int(f) for f in fields[1:6])
                records.contexts[paths[node]].sites[index] = SiteRecord(
                    _names(bits, params), count, taken
                )
            elif kind == "call":
                node, loop, site = (int(f) for f in fields[1:4])
                call = CallRecord(_names(int(fields[5]), params), int(fields[6]))
                records.contexts[paths[node]].calls[(fields[4], loop, site)] = call
        except (IndexError, KeyError, ValueError):
            raise PerfcastError(f"{path}:{number}: malformed taint record {line!r}") from None
    return records


def read_run(directory: Path) -> RunRecords:
    files = sorted(directory.glob("taint.*.txt"))
    if not files:
        raise PerfcastError(
            f"the run wrote no taint records into {directory}: did the run command start the "
            "program that was just built, and did it exit normally?"
        )
    merged = RunRecords()
    for path in files:
        merged.merge(read_process_file(path), counts=True)
    return merged
