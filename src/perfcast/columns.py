"""Aligned plain-text columns: the one table layout of perfcast's output.

Hand-laid rather than ``rich.table``: these tables go to pipes, logs and tests that compare
text. Out of the box rich reads ``[...]`` in a cell as markup (call paths and parameter
lists hold brackets: ``main->solve[tag]`` prints as ``main->solve``), fits the table to the
terminal's width (80 columns in a pipe, so a long call path ends in an ellipsis) and pads
every line with trailing spaces. With all of that switched off nothing of rich is used but
its import time. The lowest layer: imports nothing of perfcast.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

SEPARATOR = "  "
"""Between two columns: two spaces, so a cell holding a single space stays readable."""


def aligned(
    rows: Iterable[Sequence[str]], *, right: Collection[int] = (), indent: str = ""
) -> list[str]:
    """``rows`` as lines, each column as wide as its widest cell.

    Columns whose index is in ``right`` are right-aligned (numbers), the others left-aligned;
    every line starts with ``indent`` and has no trailing spaces. All rows have the same
    number of cells.
    """
    table = [list(row) for row in rows]
    if not table:
        return []
    count = len(table[0])
    if any(len(row) != count for row in table):
        raise ValueError(f"every row needs {count} cells: {table}")
    widths = [max(len(row[i]) for row in table) for i in range(count)]
    return [
        indent
        + SEPARATOR.join(
            cell.rjust(width) if i in right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in table
    ]
