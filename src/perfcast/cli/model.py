"""``perfcast model FILE``: measurements in, PMNF models out."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from perfcast.cli import EFFORT, add_caliper_flags, add_efficiency_flags, caliper_options
from perfcast.effort import EffortModeler
from perfcast.errors import InputError
from perfcast.experiment import read_experiment
from perfcast.experiment.experiment import Experiment
from perfcast.experiment.io import FORMATS
from perfcast.experiment.io.registry import CAMPAIGN_STORE, detect_format
from perfcast.experiment.names import select_callpaths
from perfcast.experiment.points import parse_point
from perfcast.modeling import PMNFModeler
from perfcast.modeling.advice import DEFAULT_TARGET_TEXT
from perfcast.modeling.modelset import MODEL_FILE, ModelSet
from perfcast.modeling.options import add_flags, from_arguments
from perfcast.modeling.scaling import SCALINGS, total_over_ranks
from perfcast.outputs import check_target
from perfcast.priors import precedence
from perfcast.report import STYLES, render_models
from perfcast.report.efficiency import scaling_section
from perfcast.report.summary import (
    DEFAULT_TOP,
    default_target,
    describe_values,
    render_summary,
)
from perfcast.workflows.model import (
    NO_PRIORS,
    ModelRequest,
    PriorInputs,
    check_counts,
    model_campaign,
    prior_choices,
)

TAINT_MODES = ("prior", "check")
SUMMARY_STYLE = "summary"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "model",
        description="Fit a PMNF model per call path and metric. Reads every format Extra-P "
        "reads (text, JSON, JSON Lines, Talpas, Cube directories).",
    )
    parser.add_argument(
        "input", type=Path, help="measurement file, Cube directory, or Caliper profile(s)"
    )
    parser.add_argument(
        "more",
        type=Path,
        nargs="*",
        metavar="MORE",
        help="more Caliper profiles (.cali files or directories of them), one run each",
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        metavar="FORMAT",  # argparse lists the choices only for help: no metadata scan
        help="input format: %(choices)s (default: detect)",
    )
    parser.add_argument(
        "--runs",
        metavar="MACHINE",
        help="of a campaign store holding real and virtual runs, model these: real, virtual "
        "(the virtual runs, of one platform) or a platform's name (default: the real runs, "
        "or the virtual runs of a store that has only those); the others are kept apart",
    )
    add_caliper_flags(parser)
    parser.add_argument("-o", "--output", type=Path, help="write the models as JSON here")
    parser.add_argument(
        "--style",
        choices=[SUMMARY_STYLE, *sorted(STYLES)],
        default=SUMMARY_STYLE,
        help="how to print the models: summary (default: the costliest and the fastest "
        "growing call paths with their models), text (every model, as Extra-P lists them), "
        "json, python or latex",
    )
    parser.add_argument(
        "--full", action="store_true", help="list every model (same as --style text)"
    )
    parser.add_argument(
        "--at",
        metavar="NAME=VALUE,...",
        help="the summary's target point for growth, e.g. p=4096,size=30 (default: each "
        f"parameter at {DEFAULT_TARGET_TEXT})",
    )
    parser.add_argument(
        "--top",
        type=int,
        default=DEFAULT_TOP,
        help=f"call paths per ranking in the summary (default {DEFAULT_TOP})",
    )
    add_efficiency_flags(parser)
    parser.add_argument(
        "--metric",
        action="append",
        help="model only this metric (repeatable); the summary ranks these metrics",
    )
    parser.add_argument(
        "--callpath",
        action="append",
        help="model only these call paths (repeatable): a call path, the name of its "
        "innermost function (CalcForceForNodes) or a glob (*CalcForce*; with '->' matched "
        "against the whole path)",
    )
    search = parser.add_argument_group("search")
    add_flags(search, PMNFModeler)  # the flags of the modeler's declared options
    search.add_argument(
        "--scaling",
        choices=SCALINGS,
        default="auto",
        help="auto (default): model the values per rank, with negative exponents for a "
        "parameter along which a metric falls (strong scaling, n/p) and exponents above the "
        "largest where the data need them; weak: Extra-P's search as it is; strong: as "
        "Extra-P, model the total over all ranks (values times --ranks-parameter, a Cube "
        "profile's sum over processes)",
    )
    taint = parser.add_argument_group("taint analysis (perfcast taint)")
    taint.add_argument(
        "--taint",
        type=Path,
        metavar="PROFILE",
        help="taint profile: restrict each call path to the parameters its code depends on "
        "and flag contention/noise and possible algorithm switches",
    )
    taint.add_argument(
        "--taint-mode",
        choices=TAINT_MODES,
        default="prior",
        help="prior: fit with the taint priors (default); check: fit black-box, only flag",
    )
    taint.add_argument(
        "--exclusive",
        action="store_true",
        help="the metrics cover each function's own code only (use exclusive dependencies)",
    )
    priors = parser.add_argument_group("priors (composed: restrictions intersect, fixed terms win)")
    priors.add_argument(
        "--priors",
        type=_prior_names,
        metavar=",".join(prior_choices()),
        help="the prior sources, comma-separated, in any combination (default: every source "
        "the input has evidence for: effort where it has counters, taint where --taint is "
        "given or app.taint.json lies beside the store app.sqlite, static with --static; "
        "none: black-box models only). effort: basic-block "
        "and MPI byte models fix the terms of each call path's time model (only the "
        "coefficients are fitted); static: the static model's instruction formulas "
        "(--static) fix them; taint: the taint profile (--taint) restricts every metric to "
        "the parameters the code depends on. Fixed terms win over the taint restriction, "
        "effort over static; every conflict is reported. --taint or --static alone implies "
        "its source; a source named reads its file beside the store as the default does "
        "(app.counts.sqlite, app.taint.json)",
    )
    priors.add_argument(
        "--static",
        type=Path,
        metavar="MODELFILE",
        help="static model (model.json, or the model.py beside it, of `perfcast static`): "
        "its formulas fix the terms of --time-metric of the call paths its functions name",
    )
    priors.add_argument(
        "--static-rename",
        metavar="NAME=PARAMETER,...",
        help="the measured parameter each of the static model's names stands for, e.g. "
        "cols=size,rows=size when a function's arguments are the problem size (names not "
        "given keep their name)",
    )
    effort = parser.add_argument_group("effort counters (perfcast build --counters)")
    effort.add_argument(
        "--effort-counts",
        type=Path,
        metavar="COUNTS_INPUT",
        help="take the effort counters from this campaign (e.g. its .sqlite store, measured "
        "with [build] counters = true and one repetition) and everything else from INPUT, "
        "measured with the light build: the counting build's time is about 3.4x native",
    )
    add_flags(effort, EffortModeler, dest_prefix=EFFORT, nested=False)
    parser.set_defaults(handler=run)


def search_modeler(args: argparse.Namespace) -> PMNFModeler:
    """The modeler the search flags configure, checked before any input is read: a value
    the library refuses is an error naming its flag. ``--scaling`` is not one of the
    modeler's options, since it also decides how the input is read (:func:`_read_scaled`);
    only ``auto`` searches beyond the space."""
    return from_arguments(PMNFModeler, args, beyond_space=args.scaling == "auto")


def run(args: argparse.Namespace) -> int:
    modeler = search_modeler(args)
    effort = from_arguments(EffortModeler, args, dest_prefix=EFFORT, nested=False, modeler=modeler)
    check_counts(args.effort_counts, args.priors)
    given = (args.input, *args.more, args.effort_counts, args.taint, args.static)
    if args.output:  # before the fit: a refused -o must not cost its minutes
        check_target(args.output, MODEL_FILE, [path for path in given if path is not None])
    input_format = args.format or detect_format(args.input).name
    experiment = _read_scaled(args, input_format, effort.ranks)
    target = parse_point(args.at, "--at", experiment.parameters) if args.at else None
    if args.top < 1:
        raise InputError(f"--top {args.top}: give the number of call paths to rank, 1 or more")
    callpaths = None
    if args.callpath:
        callpaths = select_callpaths(args.callpath, experiment.callpaths, experiment.source)
    request = ModelRequest(
        experiment,
        store=args.input if input_format == CAMPAIGN_STORE else None,
        priors=args.priors,
        inputs=PriorInputs(
            taint=args.taint,
            static=args.static,
            static_rename=args.static_rename,
            exclusive=args.exclusive,
            taint_check_only=args.taint_mode == "check",
        ),
        counts=args.effort_counts,
        metrics=tuple(args.metric) if args.metric else None,
        callpaths=tuple(callpaths) if callpaths is not None else None,
        runs=args.runs,
    )
    result = model_campaign(request, effort)
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    models, experiment, priors, report = (
        result.models,
        result.experiment,
        result.priors,
        result.report,
    )
    inputs = [args.input, result.counts, result.inputs.taint, result.inputs.static]
    inputs = [path for path in inputs if path is not None]
    written = models.save(args.output, inputs) if args.output else None
    print(
        written
        if written is not None and _style(args) == "json"
        else _render(models, experiment, args, input_format, target, effort, priors)
    )
    if report is not None:
        print()
        print(report)
    if args.efficiency:
        print()
        print(_efficiency(models, experiment, args, target, effort.ranks))
    return 0


def _efficiency(
    models: ModelSet,
    experiment: Experiment,
    args: argparse.Namespace,
    target: dict[str, float] | None,
    ranks: str,
) -> str:
    """The scaling section at the summary's target: ``--at`` (``target``) completed with
    the summary's default, from the same measured points."""
    chosen = {**default_target(experiment.parameters, experiment.coordinates()), **(target or {})}
    section = scaling_section(models, experiment, ranks, args.efficiency, chosen, args.subtree)
    return section.text()


