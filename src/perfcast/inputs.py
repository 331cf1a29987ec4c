"""Reading the files a user names (a taint profile, a filter, a measurement file): every way
the bytes can fail to be text, or the text to be JSON, becomes one
:class:`~perfcast.errors.InputError` naming the file and, where there is one, the line.

These files travel: a profile written on one machine is read days later on another, or
edited by hand, and a path on a command line can name anything. Reading fails in more ways
than ``JSONDecodeError`` alone (a missing or unreadable file, a named pipe that blocks until
a writer appears, a device that never ends, bytes that are not UTF-8, an integer longer than
Python's 4300-digit limit, nesting deeper than the recursion limit); each needs a message
that says what the file is and how to make a good one, worded the same in every stage.

Like :mod:`perfcast.outputs`, this module sits in the lowest layer (it imports only
:mod:`perfcast.errors`), so every stage reads through it.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

from perfcast.errors import InputError


def require_regular_file(path: Path, kind: str, hint: str) -> None:
    """Refuse anything but a regular file before it is opened: a named pipe would block
    until a writer appears and a device such as ``/dev/zero`` never ends, so a reader
    handed one would hang instead of answering. ``kind`` names the file (``filter file``),
    ``hint`` says how to make a good one (``save the names to a file``)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise InputError(f"no such {kind}; {hint}", path=path) from None
    except OSError as exc:
        raise InputError(f"cannot read the {kind}: {exc.strerror}", path=path) from None
    if not stat.S_ISREG(mode):
        what = "a directory" if stat.S_ISDIR(mode) else "a named pipe, socket or device"
        raise InputError(f"is not a regular file ({what}), so not a {kind}; {hint}", path=path)


def decode_text(data: bytes, path: str | Path, kind: str, hint: str, first_line: int = 1) -> str:
    """``data`` as UTF-8 text; an InputError names ``path`` and the line of the first byte
    that is not UTF-8, counting from ``first_line`` (the number of the line ``data``
    starts, when it is one line of a file read a line at a time)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"not a {kind}: not UTF-8 text (byte {data[exc.start]:#04x}); {hint}",
            path=path,
            line=first_line + data.count(b"\n", 0, exc.start),
        ) from None


def read_text(path: Path, kind: str, hint: str) -> str:
    """The UTF-8 text of ``path``, a regular file of the ``kind`` named; ``hint`` says how
    to make a good one (:func:`require_regular_file`, :func:`decode_text`)."""
    require_regular_file(path, kind, hint)
    try:
        data = path.read_bytes()
    except OSError as exc:  # e.g. removed or made unreadable since the check
        raise InputError(f"cannot read the {kind}: {exc.strerror}", path=path) from None
    return decode_text(data, path, kind, hint)


def read_json(path: Path, kind: str, hint: str) -> Any:
    """The parsed JSON of ``path``, a ``kind`` of file (``taint profile``); ``hint`` says
    how to make a good one (``write one with perfcast taint``)."""
    text = read_text(path, kind, hint)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc.msg}", path=path, line=exc.lineno) from None
    except ValueError as exc:  # an integer of more than 4300 digits
        reason = str(exc).split(";")[0]  # not Python's advice on raising the limit
        raise InputError(f"not a {kind}: {reason}", path=path) from None
    except RecursionError:
        raise InputError(f"not a {kind}: JSON nested too deeply; {hint}", path=path) from None


class JsonChecker:
    """Checks the shape of parsed JSON, each error naming the file, the key
    (``functions[0].terms``) and, in ``hint``, how to make a good file.

    Every stage's reader of a hand-over file (taint profile, static summary, model file)
    subclasses it with the records of its format, so a wrong type reads the same in all
    of them and each reader states only what its format requires.
    """

    def __init__(self, path: str | Path | None, hint: str):
        self.path = path
        self.hint = hint

    def fail(self, where: str, what: str) -> InputError:
        """The error for a value at ``where`` that is not ``what`` (``a JSON object``)."""
        return InputError(f"{where} must be {what}; {self.hint}", path=self.path)

    def required(self, table: dict[str, Any], key: str, where: str) -> Any:
        """``table[key]``; an InputError if ``where`` (the table) lacks it."""
        if key not in table:
            raise InputError(f"{where} has no {key!r}; {self.hint}", path=self.path)
        return table[key]

    def table(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, "a JSON object")
        return value

    def text(self, value: Any, where: str) -> str:
        if not isinstance(value, str):
            raise self.fail(where, "a string")
        return value

    def texts(self, value: Any, where: str, what: str = "a list of strings") -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(where, what)
        return tuple(value)

    def flag(self, value: Any, where: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(where, "true or false")
        return value

    def integer(self, value: Any, where: str, what: str = "an integer") -> int:
        """An int; ``true`` and ``false`` are refused though Python counts them as ints."""
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(where, what)
        return value
