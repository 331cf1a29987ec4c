"""``perfcast taint``: which parameters drive each function's cost (taint profile JSON).

One-off form for a single program::

    perfcast taint -o profile.json --run "mpirun -np 2 ./app 10 20" \\
        --param size=argv:1 --param iters=argv:2 -- mpicc app.c -o app

The compile command after ``--`` is rewritten and built with DataFlowSanitizer, the run
command runs it (once per batch of 8 parameters), and the profile is written.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from perfcast.errors import InputError
from perfcast.taint import INCLUDE_DIR, ArgvParameter, TaintOptions, taint_program, write_filter


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "taint",
        help="taint analysis: which parameters drive each function",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-o", "--output", type=Path, help="profile JSON to write")
    parser.add_argument("--run", help="command that runs the built program (quoted)")
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=argv:N|NAME=flag:-x",
        help="mark a command-line argument as parameter NAME (repeatable)",
    )
    parser.add_argument("--filter", type=Path, help="also write the relevant-function list")
    parser.add_argument("--work-dir", type=Path, help="keep rewritten sources and records here")
    parser.add_argument("--root", type=Path, help="project directory to instrument")
    parser.add_argument("--timeout", type=float, help="seconds one taint run may take")
    parser.add_argument(
        "--print-include-dir",
        action="store_true",
        help="print the directory holding perfcast.h and exit",
    )
    parser.add_argument("compile", nargs=argparse.REMAINDER, help="-- compile command")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.print_include_dir:
        print(INCLUDE_DIR)
        return 0
    compile_command = args.compile[1:] if args.compile[:1] == ["--"] else args.compile
    if not args.run or not compile_command or args.output is None:
        raise InputError(
            "usage: perfcast taint -o profile.json --run 'RUN COMMAND' [--param NAME=argv:N] "
            "-- COMPILE COMMAND"
        )
    parameters = [ArgvParameter.parse(text) for text in args.param]
    options = TaintOptions(root=args.root, work_dir=args.work_dir, timeout=args.timeout)
    profile = taint_program(compile_command, args.run, parameters, options=options)
    args.output.write_text(json.dumps(profile, indent=1) + "\n")
    if args.filter:
        write_filter(profile, args.filter)
    _summary(profile)
    return 0


def _summary(profile: dict[str, Any]) -> None:
    print("parameter      loops  functions  branches  mpi")
    for name, cov in profile["parameters"].items():
        mpi = ",".join(cov["mpi"]) or "-"
        print(f"{name:<14} {cov['loops']:>5}  {cov['functions']:>9}  {cov['branches']:>8}  {mpi}")
    print()
    for name in profile["relevant"]:
        print(f"  {profile['functions'][name]['dependency']:<24} {name}")
    print(
        f"\n{len(profile['relevant'])} relevant, {len(profile['constant'])} constant, "
        f"{len(profile['pruned'])} pruned statically"
    )
    for warning in profile["warnings"]:
        print(f"warning: {warning}")
