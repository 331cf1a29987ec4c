"""The ``perfcast`` command line: thin wrappers that parse, call a stage, and print.

Each sub-command lives in its own module with a ``register(subparsers)`` function that
adds its parser and sets ``handler``; this keeps stages independent and the entry point
small. :data:`COMMANDS` declares the commands, so the entry point imports only the module
of the command that runs. Errors the user can fix (:class:`~perfcast.errors.PerfcastError`)
become a one-line message and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import math
import re
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from perfcast.errors import InputError, PerfcastError

COMMANDS: dict[str, str] = {
    "build": "compile a C/C++ (MPI) program with perfcast's call-path measurement",
    "taint": "taint analysis: which parameters drive each function",
    "init": "write a commented starter perfcast.toml",
    "design": "print the experiment plan of a perfcast.toml and its cost",
    "measure": "build the program and run its measurement campaign",
    "model": "fit PMNF models to measurements",
    "export": "write measurements as Extra-P text or JSON",
    "predict": "evaluate saved models at a point",
    "report": "write one self-contained HTML page of a campaign's models",
    "static": "static instruction-count model from source and binary",
    "platform": "SimGrid platforms of machines to predict for",
    "simulate": "predict run time on SimGrid platforms by replaying a traced run",
    "synth": "generate C++ MPI benchmark programs with known complexity",
    "demo": "build, measure and model a bundled MPI example end to end",
}
"""Every sub-command, in the order of the pipeline, with the line ``perfcast --help`` shows
for it. The line lives here rather than in the command's module ``perfcast.cli.NAME`` so
that listing the commands imports none of them: the modules import their stages (pandas,
NumPy, libclang), and only the command that runs pays for its own."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser with every command listed and, when ``command`` is one of them, that
    command's module imported to register its arguments: ``perfcast --help`` imports no
    stage, and `perfcast build` inside a Makefile loads only the compiler wrapper on every
    compile step."""
    parser = argparse.ArgumentParser(
        prog="perfcast",
        description="Scaling models (PMNF) for parallel C/C++ programs.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, summary in COMMANDS.items():
        if name == command:
            importlib.import_module(f"perfcast.cli.{name}").register(subparsers)
        else:
            subparsers.add_parser(name, help=summary)
    return parser


def whole_number(low: int, high: int | None = None, why: str = "") -> Callable[[str], int]:
    """An argparse type: a whole number from ``low`` to ``high`` (``None``: no upper bound);
    ``why`` says where the upper bound comes from, in the message that refuses a larger one
    (every count a user gives is bounded before work starts: ``--synthesize 1000000000``
    wrote 172,463 files before anything failed)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be {low} or more, not {value}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"at most {high:,} ({why}), not {value:,}")
        return value

    return parse


SEED = whole_number(0, 2**32 - 1, "a 32-bit seed")
"""The argparse type of every ``--seed``: NumPy's generators take non-negative seeds."""

positive_int = whole_number(1)
"""An argparse type: a whole number >= 1 (``--parallel 0`` would start no run, ever)."""


def positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds > 0 (``nan`` compares false with every
    bound, so it would pass any check made later)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds > 0, not {text}")
    return value


NEGATIVE_LIST = re.compile(r"-\d[\d.]*[,/][-\d.,/]*")
"""A value like ``-1,0,1`` or ``-1/2``: argparse takes a word that starts with '-' for an
option unless it is a plain negative number, so ``--exponents -1,0,1`` would fail."""


def probability(text: str) -> float:
    """``--level``: a probability strictly between 0 and 1 (at 1 an interval is infinite,
    at 0 empty), so that a typo fails here and not as a nan interval."""
    try:
        level = float(text)
    except ValueError:
        level = math.nan
    if not 0 < level < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a probability between 0 and 1 (such as 0.95)"
        )
    return level


# -- flags several commands share: the measurements they read, the views they add --------
# Declared once here so that perfcast model and perfcast report spell and check them alike;
# the stages they need are imported when a parser is built, not when perfcast starts.


def add_caliper_flags(parser: argparse.ArgumentParser) -> None:
    caliper = parser.add_argument_group("Caliper profiles")
    caliper.add_argument(
        "--parameters",
        metavar="NAME,...",
        help="the Adiak globals that are the runs' parameters, e.g. jobsize,problem_size",
    )
    caliper.add_argument(
        "--where",
        action="append",
        metavar="KEY=VALUE",
        help="keep only the runs whose Adiak global KEY is VALUE (repeatable), e.g. "
        "compiler=intel: runs at one point must not differ in anything but the parameters",
    )


