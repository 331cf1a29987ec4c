"""``perfcast model FILE``: measurements in, PMNF models out."""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from perfcast.effort import EffortModeler, render_effort
from perfcast.effort.laws import RANKS_PARAMETER
from perfcast.effort.priors import COEFFICIENT_AGGREGATION, COUNTER_METRICS, TIME_METRIC
from perfcast.effort.sources import combine_sources
from perfcast.effort.with_taint import fit_with_taint, render_effort_with_taint
from perfcast.errors import InputError
from perfcast.experiment import read_experiment
from perfcast.experiment.experiment import AGGREGATIONS, Experiment
from perfcast.experiment.io import FORMATS
from perfcast.experiment.io.registry import detect_format
from perfcast.experiment.io.sqlite import FORMAT as SQLITE_FORMAT
from perfcast.experiment.names import name_list, select_callpaths
from perfcast.measure.oversubscription import (
    Oversubscription,
    models_note,
    oversubscription,
    shared_core_models,
)
from perfcast.modeling import PMNFModeler, SearchSpace
from perfcast.modeling.fitting import CRITERIA
from perfcast.modeling.modeler import MEDIAN_ESTIMATORS
from perfcast.modeling.modelset import MODEL_FILE, ModelSet
from perfcast.modeling.prior_conflicts import VISITS_METRIC
from perfcast.modeling.provenance import Provenance
from perfcast.modeling.scaling import SCALINGS, total_over_ranks
from perfcast.outputs import check_target
from perfcast.report import STYLES, render_models
from perfcast.report.summary import (
    DEFAULT_TOP,
    TARGET_FACTOR,
    describe_values,
    parse_point,
    render_summary,
)
from perfcast.taint.profile import read_profile
from perfcast.taint.validity import (
    TaintMatch,
    flag_models,
    match_profile,
    resolve_taint_conflicts,
)

TAINT_MODES = ("prior", "check")
SUMMARY_STYLE = "summary"
PRIOR_SOURCES = ("effort",)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "model",
        help="fit PMNF models to measurements",
        description="Fit a PMNF model per call path and metric. Reads every format Extra-P "
        "reads (text, JSON, JSON Lines, Talpas, Cube directories).",
    )
    parser.add_argument("input", type=Path, help="measurement file or Cube directory")
    parser.add_argument("--format", choices=FORMATS, help="input format (default: detect)")
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
        f"parameter at {TARGET_FACTOR:g}x its largest measured value)",
    )
    parser.add_argument(
        "--top",
        type=int,
        default=DEFAULT_TOP,
        help=f"call paths per ranking in the summary (default {DEFAULT_TOP})",
    )
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
    search.add_argument(
        "--exponents",
        help="polynomial exponents, e.g. '0,1/2,1,2,3'; negative ones as "
        "--exponents=-1,0,1 or --exponents '-1,0,1'",
    )
    search.add_argument("--log-exponents", help="logarithm exponents, e.g. '0,1,2'")
    defaults = PMNFModeler().get_params()  # one source of truth for the modeler's defaults
    search.add_argument(
        "--terms",
        type=int,
        default=defaults["terms"],
        help=f"terms per parameter (default {defaults['terms']})",
    )
    search.add_argument("--criterion", choices=sorted(CRITERIA), default=defaults["criterion"])
    search.add_argument("--aggregate", choices=AGGREGATIONS, default=defaults["aggregation"])
    search.add_argument(
        "--median-estimator",
        choices=MEDIAN_ESTIMATORS,
        default=defaults["median_estimator"],
        help="how --aggregate median estimates a point's centre: huber (default: starts at "
        "the sample median, counts calm repetitions fully and down-weights spikes), "
        "harrell-davis (Beta-weighted order statistics) or sample (the middle value)",
    )
    search.add_argument(
        "--candidates",
        type=int,
        default=defaults["candidates"],
        help=f"shapes kept per parameter (default {defaults['candidates']})",
    )
    search.add_argument(
        "--significance",
        type=float,
        default=defaults["significance"],
        help="level of the per-parameter noise test; 0 disables it "
        f"(default {defaults['significance']})",
    )
    search.add_argument(
        "--allow-negative-terms",
        action="store_true",
        help="accept hypotheses with negative term coefficients",
    )
    search.add_argument(
        "--unweighted", action="store_true", help="plain instead of relative least squares"
    )
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
    effort = parser.add_argument_group("effort counters (perfcast build --counters)")
    effort.add_argument(
        "--priors",
        choices=PRIOR_SOURCES,
        help="effort: basic-block and MPI byte models fix the exponents of each call path's "
        "time model; only its coefficients are fitted to time. With --taint, the taint "
        "priors constrain what effort leaves black-box, and counts that depend on a "
        "parameter the taint analysis rules out are flagged",
    )
    effort.add_argument(
        "--effort-counts",
        type=Path,
        metavar="COUNTS_INPUT",
        help="take the effort counters from this campaign (e.g. its .sqlite store, measured "
        "with [build] counters = true and one repetition) and everything else from INPUT, "
        "measured with the light build: the counting build's time is about 3.4x native",
    )
    effort.add_argument(
        "--effort-aggregate",
        choices=AGGREGATIONS,
        default=COEFFICIENT_AGGREGATION,
        help="how a point's repetitions are aggregated before the prior's coefficients are "
        f"fitted (default {COEFFICIENT_AGGREGATION}: interference only adds time, and "
        "under a prior the exponents cannot follow the minimum's noise)",
    )
    effort.add_argument(
        "--time-metric",
        default=TIME_METRIC,
        help=f"the metric the effort priors constrain (default {TIME_METRIC})",
    )
    effort.add_argument(
        "--ranks-parameter",
        default=RANKS_PARAMETER,
        help="the parameter counting MPI ranks, for the log2(p) latency of collectives "
        f"(default {RANKS_PARAMETER})",
    )
    parser.set_defaults(handler=run)


