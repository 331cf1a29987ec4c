"""The ``perfcast`` command line: thin wrappers that parse, call a stage, and print.

Each sub-command lives in its own module with a ``register(subparsers)`` function that
adds its parser and sets ``handler``; this keeps stages independent and the entry point
small. Errors the user can fix (:class:`~perfcast.errors.PerfcastError`) become a one-line
message and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import math
import re
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from perfcast.errors import PerfcastError

COMMAND_MODULES: tuple[str, ...] = (
    "perfcast.cli.build",
    "perfcast.cli.demo",
    "perfcast.cli.design",
    "perfcast.cli.export",
    "perfcast.cli.init",
    "perfcast.cli.measure",
    "perfcast.cli.model",
    "perfcast.cli.predict",
    "perfcast.cli.static",
    "perfcast.cli.synth",
    "perfcast.cli.taint",
)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The full parser, or with ``command`` only that sub-command's: each command module
    imports its stage lazily this way, so `perfcast build` inside a Makefile does not pay
    for loading the modeling stack on every compile step."""
    parser = argparse.ArgumentParser(
        prog="perfcast",
        description="Scaling models (PMNF) for parallel C/C++ programs.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        if command is None or name.rsplit(".", 1)[1] == command:
            importlib.import_module(name).register(subparsers)
    return parser


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1 (``--parallel 0`` would start no run, ever)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {value}")
    return value


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


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    known = {name.rsplit(".", 1)[1] for name in COMMAND_MODULES}
    parser = build_parser(argv[0] if argv and argv[0] in known else None)
    args = parser.parse_args(_attach_negative_lists(argv))
    try:
        with _warnings_as_lines(args.command):
            return int(args.handler(args) or 0)
    except PerfcastError as exc:
        print(f"perfcast {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print(f"perfcast {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
