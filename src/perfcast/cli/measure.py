"""``perfcast measure [perfcast.toml]``: run a campaign into its SQLite store."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from perfcast.appspec import DESIGN_KINDS, SPEC_NAME, AppSpec, load_spec
from perfcast.cli import positive_int, whole_number
from perfcast.errors import InputError
from perfcast.experiment.points import parse_point
from perfcast.measure.campaign import measure, scratch_directory
from perfcast.measure.design import DEFAULT_PER_ROUND, MAX_SUGGESTIONS, plan_from_spec
from perfcast.measure.local import LocalBackend
from perfcast.measure.runner import Backend
from perfcast.measure.slurm import SlurmBackend
from perfcast.measure.smpi import SmpiBackend, VirtualCluster
from perfcast.modeling.advice import DEFAULT_TARGET_TEXT
from perfcast.simulate.platform import read_platform

BACKENDS = ("local", "slurm", "smpi")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "measure",
        description="Build the program of a perfcast.toml through perfcast build, run every "
        "point of its design and store each run in an SQLite store the moment it finishes. "
        "A killed campaign continues with --resume (which also recovers the readable runs "
        "of a damaged store, keeping the damaged file aside, and continues after a full "
        "disk); failed runs are retried run.retries times and reported. Exit status 1 if "
        "runs failed.",
    )
    parser.add_argument("spec", nargs="?", type=Path, default=Path(SPEC_NAME))
    parser.add_argument("--resume", action="store_true", help="continue the campaign in the store")
    parser.add_argument(
        "--retry-failed", action="store_true", help="with --resume: run failed runs again"
    )
    parser.add_argument("--backend", choices=BACKENDS, default="local")
    parser.add_argument(
        "--platform",
        type=Path,
        help="with --backend smpi: the SimGrid platform file of the virtual cluster (perfcast "
        "platform describe or calibrate writes one); rank i runs on its i-th core",
    )
    parser.add_argument("--store", type=Path, help="campaign store (default: app.store)")
    parser.add_argument("--design", choices=DESIGN_KINDS, help="override [design] kind")
    parser.add_argument("--no-build", action="store_true", help="skip the build step")
    parser.add_argument(
        "--no-counting-pass",
        action="store_true",
        help="measure time only: no counting build run once per point into app.counts.sqlite "
        "(as [build] counting_pass = false)",
    )
    parser.add_argument(
        "--parallel",
        type=positive_int,
        default=1,
        help="runs at once (default 1). local: concurrent runs disturb each other's timings, "
        "and each run is stored as having only its share of the cores. smpi: simulations at "
        "once, at most this machine's cores; each is charged its own CPU time, so results "
        "agree with one at a time (docs/smpi-backend.md). slurm: see [slurm] max_parallel",
    )
    adaptive = parser.add_argument_group(
        "adaptive rounds",
        "after the design's runs, rounds of the runs perfcast design --suggest ranks first, "
        "into the same store, until the prediction at the target is as narrow as asked, the "
        "budget is spent or nothing is left worth running (--resume continues)",
    )
    adaptive.add_argument(
        "--until",
        metavar="width=W",
        help="stop when the 95 %% prediction interval at --at of every call path that "
        "matters there is at most W times its value (e.g. width=0.2)",
    )
    adaptive.add_argument(
        "--budget",
        metavar="core-hours=H,wall=T",
        help="with --until (required): what this call may spend, core-hours of runs (ranks "
        "x wall time) and/or wall time (90m, 2h, 1d)",
    )
    adaptive.add_argument(
        "--at",
        metavar="NAME=VALUE,...",
        help="with --until: the target (default: perfcast model's, each parameter at "
        f"{DEFAULT_TARGET_TEXT}: 125 ranks after 1, 8, 27)",
    )
    adaptive.add_argument(
        "--per-round",
        type=whole_number(1, MAX_SUGGESTIONS, "more than any round of a campaign measures"),
        default=DEFAULT_PER_ROUND,
        metavar="N",
        help="with --until: suggested points measured per round (default %(default)s)",
    )
    adaptive.add_argument(
        "--metric",
        help="with --until: the metric whose call paths matter (default: the one perfcast "
        "model's summary ranks), e.g. cpu_time where ranks shared cores",
    )
    parser.set_defaults(handler=run)


def make_backend(
    name: str,
    spec: AppSpec,
    store: Path,
    parallel: int = 1,
    platform: Path | None = None,
    design: str | None = None,
) -> Backend:
    if (name == "smpi") != (platform is not None):
        raise InputError(
            "--backend smpi needs --platform cluster.xml (the virtual cluster to run on)"
            if platform is None
            else "--platform describes the virtual cluster of --backend smpi; add --backend smpi"
        )
    if platform is not None:
        return virtual_cluster_backend(spec, platform, design, parallel)
    if name == "slurm":
        return SlurmBackend(
            spec.slurm, scratch_directory(store) / "slurm", job_name=f"perfcast-{spec.name}"
        )
    return LocalBackend(parallel=parallel)


def virtual_cluster_backend(
    spec: AppSpec, platform: Path, design: str | None, parallel: int = 1
) -> SmpiBackend:
    """The SMPI backend on ``platform``, ``parallel`` simulations at a time, refused before
    anything runs when the campaign's largest rank count exceeds the platform's cores."""
    described = read_platform(platform)
    backend = SmpiBackend(
        VirtualCluster(
            path=platform.resolve(),
            name=described.name,
            hosts=described.hosts,
            smpi_options=described.smpi_options,
        ),
        parallel=parallel,
    )
    backend.check_fits(run.ranks for run in plan_from_spec(spec, design).runs())
    return backend


def run(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    store = args.store or spec.store
    if args.until is not None:
        return _until(args, spec, store)
    if args.budget is not None or args.at is not None or args.metric is not None:
        raise InputError("--budget, --at and --metric belong to --until width=W: add it")
    result = measure(
        spec,
        make_backend(args.backend, spec, store, args.parallel, args.platform, args.design),
        store_path=store,
        resume=args.resume,
        retry_failed=args.retry_failed,
        build=not args.no_build,
        design=args.design,
        stream=sys.stderr,
        counting_pass=not args.no_counting_pass,
    )
    print(result.summary())
    if result.complete:
        print(f"next: perfcast model {store}")
    return 0 if result.complete else 1


def _until(args: argparse.Namespace, spec: AppSpec, store: Path) -> int:
    """``--until``: the campaign, then rounds of suggested runs
    (:mod:`perfcast.workflows.design`, imported here: it fits models)."""
    from perfcast.workflows.design import Budget, UntilRequest, measure_until, parse_width

    width = parse_width(args.until)
    if args.budget is None:
        raise InputError(
            "--until needs --budget core-hours=H or wall=DURATION, so that a width the runs "
            "cannot reach still stops"
        )
    request = UntilRequest(
        spec,
        width,
        Budget.parse(args.budget),
        store=store,
        target=parse_point(args.at, "--at", spec.varied) if args.at else None,
        per_round=args.per_round,
        resume=args.resume,
        retry_failed=args.retry_failed,
        build=not args.no_build,
        design=args.design,
        counting_pass=not args.no_counting_pass,
        metric=args.metric,
    )
    backend = make_backend(args.backend, spec, store, args.parallel, args.platform, args.design)
    result = measure_until(request, backend, sys.stderr)
    print(result.summary())
    if result.reached:
        print(f"next: perfcast model {store}")
    return 0 if result.campaigns[-1].complete else 1
