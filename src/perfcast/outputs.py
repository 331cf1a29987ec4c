"""Writing the files a user names (``-o`` and the like): whole or not at all, never over data.

Two failures made this module. Writing straight into the target truncates it first, so a
missing directory or a full disk ended in a traceback and left a 0-byte file (or half of
one) where the previous results had been. And the target was never looked at:
``perfcast model store.sqlite -o store.sqlite`` replaced a campaign store, the only copy of
every measured run, with JSON.

So every output is written to a temporary file in the target's directory, flushed to the
disk (fsync) and renamed over the target: a rename within one file system is atomic, so a
reader (or a crash) sees the old file or the new one, never a mixture. Before anything is
written, the target is checked: it must not be an input of the same command, not a SQLite
database (perfcast's campaign stores are), and an existing file must be one of the kind
being written (replacing our own earlier ``models.json`` is what ``-o`` is for; replacing a
source file or someone's notes is not). Operating-system errors become an
:class:`~perfcast.errors.InputError` naming the path and what to do.

This module sits in the lowest layer (it imports only :mod:`perfcast.errors`), so every
stage can write through it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from perfcast.errors import InputError

SQLITE_HEADER = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file (its file-format documentation)."""

SNIFF_BYTES = 64 * 1024
"""How much of an existing target is read to recognise its kind: enough for any header we
write, little enough for a file of gigabytes."""

PathLike = str | os.PathLike[str]

TEMPORARY_STEM = 200
"""Bytes of the target's name a temporary file beside it keeps: with the dot, the process
id, 8 random hex digits and ``.tmp`` (at most 33 bytes more) it stays within the 255
bytes of a file name on Linux and macOS."""


@dataclass(frozen=True)
class OutputKind:
    """What a writer writes, and how to recognise an earlier file of that kind."""

    description: str
    """For messages: ``a perfcast model file``."""
    recognise: Callable[[bytes], bool]
    """Given the first :data:`SNIFF_BYTES` bytes of an existing non-empty file: is it a file
    of this kind, which the writer may replace?"""


def json_with(marker: str) -> Callable[[bytes], bool]:
    """A recogniser for a JSON document that has ``marker`` (a key or value our writers put
    in its first lines) near its start."""
    needle = marker.encode("utf-8")

    def recognise(head: bytes) -> bool:
        return head.lstrip().startswith(b"{") and needle in head

    return recognise


def text_file(head: bytes) -> bool:
    """A recogniser for any text (no NUL byte, valid UTF-8): for outputs such as a spec,
    where an earlier file of any content is the user's own to replace."""
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:  # a character cut at the end of the head is fine
        return exc.start >= len(head) - 3
    return True


def check_target(path: PathLike, kind: OutputKind, inputs: Iterable[PathLike] = ()) -> None:
    """Refuse (with an :class:`InputError`) a target that writing ``kind`` must not replace:
    one of ``inputs``, a directory, a SQLite database, or an existing file of another kind.

    The writers call it themselves; a command calls it early too when it would otherwise
    spend minutes (fitting, measuring) before finding out that it cannot write its result.
    """
    target = Path(path)
    refuse_inputs(target, inputs, kind.description)
    try:
        info = target.stat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _write_error(target, exc) from None
    if stat.S_ISDIR(info.st_mode):
        raise InputError(
            f"is a directory; name the file to write {kind.description} to", path=target
        )
    if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
        return  # a device or pipe (-o /dev/null) or an empty file: nothing to lose
    try:
        with open(target, "rb") as existing:
            head = existing.read(SNIFF_BYTES)
    except OSError as exc:
        raise _write_error(target, exc) from None
    if head.startswith(SQLITE_HEADER):
        raise InputError(
            "is a SQLite database (a perfcast campaign store keeps every measured run in "
            f"one); perfcast will not replace it: write {kind.description} to another file",
            path=target,
        )
    if not kind.recognise(head):
        raise InputError(
            f"exists and is not {kind.description}; perfcast replaces only its own earlier "
            "output: write to another file, or move this one away first",
            path=target,
        )