MAX_SEARCH_EXPONENT = 16
"""The largest exponent ``--exponents`` and ``--log-exponents`` may name. Extra-P's largest is
3; ``x^16`` of a parameter at 10^6 is already 10^96, and a few steps more overflow a double,
so larger exponents fit nothing and only fill the fits with infinities."""

MAX_SHAPE_COMBINATIONS = 50_000
"""Combinations of ``--terms`` shapes the per-parameter search may fit: it tries every
combination on every line, so their number bounds its time. Extra-P's default space gives
59 for one term, 1711 for two and 32509 for three (already tens of seconds per parameter);
``--terms 4`` would be 455126, minutes to hours."""


def check_search_arguments(args: argparse.Namespace) -> SearchSpace:
    """The search space of ``--exponents``/``--log-exponents``, with every search option
    checked before any input is read: an error names the option and the limit."""
    parses = (
        ("--exponents", args.exponents, None),
        ("--log-exponents", None, args.log_exponents),
        ("--exponents with --log-exponents", args.exponents, args.log_exponents),
    )
    for option, exponents, log_exponents in parses:  # the last one is the space searched
        try:
            space = SearchSpace.from_strings(exponents, log_exponents)
        except (ValueError, ArithmeticError) as exc:
            raise InputError(f"{option}: {exc}") from None
    largest = max(*(abs(e) for e in space.exponents), *(Fraction(j) for j in space.log_exponents))
    if largest > MAX_SEARCH_EXPONENT:
        digits = len(str(int(largest)))
        shown = str(largest) if digits <= 12 else f"a {digits}-digit number"
        raise InputError(
            f"--exponents/--log-exponents: {shown} is beyond the largest usable exponent "
            f"{MAX_SEARCH_EXPONENT}"
        )
    if args.terms < 1 or args.candidates < 1:
        raise InputError(
            f"--terms and --candidates must be at least 1, not {args.terms} and {args.candidates}"
        )
    combinations = math.comb(len(space.shapes), args.terms)
    if combinations > MAX_SHAPE_COMBINATIONS:
        raise InputError(
            f"--terms {args.terms}: {combinations} combinations of the {len(space.shapes)} "
            f"shapes per parameter, more than the limit of {MAX_SHAPE_COMBINATIONS}; use fewer "
            "terms or fewer exponents"
        )
    if not 0 <= args.significance < 1:
        raise InputError(f"--significance must be from 0 to below 1, not {args.significance}")
    return space


