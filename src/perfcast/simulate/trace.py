"""A trace directory as a typed value: what ``perfcast build --trace`` runs write and
``perfcast simulate`` replays (the format: ``perfcast/measure/README.md``, "Trace mode").

A traced run writes one SimGrid action file and one compute-block table per rank, and rank 0
writes ``trace.json`` last, only after every rank reached ``MPI_Finalize`` and renamed its
files into place. So ``trace.json`` is the mark of a complete trace, and the reader refuses a
directory without one, saying which rank files and temporary files it found instead: a trace
cut short by a crash would replay as a shorter program and predict nonsense. Everything read
is data (paths are resolved inside the directory, never executed or evaluated).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfcast.errors import InputError
from perfcast.inputs import JsonChecker, read_json, read_text
from perfcast.modeling.provenance import Compilers

FORMAT = "perfcast-trace/1"
BLOCKS_FORMAT = "perfcast-trace-blocks/1"
SUMMARY_FILE = "trace.json"
INDEX_FILE = "index.txt"
CLOCKS = ("wall", "cpu")
HINT = "record a trace with a program built by perfcast build --trace"
THRESHOLD_FILE = re.compile(r"threshold-(\d+)\.tsv")
THRESHOLD_COLUMNS = (
    "loop",
    "file",
    "line",
    "rule",
    "entries",
    "iterations_run",
    "iterations_skipped",
    "seconds_measured",
    "seconds_credited",
)
"""The header of ``threshold-<rank>.tsv``, which ``runtime/perfcast_threshold.c`` writes at
exit for every loop the threshold iteration rule rewrote (``perfcast build --threshold``)."""


@dataclass(frozen=True)
class Block:
    """Compute between two MPI calls, summed over every time the program ran it."""

    opening: str
    """Call path of the MPI call that opens the block (``main->MPI_Init``)."""
    closing: str
    """Call path of the MPI call that closes it (``main->sweep->MPI_Allreduce``)."""
    count: int
    seconds: float


@dataclass(frozen=True)
class LoopStats:
    """One rank's record of one loop under the threshold iteration rule."""

    rank: int
    loop: int
    file: str
    line: int
    rule_on: bool
    """False where the run set PERFCAST_THRESHOLD=0: every body ran (the full traced run)."""
    entries: int
    iterations_run: int
    iterations_skipped: int
    seconds_measured: float
    """Time inside the loop, skipped iterations' headers included."""
    seconds_credited: float
    """Time credited for the skipped bodies: about what the rule saved this rank."""


@dataclass(frozen=True)
class Trace:
    """One complete traced run."""

    directory: Path
    run_id: str
    ranks: int
    reference_speed: float
    """flop/s that the trace's ``compute`` amounts are counted in per traced second."""
    clock: str
    """``wall`` (CLOCK_MONOTONIC) or ``cpu`` (each rank's thread CPU clock)."""
    program: str
    elapsed: tuple[float, ...]
    """Per rank, wall seconds from MPI_Init's return to MPI_Finalize's call."""
    credited: tuple[float, ...]
    """Per rank, seconds the threshold iteration rule added without running them."""
    rank_files: tuple[Path, ...]
    """Absolute paths of the SimGrid action files, in rank order."""
    blocks: tuple[tuple[Block, ...], ...]
    """Per rank, the compute blocks by (opening, closing) call path."""
    threshold: tuple[LoopStats, ...] = ()
    """The loops the threshold iteration rule rewrote, by rank and loop (none without
    ``perfcast build --threshold``)."""
    compilers: Compilers | None = None
    """The compiler that built the traced program and the user's own (None in a trace
    of a program ``perfcast build`` did not link, or written before traces recorded it)."""

    def write_index(self, path: Path) -> Path:
        """Write the index ``smpirun -replay`` reads (the rank files' absolute paths, one a
        line, in rank order) to ``path``; returns ``path``."""
        path.write_text("".join(f"{file}\n" for file in self.rank_files))
        return path


