"""``perfcast report STORE|MODELS.json -o report.html``: one HTML page to look at.

From a campaign store (or any measurement file ``perfcast model`` reads) the models are
fitted as ``perfcast model`` fits them by default, and the page shows every repetition
against them and the campaign's design, cost and failed runs. Models fitted with priors
or other search options come from ``perfcast model ... -o models.json``: ``perfcast report
STORE --models models.json`` draws those against the store's repetitions, and ``perfcast
report models.json`` draws the models alone.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from perfcast.errors import InputError
from perfcast.experiment import read_experiment
from perfcast.experiment.experiment import Experiment
from perfcast.experiment.io.registry import detect_format
from perfcast.experiment.points import parse_point
from perfcast.modeling import PMNFModeler
from perfcast.modeling.modelset import MODEL_FILE, ModelSet
from perfcast.modeling.provenance import Provenance, SimulatedPlatform
from perfcast.outputs import SNIFF_BYTES, check_target
from perfcast.report.campaign import campaign_facts
from perfcast.report.html import REPORT_FILE, write_report
from perfcast.report.page import ReportInputs, report_data
from perfcast.report.summary import TARGET_FACTOR

if TYPE_CHECKING:
    from perfcast.measure.oversubscription import Oversubscription

CAMPAIGN_STORE = "sqlite"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        description="Write one self-contained HTML page (no network, no server) with the "
        "call paths ranked by cost and growth at a target point, the call tree, every "
        "repetition against its model with the prediction interval beyond the measured "
        "range, priors, findings, and the campaign's design, cost and failed runs.",
    )
    parser.add_argument(
        "input",
        type=Path,
        help="a campaign store (or other measurement file perfcast model reads), or a model "
        "file written by `perfcast model -o`",
    )
    parser.add_argument("-o", "--output", type=Path, required=True, help="the HTML file to write")
    parser.add_argument(
        "--models",
        type=Path,
        metavar="MODELS.json",
        help="draw these models (perfcast model -o, e.g. fitted with priors) against the "
        "measurements of INPUT instead of fitting INPUT with the default search",
    )
    parser.add_argument(
        "--at",
        metavar="NAME=VALUE,...",
        help="the target point for the rankings, e.g. p=4096,size=30 (default: each "
        f"parameter at {TARGET_FACTOR:g}x its largest measured value)",
    )
    parser.add_argument(
        "--metric",
        action="append",
        help="rank this metric first (repeatable); fitting INPUT, model only these",
    )
    parser.set_defaults(handler=run)


def is_model_file(path: Path) -> bool:
    try:
        with open(path, "rb") as stream:
            head = stream.read(SNIFF_BYTES)
    except OSError:
        return False  # reading it as measurements names the problem
    return MODEL_FILE.recognise(head)


def run(args: argparse.Namespace) -> int:
    inputs = [path for path in (args.input, args.models) if path is not None]
    check_target(args.output, REPORT_FILE, inputs)
    if is_model_file(args.input):
        if args.models is not None:
            raise InputError(
                "is a model file already: give --models with a campaign store or measurement "
                "file as INPUT",
                path=args.input,
            )
        models = ModelSet.load(args.input)
        report = ReportInputs(models, str(args.input), notes=tuple(_model_notes(models.provenance)))
    else:
        report = _from_measurements(args)
    target = parse_point(args.at, "--at", report.models.parameters) if args.at else None
    data = report_data(report, target=target, metrics=args.metric)
    size = write_report(args.output, data, f"perfcast report: {args.input.name}", inputs)
    call_paths = len({m.callpath for m in report.models})
    print(
        f"wrote {args.output} ({size / 1024:,.0f} KiB: {call_paths:,} call paths, "
        f"{len(report.models):,} models); open it in a browser, no network needed"
    )
    return 0


def _from_measurements(args: argparse.Namespace) -> ReportInputs:
    """Models and repetitions of a measurement file; for a store also the campaign."""
    store = detect_format(args.input).name == CAMPAIGN_STORE
    experiment = read_experiment(args.input)
    notes: list[str] = []
    shared: Oversubscription | None = None
    platform: SimulatedPlatform | None = None
    if store:
        shared, platform, notes = _machine_notes(args.input)
    if args.models is not None:
        models = ModelSet.load(args.models)
        if models.parameters != experiment.parameters:
            raise InputError(
                f"has models over {', '.join(models.parameters)} but {args.input} measured "
                f"{', '.join(experiment.parameters)}: give the model file fitted to it",
                path=args.models,
            )
    else:
        if args.metric:
            experiment = experiment.restricted(metrics=args.metric)
        models = PMNFModeler().fit(experiment)
        models = models.with_provenance(_provenance(experiment, models, shared, platform))
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    return ReportInputs(
        models,
        str(args.input),
        experiment=experiment,
        campaign=campaign_facts(args.input) if store else None,
        notes=(*notes, *_model_notes(models.provenance)),
    )


def _machine_notes(
    store: Path,
) -> tuple[Oversubscription | None, SimulatedPlatform | None, list[str]]:
    """What the store knows of the machine its runs describe (as ``perfcast model`` says
    it): runs with more ranks than cores, and runs on a virtual cluster."""
    from perfcast.measure.oversubscription import oversubscription
    from perfcast.measure.virtual import selection

    notes = []
    shared = oversubscription(store)
    if shared is not None:
        notes.append(shared.describe(store))
    chosen = selection(store)
    machine = chosen.note(store)
    if machine is not None:
        notes.append(machine)
    platform = None
    if chosen.platform is not None:
        platform = SimulatedPlatform(chosen.platform.name, chosen.platform.file)
    return shared, platform, notes


def _provenance(
    experiment: Experiment,
    models: ModelSet,
    shared: Oversubscription | None,
    platform: SimulatedPlatform | None,
) -> Provenance:
    """The measured ranges and the models fitted on runs that shared cores."""
    if shared is None:
        return Provenance(experiment.ranges(), platform=platform)
    from perfcast.measure.oversubscription import shared_core_models

    on_shared = shared_core_models(experiment, shared)
    fitted = {(model.callpath, model.metric) for model in models}
    return Provenance(
        experiment.ranges(), replace(on_shared, models=on_shared.models & fitted), platform
    )


def _model_notes(provenance: Provenance | None) -> list[str]:
    """What the model file's provenance says every reader must know."""
    if provenance is None:
        return []
    notes = []
    if provenance.shared_cores is not None and provenance.shared_cores.models:
        notes.append(
            f"{len(provenance.shared_cores.models):,} model(s) rest on wall time of runs with "
            "more ranks than cores (marked on each): their growth in the ranks is partly "
            "waiting for a core"
        )
    if provenance.platform is not None:
        notes.append(
            f"The runs were simulated on {provenance.platform.describe()}: every number "
            "describes that platform, not a measured machine"
        )
    return notes
