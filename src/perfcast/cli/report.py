"""``perfcast report STORE|MODELS.json -o report.html``: one HTML page to look at.

From a campaign store (or any measurement file ``perfcast model`` reads) the models are
fitted as ``perfcast model`` fits them by default, and the page shows every repetition
against them and the campaign's design, cost and failed runs. Models fitted with priors
or other search options come from ``perfcast model ... -o models.json``: ``perfcast report
STORE --models models.json`` draws those against the store's repetitions, and ``perfcast
report models.json`` draws the models alone.

``perfcast report A B`` compares two campaigns (before and after a code change): the page
is B's, with a comparison view of what changed against A, and a few lines on stdout say
the same (:mod:`perfcast.report.compare`). ``--level`` is the probability of the page's
prediction bands and, comparing, ``1 -`` the false discovery rate of the changes it
reports, so that one number says how sure the page is of what it shows. ``--simulation``
adds the predictions of ``perfcast simulate --json`` (:mod:`perfcast.report.simulation`).
``--taint`` fits the measurements as ``perfcast model --taint`` does and shows beside each
model its taint prior, the validity findings, and the black-box model it replaced.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from perfcast.cli import (
    EFFORT,
    RANKS_OPTION,
    add_caliper_flags,
    add_efficiency_flags,
    caliper_options,
    probability,
)
from perfcast.effort import EffortModeler
from perfcast.errors import InputError
from perfcast.experiment import read_experiment
from perfcast.experiment.io.registry import CAMPAIGN_STORE, detect_format
from perfcast.experiment.points import parse_point
from perfcast.modeling.advice import DEFAULT_TARGET_TEXT
from perfcast.modeling.intervals import DEFAULT_LEVEL
from perfcast.modeling.modelset import MODEL_FILE
from perfcast.modeling.options import add_flags, from_arguments
from perfcast.outputs import SNIFF_BYTES, check_target
from perfcast.report.compare import (
    compare,
    comparison_data,
    measured_in_both,
    render_comparison,
)
from perfcast.report.efficiency import scaling_section
from perfcast.report.html import REPORT_FILE, write_report
from perfcast.report.page import ReportInputs, report_data
from perfcast.report.simulation import read_simulations
from perfcast.workflows.report import ReportRequest, report_inputs


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        description="Write one self-contained HTML page (no network, no server) with the "
        "call paths ranked by cost and growth at a target point, the call tree, every "
        "repetition against its model with the prediction interval beyond the measured "
        "range, priors, findings, and the campaign's design, cost and failed runs. Two "
        "inputs (A B: before and after a code change) add a comparison: which call paths "
        "changed their model or their cost beyond the noise of the two fits, at a false "
        "discovery rate of 1 - --level across all call paths.",
    )
    parser.add_argument(
        "input",
        type=Path,
        nargs="+",
        metavar="INPUT",
        help="a campaign store (or other measurement file perfcast model reads), or a model "
        "file written by `perfcast model -o`; two (A B): compare B (after a change) with A",
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
        f"parameter at {DEFAULT_TARGET_TEXT})",
    )
    parser.add_argument(
        "--level",
        type=probability,
        default=DEFAULT_LEVEL,
        help="probability of the prediction bands drawn around the models; comparing A B, "
        "also 1 - the false discovery rate of the changes reported (Benjamini-Hochberg over "
        "all compared call paths and metrics; default %(default)s)",
    )
    parser.add_argument(
        "--metric",
        action="append",
        help="rank this metric first (repeatable); fitting INPUT, model only these",
    )
    parser.add_argument(
        "--simulation",
        type=Path,
        action="append",
        default=[],
        metavar="FILE.json",
        help="add the results of `perfcast simulate ... --json` (one or more runs; "
        "repeatable): predicted vs measured time and compute vs communication per platform",
    )
    parser.add_argument(
        "--taint",
        type=Path,
        metavar="PROFILE.json",
        help="a taint profile (perfcast taint): fit INPUT's measurements with its priors, as "
        "perfcast model --taint does, and show each model's prior, findings and black-box "
        "alternative",
    )
    add_caliper_flags(parser)
    add_efficiency_flags(parser)
    add_flags(parser, EffortModeler, dest_prefix=EFFORT, nested=False, only=RANKS_OPTION)
    parser.set_defaults(handler=run)


def is_model_file(path: Path) -> bool:
    try:
        with open(path, "rb") as stream:
            head = stream.read(SNIFF_BYTES)
    except OSError:
        return False  # reading it as measurements names the problem
    return MODEL_FILE.recognise(head)


def run(args: argparse.Namespace) -> int:
    if len(args.input) > 2:
        raise InputError("give one INPUT, or two (A B) to compare B (after a change) with A")
    if len(args.input) == 2 and args.models is not None:
        raise InputError(
            "--models draws models against one INPUT; to compare two model files give them as A B"
        )
    optional = [args.models, args.taint, *args.simulation]
    inputs = [*args.input, *(path for path in optional if path is not None)]
    check_target(args.output, REPORT_FILE, inputs)
    simulations = [run for path in args.simulation for run in read_simulations(path)]
    effort = from_arguments(
        EffortModeler, args, dest_prefix=EFFORT, nested=False, only=RANKS_OPTION
    )
    reports = [_report_inputs(path, args, effort) for path in args.input]
    report = reports[-1]
    target = parse_point(args.at, "--at", report.models.parameters) if args.at else None
    data = report_data(report, target=target, metrics=args.metric, level=args.level)
    data["simulations"] = [run.to_json() for run in simulations]
    if args.efficiency:
        if report.experiment is None:
            raise InputError(
                "--efficiency compares measured values along the ranks: give the "
                "measurements (a store, a measurement file or Caliper profiles), not a model file",
                path=args.input[-1],
            )
        section = scaling_section(
            report.models,
            report.experiment,
            effort.ranks,
            args.efficiency,
            data["target"],
            args.subtree,
        )
        data["efficiency"] = section.to_json()
    title = f"perfcast report: {args.input[-1].name}"
    if len(reports) == 2:
        before = reports[0]
        if before.models.parameters != report.models.parameters:
            raise InputError(
                f"has models over {', '.join(before.models.parameters)} but "
                f"{args.input[1]} over {', '.join(report.models.parameters)}: compare two "
                "campaigns of the same parameters",
                path=args.input[0],
            )
        measured = measured_in_both(before, report)
        changes = compare(before.models, report.models, data["target"], args.level, measured)
        data["comparison"] = comparison_data(changes, before, data)
        title = f"perfcast report: {args.input[1].name} against {args.input[0].name}"
        lines = render_comparison(changes, before.source, report.source, data["target"], args.level)
        print("\n".join(lines))
    size = write_report(args.output, data, title, inputs)
    call_paths = len({m.callpath for m in report.models})
    print(
        f"wrote {args.output} ({size / 1024:,.0f} KiB: {call_paths:,} call paths, "
        f"{len(report.models):,} models); open it in a browser, no network needed"
    )
    return 0


def _report_inputs(path: Path, args: argparse.Namespace, effort: EffortModeler) -> ReportInputs:
    """What the report of one INPUT is made of (:func:`perfcast.workflows.report.report_inputs`);
    its notes go to standard error as they are made."""
    experiment = None
    store = False
    if not is_model_file(path):
        format = detect_format(path).name
        store = format == CAMPAIGN_STORE
        experiment = read_experiment(path, format, **caliper_options(args, format, path))
    request = ReportRequest(
        path,
        experiment,
        store=store,
        models=args.models,
        taint=args.taint,
        metrics=tuple(args.metric) if args.metric else None,
    )
    inputs = report_inputs(request, effort)
    if experiment is not None:  # a model file's notes are drawn on the page, as before
        for note in inputs.notes:
            print(f"note: {note}", file=sys.stderr)
    return inputs
