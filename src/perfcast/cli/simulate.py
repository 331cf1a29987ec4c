"""``perfcast simulate``: predicted run time of a traced run on platforms we do not have.

    perfcast simulate perfcast-trace --platform a.xml [--platform b.xml ...]
                      [--native SECONDS] [--json] [--timeout SECONDS]
    perfcast simulate trace-p4 trace-p8 trace-p16 ... --synthesize 4096 -o trace-p4096
                      [--noise mean|resample|correlated] [--seed N]
                      [--steep bound|keep|refuse] [--grid AxBxC|dims_create|cube]
                      [--platform a.xml ...]

The trace comes from a run of a program built with ``perfcast build --trace``; platforms
from ``perfcast platform describe`` or ``calibrate``, or any SimGrid platform file. Per
platform: the predicted time (MPI_Init to MPI_Finalize), its compute and communication
(waiting for other ranks counts as communication), the busiest rank (most compute: the
one the others wait for) and the least compute of any rank, so load imbalance shows; then
the compute blocks of the trace by time, so the time can be found in the code; and, for a
program built with ``--threshold``, what the threshold iteration rule skipped per loop.

``--synthesize P`` writes the trace of a rank count nobody ran from traces of the same program
at three or more rank counts (``perfcast.simulate.synthesis``: the ranks' communication
structure aligned across the runs, compute blocks and message sizes modeled in p) and
prints what it modeled; with ``--platform`` it predicts the synthesised trace right away.
A compute block whose model grows faster than linearly in p beyond the traces (the traced
machine's own growth, more often than the program's) is refitted with growth at most linear
and printed with both models (``--steep bound``), written as fitted with a warning
(``keep``), or refused (``refuse``). Ranks that form a 2-D or 3-D Cartesian grid (a halo
exchange with neighbours in grid positions: HPCG, LULESH) are found on MPI_Dims_create's
grid where a chain of ranks does not fit; ``--grid`` names the target's grid or the rule.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfcast.cli import SEED, positive_seconds, whole_number
from perfcast.columns import aligned
from perfcast.experiment.names import display_names
from perfcast.simulate.platform import MAX_RANKS
from perfcast.simulate.simulation import Simulation
from perfcast.workflows.simulate import (
    DEFAULT_TIMEOUT,
    LoopCredit,
    SimulateRequest,
    simulate_traces,
)

if TYPE_CHECKING:
    from perfcast.simulate.synthesis import Synthesis

TOP_BLOCKS = 10
"""Compute blocks the text output lists: enough to find where the time is, short enough
to read; ``--json`` has them all."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "simulate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "trace",
        type=Path,
        nargs="+",
        metavar="TRACE_DIR",
        help="the traced run's perfcast-trace directory (with --synthesize: several runs)",
    )
    parser.add_argument(
        "--platform",
        type=Path,
        action="append",
        default=[],
        metavar="FILE.xml",
        help="a SimGrid platform to predict for (repeat for several; needed unless --synthesize)",
    )
    parser.add_argument(
        "--synthesize",
        type=whole_number(1, MAX_RANKS, "the most ranks a platform may have, a trace file each"),
        metavar="P",
        help="write the trace of P ranks synthesised from the TRACE_DIRs (one program at 3 "
        "or more rank counts) into --output",
    )
    parser.add_argument(
        "-o", "--output", type=Path, metavar="DIR", help="with --synthesize: a new directory"
    )
    parser.add_argument(
        "--noise",
        choices=("mean", "resample", "correlated"),
        help="with --synthesize: every compute block at its modeled mean (default), times "
        "ratios resampled from the inputs' spread between ranks and occurrences (resample), "
        "or times a ratio every rank shares at an occurrence and one of its own (correlated: "
        "the measured choice for compute-bound programs at large p, whose steps wait for "
        "their slowest rank)",
    )
    parser.add_argument(
        "--seed", type=SEED, help="with --noise resample|correlated: the draw's seed (default 0)"
    )
    parser.add_argument(
        "--steep",
        choices=("bound", "keep", "refuse"),
        help="with --synthesize: a compute block modeled as growing faster than linearly in p "
        "beyond the traces is refitted with growth at most linear (bound, the default), "
        "written as fitted with a warning (keep), or refused (refuse)",
    )
    parser.add_argument(
        "--grid",
        metavar="AxBxC|RULE",
        help="with --synthesize: the ranks form a Cartesian grid (row-major, the last "
        "dimension fastest); the target's grid (4x4x4) or the rule that gives every p its "
        "grid: dims_create (MPI_Dims_create's balanced factorisation, 2-D or 3-D, tried "
        "where a chain of ranks does not fit) or cube (LULESH)",
    )
    parser.add_argument(
        "--native",
        type=positive_seconds,
        metavar="SECONDS",
        help="the program's native run time: prints the slowdown (trace + simulate) / native",
    )
    parser.add_argument(
        "--timeout",
        type=positive_seconds,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help="seconds one replay may take (default %(default)g)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    request = SimulateRequest(
        tuple(args.trace),
        tuple(args.platform),
        synthesize=args.synthesize,
        output=args.output,
        noise=args.noise,
        seed=args.seed,
        steep=args.steep,
        grid=args.grid,
        native=args.native,
        timeout=args.timeout,
    )
    result = simulate_traces(request)
    made, simulation = result.synthesis, result.simulation
    if args.json:
        shown: dict[str, Any] = {}
        if simulation is not None:
            shown = _as_json(simulation, result.slowdown)
            shown["threshold"] = [loop.to_json() for loop in result.loops]
        if made is not None:
            shown["synthesis"] = _synthesis_json(made)
        print(json.dumps(shown, indent=2))
        return 0
    lines = [] if made is None else _synthesis_text(made)
    if simulation is not None:
        lines += _as_text(simulation, args.native, result.slowdown) + _rule_text(result.loops)
    print("\n".join(lines))
    return 0


