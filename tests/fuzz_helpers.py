"""What the property-based suites share: a time limit per case (a hang never returns to let
hypothesis' deadline fire) and how a crash is counted (its innermost perfcast frame)."""

from __future__ import annotations

import os
import signal
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[1] / "src"


class CaseTimeout(Exception):
    """A case ran past its time limit: a hang or unbounded work."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`CaseTimeout` in the main thread after ``seconds`` (SIGALRM)."""

    def expire(signum: int, frame: Any) -> None:
        raise CaseTimeout(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def crash_site(error: BaseException) -> str:
    """``perfcast/path/file.py:line ExcType``: where a foreign exception escaped perfcast."""
    frames = traceback.extract_tb(error.__traceback__)
    ours = [f for f in frames if f.filename.startswith(str(SRC))] or frames
    if not ours:
        return f"? {type(error).__name__}"
    name = ours[-1].filename.removeprefix(str(SRC) + os.sep)
    return f"{name}:{ours[-1].lineno} {type(error).__name__}"
