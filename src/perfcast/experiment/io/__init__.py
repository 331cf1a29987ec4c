"""Reading and writing measurements in the formats Extra-P users have.

``read_experiment(path)`` recognises the format from the path (a directory is a Cube
profile set), the extension and the first line; ``format=`` overrides the guess, and
extra keyword options go to the reader (e.g. ``metrics=["time"]`` to read only that
Cube metric). Each format is one module with a ``FORMAT`` entry; the table below registers
the built-in ones, installed packages declare more (:mod:`.registry`; the campaign-store
reader of :mod:`perfcast.measure.reader` is one), and :data:`FORMATS` lists their names.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from perfcast.errors import InputError, PerfcastError
from perfcast.experiment.experiment import Experiment
from perfcast.experiment.io import caliper, cube, jsonfile, jsonlines, talpas, text
from perfcast.experiment.io.registry import (
    Format,
    FormatNames,
    all_formats,
    detect_format,
    get_format,
    register,
    require_regular_file,
)

for _module in (text, jsonfile, jsonlines, talpas, caliper, cube):
    register(_module.FORMAT)


FORMATS = FormatNames()
"""The names of all formats, built-in and declared, e.g. for a ``--format`` choice list;
listed on first look (:class:`~perfcast.experiment.io.registry.FormatNames`)."""


def read_experiment(
    path: str | Path | Sequence[str | Path], format: str | None = None, **options: Any
) -> Experiment:
    """Read measurements from a file or Cube directory into an Experiment; a format of one
    file per run (Caliper) also reads several paths, files or directories of them."""
    paths = (
        [Path(p) for p in path]
        if isinstance(path, Sequence) and not isinstance(path, str)
        else [Path(path)]
    )
    if not paths:
        raise InputError("no measurement file given")
    path = paths[0]
    for each in paths:
        if not each.exists():
            raise InputError("no such file or directory", path=each)
    entry = detect_format(path) if format is None else get_format(format)
    if len(paths) > 1:
        if not entry.collection:
            raise InputError(
                f"the {entry.name} format is read from one path; give one at a time "
                "(only formats of one file per run, such as Caliper profiles, take several)",
                path=paths[1],
            )
        options = {**options, "more": paths[1:]}
    problem = entry.accepts(options)
    if problem:
        raise PerfcastError(problem)
    assert entry.reader is not None
    if entry.collection:
        return entry.reader(path, **options)
    if path.is_dir() != entry.directory:
        kind = "a directory (of run directories)" if entry.directory else "a file"
        raise InputError(f"the {entry.name} format is read from {kind}", path=path)
    if not entry.directory:
        require_regular_file(path)
    return entry.reader(path, **options)


def write_experiment(experiment: Experiment, path: str | Path, format: str | None = None) -> None:
    """Write an Experiment; the format defaults to the one the extension suggests."""
    path = Path(path)
    writers = [entry for entry in all_formats() if entry.writer]
    if format is None:
        matching = [f for f in writers if path.suffix.lower() in f.suffixes]
        if not matching:
            raise PerfcastError(
                f"cannot tell the output format from the name {path.name!r}; use one of the "
                f"extensions {[s for f in writers for s in f.suffixes]} or pass the format"
            )
        entry = matching[0]
    else:
        entry = get_format(format)
    if entry.writer is None:
        raise PerfcastError(
            f"perfcast cannot write the {entry.name} format; it writes {[f.name for f in writers]}"
        )
    entry.writer(experiment, path)


__all__ = ["FORMATS", "Format", "read_experiment", "write_experiment"]
