"""What the property-based suites share: a time limit per case (a hang never returns to let
hypothesis' deadline fire) and how a crash is counted (its innermost perfcast frame)."""

from __future__ import annotations

import os
import signal
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import chdir, contextmanager, nullcontext, redirect_stderr, redirect_stdout
from io import StringIO
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


@contextmanager
def numpy_warnings_fail() -> Iterator[None]:
    """Turn NumPy's RuntimeWarnings into exceptions for one case: such a warning reaches the
    user as Python's ``file:line: RuntimeWarning`` text (issue 27, class 7), so a suite counts
    it as a crash at its site. Overflow that perfcast expects and handles is silenced where it
    happens (``np.errstate``), never here."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        yield


def crash_site(error: BaseException) -> str:
    """``perfcast/path/file.py:line ExcType``: where a foreign exception escaped perfcast."""
    frames = traceback.extract_tb(error.__traceback__)
    ours = [f for f in frames if f.filename.startswith(str(SRC))] or frames
    if not ours:
        return f"? {type(error).__name__}"
    name = ours[-1].filename.removeprefix(str(SRC) + os.sep)
    return f"{name}:{ours[-1].lineno} {type(error).__name__}"


def case_settings(examples: int) -> Any:
    """Hypothesis settings of the suites that damage real files: no deadline (a case's own
    time limit stops hangs), no example database, big or slow cases allowed."""
    from hypothesis import HealthCheck, settings

    return settings(
        deadline=None,
        max_examples=examples,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def census(
    strategy: Any,
    run: Callable[[Any], str],
    count: int,
    *,
    quiet: bool = False,
    seed: int | None = None,
) -> Counter[str]:
    """Run ``count`` cases of ``strategy`` through ``run`` (which returns how a case ended)
    and print (unless ``quiet``) and return how many ended each way, every crash counted by
    its site: what a suite's property would fail on, all at once instead of at the first.
    With ``seed`` the cases drawn are the same on every run (hypothesis' ``@seed``)."""
    from hypothesis import given
    from hypothesis import seed as seeded

    outcomes: Counter[str] = Counter()

    def same(test: Any) -> Any:
        return test if seed is None else seeded(seed)(test)

    @same
    @case_settings(count)
    @given(strategy)
    def one(case: Any) -> None:
        try:
            outcomes[run(case)] += 1
        except (AssertionError, CaseTimeout) as error:
            outcomes[f"{type(error).__name__}: {str(error)[:100]}"] += 1
        except Exception as error:  # the census counts what the test would fail on
            outcomes[crash_site(error)] += 1

    one()
    if not quiet:
        for outcome, times in outcomes.most_common():
            print(f"{times:6}  {outcome}")
    return outcomes


def run_cli(argv: list[str], seconds: float, directory: Path | None = None) -> tuple[int, str]:
    """``perfcast ARGV`` in-process as a fuzz case runs it: within ``seconds``, NumPy
    warnings as failures, in ``directory`` when given (relative outputs such as '.' land
    there, never in the checkout), stdout dropped. Returns the exit status (argparse's
    refusal included) and what went to stderr, which must hold no traceback or warning."""
    from perfcast import cli

    error = StringIO()
    with (
        time_limit(seconds),
        numpy_warnings_fail(),
        chdir(directory) if directory is not None else nullcontext(),
        redirect_stderr(error),
        redirect_stdout(StringIO()),
    ):
        try:
            status = cli.main(argv)
        except SystemExit as stopped:  # argparse refusing a value
            status = int(stopped.code or 0)
    said = error.getvalue()
    assert "Traceback" not in said and "Warning:" not in said, said
    return status, said
