"""The table of file formats, and how a path is matched to one of them.

Each format module defines one :class:`Format` entry (``FORMAT``) and the package
registers them in one table, so adding a format means one module and one line. A format
may read, write, or both. Detection looks at what is cheap and telling: a directory, the
file extension, then the first meaningful line of the file; table order breaks ties
(``.txt`` is text before Talpas).
"""

from __future__ import annotations

import inspect
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfcast.errors import InputError, PerfcastError
from perfcast.experiment.experiment import Experiment

Reader = Callable[..., Experiment]
"""``reader(path, **options)``; options are the format's own keyword arguments."""
Writer = Callable[[Experiment, Path], None]

HEAD_BYTES = 64 * 1024
"""How much of a file detection reads to find its first meaningful line."""


@dataclass(frozen=True)
class Format:
    """One file format: its name, how to recognise it, and its reader/writer."""

    name: str
    summary: str
    reader: Reader | None = None
    writer: Writer | None = None
    suffixes: tuple[str, ...] = ()
    """Lower-case file extensions (with dot) that suggest this format."""
    directory: bool = False
    """True for formats stored as a directory tree (Cube profile sets)."""
    sniff: Callable[[str], bool] | None = None
    """Given the first non-blank, non-comment line, is this the format? Sniffers of
    different formats must not both accept the same line."""

    def accepts(self, options: dict[str, Any]) -> str | None:
        """Why the reader cannot take these keyword options (None if it can)."""
        if self.reader is None:
            return f"perfcast cannot read the {self.name} format"
        try:
            inspect.signature(self.reader).bind(Path(), **options)
        except TypeError as exc:
            return f"the {self.name} reader does not accept {sorted(options)}: {exc}"
        return None


_FORMATS: dict[str, Format] = {}


def register(entry: Format) -> Format:
    """Add a format to the table; earlier entries win ties in detection."""
    if entry.name in _FORMATS:
        raise ValueError(f"file format {entry.name!r} is registered twice")
    _FORMATS[entry.name] = entry
    return entry


def format_names() -> tuple[str, ...]:
    return tuple(_FORMATS)


def get_format(name: str) -> Format:
    try:
        return _FORMATS[name]
    except KeyError:
        raise PerfcastError(
            f"unknown file format {name!r}; choose one of {', '.join(_FORMATS)}"
        ) from None


def detect_format(path: Path) -> Format:
    """The format of an existing path: directory, then extension, then content."""
    if path.is_dir():
        for entry in _FORMATS.values():
            if entry.directory:
                return entry
        raise InputError("is a directory, and no registered format reads directories", path=path)
    by_suffix = [f for f in _FORMATS.values() if path.suffix.lower() in f.suffixes]
    candidates = by_suffix or [f for f in _FORMATS.values() if not f.directory]
    head = first_meaningful_line(path)
    for entry in candidates:
        if entry.sniff is not None and entry.sniff(head):
            return entry
    if by_suffix:
        # The extension is all we have: let that reader explain what is wrong inside.
        return by_suffix[0]
    raise InputError(
        f"cannot tell the file format from the name or the first line {head[:60]!r}; "
        f"pass the format explicitly (one of {', '.join(_FORMATS)})",
        path=path,
    )


def require_regular_file(path: Path) -> None:
    """Refuse anything but a regular file before it is opened.

    Opening a named pipe blocks until a writer appears and a device may never end, so a
    reader handed one would hang instead of answering; a directory is refused with the
    one format that reads directories named.
    """
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise InputError(f"cannot read the file: {exc.strerror}", path=path) from None
    if stat.S_ISDIR(mode):
        raise InputError(
            "is a directory; give a measurement file (only Cube profile sets are directories)",
            path=path,
        )
    if not stat.S_ISREG(mode):
        raise InputError(
            "is not a regular file (a named pipe, socket or device); save the measurements "
            "to a file and read that",
            path=path,
        )


def read_text(path: Path) -> str:
    """A measurement file's text, decoded as UTF-8, or an InputError naming the file."""
    require_regular_file(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read the file: {exc.strerror}", path=path) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_utf8(exc, path, data.count(b"\n", 0, exc.start) + 1) from None


def read_lines(path: Path) -> Iterator[tuple[int, str]]:
    """A file's lines (split at ``\\n`` only) with their numbers from 1, decoded one at a
    time, so a large file of records is never held in memory twice."""
    require_regular_file(path)
    try:
        with open(path, "rb") as file:
            for number, raw in enumerate(file, start=1):
                try:
                    yield number, raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise _not_utf8(exc, path, number) from None
    except OSError as exc:
        raise InputError(f"cannot read the file: {exc.strerror}", path=path) from None


def _not_utf8(error: UnicodeDecodeError, path: Path, line: int) -> InputError:
    bad = error.object[error.start : error.start + 1].hex()
    return InputError(
        f"not a UTF-8 text file: byte 0x{bad} ({error.reason}); save the file as UTF-8",
        path=path,
        line=line,
    )


def first_meaningful_line(path: Path) -> str:
    """The first line that is neither blank nor a ``#`` comment, stripped ('' if none)."""
    require_regular_file(path)
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            head = file.read(HEAD_BYTES)
    except OSError as exc:
        raise InputError(f"cannot read the file: {exc.strerror}", path=path) from None
    for line in head.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            return line
    return ""
