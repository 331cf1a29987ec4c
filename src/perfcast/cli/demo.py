"""``perfcast demo``: the whole pipeline on a bundled example, in about a minute.

It copies the Jacobi stencil (``examples/stencil``) into a working directory, writes a
``perfcast.toml`` for it, builds it with ``perfcast build`` (through its Makefile),
measures a small grid of problem sizes and iteration counts with the local backend, fits
PMNF models with :class:`~perfcast.modeling.PMNFModeler`, and prints each call path's
model beside the complexity the example documents (``examples/stencil/README.md``): time
black-box, the exact effort counters, and time fitted with the effort priors
(:class:`~perfcast.effort.EffortModeler`).

The rank count stays fixed: on a machine with few cores, runs with more ranks than cores
measure the oversubscription, not the program.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from perfcast.effort import EffortModeler
from perfcast.errors import PerfcastError
from perfcast.experiment import read_experiment
from perfcast.measure.campaign import measure
from perfcast.measure.local import LocalBackend
from perfcast.measure.spec import load_spec
from perfcast.modeling import PMNFModeler

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "stencil"

SPEC = """\
# written by `perfcast demo`
[app]
name = "stencil"

[build]
command = "make -s CC='{{perfcast_build}} mpicc'"
counters = true

[run]
command = "./jacobi {{size}} {{iterations}}"
repetitions = {repetitions}
timeout = 60

[parameters]
p = {ranks}
size = [{sizes}]
iterations = [{iterations}]

[metrics]
collect = ["time", "basic_blocks", "mpi_bytes_sent"]
"""

SIZES = (128, 256, 384, 512, 640)
ITERATIONS = (10, 20, 30, 40, 50)
RANKS = 2
REPETITIONS = 2

EXPECTED = {
    "main": "iterations",
    "main->MPI_Init": "constant",
    "main->init_grid": "size^2",
    "main->sweep": "size^2 * iterations",
    "main->exchange_halo": "iterations",
    "main->exchange_halo->MPI_Sendrecv": "size * iterations",
    "main->global_residual": "iterations",
    "main->global_residual->MPI_Allreduce": "iterations",
    "main->MPI_Finalize": "constant",
}
"""Per call path, the cost of the stencil at a fixed rank count, from the example's
README: the sweep touches size^2 points per iteration, the halo exchange sends two rows
of size doubles, the residual is one allreduce of one double per iteration."""

EFFORT_METRICS = ("basic_blocks", "mpi_bytes_sent")
"""The deterministic counters beside the time: blocks for code, bytes for MPI calls."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="build, measure and model a bundled MPI example end to end",
        description="Build examples/stencil with perfcast build, measure a small grid, "
        "model it and print the models beside the documented complexity.",
    )
    parser.add_argument(
        "--workdir", type=Path, help="where to build and measure (default: a temporary one)"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if not EXAMPLE.is_dir():
        raise PerfcastError(
            f"the bundled example {EXAMPLE} is missing; run perfcast demo from a source "
            "checkout (pip install -e .)"
        )
    if args.workdir is None:
        with tempfile.TemporaryDirectory(prefix="perfcast-demo-") as scratch:
            return demo(Path(scratch), keep=False)
    return demo(args.workdir)


def demo(workdir: Path, *, keep: bool = True) -> int:
    app = workdir / "stencil"
    if app.exists():
        shutil.rmtree(app)
    shutil.copytree(EXAMPLE, app, ignore=shutil.ignore_patterns("*.o", "jacobi"))
    spec_path = app / "perfcast.toml"
    spec_path.write_text(
        SPEC.format(
            repetitions=REPETITIONS,
            ranks=RANKS,
            sizes=", ".join(map(str, SIZES)),
            iterations=", ".join(map(str, ITERATIONS)),
        )
    )
    spec = load_spec(spec_path)
    print(f"perfcast demo: the Jacobi stencil ({EXAMPLE}) at p={RANKS}", flush=True)
    print(
        f"  {len(SIZES)} sizes x {len(ITERATIONS)} iteration counts x {REPETITIONS} repetitions",
        flush=True,
    )
    result = measure(spec, LocalBackend(), stream=sys.stderr)
    print(result.summary(), flush=True)
    if result.failed:
        return 1
    experiment = read_experiment(spec.store)
    modeled = EffortModeler(PMNFModeler()).fit(
        experiment.restricted(metrics=["time", *EFFORT_METRICS])
    )
    effort = [m for m in modeled.models if m.metric in EFFORT_METRICS]
    with_priors = [modeled.models[(callpath, "time")] for callpath in modeled.priors]
    for title, models, show_warnings in (
        ("exclusive time [s]", list(modeled.blackbox), False),
        ("effort: basic blocks (code) or bytes sent (MPI), exact counters", effort, False),
        ("exclusive time [s] with effort priors: the counters fix the terms", with_priors, True),
    ):
        print(f"\nmodels of {title}")
        print(f"  {'call path':<38} {'expected':<21} model")
        for model in models:
            expected = EXPECTED.get(model.callpath, "?")
            print(f"  {model.callpath:<38} {expected:<21} {model.text(3)}")
            if show_warnings:
                for warning in model.warnings:
                    print(f"  {'':<38} {'':<21} warning: {warning}")
    for note in modeled.notes:
        print(f"  note: {note}")
    print()
    if keep:
        print(f"store: {spec.store} (try: perfcast model {spec.store})")
    else:
        print("measured in a temporary directory; perfcast demo --workdir DIR keeps the store")
    return 0
