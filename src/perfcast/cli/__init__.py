"""The ``perfcast`` command line: thin wrappers that parse, call a stage, and print.

Each sub-command lives in its own module with a ``register(subparsers)`` function that
adds its parser and sets ``handler``; this keeps stages independent and the entry point
small. Errors the user can fix (:class:`~perfcast.errors.PerfcastError`) become a one-line
message and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

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


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    known = {name.rsplit(".", 1)[1] for name in COMMAND_MODULES}
    parser = build_parser(argv[0] if argv and argv[0] in known else None)
    args = parser.parse_args(argv)
    try:
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
