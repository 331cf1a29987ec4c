"""Perfcast-owned copies of the app directory: where builds other than the campaign's own go.

A make project writes its objects and its program to fixed paths in its own tree
(``bin/xhpcg``, ``jacobi``): a second build of another kind there either finds them up to
date (the counting build without counters, the SMPI build an executable smpirun cannot
load) or replaces the program the user and the timing campaign run. So the campaign's own
build (the light one, ``[build]`` as written) is the only one that runs in the app
directory; every other kind runs in a copy beside the store that perfcast owns:

- ``app.counting/``: the counting pass (:mod:`~perfcast.measure.counting`);
- ``app.smpi/``: a campaign on a virtual cluster (``--backend smpi``, :mod:`.smpi`).

The taint build needs no copy: it compiles one compile-and-link command into a temporary
directory (:func:`perfcast.taint.campaign.taint_campaign`); ``perfcast build --trace`` is
run by hand, where the user chooses the output.

A copy leaves out version-control data, object files, the program the build writes and the
run command starts, every campaign's own files (stores, their companions, other copies), so
the build in it makes everything afresh; runs start in the copy, so the run command's
relative paths (``./app``, input files) find the copy's. A copy holds :data:`MARKER`, by
which perfcast knows it may replace it (a directory without one is the user's and is never
removed) and never copies one copy into another.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

from perfcast.appspec import COUNTS_SUFFIX, AppSpec, beside, expand
from perfcast.errors import PerfcastError

COUNTING = ".counting"
"""The counting pass's copy: ``app.counting/``."""
SMPI = ".smpi"
"""The virtual cluster's build: ``app.smpi/``."""

MARKER = ".perfcast-copy"
"""The file in every copy that says perfcast made it (and may replace it)."""

MAX_COPY_BYTES = 1 << 30
"""Largest app directory perfcast copies (1 GiB): sources and build files are far smaller;
a directory this large holds input data, and copying it for every campaign would cost more
disk than a second build is worth."""

UNCOPIED = frozenset({".git", ".hg", ".svn", "__pycache__"})
"""Directory entries never copied: version control and Python caches."""

OBJECT_SUFFIXES = (".o", ".obj")
"""Objects of the campaign's own build, left out so that make rebuilds them in the copy."""

STORE_COMPANIONS = ("", ".lock", ".runs", "-journal", "-wal", "-shm")
"""What a store ``app.sqlite`` has beside it: its lock, its runs' scratch directory and
SQLite's journal files."""


def copy_directory(store: Path, kind: str) -> Path:
    """``app<kind>/`` beside the campaign store ``app.sqlite`` (``kind``: :data:`COUNTING`,
    :data:`SMPI`)."""
    return store.absolute().with_name(store.stem + kind)


def copy_app(spec: AppSpec, store: Path, kind: str) -> Path:
    """A fresh copy of the app directory for a build of ``kind`` (module docstring): the
    campaign's own objects and program left out, so that the build in it makes its own."""
    target = copy_directory(store, kind)
    if target.exists():
        if not (target / MARKER).is_file():
            raise PerfcastError(
                f"{target} exists and perfcast did not make it, so it is not replaced by "
                "perfcast's copy of the app directory: move it away, or measure into a "
                "store of another name (--store)"
            )
        shutil.rmtree(target)
    own = own_files(store)

    def ignored(directory: str, names: list[str]) -> set[str]:
        return {name for name in names if left_out(Path(directory, name), own)}

    try:
        shutil.copytree(spec.directory, target, symlinks=True, ignore=ignored)
        (target / MARKER).write_text(
            f"made by perfcast measure for the build of {kind[1:]} runs; replaced by the next\n"
        )
    except (OSError, shutil.Error) as exc:
        raise PerfcastError(f"cannot copy {spec.directory} to {target}: {exc}") from None
    for program in _programs(spec):
        built = target / program
        if built.is_file() and not built.is_symlink():
            built.unlink()
    return target


def copied_bytes(directory: Path, store: Path) -> int:
    """Bytes :func:`copy_app` would copy (stops counting past :data:`MAX_COPY_BYTES`)."""
    own = own_files(store)
    total = 0
    for root, directories, files in os.walk(directory):
        directories[:] = [d for d in directories if not left_out(Path(root, d), own)]
        for name in files:
            path = Path(root, name)
            if left_out(path, own):
                continue
            try:
                total += path.lstat().st_size
            except OSError:
                continue
            if total > MAX_COPY_BYTES:
                return total
    return total


def own_files(store: Path) -> set[Path]:
    """The campaign's files that may lie in the app directory: its store and its counting
    store, each with its companions, and its copies (also known by their :data:`MARKER`,
    which copies made by perfcast before it wrote one lack)."""
    own = {copy_directory(store, kind) for kind in (COUNTING, SMPI)}
    for base in (store.absolute(), beside(store, COUNTS_SUFFIX).absolute()):
        own |= {base.with_name(base.name + suffix) for suffix in STORE_COMPANIONS}
    return own


def left_out(path: Path, own: set[Path]) -> bool:
    """Is ``path`` left out of a copy: version control and caches (:data:`UNCOPIED`), the
    campaign's own objects, one of its files (``own``), or a copy perfcast made?"""
    return (
        path.name in UNCOPIED
        or path.name.endswith(OBJECT_SUFFIXES)
        or path.absolute() in own
        or (path / MARKER).is_file()
    )


def _programs(spec: AppSpec) -> Iterator[str]:
    """Relative paths of the program the build writes and the run command starts."""
    assert spec.build is not None
    if spec.build.output:
        yield spec.build.output
    example = {p.name: p.values[0] for p in spec.parameters}
    try:
        argv = shlex.split(expand(spec.run.command, example))
    except ValueError:
        return
    if argv and not os.path.isabs(argv[0]) and "/" in argv[0]:
        yield argv[0]
