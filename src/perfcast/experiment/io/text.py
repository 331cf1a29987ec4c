"""Extra-P's text format: PARAMETER, POINTS, REGION, METRIC and DATA lines.

::

    PARAMETER p
    PARAMETER size          # or several names on one line: PARAMETER p size
    POINTS ( 2 100 ) ( 4 100 )
    POINTS ( 8 100 )
    REGION main->solve
    METRIC time
    DATA 1.2 1.3 1.25       # one line per point, in POINTS order; one value per repetition
    DATA 2.4 2.5 2.45

A REGION or METRIC line starts a new block; the metric carries over to the next REGION,
and data before any METRIC belongs to the unnamed metric ``""`` (as in Extra-P). With one
parameter POINTS may also be a plain list (``POINTS 1000 2000``). Unlike Extra-P, any
number of parameters is allowed (Extra-P stops at four), and every mistake is reported
with its line: unknown keywords, points of the wrong size, duplicate points, non-numeric
or non-finite values, and blocks whose DATA count differs from the number of POINTS.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from perfcast.errors import InputError, PerfcastError
from perfcast.experiment.experiment import Experiment
from perfcast.experiment.io import registry
from perfcast.experiment.io.registry import Format
from perfcast.experiment.io.table import Cells, MeasurementTable, Point
from perfcast.outputs import OutputKind, write_output

KEYWORDS = ("PARAMETER", "POINTS", "REGION", "METRIC", "DATA")
UNNAMED_METRIC = ""
"""Extra-P's name for the metric of DATA lines that follow no METRIC line."""

_GROUP = re.compile(r"\(([^()]*)\)")


class _TextReader:
    """Line-by-line state machine; one instance per file."""

    def __init__(self, path: Path):
        self.path = path
        self.parameters: list[str] = []
        self.table: MeasurementTable | None = None
        self.point_lines: list[int] = []
        """Line of each declared point; point ids are POINTS order, so DATA line k of a
        block belongs to point k."""
        self.region: str | None = None
        self.metric = UNNAMED_METRIC
        self.block: tuple[str, str] | None = None
        self.block_start = 0
        self.block_rows = 0
        self.blocks_seen: dict[tuple[str, str], int] = {}
        self.handlers: dict[str, Callable[[str, int], None]] = {
            "PARAMETER": self.parameter,
            "POINTS": self.points_line,
            "REGION": self.region_line,
            "METRIC": self.metric_line,
            "DATA": self.data,
        }

    def error(self, message: str, line: int | None) -> InputError:
        return InputError(message, path=self.path, line=line)

    def read(self) -> Experiment:
        # One pass, a line at a time (a 250 MB file held whole and split took 650 MB more
        # than its values): DATA lines are nearly all of a file (one per call path, metric
        # and point), so they take a short path that skips the keyword dispatch and the
        # whitespace normalisation the rarer keywords need.
        for number, raw in registry.read_lines(self.path):
            tokens = raw.split()
            if not tokens:
                continue
            keyword = tokens[0]
            if keyword == "DATA" and len(tokens) > 1 and self.block is not None:
                self.data_values(tokens[1:], number)
                continue
            if keyword.startswith("#"):
                continue
            handler = self.handlers.get(keyword)
            if handler is None:
                raise self.error(
                    f"unknown keyword {keyword!r}; expected one of {', '.join(KEYWORDS)}",
                    number,
                )
            handler(" ".join(tokens[1:]), number)
        self.close_block()
        if self.table is None or not self.blocks_seen:
            raise self.error("the file contains no DATA lines", None)
        return self.table.to_experiment()

    # -- one method per keyword ---------------------------------------------------------

    def parameter(self, rest: str, line: int) -> None:
        if self.table is not None:
            raise self.error("PARAMETER after POINTS: declare all parameters first", line)
        if not rest:
            raise self.error("PARAMETER needs a name", line)
        self.parameters.extend(rest.split(" "))

    def points_line(self, rest: str, line: int) -> None:
        if not self.parameters:
            raise self.error("POINTS before any PARAMETER line", line)
        if self.blocks_seen or self.block is not None:
            raise self.error("POINTS after DATA: declare all points before the data", line)
        if self.table is None:
            self.table = MeasurementTable(self.parameters, path=self.path)
        for values in self.split_points(rest, line):
            point_id = self.table.point(values, line=line)
            if point_id < len(self.point_lines):
                raise self.error(
                    f"duplicate point {_format(self.table.points[point_id])}, first given in "
                    f"line {self.point_lines[point_id]}",
                    line,
                )
            self.point_lines.append(line)

    def split_points(self, rest: str, line: int) -> list[list[str]]:
        if "(" not in rest and ")" not in rest:
            if len(self.parameters) != 1:
                raise self.error(
                    f"with {len(self.parameters)} parameters each point needs parentheses, "
                    "e.g. POINTS ( 20 1 ) ( 30 1 )",
                    line,
                )
            groups = [[token] for token in rest.split(" ") if token]
        else:
            outside = _GROUP.sub(" ", rest).strip()
            if outside:
                raise self.error(f"unexpected {outside!r} outside the parentheses of POINTS", line)
            groups = [group.split() for group in _GROUP.findall(rest)]
        if not groups:
            raise self.error("POINTS line without points", line)
        return groups

    def region_line(self, rest: str, line: int) -> None:
        if not rest:
            raise self.error("REGION needs a name", line)
        self.close_block()
        self.region = rest

    def metric_line(self, rest: str, line: int) -> None:
        self.close_block()
        self.metric = rest

    def data(self, rest: str, line: int) -> None:
        if self.table is None:
            raise self.error("DATA before any POINTS line", line)
        if self.region is None:
            raise self.error("DATA before any REGION line", line)
        if not rest:
            raise self.error("DATA line without values", line)
        if self.block is None:
            self.open_block(line)
        self.data_values(rest.split(" "), line)

    def data_values(self, values: list[str], line: int) -> None:
        """One DATA line's values, in an open block (the reader's hot path)."""
        if self.block_rows == len(self.point_lines):
            raise self.error(
                f"more DATA lines than the {len(self.point_lines)} POINTS for region "
                f"{self.region!r}, metric {self.metric!r} (block starts in line "
                f"{self.block_start})",
                line,
            )
        assert self.table is not None and self.block is not None  # an open block has both
        self.table.add(self.block[0], self.block[1], self.block_rows, values, line=line)
        self.block_rows += 1

    # -- blocks: one REGION/METRIC pair with one DATA line per point --------------------

    def open_block(self, line: int) -> None:
        assert self.region is not None
        key = (self.region, self.metric)
        if key in self.blocks_seen:
            raise self.error(
                f"region {key[0]!r}, metric {key[1]!r} already has data from line "
                f"{self.blocks_seen[key]}; give each region and metric one block",
                line,
            )
        self.block, self.block_start, self.block_rows = key, line, 0
        self.blocks_seen[key] = line

    def close_block(self) -> None:
        if self.block is not None and self.block_rows != len(self.point_lines):
            raise self.error(
                f"region {self.block[0]!r}, metric {self.block[1]!r} has {self.block_rows} "
                f"DATA line(s) but {len(self.point_lines)} POINTS are declared; give one DATA "
                "line per point",
                self.block_start,
            )
        self.block = None