def caliper_options(
    args: argparse.Namespace, format: str, path: Path, *, more: bool = False
) -> dict[str, object]:
    """The reader's options the Caliper flags give; refused for another format, which
    would otherwise ignore them. ``more``: more than one input was given."""
    if args.parameters is None and not args.where and not more:
        return {}
    from perfcast.experiment.io.registry import get_format

    if not get_format(format).collection:
        raise InputError(
            f"--parameters, --where and more than one input are for Caliper profiles, "
            f"and this is {format} input: leave them out",
            path=path,
        )
    return {"parameters": args.parameters, "where": args.where}


EFFORT = "effort__"
"""Where the effort modeler's flags store (its ``aggregation`` is not the search's)."""
RANKS_OPTION = ("ranks",)
"""The effort modeler's option ``--ranks-parameter`` sets, declared with the option
(:class:`~perfcast.effort.EffortModeler`): ``perfcast model`` takes it among the effort
flags, ``perfcast report`` alone (``add_flags(..., only=RANKS_OPTION)``), so both read the
ranks, for the priors and for ``--efficiency``, from one declaration."""


def add_efficiency_flags(parser: argparse.ArgumentParser) -> None:
    """``--efficiency`` and ``--subtree``; the ranks they scale along are the effort
    modeler's ``--ranks-parameter`` (:data:`RANKS_OPTION`)."""
    from perfcast.modeling.efficiency import KINDS

    parser.add_argument(
        "--efficiency",
        choices=KINDS,
        help="also show the speedup and parallel efficiency along the ranks "
        "(--ranks-parameter) of the costliest region, or of --subtree, measured and at the "
        "target: strong (the problem fixed) or weak (the problem per rank fixed) scaling",
    )
    parser.add_argument(
        "--subtree",
        metavar="CALLPATH",
        help="the region --efficiency looks at: its inclusive value, the sum of the call "
        "paths at and below it (default: the costliest root)",
    )


def _attach_negative_lists(argv: list[str]) -> list[str]:
    """``--option -1,0,1`` as ``--option=-1,0,1``, the spelling argparse accepts. Only words
    argparse would refuse anyway are joined: a list or fraction after a long option."""
    joined: list[str] = []
    for position, word in enumerate(argv):
        if word == "--":  # a wrapped command follows (`perfcast build -- mpicc ...`): its own
            return joined + argv[position:]
        previous = joined[-1] if joined else ""
        if previous.startswith("--") and "=" not in previous and NEGATIVE_LIST.fullmatch(word):
            joined[-1] = f"{previous}={word}"
        else:
            joined.append(word)
    return joined


@contextmanager
def _warnings_as_lines(command: str) -> Iterator[None]:
    """Warnings a stage gives the user (``UserWarning`` and its subclasses, e.g. a declared
    metric no run measured) printed as one line like errors, ``perfcast model: warning:
    ...``: Python's own format adds the file, line and source text of the ``warn`` call,
    which reads like a traceback to a user. Other categories (NumPy's, deprecations) keep
    Python's format: they are bugs to report, and their location helps."""
    python_format = warnings.formatwarning

    def one_line(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        line: str | None = None,
    ) -> str:
        if issubclass(category, UserWarning):
            return f"perfcast {command}: warning: {message}\n"
        return python_format(message, category, filename, lineno, line)

    warnings.formatwarning = one_line
    try:
        yield
    finally:
        warnings.formatwarning = python_format


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that the same cleanup runs: a simulator's process
    group killed, temporary directories removed (Python's default would end the process
    with both left behind)."""


def _terminated(signum: int, frame: object) -> None:
    raise Terminated


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` while a command runs (in the main thread only,
    where Python delivers signals; the previous handler is restored after)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(_attach_negative_lists(argv))
    try:
        with _warnings_as_lines(args.command), _sigterm_as_interrupt():
            return int(args.handler(args) or 0)
    except PerfcastError as exc:
        print(f"perfcast {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return 0
    except Terminated:
        print(f"perfcast {args.command}: terminated", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print(f"perfcast {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