def _synthesis_text(made: Synthesis) -> list[str]:
    """What went into a synthesised trace: inputs, peers, and the models of its largest
    amounts (compute blocks first, by flops per rank at the target)."""
    inputs = ", ".join(map(str, made.inputs))
    relations = ", ".join(f"{text} x{count}" for text, count in made.relations.items())
    blocks = sum(q.places for q in made.quantities if q.kind == "flops")
    counts = sum(q.places for q in made.quantities if q.kind == "count")
    lines = [
        f"synthesised {made.ranks} ranks from traces at p = {inputs} into {made.directory}: "
        f"{made.actions} action lines ({made.noise} compute, --steep {made.steep})",
        *_grid_text(made),
        f"peers by relation to the rank: {relations or 'none'}",
        f"modeled in p: {blocks} compute block(s) and {counts} message count field(s) in "
        f"{len(made.quantities)} model(s):",
    ]
    rows = [
        (
            quantity.kind,
            f"{quantity.value:,}",
            str(quantity.occurrences),
            quantity.model.text(),
            quantity.name + (f" (+{quantity.places - 1} same)" if quantity.places > 1 else ""),
        )
        for quantity in made.quantities[:TOP_BLOCKS]
    ]
    header = ("kind", f"at p={made.ranks}", "per rank", "model", "where")
    largest = max(made.inputs)
    steep = [
        f"warning: {q.name} grows faster than linearly in p beyond the traces: "
        f"{q.at_largest_input:,.0f} {q.kind} at p={largest}, {q.value:,} at p={made.ranks} "
        f"({q.model.text()}); "
        + (
            "growth between small traced rank counts is often the traced runs' own (ranks "
            "sharing a core's caches): check it with traces at more rank counts"
            if q.kind == "flops"
            else "a message size that grows so with p is rare: check that the program sends "
            "that much at large p, or trace at more rank counts"
        )
        for q in made.quantities
        if q.steep(made.ranks, largest)
    ]
    return lines + aligned([header, *rows], right={1, 2}, indent="  ") + _bounded_text(made) + steep


