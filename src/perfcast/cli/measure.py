"""``perfcast measure [perfcast.toml]``: run a campaign into its SQLite store."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from perfcast.appspec import DESIGN_KINDS, SPEC_NAME, AppSpec, load_spec
from perfcast.cli import positive_int
from perfcast.measure.campaign import measure, scratch_directory
from perfcast.measure.local import LocalBackend
from perfcast.measure.runner import Backend
from perfcast.measure.slurm import SlurmBackend

BACKENDS = ("local", "slurm")


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
    parser.add_argument("--store", type=Path, help="campaign store (default: app.store)")
    parser.add_argument("--design", choices=DESIGN_KINDS, help="override [design] kind")
    parser.add_argument("--no-build", action="store_true", help="skip the build step")
    parser.add_argument(
        "--parallel",
        type=positive_int,
        default=1,
        help="local backend: runs at once (default 1: concurrent runs disturb timings, and "
        "each run is stored as having only its share of the cores)",
    )
    parser.set_defaults(handler=run)


def make_backend(name: str, spec: AppSpec, store: Path, parallel: int = 1) -> Backend:
    if name == "slurm":
        return SlurmBackend(
            spec.slurm, scratch_directory(store) / "slurm", job_name=f"perfcast-{spec.name}"
        )
    return LocalBackend(parallel=parallel)


def run(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    store = args.store or spec.store
    result = measure(
        spec,
        make_backend(args.backend, spec, store, args.parallel),
        store_path=store,
        resume=args.resume,
        retry_failed=args.retry_failed,
        build=not args.no_build,
        design=args.design,
        stream=sys.stderr,
    )
    print(result.summary())
    if not result.failed:
        print(f"next: perfcast model {store}")
    return 1 if result.failed else 0
