"""``perfcast design [perfcast.toml]``: the runs a campaign would make, and their cost."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from perfcast.appspec import DESIGN_KINDS, SPEC_NAME, AppSpec, load_spec
from perfcast.cli import whole_number
from perfcast.errors import InputError
from perfcast.experiment.points import parse_point
from perfcast.measure.counting import cost_note, counting_store, skip_reason
from perfcast.measure.design import (
    DEFAULT_SUGGESTIONS,
    MAX_SUGGESTIONS,
    describe_plan,
    plan_from_spec,
)
from perfcast.modeling.advice import DEFAULT_TARGET_TEXT
from perfcast.taint.campaign import default_profile_path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "design",
        description="Print the points a campaign measures, how many runs that is, and "
        "an estimate of the rank-seconds it costs. A taint profile (perfcast taint) "
        "reduces the plan to the points a model can need; the campaign's own profile "
        "(<store>.taint.json beside the store) is used automatically, as perfcast measure "
        "does.",
    )
    parser.add_argument("spec", nargs="?", type=Path, default=Path(SPEC_NAME))
    parser.add_argument("--kind", choices=DESIGN_KINDS, help="override [design] kind")
    taint = parser.add_mutually_exclusive_group()
    taint.add_argument(
        "--taint", type=Path, metavar="PROFILE", help="reduce the plan with this taint profile"
    )
    taint.add_argument(
        "--no-taint",
        action="store_true",
        help="ignore the campaign's taint profile: the plan [design] describes",
    )
    parser.add_argument(
        "--suggest",
        nargs="?",
        const=DEFAULT_SUGGESTIONS,
        type=whole_number(1, MAX_SUGGESTIONS, "more than any round of a campaign measures"),
        metavar="N",
        help="instead of the plan: the next N runs (default %(const)s) for the campaign in the "
        "store, ranked by the expected narrowing of the 95 %% prediction interval at --at of "
        "the call paths that matter there, per core-hour, each with its reason",
    )
    parser.add_argument(
        "--at",
        metavar="NAME=VALUE,...",
        help="with --suggest: the target (default: perfcast model's, each parameter at "
        f"{DEFAULT_TARGET_TEXT}: 125 ranks after 1, 8, 27)",
    )
    parser.add_argument("--store", type=Path, help="with --suggest: the campaign store")
    parser.add_argument(
        "--metric",
        help="with --suggest: the metric whose call paths matter (default: the one perfcast "
        "model's summary ranks), e.g. cpu_time where ranks shared cores",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    if args.suggest is not None:
        return _suggest(args, spec)
    if args.at is not None or args.store is not None or args.metric is not None:
        raise InputError(
            "--at, --store and --metric choose what --suggest ranks runs for: add --suggest"
        )
    plan = plan_from_spec(
        spec, args.kind, taint_profile=args.taint, campaign_profile=not args.no_taint
    )
    campaign = default_profile_path(spec)
    if args.taint is None and not args.no_taint and campaign.is_file():
        print(f"using the campaign's taint profile {campaign} (--no-taint: ignore it)")
    print(describe_plan(spec, plan))
    if skip_reason(spec, spec.store, virtual=False) is None:
        counts = counting_store(spec.store)
        print(
            f"then: the counting pass, {len(plan.points)} runs (1 per point) of the build with "
            f"counters into {counts.name} (perfcast measure --no-counting-pass: none); about "
            "one repetition's time where kernels are long, up to 3.4x for unfiltered code of "
            "many small functions"
        )
        both = counts.is_file() and spec.store.is_file()
        measured = cost_note(spec.store, counts) if both else None
        if measured is not None:
            print(f"last time, {measured}")
    return 0


def _suggest(args: argparse.Namespace, spec: AppSpec) -> int:
    from perfcast.workflows.design import SuggestRequest, suggest_runs

    target = parse_point(args.at, "--at", spec.varied) if args.at else None
    found = suggest_runs(SuggestRequest(spec, args.store, args.suggest, target, args.metric))
    for note in found.notes:
        print(f"note: {note}", file=sys.stderr)
    print(found.text())
    return 0