def run(args: argparse.Namespace) -> int:
    space = check_search_arguments(args)
    modeler = PMNFModeler(
        space,
        terms=args.terms,
        criterion=args.criterion,
        aggregation=args.aggregate,
        median_estimator=args.median_estimator,
        candidates=args.candidates,
        significance=args.significance or None,
        weighting="none" if args.unweighted else "relative",
        positive_terms=not args.allow_negative_terms,
        beyond_space=args.scaling == "auto",
    )
    if args.effort_counts is not None and args.priors != "effort":
        raise InputError(
            "--effort-counts gives the counts of effort priors: add --priors effort",
            path=args.effort_counts,
        )
    inputs = [path for path in (args.input, args.effort_counts, args.taint) if path is not None]
    if args.output:  # before the fit: a refused -o must not cost its minutes
        check_target(args.output, MODEL_FILE, inputs)
    experiment = _read_scaled(args)
    if args.effort_counts is not None:
        experiment = _with_counts_from(experiment, args)
    target = parse_point(args.at, experiment.parameters) if args.at else None
    if args.top < 1:
        raise InputError(f"--top {args.top}: give the number of call paths to rank, 1 or more")
    callpaths = None
    if args.callpath:
        callpaths = select_callpaths(args.callpath, experiment.callpaths, experiment.source)
    experiment = experiment.restricted(
        callpaths=callpaths, metrics=_modeled_metrics(args, experiment)
    )
    shared = _note_shared_cores(args)
    report = None
    if args.priors == "effort":
        models, report = _fit_with_effort(modeler, experiment, args)
    elif args.taint is None:
        models = modeler.fit(experiment)
    else:
        models = _fit_with_taint(modeler, experiment, args)
    models.provenance = _provenance(experiment, models, shared)
    _note_shared_core_models(models.provenance)
    if args.output:
        models.save(args.output, inputs)
    print(_render(models, experiment, args, target))
    if report is not None:
        print()
        print(report)
    return 0


def _modeled_metrics(args: argparse.Namespace, experiment: Experiment) -> list[str] | None:
    """The metrics to fit: ``--metric``'s, and under ``--priors effort`` also the counters
    and visits the priors are made from. ``--metric cpu_time`` chooses what the summary
    ranks, not what the priors may read: without the counters every call path silently
    lost its prior, with a note that the program had been built without counters. Where
    ``--metric`` names counters itself, the user chose which priors to derive (e.g. basic
    blocks without MPI bytes: the MPI call paths then take taint priors), and only those
    are read."""
    if not args.metric or args.priors != "effort":
        return args.metric
    counters = [m for m in COUNTER_METRICS if m in experiment.metrics]
    if any(m in COUNTER_METRICS for m in args.metric):
        counters = []
    inputs = [*counters, *([VISITS_METRIC] if VISITS_METRIC in experiment.metrics else [])]
    return [*args.metric, *(m for m in inputs if m not in args.metric)]


