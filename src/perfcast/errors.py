"""Errors that reach the user as a message, never as a traceback.

Every stage raises :class:`PerfcastError` (or a subclass) for problems the user can fix;
the CLI prints the message and exits with status 2. Anything else is a bug in perfcast.
"""

from __future__ import annotations

from pathlib import Path


class PerfcastError(Exception):
    """A problem the user can act on; the message says what to do."""


class InputError(PerfcastError):
    """Bad input data, located as precisely as we can (file, line, parameter)."""

    def __init__(self, message: str, *, path: str | Path | None = None, line: int | None = None):
        self.path = None if path is None else Path(path)
        self.line = line
        self.reason = message
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(where + message)
