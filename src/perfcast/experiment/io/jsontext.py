"""JSON text of measurement files decoded in one place, for the JSON, JSON Lines and
Talpas readers and their format sniffers.

Python's ``json`` module fails on hostile input in more ways than ``JSONDecodeError``:
deep nesting exhausts the recursion limit (``RecursionError``), an integer of more than
4,300 digits exceeds the integer-string conversion limit (``ValueError``), and ``NaN`` or
``Infinity`` are accepted although no measurement can be either. :func:`decode` turns each
into an :class:`InputError` that names the file and line and says what to change.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from perfcast.errors import InputError

MAX_INTEGER_DIGITS = 400
"""Longer integers cannot be a float (the largest has 309 digits), so no measurement,
coordinate or id is ever that long; refusing them early also avoids Python's limit."""

_NON_FINITE = re.compile(r"-?\b(?:NaN|Infinity)\b")
_NON_FINITE_NAMES = ("NaN", "Infinity", "-Infinity")


class JSONSyntaxError(InputError):
    """The text is not JSON at all (as opposed to JSON that no reader can use)."""


class _Refused(ValueError):
    """A token the decoder refuses; ``args[0]`` says why, ``args[1]`` is the token."""


def _reject_constant(name: str) -> float:
    raise _Refused(
        f"{name} is not a measured value or coordinate; only finite numbers are allowed", name
    )


def _parse_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise _Refused(
            f"an integer of {len(digits)} digits is too large for any measurement", digits
        )
    return int(digits)


def decode(
    text: str, *, path: Path | None, line: int | None = None, what: str = "valid JSON"
) -> Any:
    """The JSON value of ``text``, or an InputError saying what is wrong and where.

    ``line`` is the file line of a one-line record; without it the line is found in
    ``text``. ``what`` names what the text should be, for syntax errors.
    """
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_int=_parse_int)
    except _Refused as exc:
        reason, token = exc.args
        if line is None:
            match = _NON_FINITE.search(text) if token in _NON_FINITE_NAMES else None
            start = match.start() if match else text.find(token)
            line = text.count("\n", 0, start) + 1 if start >= 0 else None
        raise InputError(reason, path=path, line=line) from None
    except json.JSONDecodeError as exc:
        raise JSONSyntaxError(
            f"not {what}: {exc.msg} (column {exc.colno})",
            path=path,
            line=exc.lineno if line is None else line,
        ) from None
    except RecursionError:
        raise InputError(
            "JSON nested too deeply to read (hundreds of levels of [ or {); measurement "
            "files need only a few",
            path=path,
            line=line,
        ) from None


def try_decode(text: str) -> Any | None:
    """The JSON value of ``text``, or None where :func:`decode` would refuse it (sniffing)."""
    try:
        return decode(text, path=None)
    except InputError:
        return None