def read_text(path: Path) -> Experiment:
    """Read an Extra-P text file (any number of parameters)."""
    return _TextReader(path).read()


def write_text(experiment: Experiment, path: Path) -> None:
    """Write an Extra-P text file that Extra-P reads back (it accepts up to 4 parameters).

    Every call path and metric must be measured at every point: the format has exactly
    one DATA line per point. Data of the unnamed metric ``""`` is written first, before
    any METRIC line, which is the only place the format can express it.
    """
    for name in experiment.parameters:
        if name.split() != [name]:
            raise PerfcastError(f"parameter name {name!r} cannot be written to a text file")
    cells = Cells.of(experiment)
    gaps = np.argwhere(cells.counts == 0)
    if len(gaps):
        (callpath, metric), point = cells.series[gaps[0][0]], cells.points[gaps[0][1]]
        raise PerfcastError(
            f"call path {callpath!r}, metric {metric!r} has no measurement at {_format(point)}; "
            "the text format needs every call path measured at every point (a call path "
            "absent from a completed run was not called there: Experiment.with_absent_as_zero "
            "and perfcast export write it as 0)"
        )
    lines = [f"PARAMETER {name}" for name in experiment.parameters]
    lines += ["POINTS " + _format(point) for point in cells.points]
    unnamed_first = sorted(
        range(len(cells.series)), key=lambda s: cells.series[s][1] != UNNAMED_METRIC
    )
    for index in unnamed_first:
        callpath, metric = cells.series[index]
        lines.append(f"REGION {callpath}")
        if metric != UNNAMED_METRIC:
            lines.append(f"METRIC {metric}")
        for point in range(len(cells.points)):
            lines.append("DATA " + " ".join(map(repr, cells.values_at(index, point))))
    write_output(path, "\n".join(lines) + "\n", TEXT_FILE)


def _format(point: Point | np.ndarray) -> str:
    return "( " + " ".join(_number(float(v)) for v in point) + " )"


def _number(value: float) -> str:
    """Shortest exact spelling, without a trailing ``.0`` for whole numbers."""
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text


def _sniff(head: str) -> bool:
    return head.split(None, 1)[0] in KEYWORDS if head else False


TEXT_FILE = OutputKind(
    "an Extra-P text file", lambda head: _sniff(head.decode("utf-8", errors="replace"))
)


FORMAT = Format(
    name="text",
    summary="Extra-P text (PARAMETER/POINTS/REGION/METRIC/DATA)",
    reader=read_text,
    writer=write_text,
    suffixes=(".txt",),
    sniff=_sniff,
)
