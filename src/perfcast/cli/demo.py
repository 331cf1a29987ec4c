"""``perfcast demo``: the whole pipeline on a bundled example, in about a minute.

It copies the Jacobi stencil (``perfcast/examples/stencil``, package data, so the demo
runs from an installed wheel as from a checkout) into a working directory and measures a
small grid of problem sizes and iteration counts with the local backend, as a user's
``perfcast measure`` does and as the effort-prior method measures
(``noise-resilient-priors.txt`` V-A4): time with the light ``perfcast build`` (its
repetitions), then the counting pass (:mod:`perfcast.measure.counting`): the effort
counters once per point with the counting build, whose own time is inflated by the
counting. It then models the store exactly as ``perfcast model stencil.sqlite --metric
time`` does (:func:`demo_models`: the one modeling workflow,
:func:`perfcast.workflows.model.model_campaign`, where the counts beside the store become
effort priors) and prints each call path's model beside the complexity the example
documents (its ``README.md``): time as ``perfcast model`` gives it, the exact effort
counters, and time black-box (``--priors none``) for comparison. It ends
by writing the HTML report of those models (:mod:`perfcast.report.html`) and saying where
it is, since looking at the plots is how a first-time user sees what the models mean.

The rank count stays fixed: on a machine with few cores, runs with more ranks than cores
measure the oversubscription, not the program.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from perfcast.appspec import AppSpec, load_spec
from perfcast.errors import PerfcastError
from perfcast.experiment import read_experiment
from perfcast.experiment.metrics import BYTES_SENT, COMPUTATION_METRIC, TIME_METRIC
from perfcast.measure.campaign import measure
from perfcast.measure.counting import counting_store
from perfcast.measure.local import LocalBackend
from perfcast.outputs import check_target
from perfcast.report.html import REPORT_FILE, write_report
from perfcast.report.page import report_data
from perfcast.workflows.model import CampaignModels, ModelRequest, model_campaign
from perfcast.workflows.report import fitted_report

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "stencil"

SPEC = """\
# written by `perfcast demo`
[app]
name = "stencil"

[build]
command = "make -s CC='{{perfcast_build}} mpicc'"

[run]
command = "./jacobi {{size}} {{iterations}}"
repetitions = {repetitions}
timeout = 60

[parameters]
p = {ranks}
size = [{sizes}]
iterations = [{iterations}]
"""

SIZES = (128, 256, 384, 512, 640)
ITERATIONS = (10, 20, 30, 40, 50)
RANKS = 2
REPETITIONS = 2
"""Timing runs per point; the counting pass runs once per point (counts are exact)."""

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

REPORT_NAME = "perfcast-demo.html"
"""The report of a demo measured in a temporary directory: beside the user, since the
directory is gone when the demo ends."""

EFFORT_METRICS = (COMPUTATION_METRIC, BYTES_SENT)
"""The deterministic counters beside the time: blocks for code, bytes for MPI calls."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        description="Build the bundled Jacobi stencil with perfcast build, measure a small grid, "
        "model it and print the models beside the documented complexity.",
    )
    parser.add_argument(
        "--workdir", type=Path, help="where to build and measure (default: a temporary one)"
    )
    parser.add_argument(
        "--report",
        type=Path,
        help="where to write the HTML report (default: report.html in --workdir, else "
        f"{REPORT_NAME} in the current directory)",
    )
    parser.set_defaults(handler=run)


def _campaign(app: Path) -> AppSpec:
    """The example copied to ``app`` (build products left out) with its perfcast.toml."""
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
    return load_spec(spec_path)


def demo_models(store: Path) -> CampaignModels:
    """The demo's models of its campaign ``store``: what ``perfcast model STORE --metric
    time`` gives, the counting campaign's store beside it supplying the effort priors. The
    demo prints them and then tells the user to run that command (:func:`advice`), so
    they must be the command's models, not another route's."""
    request = ModelRequest(read_experiment(store), store=store, metrics=(TIME_METRIC,))
    return model_campaign(request)


def advice(store: Path) -> str:
    """The command the demo suggests for the campaign store it kept: it finds the counts
    beside the store without a flag, so it gives the models the demo printed."""
    return f"try: perfcast model {store}   (it finds {counting_store(store).name} beside it)"


def run(args: argparse.Namespace) -> int:
    if not EXAMPLE.is_dir():
        raise PerfcastError(
            f"the bundled example {EXAMPLE} is missing: this perfcast was installed without "
            "its package data; reinstall it (pip install --force-reinstall perfcast)"
        )
    if args.workdir is None:
        report = args.report or Path(REPORT_NAME)
        check_target(report, REPORT_FILE)  # before a minute of measuring
        with tempfile.TemporaryDirectory(prefix="perfcast-demo-") as scratch:
            return demo(Path(scratch), keep=False, report=report)
    report = args.report or args.workdir / "report.html"
    check_target(report, REPORT_FILE)
    return demo(args.workdir, report=report)


def demo(workdir: Path, *, report: Path, keep: bool = True) -> int:
    print(f"perfcast demo: the Jacobi stencil ({EXAMPLE}) at p={RANKS}", flush=True)
    print(
        f"  {len(SIZES)} sizes x {len(ITERATIONS)} iteration counts: {REPETITIONS} timing runs "
        "(light build) and 1 counting run (counters build) per point",
        flush=True,
    )
    spec = _campaign(workdir / "stencil")
    result = measure(spec, LocalBackend(), stream=sys.stderr)
    print(result.summary(), flush=True)
    if not result.complete:
        return 1
    stores = [spec.store, counting_store(spec.store)]
    fitted = demo_models(spec.store)
    models = fitted.models
    by_default = [m for m in models if m.metric == TIME_METRIC]
    effort = [m for m in models if m.metric in EFFORT_METRICS]
    blackbox = [m for m in fitted.fit.free if m.metric == TIME_METRIC]
    for title, shown, show_warnings in (
        (
            "exclusive time [s], as perfcast model gives them: the counters fix the terms",
            by_default,
            True,
        ),
        ("effort: basic blocks (code) or bytes sent (MPI), exact counters", effort, False),
        ("exclusive time [s] without priors (--priors none), for comparison", blackbox, False),
    ):
        print(f"\nmodels of {title}")
        # fixed widths, not columns.aligned: the three tables line up under each other
        print(f"  {'call path':<38} {'expected':<21} model")
        for model in shown:
            expected = EXPECTED.get(model.callpath, "?")
            print(f"  {model.callpath:<38} {expected:<21} {model.text(3)}")
            if show_warnings:
                for warning in models.notes((model.callpath, model.metric)):
                    print(f"  {'':<38} {'':<21} warning: {warning}")
    for note in fitted.notes:
        print(f"  note: {note}")
    print()
    counted = f"Time models fitted with effort priors: the counters come from {stores[1]}."
    page = fitted_report(fitted, stores[0], store=True, notes=(counted,))
    size = write_report(report, report_data(page), "perfcast demo: the Jacobi stencil", stores)
    print(f"report: {report} ({size / 1024:,.0f} KiB; open it in a browser)")
    if keep:
        time_store, counts_store = stores
        print(f"stores: {time_store} (time), {counts_store} (counts)")
        print(advice(time_store))
    else:
        print("measured in a temporary directory; perfcast demo --workdir DIR keeps the store")
    return 0
