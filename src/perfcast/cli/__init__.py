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
    "perfcast.cli.taint",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="perfcast",
        description="Scaling models (PMNF) for parallel C/C++ programs.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
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