def _grid_text(made: Synthesis) -> list[str]:
    """The grids the ranks were read on, and the roles whose actions rest on one traced rank
    count: their amounts are that run's, constant in p, which the user should know."""
    if made.grid is None:
        return []
    from perfcast.simulate.grid import text

    layout = made.grid
    inputs = ", ".join(text(dims) for dims in layout.inputs)
    lines = [
        f"ranks on a Cartesian grid ({layout.rule}): {text(layout.target)} at p={made.ranks} "
        f"from {inputs}; {len(layout.roles)} role(s) by position (low/mid/high along each "
        "dimension), each from the traced ranks of that role"
    ]
    once = {role: counts[0] for role, counts in layout.roles.items() if len(counts) == 1}
    if once:
        where = sorted(set(once.values()))
        lines.append(
            f"note: {len(once)} role(s) appear only in the trace at p = "
            f"{', '.join(map(str, where))} ({' '.join(f'({role})' for role in list(once)[:3])}"
            + (" ..." if len(once) > 3 else "")
            + "): their message sizes and compute are that run's, constant in p; trace a "
            "larger grid to model them"
        )
    return lines


def _bounded_text(made: Synthesis) -> list[str]:
    """The compute blocks ``--steep bound`` changed, each with its fitted model and the
    bounded one at the target: the trace has the second, and the user should know that it
    is not what the search found."""
    bounded = [q for q in made.quantities if q.bound is not None]
    if not bounded:
        return []
    largest = max(made.inputs)
    lines = [
        f"bounded: {len(bounded)} compute block(s) modeled as growing faster than linearly in "
        f"p beyond p={largest}, refitted with growth at most linear (held at linear growth "
        "from the largest trace where even that was steeper); growth between small traced "
        "rank counts is often the traced runs' own (ranks sharing a core's caches): "
        "--steep keep writes the fitted values",
    ]
    rows = [
        (
            quantity.name,
            quantity.bound.fitted.text(),
            f"{quantity.bound.fitted_value:,}",
            quantity.model.text() + (" (held)" if quantity.bound.held else ""),
            f"{quantity.value:,}",
        )
        for quantity in bounded
        if quantity.bound is not None
    ]
    header = ("block", "fitted", f"at p={made.ranks}", "bounded", f"at p={made.ranks}")
    return lines + aligned([header, *rows], right={2, 4}, indent="  ")


def _synthesis_json(made: Synthesis) -> dict[str, Any]:
    return {
        "directory": str(made.directory),
        "ranks": made.ranks,
        "inputs": list(made.inputs),
        "noise": made.noise,
        "steep": made.steep,
        "actions": made.actions,
        "relations": made.relations,
        "grid": None
        if made.grid is None
        else {
            "target": list(made.grid.target),
            "inputs": [list(dims) for dims in made.grid.inputs],
            "rule": made.grid.rule,
            "roles": {role: list(counts) for role, counts in made.grid.roles.items()},
        },
        "quantities": [
            {
                "name": quantity.name,
                "kind": quantity.kind,
                "places": quantity.places,
                "occurrences": quantity.occurrences,
                "model": quantity.model.text(),
                "constant": quantity.model.is_constant(),
                "value": quantity.value,
                "bound": None
                if quantity.bound is None
                else {
                    "fitted": quantity.bound.fitted.text(),
                    "fitted_value": quantity.bound.fitted_value,
                    "held_linear": quantity.bound.held,
                },
            }
            for quantity in made.quantities
        ],
    }


