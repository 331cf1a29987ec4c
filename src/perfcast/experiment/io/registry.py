"""The table of file formats, and how a path is matched to one of them.

Each format module defines one :class:`Format` entry (``FORMAT``). The formats of other
tools' files are built in: this package registers them in one table, so adding one means
one module and one line. Any installed package may add a format by naming its ``FORMAT``
in the :data:`READERS_GROUP` entry-point group; perfcast's own campaign-store reader is
declared that way (:mod:`perfcast.measure.reader`), so this package never imports the
stage that writes those stores. Declared formats are listed from package metadata and
imported only when a path is detected or one of them is asked for by name.

A format may read, write, or both. Detection looks at what is cheap and telling: a
directory, the file extension, then the first meaningful line of the file; table order
(built-in formats, then declared ones by name) breaks ties (``.txt`` is text before Talpas).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from perfcast import inputs
from perfcast.errors import InputError, PerfcastError
from perfcast.experiment.experiment import Experiment

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

Reader = Callable[..., Experiment]
"""``reader(path, **options)``; options are the format's own keyword arguments."""
Writer = Callable[[Experiment, Path], None]

HEAD_BYTES = 64 * 1024
"""How much of a file detection reads to find its first meaningful line."""

READERS_GROUP = "perfcast.readers"
"""Entry-point group of formats added by installed packages: ``name = "module:FORMAT"``,
where ``FORMAT`` is a :class:`Format` called ``name``."""

CAMPAIGN_STORE = "sqlite"
"""The name the measure stage registers its campaign-store reader under
(:data:`perfcast.measure.reader.FORMAT`): only such an input knows its runs and machine, so
commands ask for the measure stage only then (on a text file it would cost a tenth of the
start-up)."""


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
    collection: bool = False
    """True for formats of one file per run (Caliper profiles): the reader takes a file,
    a directory searched for such files, and more of either (its ``more`` option)."""
    claims_directory: Callable[[Path], bool] | None = None
    """Given a directory, does it hold this format's files? Asked before a directory is
    taken for the first ``directory`` format's (a Cube set)."""

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
    """Add a built-in format to the table; earlier entries win ties in detection."""
    if entry.name in _FORMATS:
        raise ValueError(f"file format {entry.name!r} is registered twice")
    _FORMATS[entry.name] = entry
    return entry


@functools.cache
def _declared() -> dict[str, EntryPoint]:
    """The formats installed packages declare, by name, read from metadata, not imported.

    Read on first use, not at import: listing entry points scans every installed
    package's metadata, which a command that reads no measurements need not pay for.
    """
    from importlib.metadata import entry_points

    declared: dict[str, EntryPoint] = {}
    for point in sorted(entry_points(group=READERS_GROUP), key=lambda point: point.name):
        if point.name in _FORMATS or point.name in declared:
            raise PerfcastError(
                f"file format {point.name!r} is declared twice (entry point {point.value!r} "
                f"in group {READERS_GROUP!r} of package "
                f"{point.dist.name if point.dist else 'unknown'!r}); uninstall one of them"
            )
        declared[point.name] = point
    return declared


@functools.cache
def _load(name: str) -> Format:
    """Import a declared format's module and check that it names a Format called ``name``."""
    point = _declared()[name]
    try:
        entry = point.load()
    except (ImportError, AttributeError) as exc:
        raise PerfcastError(
            f"cannot load file format {name!r} from entry point {point.value!r} "
            f"(group {READERS_GROUP!r}): {exc}; reinstall the package that declares it"
        ) from exc
    if not isinstance(entry, Format) or entry.name != name:
        named = f"the {entry.name!r} format" if isinstance(entry, Format) else type(entry).__name__
        raise PerfcastError(
            f"entry point {point.value!r} (group {READERS_GROUP!r}) must name a Format "
            f"called {name!r}, not {named}"
        )
    return entry


def format_names() -> tuple[str, ...]:
    """Every format's name, built-in first, without importing any declared format."""
    return (*_FORMATS, *_declared())


