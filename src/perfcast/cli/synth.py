"""``perfcast synth -o DIR``: benchmark programs with known complexity (ground truth beside)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from perfcast.cli import SEED, whole_number
from perfcast.errors import InputError
from perfcast.experiment.points import format_value
from perfcast.simulate.platform import MAX_RANKS

if TYPE_CHECKING:
    from perfcast.modeling.pmnf import Model

DEFAULT_KERNELS = 5
MAX_PROGRAMS = 1_000
"""Programs one ``perfcast synth`` writes: a benchmark suite of a thousand generated programs
is larger than any study here (the noise study measures ten)."""
MAX_KERNELS = 100
"""Kernels of one generated program: each is a function with its own loop nest and a
measured call path; a hundred keeps one run's profile readable and its build in seconds."""
MAX_SIZE = 1e12
"""Problem size of a point the program is sized for: a loop of 10^12 iterations per rank
already runs for minutes."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "synth",
        description=(
            "Write C++ MPI programs whose kernels have chosen computational complexity "
            "(loops following PMNF terms in the ranks p and the size n, in sequence or "
            "nested) and communication complexity (one MPI operation per kernel, messages "
            "sized by a term), random or specified, each with <name>.truth.json beside it. "
            "Build with perfcast build --counters -- mpicxx -O2 NAME.cpp -o NAME and run "
            "as mpirun -np P ./NAME N [REPEAT]."
        ),
    )
    parser.add_argument(
        "-o", "--output", type=Path, required=True, metavar="DIR", help="where to write them"
    )
    parser.add_argument(
        "--count",
        type=whole_number(1, MAX_PROGRAMS, "programs of one call, each a directory to build"),
        default=1,
        help="programs to write (default 1), NAME_000, NAME_001, ...; specified kernels are in "
        "every one, with coefficients drawn per program",
    )
    parser.add_argument("--seed", type=SEED, help="random seed (default: drawn and printed)")
    parser.add_argument(
        "--kernels",
        type=whole_number(0, MAX_KERNELS, "kernels of one program, each a function to time"),
        help=f"random kernels per program (default {DEFAULT_KERNELS}, or 0 when kernels are "
        "specified with --computation/--communication)",
    )
    parser.add_argument(
        "--computation",
        action="append",
        default=[],
        metavar="EXPR",
        help="add a computation kernel, e.g. 'n^2*log2(n) + p^(1/2)' or '3*p*n' (repeatable; "
        "without a coefficient a term is sized for --reference)",
    )
    parser.add_argument(
        "--communication",
        action="append",
        default=[],
        metavar="OP[:TERM]",
        help="add a communication kernel, e.g. 'allreduce:n', 'bcast:n*p', 'barrier' "
        "(repeatable); TERM is the message size in doubles per rank",
    )
    parser.add_argument("--name", default="bench", help="program name (default bench)")
    parser.add_argument(
        "--parameters",
        default="p,n",
        metavar="RANKS,SIZE",
        help="names of the ranks and size parameters (default p,n)",
    )
    parser.add_argument(
        "--reference",
        metavar="RANKS,SIZE",
        help="the largest point you will measure; coefficients are sized there (default 6,5000)",
    )
    parser.add_argument(
        "--smallest",
        metavar="RANKS,SIZE",
        help="the smallest point you will measure; loops are sized so that counted effort "
        "follows the truth within 0.1 %% there too (default 2,1000, capped at --reference)",
    )
    parser.add_argument(
        "--communication-share",
        type=float,
        default=0.4,
        help="chance that a random kernel communicates (default 0.4)",
    )
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    import numpy as np

    from perfcast.synth.programs import (
        DEFAULT_REFERENCE,
        KernelSpec,
        ProgramGenerator,
        ProgramSpec,
        kernel_name,
        parse_communication,
        truth_of,
        write_program,
    )

    if args.count < 1:
        raise InputError(f"--count must be at least 1, got {args.count}")
    specified = len(args.computation) + len(args.communication)
    kernels = args.kernels if args.kernels is not None else (0 if specified else DEFAULT_KERNELS)
    if kernels < 0 or kernels + specified < 1:
        raise InputError("a program needs at least one kernel: give --kernels K >= 1")
    parameters = _pair(args.parameters, "--parameters")
    reference = (
        DEFAULT_REFERENCE if args.reference is None else _point(args.reference, "--reference")
    )
    smallest = None if args.smallest is None else _point(args.smallest, "--smallest")
    generator = ProgramGenerator(
        parameters=parameters,
        reference=reference,
        smallest=smallest,
        communication_share=args.communication_share,
    )
    seed = args.seed if args.seed is not None else int(np.random.default_rng().integers(2**32))
    rng = np.random.default_rng(seed)
    for number in range(args.count):
        name = args.name if args.count == 1 else f"{args.name}_{number:03d}"
        specs: list[KernelSpec] = []
        for text in args.computation:
            specs.append(generator.computation(kernel_name(len(specs) + 1), text, rng))
        for text in args.communication:
            operation = parse_communication(text, parameters).operation
            specs.append(generator.communication(kernel_name(len(specs) + 1, operation), text, rng))
        for _ in range(kernels):
            specs.append(generator.random_kernel(len(specs) + 1, rng))
        spec = ProgramSpec(name, tuple(specs), parameters, reference)
        source = write_program(spec, args.output)
        print(f"wrote {source} and {source.with_suffix('.truth.json').name} (seed {seed})")
        for truth in truth_of(spec).values():
            lines = []
            if truth.bytes is not None and truth.law is not None:
                lines.append(
                    f"{truth.bytes_metric} = {_formula(truth.bytes)}   "
                    f"[{truth.law.name}: {truth.law.value}]"
                )
            if truth.effort is not None:
                lines.append(f"iterations = {_formula(truth.effort)}")
            label = truth.spec.mpi_function or truth.kind
            print(f"  {truth.function:24} {label:14} {lines[0]}")
            for line in lines[1:]:
                print(f"  {'':24} {'':14} {line}")
    ranks, size = parameters
    print(
        f"build: perfcast build --counters -- mpicxx -O2 DIR/NAME.cpp -o NAME\n"
        f"run:   mpirun -np P ./NAME N [REPEAT]   ({ranks} = P ranks, {size} = N; "
        f"sized for {ranks}<={format_value(reference[0])}, {size}<={format_value(reference[1])})"
    )
    return 0


def _formula(model: Model) -> str:
    """The model's terms without the zero constant: what the kernel does."""
    terms = [
        f"{term.coefficient:.4g} * " + " * ".join(f.text() for f in term.factors)
        for term in model.terms
    ]
    return " + ".join(terms) or f"{model.constant:g}"


def _pair(text: str, option: str) -> tuple[str, str]:
    parts = [part.strip() for part in text.split(",")]
    if len(parts) != 2 or not all(parts):
        raise InputError(f"{option} takes two comma-separated values (RANKS,SIZE), got {text!r}")
    return parts[0], parts[1]


def _point(text: str, option: str) -> tuple[float, float]:
    """RANKS,SIZE within :data:`MAX_RANKS` ranks and :data:`MAX_SIZE`: coefficients are
    sized at this point, and at ``1e308`` they underflow to zero."""
    ranks, size = _pair(text, option)
    try:
        point = float(ranks), float(size)
    except ValueError:
        raise InputError(f"{option} takes two numbers (RANKS,SIZE), got {text!r}") from None
    if not 1 <= point[0] <= MAX_RANKS or not 1 <= point[1] <= MAX_SIZE:
        raise InputError(
            f"{option} {text}: give RANKS from 1 to {MAX_RANKS:,} and SIZE from 1 to "
            f"{MAX_SIZE:.0e} (a generated program runs at that point)"
        )
    return point
