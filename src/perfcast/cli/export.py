"""``perfcast export INPUT -o OUTPUT``: measurements (e.g. a campaign store) as Extra-P files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from perfcast.experiment import read_experiment, write_experiment
from perfcast.experiment.io import FORMATS
from perfcast.outputs import refuse_inputs


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "export",
        description="Convert measurements, such as a perfcast campaign store, into a file "
        "Extra-P reads; the output format follows the extension (.txt text, .json JSON).",
    )
    parser.add_argument("input", type=Path, help="campaign store or any readable measurements")
    parser.add_argument("-o", "--output", type=Path, required=True, help="file to write")
    parser.add_argument(
        "--format",
        choices=FORMATS,
        metavar="FORMAT",
        help="input format: %(choices)s (default: detect)",
    )
    parser.add_argument(
        "--to",
        choices=FORMATS,
        metavar="FORMAT",
        help="output format: %(choices)s (default: by extension)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    refuse_inputs(args.output, [args.input], "the exported measurements")
    experiment = read_experiment(args.input, args.format)
    # Extra-P needs every call path at every point; one absent from a completed run was
    # not called there, which is a measured zero, not a gap.
    experiment, filled = experiment.with_absent_as_zero()
    if filled:
        print(
            f"note: {filled} (call path, metric, point) cell(s) had no measurement: written as "
            "0, since the call path was not called in those runs (e.g. MPI calls at p=1)",
            file=sys.stderr,
        )
    write_experiment(experiment, args.output, args.to)
    print(
        f"wrote {args.output}: {len(experiment.callpaths)} call paths, "
        f"{len(experiment.metrics)} metrics, {len(experiment.coordinates())} points"
    )
    return 0