def _rule_text(loops: Sequence[LoopCredit]) -> list[str]:
    """What the threshold iteration rule did in the traced run: per loop, the iterations
    whose body ran and those skipped, and the seconds credited for them (about what the
    rule saved, summed over ranks)."""
    if not loops:
        return []
    if not any(loop.rule_on for loop in loops):
        return [
            f"threshold rule: built into {len(loops)} loop(s) but off in this run "
            "(PERFCAST_THRESHOLD=0): every iteration ran"
        ]
    credited = sum(loop.seconds_credited for loop in loops)
    lines = [f"threshold rule: {credited:.4g} s credited for skipped iterations, all ranks:"]
    rows = [
        (
            f"{loop.file}:{loop.line}",
            str(loop.iterations_run),
            str(loop.iterations_skipped),
            f"{loop.seconds_credited:.4g}",
        )
        for loop in loops
    ]
    header = ("loop", "iterations run", "skipped", "credited s")
    return lines + aligned([header, *rows], right={1, 2, 3}, indent="  ")


def _as_json(result: Simulation, slowdown: float | None) -> dict[str, Any]:
    return {
        "trace": str(result.trace),
        "ranks": result.ranks,
        "trace_seconds": result.trace_seconds,
        "platforms": [
            {
                "name": platform.name,
                "file": str(platform.file),
                "time": platform.time,
                "compute": platform.compute,
                "communication": platform.communication,
                "slowest_rank": platform.slowest_rank,
                "simulation_seconds": platform.simulation_seconds,
                "ranks": [
                    {"rank": rank, "finish": finish, "compute": compute}
                    for rank, (finish, compute) in enumerate(
                        zip(platform.ranks_finish, platform.ranks_compute, strict=True)
                    )
                ],
            }
            for platform in result.platforms
        ],
        "slowdown": slowdown,
        "compilers": None
        if result.compilers is None
        else {"measured": result.compilers.measured, "user": result.compilers.user},
        "compiler_note": result.compiler_note,
        "blocks": [
            {
                "open": block.opening,
                "close": block.closing,
                "count": block.count,
                "seconds": block.seconds,
            }
            for block in result.blocks
        ],
    }


def _as_text(result: Simulation, native: float | None, slowdown: float | None) -> list[str]:
    lines = [
        f"trace {result.trace}: {result.ranks} rank(s), traced run {result.trace_seconds:.4g} s"
        + ("" if result.compilers is None else f", built by {result.compilers.measured}")
    ]
    if result.compiler_note is not None:
        lines.append(f"note: {result.compiler_note}")
    header = (
        "platform",
        "predicted s",
        "compute s",
        "communication s",
        "slowest rank",
        "least compute s",
        "file",
    )
    rows = [
        (
            platform.name,
            f"{platform.time:.4g}",
            f"{platform.compute:.4g}",
            f"{platform.communication:.4g}",
            str(platform.slowest_rank),
            f"{min(platform.ranks_compute):.4g}",
            str(platform.file),
        )
        for platform in result.platforms
    ]
    lines += aligned([header, *rows], right={1, 2, 3, 4, 5})
    lines.append(f"simulation: {result.simulation_seconds:.3g} s for {len(rows)} replay(s)")
    if native is not None and slowdown is not None:
        lines.append(
            f"slowdown: (traced run {result.trace_seconds:.4g} s + simulation "
            f"{result.simulation_seconds:.3g} s) / native {native:.4g} s = {slowdown:.3g}x"
        )
    if result.blocks:
        shown = result.blocks[:TOP_BLOCKS]
        lines.append(
            f"compute blocks of the traced run, all ranks ({len(shown)} of {len(result.blocks)}):"
        )
        # C++ signatures shortened to function names, as every other listing shows them
        names = display_names([path for block in shown for path in (block.opening, block.closing)])
        block_rows = [
            (
                f"{block.seconds:.4g}",
                str(block.count),
                f"{names[block.opening]} -> {names[block.closing]}",
            )
            for block in shown
        ]
        lines += aligned(
            [("seconds", "count", "open -> close"), *block_rows], right={0, 1}, indent="  "
        )
    return lines