def _render(
    models: ModelSet,
    experiment: Experiment,
    args: argparse.Namespace,
    target: dict[str, float] | None,
) -> str:
    """The summary by default, every model with --full or another --style."""
    style = "text" if args.full and args.style == SUMMARY_STYLE else args.style
    if style != SUMMARY_STYLE:
        return render_models(models, style)
    values_note = describe_values(
        args.format or detect_format(args.input).name,
        models.metrics,
        aggregation=args.aggregate,
        median_estimator=args.median_estimator,
        effort_aggregation=args.effort_aggregate if args.priors == "effort" else None,
        scaling=args.scaling,
        ranks_parameter=args.ranks_parameter,
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


def _read_scaled(args: argparse.Namespace) -> Experiment:
    """The input as ``--scaling`` asks: a Cube set's processes summed by its reader, as
    Extra-P does, other formats' per-rank values multiplied by the number of ranks."""
    strong = args.scaling == "strong"
    if strong and (args.format or detect_format(args.input).name) == "cube":
        return read_experiment(args.input, args.format, scaling="strong")
    experiment = read_experiment(args.input, args.format)
    return total_over_ranks(experiment, args.ranks_parameter) if strong else experiment


def _with_counts_from(experiment: Experiment, args: argparse.Namespace) -> Experiment:
    """``experiment``'s time with the counters of ``--effort-counts``; notes on stderr."""
    counts = read_experiment(args.effort_counts)
    combined = combine_sources(experiment, counts, time_metric=args.time_metric)
    for note in combined.notes:
        print(f"note: {note}", file=sys.stderr)
    return combined.experiment


def _note_shared_cores(args: argparse.Namespace) -> Oversubscription | None:
    """A campaign store knows which runs had more ranks than cores: their time is partly
    waiting for a core, which no model of the program should be taken to describe."""
    if (args.format or detect_format(args.input).name) != SQLITE_FORMAT.name:
        return None
    shared = oversubscription(args.input)
    if shared is not None:
        note = shared.describe(args.input, effort_priors=args.priors == "effort")
        print(f"note: {note}", file=sys.stderr)
    return shared


def _provenance(
    experiment: Experiment, models: ModelSet, shared: Oversubscription | None
) -> Provenance:
    """What `perfcast predict` needs to know of the measurements: each parameter's measured
    range, and the models fitted on wall time of runs with more ranks than cores."""
    ranges = {
        name: (float(experiment.data[name].min()), float(experiment.data[name].max()))
        for name in experiment.parameters
    }
    if shared is None:
        return Provenance(ranges)
    on_shared_cores = shared_core_models(experiment, shared)
    fitted = {(model.callpath, model.metric) for model in models}
    return Provenance(ranges, replace(on_shared_cores, models=on_shared_cores.models & fitted))


def _note_shared_core_models(provenance: Provenance) -> None:
    """Name the models that rest on runs with more ranks than cores (the file keeps them
    too, for `perfcast predict`)."""
    shared = provenance.shared_cores
    if shared is not None and shared.models:
        print(f"note: {models_note(shared.models, shared)}", file=sys.stderr)


def _fit_with_effort(
    modeler: PMNFModeler, experiment: Experiment, args: argparse.Namespace
) -> tuple[ModelSet, str]:
    """Effort priors, with a taint profile where effort has none; models and report."""
    effort = EffortModeler(
        modeler,
        time_metric=args.time_metric,
        ranks=args.ranks_parameter,
        aggregation=args.effort_aggregate,
    )
    if args.taint is None:
        result = effort.fit(experiment)
        return result.models, render_effort(result)
    profile, match = _match_taint(experiment, args)
    combined = fit_with_taint(
        effort, experiment, profile, match, apply_taint_priors=args.taint_mode == "prior"
    )
    return combined.models, render_effort_with_taint(combined)


def _match_taint(
    experiment: Experiment, args: argparse.Namespace
) -> tuple[dict[str, Any], TaintMatch]:
    """The taint profile of ``--taint`` and its match to the measured call paths."""
    profile = read_profile(args.taint)
    try:
        match = match_profile(profile, experiment, inclusive=not args.exclusive)
    except InputError as exc:
        raise InputError(exc.reason, path=args.taint) from None
    return profile, match


def _fit_with_taint(
    modeler: PMNFModeler, experiment: Experiment, args: argparse.Namespace
) -> ModelSet:
    """Fit with (or only check against) a taint profile; the black-box fit is always made,
    since only a model free to use every parameter reveals a dependency the code lacks."""
    profile, match = _match_taint(experiment, args)
    for note in match.notes():
        print(f"note: {note}", file=sys.stderr)
    free = modeler.fit(experiment)
    if args.taint_mode != "prior":
        flag_models(free, free, profile, experiment, match)
        return free
    models = modeler.fit(experiment, priors=match.priors)
    conflicts = resolve_taint_conflicts(models, free, profile, match)
    if conflicts:
        metrics: dict[str, list[str]] = {}
        for conflict in conflicts:
            metrics.setdefault(conflict.callpath, []).append(conflict.metric)
        listed = name_list(metrics, tags=metrics)
        print(
            f"note: {len(conflicts)} model(s) conflict with their taint prior; each says "
            f"which model was kept, with both fits, in its warnings: {listed}",
            file=sys.stderr,
        )
    flag_models(models, free, profile, experiment, match)
    return models
