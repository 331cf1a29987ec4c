"""``perfcast model FILE``: measurements in, PMNF models out."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from perfcast.effort import EffortModeler, render_effort
from perfcast.effort.laws import RANKS_PARAMETER
from perfcast.effort.priors import COEFFICIENT_AGGREGATION, TIME_METRIC
from perfcast.effort.sources import combine_sources
from perfcast.effort.with_taint import fit_with_taint, render_effort_with_taint
from perfcast.errors import InputError
from perfcast.experiment import read_experiment
from perfcast.experiment.experiment import AGGREGATIONS, Experiment
from perfcast.experiment.io import FORMATS
from perfcast.experiment.io.registry import detect_format
from perfcast.experiment.io.sqlite import FORMAT as SQLITE_FORMAT
from perfcast.measure.oversubscription import oversubscription
from perfcast.modeling import PMNFModeler, SearchSpace
from perfcast.modeling.fitting import CRITERIA
from perfcast.modeling.modeler import MEDIAN_ESTIMATORS
from perfcast.modeling.modelset import ModelSet
from perfcast.report import STYLES, render_models
from perfcast.taint.profile import read_profile
from perfcast.taint.validity import TaintMatch, flag_models, match_profile

TAINT_MODES = ("prior", "check")
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
        "--style", choices=sorted(STYLES), default="text", help="how to print the models"
    )
    parser.add_argument("--metric", action="append", help="model only this metric (repeatable)")
    parser.add_argument("--callpath", action="append", help="model only this call path")
    search = parser.add_argument_group("search")
    search.add_argument("--exponents", help="polynomial exponents, e.g. '0,1/2,1,2,3' or '-1,0,1'")
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


def run(args: argparse.Namespace) -> int:
    try:
        space = SearchSpace.from_strings(args.exponents, args.log_exponents)
    except ValueError as exc:
        raise InputError(str(exc)) from None
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
    )
    if args.effort_counts is not None and args.priors != "effort":
        raise InputError(
            "--effort-counts gives the counts of effort priors: add --priors effort",
            path=args.effort_counts,
        )
    experiment = read_experiment(args.input, args.format)
    if args.effort_counts is not None:
        experiment = _with_counts_from(experiment, args)
    experiment = experiment.restricted(callpaths=args.callpath, metrics=args.metric)
    _note_shared_cores(args)
    report = None
    if args.priors == "effort":
        models, report = _fit_with_effort(modeler, experiment, args)
    elif args.taint is None:
        models = modeler.fit(experiment)
    else:
        models = _fit_with_taint(modeler, experiment, args)
    if args.output:
        models.save(args.output)
    print(render_models(models, args.style))
    if report is not None:
        print()
        print(report)
    return 0


def _with_counts_from(experiment: Experiment, args: argparse.Namespace) -> Experiment:
    """``experiment``'s time with the counters of ``--effort-counts``; notes on stderr."""
    counts = read_experiment(args.effort_counts)
    combined = combine_sources(experiment, counts, time_metric=args.time_metric)
    for note in combined.notes:
        print(f"note: {note}", file=sys.stderr)
    return combined.experiment


def _note_shared_cores(args: argparse.Namespace) -> None:
    """A campaign store knows which runs had more ranks than cores: their time is partly
    waiting for a core, which no model of the program should be taken to describe."""
    if (args.format or detect_format(args.input).name) != SQLITE_FORMAT.name:
        return
    shared = oversubscription(args.input)
    if shared is not None:
        note = shared.describe(args.input, effort_priors=args.priors == "effort")
        print(f"note: {note}", file=sys.stderr)


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
    models = modeler.fit(experiment, priors=match.priors) if args.taint_mode == "prior" else free
    flag_models(models, free, profile, experiment, match)
    return models