class FormatNames(Sequence[str]):
    """:func:`format_names` as a sequence read when it is first looked at, e.g. argparse's
    ``choices`` of ``--format``: argparse consults them only when the flag is given or
    help is printed, so a command that detects a text file never scans the installed
    packages' metadata for declared formats (15 ms of ``perfcast model``'s start-up)."""

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return format_names()[index]

    def __len__(self) -> int:
        return len(format_names())

    def __repr__(self) -> str:
        return repr(format_names())


def all_formats() -> list[Format]:
    """Every format in detection order; declared formats are imported here."""
    return [*_FORMATS.values(), *(_load(name) for name in _declared())]


def get_format(name: str) -> Format:
    if name in _FORMATS:
        return _FORMATS[name]
    if name in _declared():
        return _load(name)
    raise PerfcastError(f"unknown file format {name!r}; choose one of {', '.join(format_names())}")


def detect_format(path: Path) -> Format:
    """The format of an existing path: directory, then extension, then content.

    Built-in formats go first, as in :func:`all_formats`; where the extension names a
    built-in format whose content test accepts the file, that is the answer before any
    declared format is imported, so detecting a text file never imports a plug-in's reader
    (the campaign-store reader pulls in the whole measure stage: a tenth of ``perfcast
    model``'s start-up)."""
    if path.is_dir():
        claimed = (f for f in _FORMATS.values() if f.claims_directory and f.claims_directory(path))
        reader = next(claimed, None) or next((f for f in _FORMATS.values() if f.directory), None)
        reader = reader or next((f for f in all_formats() if f.directory), None)
        if reader is not None:  # declared formats were imported only if no built-in one fits
            return reader
        raise InputError("is a directory, and no registered format reads directories", path=path)
    head = first_meaningful_line(path)
    for entry in _FORMATS.values():
        if path.suffix.lower() in entry.suffixes and entry.sniff is not None and entry.sniff(head):
            return entry
    formats = all_formats()
    by_suffix = [f for f in formats if path.suffix.lower() in f.suffixes]
    for entry in by_suffix or [f for f in formats if not f.directory]:
        if entry.sniff is not None and entry.sniff(head):
            return entry
    if by_suffix:
        # The extension is all we have: let that reader explain what is wrong inside.
        return by_suffix[0]
    raise InputError(
        f"cannot tell the file format from the name or the first line {head[:60]!r}; "
        f"pass the format explicitly (one of {', '.join(format_names())})",
        path=path,
    )


MEASUREMENT_FILE = "measurement file"
"""What a reader's input is called in errors (:mod:`perfcast.inputs`)."""
SAVE_AS_TEXT = (
    "save the measurements as UTF-8 text in a file (only Cube profile sets are directories)"
)


def require_regular_file(path: Path) -> None:
    """Refuse anything but a regular measurement file before it is opened, so a reader
    handed a named pipe or device answers instead of hanging
    (:func:`perfcast.inputs.require_regular_file`)."""
    inputs.require_regular_file(path, MEASUREMENT_FILE, SAVE_AS_TEXT)


def read_utf8(path: Path) -> str:
    """A measurement file's text, decoded as UTF-8, or an InputError naming the file.
    (:func:`perfcast.experiment.io.text.read_text` reads Extra-P's text format.)"""
    return inputs.read_text(path, MEASUREMENT_FILE, SAVE_AS_TEXT)


def read_lines(path: Path) -> Iterator[tuple[int, str]]:
    """A file's lines (split at ``\\n`` only) with their numbers from 1, decoded one at a
    time, so a large file of records is never held in memory twice."""
    require_regular_file(path)
    try:
        with open(path, "rb") as file:
            for number, raw in enumerate(file, start=1):
                yield number, inputs.decode_text(raw, path, MEASUREMENT_FILE, SAVE_AS_TEXT, number)
    except OSError as exc:
        raise InputError(f"cannot read the {MEASUREMENT_FILE}: {exc.strerror}", path=path) from None


def first_meaningful_line(path: Path) -> str:
    """The first line that is neither blank nor a ``#`` comment, stripped ('' if none)."""
    require_regular_file(path)
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            head = file.read(HEAD_BYTES)
    except OSError as exc:
        raise InputError(f"cannot read the {MEASUREMENT_FILE}: {exc.strerror}", path=path) from None
    for line in head.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            return line
    return ""
