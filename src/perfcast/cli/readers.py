"""Flags that several commands share for the measurements they read and the views they
add: the Caliper profiles' run selection (``--parameters``, ``--where``) and the scaling
section (``--efficiency``, ``--subtree``). Declared once here, so ``perfcast model`` and
``perfcast report`` spell and check them alike. Not a sub-command: ``COMMANDS`` does not
list it."""

from __future__ import annotations

import argparse
from pathlib import Path

from perfcast.errors import InputError
from perfcast.experiment.io.registry import get_format
from perfcast.modeling.efficiency import KINDS


def add_caliper_flags(parser: argparse.ArgumentParser) -> None:
    caliper = parser.add_argument_group("Caliper profiles")
    caliper.add_argument(
        "--parameters",
        metavar="NAME,...",
        help="the Adiak globals that are the runs' parameters, e.g. jobsize,problem_size",
    )
    caliper.add_argument(
        "--where",
        action="append",
        metavar="KEY=VALUE",
        help="keep only the runs whose Adiak global KEY is VALUE (repeatable), e.g. "
        "compiler=intel: runs at one point must not differ in anything but the parameters",
    )


def caliper_options(
    args: argparse.Namespace, format: str, path: Path, *, more: bool = False
) -> dict[str, object]:
    """The reader's options the Caliper flags give; refused for another format, which
    would otherwise ignore them. ``more``: more than one input was given."""
    if args.parameters is None and not args.where and not more:
        return {}
    if not get_format(format).collection:
        raise InputError(
            f"--parameters, --where and more than one input are for Caliper profiles, "
            f"and this is {format} input: leave them out",
            path=path,
        )
    return {"parameters": args.parameters, "where": args.where}


def add_efficiency_flags(parser: argparse.ArgumentParser, *, ranks: bool = False) -> None:
    """``ranks``: also declare ``--ranks-parameter`` (``perfcast model`` has it already,
    from the effort modeler's options, with the same default)."""
    if ranks:
        from perfcast.effort import EffortModeler

        parser.add_argument(
            "--ranks-parameter",
            default=EffortModeler().ranks,
            help="the parameter counting MPI ranks, for --efficiency (default %(default)s)",
        )
    parser.add_argument(
        "--efficiency",
        choices=KINDS,
        help="also show the speedup and parallel efficiency along the ranks "
        "(--ranks-parameter) of the costliest region, or of --subtree, measured and at the "
        "target: strong (the problem fixed) or weak (the problem per rank fixed) scaling",
    )
    parser.add_argument(
        "--subtree",
        metavar="CALLPATH",
        help="the region --efficiency looks at: its inclusive value, the sum of the call "
        "paths at and below it (default: the costliest root)",
    )