class _Reader(JsonChecker):
    def number(self, value: Any, where: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(where, "a number")
        if not math.isfinite(value) or value < 0:
            raise self.fail(where, "a finite number of at least 0")
        return float(value)

    def numbers(self, value: Any, where: str, ranks: int) -> tuple[float, ...]:
        if not isinstance(value, list) or len(value) != ranks:
            raise self.fail(where, f"a list of {ranks} numbers, one per rank")
        return tuple(self.number(v, f"{where}[{i}]") for i, v in enumerate(value))

    def file_names(self, value: Any, where: str, ranks: int) -> tuple[str, ...]:
        names = self.texts(value, where)
        if len(names) != ranks:
            raise self.fail(where, f"a list of {ranks} file names, one per rank")
        for index, name in enumerate(names):
            if not name or "/" in name or name in (".", ".."):
                raise self.fail(f"{where}[{index}]", "a file name inside the trace directory")
        return names


def _incomplete(directory: Path) -> InputError:
    """Why a directory without trace.json is no trace, with what it does hold."""
    found = sorted(p.name for p in directory.iterdir() if p.name.startswith(("rank-", ".rank-")))
    listing = ", ".join(found) if found else "no rank files"
    return InputError(
        f"no {SUMMARY_FILE}: the traced run did not reach MPI_Finalize on every rank (it "
        f"crashed or was aborted), so the trace is incomplete and would replay as a shorter "
        f"program. Found: {listing}. Run the program again to completion",
        path=directory,
    )


MAX_AMOUNT = 2**62
"""Largest count, flop amount or byte size a trace may hold: synthesis sums and scales them
as 64-bit integers (a 400-digit count or ``compute 1.7e308`` overflowed there), and no
traced run computes or sends more."""


def _read_blocks(path: Path, run_id: str, rank: int) -> tuple[Block, ...]:
    text = read_text(path, "trace blocks file", HINT)
    lines = text.splitlines()
    expected = f"# {BLOCKS_FORMAT} run={run_id} rank={rank}"
    if not lines or lines[0] != expected:
        first = lines[0] if lines else "(empty file)"
        raise InputError(
            f"the first line is {first!r}, expected {expected!r}: this blocks file is from "
            f"another run or rank than {SUMMARY_FILE}. Trace the program again into an empty "
            "directory",
            path=path,
            line=1,
        )
    blocks = []
    for number, line in enumerate(lines[1:], start=2):
        if not line or line.startswith("#"):
            continue
        fields = line.split("\t")
        try:
            if len(fields) != 4:
                raise ValueError
            count, seconds = int(fields[2]), float(fields[3])
            if not 0 <= count <= MAX_AMOUNT or not math.isfinite(seconds) or seconds < 0:
                raise ValueError
            if any(not name or not name.isprintable() for name in fields[:2]):
                raise ValueError
        except ValueError:
            raise InputError(
                "a block row must be: opening call path, closing call path (printable text), "
                "count (an integer from 0 to 2^62), seconds (a number of at least 0), "
                "separated by tabs; " + HINT,
                path=path,
                line=number,
            ) from None
        blocks.append(Block(fields[0], fields[1], count, seconds))
    return tuple(blocks)


def read_trace(directory: Path) -> Trace:
    """The trace in ``directory``; an InputError saying what is wrong and what to do."""
    if not directory.is_dir():
        raise InputError(f"no such trace directory; {HINT}", path=directory)
    summary = directory / SUMMARY_FILE
    if not summary.exists():
        raise _incomplete(directory)
    data = read_json(summary, "trace summary", HINT)
    reader = _Reader(summary, HINT)
    where = "the trace summary"
    table = reader.table(data, where)
    form = reader.text(reader.required(table, "format", where), "format")
    if form != FORMAT:
        raise reader.fail("format", f"{FORMAT!r} (found {form!r})")
    run_id = reader.text(reader.required(table, "run_id", where), "run_id")
    ranks = reader.integer(reader.required(table, "ranks", where), "ranks")
    if ranks < 1:
        raise reader.fail("ranks", "an integer of at least 1")
    speed = reader.number(reader.required(table, "reference_speed", where), "reference_speed")
    if speed <= 0:
        raise reader.fail("reference_speed", "a number above 0")
    clock = reader.text(reader.required(table, "clock", where), "clock")
    if clock not in CLOCKS:
        raise reader.fail("clock", " or ".join(repr(c) for c in CLOCKS))
    program = reader.text(table.get("program", ""), "program")
    compilers = None
    if "compilers" in table:
        pair = reader.table(table["compilers"], "compilers")
        compilers = Compilers(
            reader.text(reader.required(pair, "measured", "compilers"), "compilers.measured"),
            reader.text(reader.required(pair, "user", "compilers"), "compilers.user"),
        )
    elapsed = reader.numbers(reader.required(table, "elapsed", where), "elapsed", ranks)
    credited = reader.numbers(reader.required(table, "credited", where), "credited", ranks)
    files = reader.file_names(reader.required(table, "files", where), "files", ranks)
    block_files = reader.file_names(reader.required(table, "blocks", where), "blocks", ranks)
    base = directory.resolve()
    rank_files = []
    for rank, name in enumerate(files):
        path = base / name
        if not path.is_file():
            raise InputError(
                f"rank {rank}'s action file {name} (files[{rank}] of {SUMMARY_FILE}) is "
                "missing: the trace directory was changed after the run. Trace again",
                path=directory,
            )
        if path.stat().st_size == 0:
            # a run writes init and finalize at least: SimGrid met an empty file as an
            # actor that is "gone", synthesis as a sequence without finalize
            raise InputError(
                f"rank {rank}'s action file {name} is empty: the trace directory was changed "
                "after the run. Trace again",
                path=directory,
            )
        rank_files.append(path)
    blocks = tuple(_read_blocks(base / name, run_id, rank) for rank, name in enumerate(block_files))
    return Trace(
        directory=directory,
        run_id=run_id,
        ranks=ranks,
        reference_speed=speed,
        clock=clock,
        program=program,
        elapsed=elapsed,
        credited=credited,
        rank_files=tuple(rank_files),
        blocks=blocks,
        threshold=read_threshold_stats(base),
        compilers=compilers,
    )


def read_threshold_stats(directory: Path) -> tuple[LoopStats, ...]:
    """Every rank's threshold statistics in ``directory``, by rank and loop; empty where
    the run rewrote no loop. A damaged file is an InputError naming it and the line."""
    stats: list[LoopStats] = []
    for path in sorted(directory.glob("threshold-*.tsv")):
        match = THRESHOLD_FILE.fullmatch(path.name)
        if match is None:
            continue
        lines = read_text(path, "threshold statistics", HINT).splitlines()
        if not lines or tuple(lines[0].split("\t")) != THRESHOLD_COLUMNS:
            raise InputError(
                f"not a perfcast threshold statistics file (its header differs); {HINT}",
                path=path,
                line=1,
            )
        rank = int(match.group(1))
        stats += [_loop_stats(path, number, rank, text) for number, text in enumerate(lines[1:], 2)]
    return tuple(sorted(stats, key=lambda s: (s.rank, s.loop)))


def _loop_stats(path: Path, number: int, rank: int, text: str) -> LoopStats:
    fields = text.split("\t")
    try:
        if len(fields) != len(THRESHOLD_COLUMNS) or fields[3] not in ("on", "off"):
            raise ValueError
        loop, file, line, rule, entries, run, skipped, measured, credited = fields
        seconds = float(measured), float(credited)
        if not all(math.isfinite(s) and s >= 0 for s in seconds):
            raise ValueError
        counts = int(loop), int(line), int(entries), int(run), int(skipped)
        if min(counts) < 0:
            raise ValueError
    except ValueError:
        raise InputError(
            f"expected {len(THRESHOLD_COLUMNS)} tab-separated fields "
            f"({', '.join(THRESHOLD_COLUMNS)}); the run was damaged: {HINT}",
            path=path,
            line=number,
        ) from None
    return LoopStats(rank, counts[0], file, counts[1], rule == "on", *counts[2:], *seconds)