def refuse_inputs(path: PathLike, inputs: Iterable[PathLike], description: str) -> None:
    """Refuse a target that is one of ``inputs`` (also under another name or a link):
    writing ``description`` there would destroy what the command reads."""
    for source in inputs:
        if _same_file(Path(path), Path(source)):
            raise InputError(
                f"is an input of this command; write {description} to another file",
                path=Path(path),
            )


def write_output(
    path: PathLike, content: str | bytes, kind: OutputKind, inputs: Iterable[PathLike] = ()
) -> None:
    """Write ``content`` (text is UTF-8) to ``path`` atomically, after :func:`check_target`.

    A device or pipe (``-o /dev/null``, ``-o >(gzip > x.gz)``) is written in place, since it
    cannot be renamed over and holds nothing to lose. A symbolic link keeps pointing where it
    did; the file it points to is replaced.
    """
    target = Path(path)
    check_target(target, kind, inputs)
    data = content.encode("utf-8") if isinstance(content, str) else content
    try:
        if target.exists() and not target.is_file():
            with open(target, "wb") as stream:
                stream.write(data)
            return
        _replace_atomically(Path(os.path.realpath(target)), data)
    except OSError as exc:
        raise _write_error(target, exc) from None


def _replace_atomically(target: Path, data: bytes) -> None:
    """Temporary file beside ``target``, fsync, rename, fsync of the directory (which makes
    the rename itself survive a crash)."""
    directory = target.parent
    # At most TEMPORARY_STEM bytes of the name: a name the file system takes (255 bytes)
    # must not be refused as too long because of what the temporary file adds to it.
    stem = os.fsdecode(os.fsencode(target.name)[:TEMPORARY_STEM])
    temporary = directory / f".{stem}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    # O_EXCL: never write into a file someone else created under that name; mode 0o666 lets
    # the umask decide, as for any file a program creates.
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        with contextlib.suppress(FileNotFoundError):  # keep an earlier file's mode
            os.chmod(temporary, stat.S_IMODE(target.stat().st_mode))
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _sync_directory(directory)


def _sync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    except OSError as exc:
        if exc.errno != errno.EINVAL:  # file systems that cannot sync a directory say EINVAL
            raise
    finally:
        os.close(descriptor)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # either does not exist (yet): they cannot be the same file
        return False


_REMEDIES = {
    errno.ENOSPC: "no space left on its file system: free some space or write elsewhere",
    errno.EDQUOT: "disk quota exceeded: free some space or write elsewhere",
    errno.EFBIG: "the file is larger than this file system or a limit (ulimit -f) allows: "
    "write elsewhere or raise the limit",
    errno.EACCES: "permission denied: write to a directory you may write to",
    errno.EPERM: "permission denied: write to a directory you may write to",
    errno.EROFS: "the file system is read-only: write elsewhere",
    errno.ENOTDIR: "a part of the path is not a directory: check the path",
    errno.ENAMETOOLONG: "the name is too long: choose a shorter one",
}


def _write_error(target: Path, exc: OSError) -> InputError:
    """The one-line message for an OSError while writing ``target``."""
    if exc.errno == errno.ENOENT and target.is_symlink():
        reason = (
            f"cannot write: it is a symbolic link to {os.readlink(target)}, whose directory "
            "does not exist: remove the link or write elsewhere"
        )
    elif exc.errno == errno.ENOENT and not _exists(target.parent):
        reason = (
            f"cannot write: directory {target.parent} does not exist: create it "
            f"(mkdir -p {target.parent}) or write elsewhere"
        )
    else:
        remedy = _REMEDIES.get(exc.errno or 0, f"{exc.strerror or exc}: write elsewhere")
        reason = f"cannot write: {remedy}"
    if _exists(target, file=True):
        reason += f"; the existing {target.name} is unchanged"
    return InputError(reason, path=target)


def _exists(path: Path, *, file: bool = False) -> bool:
    """Is ``path`` a directory (``file``: a regular file)? ``False`` where the question
    itself fails: a name too long for the file system raises in ``Path.is_file``."""
    try:
        return path.is_file() if file else path.is_dir()
    except OSError:
        return False
