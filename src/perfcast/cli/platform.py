"""``perfcast platform describe`` and ``calibrate``: SimGrid platforms of a target machine
from a few numbers, and of this machine from measurements."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from perfcast.cli import whole_number
from perfcast.errors import InputError
from perfcast.measure.local import available_cores
from perfcast.outputs import OutputKind, check_target, write_output
from perfcast.simulate.calibrate import (
    DEFAULT_REPETITIONS,
    DEFAULT_SIZES,
    LINE_TOLERANCE,
    MAX_REPETITIONS,
    Calibration,
    calibrate,
    check_sizes,
)
from perfcast.simulate.platform import (
    MAX_NODES,
    MAX_RANKS,
    REFERENCE_SPEED,
    TOPOLOGIES,
    PlatformSpec,
)

PLATFORM_FILE = OutputKind(
    "a SimGrid platform", lambda head: b"<platform" in head or b"simgrid.dtd" in head
)

BUSY_LOAD = 1.0
"""Load average from which the calibration warns: another program is keeping a core busy."""


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
    describe.add_argument(
        "--nodes",
        type=whole_number(1, MAX_NODES, "hosts SimGrid simulates"),
        required=True,
        help="compute nodes",
    )
    describe.add_argument(
        "--cores",
        type=whole_number(1, MAX_RANKS, "ranks a platform may have"),
        default=1,
        help="cores per node (default 1)",
    )
    speed = describe.add_mutually_exclusive_group()
    speed.add_argument(
        "--speed",
        type=float,
        help=f"flop/s of one core on the traces' scale (default {REFERENCE_SPEED:g}: as fast "
        "as the machine the trace was recorded on)",
    )
    speed.add_argument(
        "--speed-factor",
        type=float,
        help="speed of one core relative to the traced machine (2: twice as fast)",
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
    calibrate_verb = verbs.add_parser(
        "calibrate",
        help="write this machine as a platform, from an MPI ping-pong and a compute reference",
        description="Measure MPI messages between two cores of this machine (mpirun -np 2) "
        "and a compute reference, fit link latency, bandwidth and SMPI's piecewise factors, "
        "and write this machine as a SimGrid platform (one host per core). The ping-pong is "
        "then replayed on the written platform and shown beside the measurement.",
    )
    calibrate_verb.add_argument(
        "-o", "--output", type=Path, required=True, help="platform XML file"
    )
    calibrate_verb.add_argument("--name", default="local", help="platform name (default local)")
    calibrate_verb.add_argument(
        "--cores",
        type=whole_number(1, MAX_NODES, "hosts SimGrid simulates; one per core here"),
        help="hosts in the platform (default: this machine's cores)",
    )
    calibrate_verb.add_argument(
        "--repetitions",
        type=whole_number(
            1, MAX_REPETITIONS, "round trips per size; the median settles far sooner"
        ),
        default=DEFAULT_REPETITIONS,
        help=f"round trips per message size; the median counts (default {DEFAULT_REPETITIONS})",
    )
    calibrate_verb.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=DEFAULT_SIZES,
        metavar="BYTES",
        help="message sizes (default every power of two from 1 B to 16 MiB)",
    )
    calibrate_verb.set_defaults(verb_handler=run_calibrate)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """The chosen verb."""
    handler: Callable[[argparse.Namespace], int] = args.verb_handler
    return handler(args)


def run_describe(args: argparse.Namespace) -> int:
    spec = PlatformSpec(
        args.name,
        nodes=args.nodes,
        cores=args.cores,
        speed=_speed(args),
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


def _speed(args: argparse.Namespace) -> float:
    """flop/s of a core: ``--speed``, or ``--speed-factor`` times the traced machine's."""
    if args.speed_factor is not None:
        factor: float = args.speed_factor
        return REFERENCE_SPEED * factor
    speed: float | None = args.speed
    return REFERENCE_SPEED if speed is None else speed


def run_calibrate(args: argparse.Namespace) -> int:
    # everything that would refuse the result is checked before a minute of measuring
    check_target(args.output, PLATFORM_FILE)
    # where the file will land: a symbolic link's target (a dangling link into a missing
    # directory was found only when the result was written, after measuring)
    landing = Path(os.path.realpath(args.output)).parent
    if not landing.is_dir():
        raise InputError(
            f"its directory does not exist (or is not a directory): {landing}; create it "
            "first, so that the calibration's result can be written",
            path=args.output,
        )
    if not os.access(landing, os.W_OK | os.X_OK):
        raise InputError(
            f"its directory {landing} is not writable: write the calibration elsewhere",
            path=args.output,
        )
    if args.cores is not None and args.cores < 2:
        raise InputError("--cores must be at least 2: the ping-pong's two ranks need a core each")
    # the name and the host count, as the written platform will hold them (a calibrated
    # platform has one single-core host per core)
    PlatformSpec(name=args.name, nodes=args.cores or available_cores())
    busy = os.getloadavg()[0]
    if busy >= BUSY_LOAD:
        print(
            f"note: this machine is busy (load average {busy:.1f}): other programs' work "
            "slows the ping-pong and the compute reference; calibrate on a quiet machine",
            file=sys.stderr,
        )
    result = calibrate(
        sizes=check_sizes(args.sizes),
        repetitions=args.repetitions,
        cores=args.cores,
        name=args.name,
    )
    write_output(args.output, result.platform.to_xml(), PLATFORM_FILE)
    print(_calibration_report(result))
    print(f"wrote {args.output}: {result.platform.nodes} cores of this machine")
    return 0


def _calibration_report(result: Calibration) -> str:
    fit = result.fit
    lines = [
        f"compute reference: {result.measurement.reference_rate:.4g} dependent multiply-adds/s",
        f"line fit: latency {fit.latency:.4g} s, bandwidth {fit.bandwidth:.4g} B/s, "
        f"largest error {100 * fit.line_error:.1f} %"
        + (" (too large: SMPI factors fitted per size)" if fit.line_error > LINE_TOLERANCE else ""),
        f"{'bytes':>10} {'measured us':>12} {'simulated us':>12} {'error':>7}",
    ]
    for size, measured in result.measurement.one_way.items():
        simulated = result.simulated[size]
        error = 100 * (simulated - measured) / measured
        lines.append(f"{size:>10} {1e6 * measured:>12.3f} {1e6 * simulated:>12.3f} {error:>+6.1f}%")
    return "\n".join(lines)