def _style(args: argparse.Namespace) -> str:
    return "text" if args.full and args.style == SUMMARY_STYLE else args.style


def _render(
    models: ModelSet,
    experiment: Experiment,
    args: argparse.Namespace,
    input_format: str,
    target: dict[str, float] | None,
    effort: EffortModeler,
    priors: tuple[str, ...],
) -> str:
    """The summary by default, every model with --full or another --style."""
    style = _style(args)
    if style != SUMMARY_STYLE:
        return render_models(models, style)
    values_note = describe_values(
        input_format,
        models.metrics,
        aggregation=args.aggregation,
        median_estimator=args.median_estimator,
        effort_aggregation=effort.coefficient_aggregation if "effort" in priors else None,
        scaling=args.scaling,
        ranks_parameter=effort.ranks,
    )
    if args.callpath:
        values_note.append(
            f"Totals, shares and inclusive values cover only the {len(experiment.callpaths):,} "
            "call paths --callpath selected."
        )
    return render_summary(
        models,
        experiment.coordinates(),
        target=target,
        metrics=args.metric,
        units={name: metric.unit for name, metric in experiment.metrics.items()},
        values_note=values_note,
        top=args.top,
    )


def _read_scaled(args: argparse.Namespace, format: str, ranks: str) -> Experiment:
    """The input (in ``format``) as ``--scaling`` asks: a Cube set's processes summed by
    its reader, as Extra-P does, other formats' per-rank values multiplied by the number of
    ranks."""
    strong = args.scaling == "strong"
    if strong and format == "cube":
        return read_experiment(args.input, format, scaling="strong")
    options: dict[str, object] = {}
    options.update(caliper_options(args, format, args.input, more=bool(args.more)))
    if args.runs is not None:
        if format != CAMPAIGN_STORE:
            raise InputError(
                f"--runs chooses among the runs of a campaign store, and this is a {format} "
                "file: leave --runs out",
                path=args.input,
            )
        options["runs"] = args.runs
    experiment = read_experiment([args.input, *args.more], format, **options)
    return total_over_ranks(experiment, ranks) if strong else experiment


def _prior_names(text: str) -> tuple[str, ...]:
    """``--priors taint,effort`` as names; an unknown one is a usage error naming it."""
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in prior_choices()]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"{', '.join(unknown) or 'nothing'}: give prior sources from "
            f"{', '.join(precedence())}, comma-separated, or {NO_PRIORS}"
        )
    return names
