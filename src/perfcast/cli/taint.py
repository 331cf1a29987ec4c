"""``perfcast taint``: which parameters drive each function's cost (taint profile JSON).

Campaign form, everything from the app spec::

    perfcast taint [perfcast.toml] [-o PROFILE] [--point size=16,p=2] [-- COMPILE COMMAND]

builds the program of ``[build] sources`` with DataFlowSanitizer (a ``[build] command``
needs the compile command after ``--``), marks the parameters where the ``[run] command``
passes them, runs it once at a small point of the design and writes the profile beside the
campaign store (``<store>.taint.json``), where ``perfcast design`` and ``perfcast measure``
pick it up.

One-off form for a single program::

    perfcast taint -o profile.json --run "mpirun -np 2 ./app 10 20" \\
        --param size=argv:1 --param iters=argv:2 -- mpicc app.c -o app

The compile command after ``--`` is rewritten and built with DataFlowSanitizer, the run
command runs it (once per batch of 8 parameters), and the profile is written.

Import form, perf-taint's results into a perfcast profile (no taint run)::

    perfcast taint import app_0.json -o profile.json [--filter relevant.txt]

reads the JSON a perf-taint run wrote (or JSONConverter's output), so that
``perfcast model --taint profile.json`` uses it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from perfcast.appspec import SPEC_NAME, load_spec
from perfcast.cli import positive_seconds
from perfcast.columns import aligned
from perfcast.errors import InputError
from perfcast.experiment.names import display_names
from perfcast.experiment.points import format_point, parse_point
from perfcast.outputs import check_target
from perfcast.taint import INCLUDE_DIR, ArgvParameter, TaintOptions, taint_program, write_filter
from perfcast.taint.campaign import (
    default_profile_path,
    taint_campaign,
)
from perfcast.taint.profile_model import PROFILE_FILE, TaintProfile, switch_advice, symbol_name

SPEC_SUFFIX = ".toml"
IMPORT_WORD = "import"
"""First word of the import form. No spec is named so (a spec ends in ``.toml``), and the
one-off form's words are a compile command, so the word is free in both other forms."""


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", type=Path, help="profile JSON to write")
    parser.add_argument("--run", help="one-off form: command that runs the built program")
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=argv:N|NAME=flag:-x",
        help="one-off form: mark a command-line argument as parameter NAME (repeatable)",
    )
    parser.add_argument(
        "--point",
        metavar="NAME=VALUE,...",
        help="campaign form: parameter values of the taint run (default: the smallest, "
        "p at least 2)",
    )
    parser.add_argument(
        "--filter", type=Path, help="also write the instrumentation filter (function names)"
    )
    parser.add_argument("--work-dir", type=Path, help="keep rewritten sources and records here")
    parser.add_argument("--root", type=Path, help="project directory to instrument")
    parser.add_argument("--timeout", type=positive_seconds, help="seconds one taint run may take")
    parser.add_argument(
        "--no-control-flow",
        dest="control_flow",
        action="store_false",
        help="follow data flow only: stores under parameter-dependent conditions keep their "
        "own labels (to compare with data-flow-only tools and see what control flow adds)",
    )
    parser.add_argument(
        "--mpi-database",
        type=Path,
        metavar="FILE",
        help="the MPI library database to use instead of perfcast's mpi.json (same format; "
        "see perfcast/taint/README.md, 'Library database')",
    )
    parser.add_argument(
        "--print-include-dir",
        action="store_true",
        help="print the directory holding perfcast.h and exit",
    )


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "taint",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_options(parser)
    parser.add_argument(
        "words",
        nargs=argparse.REMAINDER,
        help="[perfcast.toml] [-- COMPILE COMMAND], or: import PERF_TAINT.json",
    )
    parser.set_defaults(handler=run)


def _split_words(args: argparse.Namespace) -> tuple[Path | None, list[str]]:
    """(spec, compile command) from the words after the options.

    argparse hands everything from the first positional word on to ``words``, options
    included (``perfcast taint perfcast.toml -o p.json``), so the part before ``--`` is
    parsed again for options and the spec. The two forms stay one command, not argparse
    sub-commands: ``--run`` tells them apart, and a sub-command word would break every
    documented command line.
    """
    words = list(args.words)
    if "--" in words:
        cut = words.index("--")
        head, command = words[:cut], words[cut + 1 :]
    elif args.run:  # one-off form: the compile command may come without --
        head, command = [], words
    else:
        head, command = words, []
    if not head:
        return None, command
    again = argparse.ArgumentParser(prog="perfcast taint")
    _add_options(again)
    again.add_argument("spec", nargs="?", type=Path)
    again.parse_args(head, namespace=args)
    return args.spec, command


def run(args: argparse.Namespace) -> int:
    if args.print_include_dir:
        print(INCLUDE_DIR)
        return 0
    if args.run is None and args.words[:1] == [IMPORT_WORD]:
        return _import(args)
    spec_path, compile_command = _split_words(args)
    if args.run is not None:
        if spec_path is not None:
            compile_command = [str(spec_path), *compile_command]
        return _one_off(args, compile_command)
    return _campaign(args, spec_path, compile_command)


def _one_off(args: argparse.Namespace, compile_command: list[str]) -> int:
    if not compile_command or args.output is None:
        raise InputError(
            "usage: perfcast taint -o profile.json --run 'RUN COMMAND' [--param NAME=argv:N] "
            "-- COMPILE COMMAND  (or the campaign form: perfcast taint perfcast.toml)"
        )
    if args.point:
        raise InputError("--point belongs to the campaign form (perfcast taint perfcast.toml)")
    check_target(args.output, PROFILE_FILE)  # before the taint run, which takes minutes
    parameters = [ArgvParameter.parse(text) for text in args.param]
    options = _options(args)
    profile = taint_program(compile_command, args.run, parameters, options=options)
    _write(profile, args.output, args.filter)
    return 0


