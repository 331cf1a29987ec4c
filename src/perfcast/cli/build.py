"""``perfcast build [--filter FILE [--keep-inlined]] [--counters] [--trace] [--smpi] --
COMPILE COMMAND``: a measured program."""

from __future__ import annotations

import argparse
from pathlib import Path

from perfcast.errors import PerfcastError
from perfcast.measure.build import MAX_TRUSTED, BuildOptions, run


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "build",
        description=(
            "Prefix a compile or link command, e.g. perfcast build -- mpicxx -O2 app.cpp -o app, "
            'or make CC="perfcast build -- mpicc". The program then writes one profile per '
            "rank to $PERFCAST_PROFILE_DIR (default ./perfcast-profile) when it exits."
        ),
    )
    parser.add_argument(
        "--filter",
        type=Path,
        metavar="FILE",
        help="measure only the functions listed in FILE, one per line (main always), or, "
        "for a taint profile (perfcast taint), the functions whose cost can depend on a "
        "parameter; takes effect at the link step; PERFCAST_FILTER=FILE overrides it at run time",
    )
    parser.add_argument(
        "--keep-inlined",
        action="store_true",
        help="with --filter: compile the filter's functions as real functions (noinline), so "
        "none is inlined into its caller and lost to measurement; give it to compile steps. "
        "The link step names the filter's functions the program lacks",
    )
    parser.add_argument(
        "--counters",
        action="store_true",
        help="also count executed basic blocks per call path (give it to compile steps)",
    )
    parser.add_argument(
        "--trace",
        action="store_true",
        help="MPI programs: also write SimGrid time-independent traces (compute blocks and "
        "every MPI call) to $PERFCAST_TRACE_DIR (default ./perfcast-trace) for perfcast "
        "simulate; takes effect at the link step",
    )
    parser.add_argument(
        "--user-compiler",
        action="store_true",
        help="with --trace: keep the compiler your command runs (gcc behind mpicc) rather "
        "than clang-16, so the trace times the binary you run; blocks are then named by the "
        "MPI calls around them (no function call paths, which need clang's XRay)",
    )
    parser.add_argument(
        "--threshold",
        type=Path,
        metavar="PROFILE",
        help="with --trace: run the parameter-dependent loops of this taint profile under "
        "dPerf's threshold iteration rule (bodies stop once the time per iteration is stable; "
        "the rest is credited to the trace); each loop's verdict is printed",
    )
    parser.add_argument(
        "--threshold-trust",
        action="append",
        default=[],
        metavar="FILE:LINE",
        help="with --threshold: apply the rule to this loop (as the build names it, "
        "lulesh.cc:1203) although its results reach later branches, MPI sizes or "
        "allocations: you vouch that skipping bodies changes no control flow (dPerf's "
        "user-chosen loops); MPI calls, I/O and exits in the body still refuse it; repeat "
        "for several",
    )
    parser.add_argument(
        "--smpi",
        action="store_true",
        help="build for SimGrid SMPI with smpicc/smpicxx (perfcast build --smpi -- smpicc ...): "
        "run it with smpirun -np N -platform P -hostfile H; every rank writes its profile with "
        "call-path times on the simulated clock (docs/smpi-backend.md)",
    )
    parser.add_argument("--verbose", action="store_true", help="print the command perfcast runs")
    # not "command": the sub-command's name is args.command, which error messages show
    parser.add_argument(
        "compile_command",
        metavar="command",
        nargs=argparse.REMAINDER,
        help="the compile command, after --",
    )
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    command = args.compile_command
    command = command[1:] if command[:1] == ["--"] else command
    if len(args.threshold_trust) > MAX_TRUSTED:
        raise PerfcastError(
            f"--threshold-trust is given {len(args.threshold_trust)} times: at most "
            f"{MAX_TRUSTED} loops can be trusted"
        )
    if args.keep_inlined and args.filter is None:
        raise PerfcastError("--keep-inlined keeps the functions of a --filter FILE: give one")
    options = BuildOptions(
        counters=args.counters,
        filter_file=args.filter,
        keep_inlined=args.keep_inlined,
        trace=args.trace,
        threshold_profile=args.threshold,
        threshold_trusted=tuple(args.threshold_trust),
        smpi=args.smpi,
        user_compiler=args.user_compiler,
    )
    return run(command, options, verbose=args.verbose)
