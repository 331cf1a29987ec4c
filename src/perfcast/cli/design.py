"""``perfcast design [perfcast.toml]``: the runs a campaign would make, and their cost."""

from __future__ import annotations

import argparse
from pathlib import Path

from perfcast.measure.design import describe_plan, plan_from_spec
from perfcast.measure.spec import DESIGN_KINDS, SPEC_NAME, load_spec


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "design",
        help="print the experiment plan of a perfcast.toml and its cost",
        description="Print the points a campaign measures, how many runs that is, and "
        "an estimate of the rank-seconds it costs.",
    )
    parser.add_argument("spec", nargs="?", type=Path, default=Path(SPEC_NAME))
    parser.add_argument("--kind", choices=DESIGN_KINDS, help="override [design] kind")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    print(describe_plan(spec, plan_from_spec(spec, args.kind)))
    return 0