def _import(args: argparse.Namespace) -> int:
    """``perfcast taint import FILE -o PROFILE``: only ``-o`` and ``--filter`` apply; the
    options of a taint run are refused rather than ignored."""
    again = argparse.ArgumentParser(prog="perfcast taint import")
    again.add_argument("source", type=Path, help="perf-taint's result JSON")
    again.add_argument("-o", "--output", type=Path, default=args.output)
    again.add_argument("--filter", type=Path, default=args.filter)
    parsed = again.parse_args(args.words[1:])
    misplaced = [
        flag
        for flag, given in (
            ("--param", args.param),
            ("--point", args.point),
            ("--work-dir", args.work_dir),
            ("--root", args.root),
            ("--timeout", args.timeout),
            ("--no-control-flow", not args.control_flow),
            ("--mpi-database", args.mpi_database),
        )
        if given
    ]
    if misplaced:
        raise InputError(
            f"{', '.join(misplaced)} {'belongs' if len(misplaced) == 1 else 'belong'} to a "
            "taint run; perfcast taint import only reads "
            "perf-taint's JSON (-o PROFILE, --filter FILE)"
        )
    if parsed.output is None:
        raise InputError("usage: perfcast taint import PERF_TAINT.json -o profile.json")
    from perfcast.taint.perftaint import import_perftaint

    check_target(parsed.output, PROFILE_FILE, [parsed.source])  # never over the input
    _write(import_perftaint(parsed.source), parsed.output, parsed.filter)
    return 0


def _campaign(args: argparse.Namespace, spec_path: Path | None, compile_command: list[str]) -> int:
    if args.param:
        raise InputError(
            "--param belongs to the one-off form; the campaign form marks the parameters "
            "of the spec's [run] command itself"
        )
    if spec_path is not None and spec_path.suffix != SPEC_SUFFIX:
        raise InputError(
            f"{spec_path} is not an app spec (*.toml); for a single program use the one-off "
            "form: perfcast taint -o profile.json --run 'RUN COMMAND' -- COMPILE COMMAND"
        )
    spec = load_spec(spec_path or Path(SPEC_NAME))
    options = _options(args)
    point = parse_point(args.point, "--point") if args.point else None
    output = args.output or default_profile_path(spec)
    check_target(output, PROFILE_FILE, [spec.path])  # before the taint run, which takes minutes
    done = taint_campaign(spec, compile_command=compile_command, point=point, options=options)
    print(f"taint run at {format_point(done.point)}: {done.run_command}")
    bound = ", ".join(f"{p.name}={p.describe()}" for p in done.bindings.parameters)
    print(f"parameters marked: {bound or 'none on the command line'}\n")
    _write(done.profile, output, args.filter)
    return 0


def _options(args: argparse.Namespace) -> TaintOptions:
    return TaintOptions(
        root=args.root,
        work_dir=args.work_dir,
        timeout=args.timeout,
        control_flow=args.control_flow,
        library_database=args.mpi_database,
    )


def _write(profile: TaintProfile, output: Path, filter_path: Path | None) -> None:
    profile.save(output)
    if filter_path:
        write_filter(profile, filter_path)
    _summary(profile)
    print(f"profile: {output}" + (f"; filter: {filter_path}" if filter_path else ""))


def _summary(profile: TaintProfile) -> None:
    rows = [("parameter", "loops", "functions", "branches", "mpi")]
    rows += [
        (name, str(cov.loops), str(cov.functions), str(cov.branches), ",".join(cov.mpi) or "-")
        for name, cov in profile.parameters.items()
    ]
    print("\n".join(aligned(rows, right={1, 2, 3})) + "\n")
    # Function names, not signatures: LULESH's CalcEnergyForElems alone has 24 parameters,
    # which pushed every dependency 230 columns to the right; the profile keeps them all.
    relevant = profile.relevant or ()
    # short names of the symbols; a file suffix (``helper [a.c]``) keeps two static
    # functions of one name apart on screen as in the profile
    shown = display_names(symbol_name(name) for name in relevant)
    dependencies = [
        (
            shown[symbol_name(name)] + name[len(symbol_name(name)) :],
            profile.functions[name].dependency,
        )
        for name in relevant
    ]
    for line in aligned(dependencies, indent="  "):
        print(line)
    print(
        f"\n{len(relevant)} relevant, {len(profile.constant)} constant, "
        f"{len(profile.pruned)} pruned statically"
    )
    for parameter, places in _switches(profile).items():
        print(
            f"algorithm switch: {parameter} switches algorithms in {places}: the cost of the "
            f"work it selects depends on {parameter}, so {parameter} stays in the model and "
            f"perfcast design keeps all its values; {switch_advice(parameter)}"
        )
    for warning in profile.warnings:
        print(f"warning: {warning}")


def _switches(profile: TaintProfile) -> dict[str, str]:
    """Per parameter that switches algorithms, where: ``work (branch at app.c:12)``."""
    places: dict[str, list[str]] = {}
    for switch in profile.algorithm_switches():
        places.setdefault(switch.parameter, []).append(
            f"{symbol_name(switch.function)} (branch at {switch.where})"
        )
    return {parameter: ", ".join(found) for parameter, found in places.items()}
