"""``perfcast platform describe``: a SimGrid platform of a target machine from a few numbers."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from perfcast.outputs import OutputKind, write_output
from perfcast.simulate.platform import TOPOLOGIES, PlatformSpec

PLATFORM_FILE = OutputKind(
    "a SimGrid platform", lambda head: b"<platform" in head or b"simgrid.dtd" in head
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "platform",
        description="SimGrid platforms of machines to predict for (prediction by "
        "simulation, dperf-block-benchmarking-prediction.txt).",
    )
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    describe = verbs.add_parser(
        "describe",
        help="write a target platform from node count, cores, speed and network numbers",
        description="Write a SimGrid platform (XML) of a target machine. Quantities are SI "
        "numbers: flop/s, bytes/s, seconds.",
    )
    describe.add_argument("-o", "--output", type=Path, required=True, help="platform XML file")
    describe.add_argument("--name", default="target", help="platform name (default target)")
    describe.add_argument("--nodes", type=int, required=True, help="compute nodes")
    describe.add_argument("--cores", type=int, default=1, help="cores per node (default 1)")
    describe.add_argument(
        "--speed", type=float, default=1e9, help="flop/s of one core (default 1e9)"
    )
    describe.add_argument(
        "--bandwidth", type=float, default=1.25e9, help="bytes/s of a node's link (default 1.25e9)"
    )
    describe.add_argument(
        "--latency", type=float, default=1e-6, help="seconds of a node's link (default 1e-6)"
    )
    describe.add_argument(
        "--backbone-bandwidth", type=float, help="bytes/s of the shared switch (default 10x)"
    )
    describe.add_argument("--topology", choices=TOPOLOGIES, default="flat")
    describe.add_argument(
        "--inter-bandwidth",
        type=float,
        help="two-clusters: bytes/s of the link between them (default a tenth of --bandwidth)",
    )
    describe.add_argument(
        "--inter-latency",
        type=float,
        help="two-clusters: seconds of the link between them (default 100x --latency)",
    )
    describe.set_defaults(verb_handler=run_describe)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """The chosen verb (``describe``; ``calibrate`` is still to come)."""
    handler: Callable[[argparse.Namespace], int] = args.verb_handler
    return handler(args)


def run_describe(args: argparse.Namespace) -> int:
    spec = PlatformSpec(
        args.name,
        nodes=args.nodes,
        cores=args.cores,
        speed=args.speed,
        bandwidth=args.bandwidth,
        latency=args.latency,
        backbone_bandwidth=args.backbone_bandwidth,
        topology=args.topology,
        inter_bandwidth=args.inter_bandwidth,
        inter_latency=args.inter_latency,
    )
    write_output(args.output, spec.to_xml(), PLATFORM_FILE)
    print(f"wrote {args.output}: {spec.nodes * spec.cores} cores ({spec.topology})")
    return 0
