"""``perfcast predict models.json p=4096 n=48000``: evaluate saved models anywhere.

Prints what :func:`perfcast.workflows.predict.predict` returns: a table with each value
and its prediction interval, ``1330.48 [1280, 1381]``, and the checks' notes on stderr, so
that the table stays machine-readable. Parsing the values (a comma separates points here)
and shortening call paths are this module's; the checks are the workflow's, so that a
library user gets them too.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from perfcast.cli import probability
from perfcast.columns import aligned
from perfcast.errors import InputError
from perfcast.experiment.names import display_names
from perfcast.experiment.points import format_point
from perfcast.modeling import ModelSet
from perfcast.modeling.intervals import DEFAULT_LEVEL
from perfcast.workflows.predict import PredictRequest, predict


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "predict",
        description="Evaluate the models of a model file at parameter values given as "
        "NAME=VALUE; a comma list (p=64,128,256) evaluates several points, and a single "
        "value (size=30) is used at every one of them.",
    )
    parser.add_argument("models", type=Path, help="model file written by `perfcast model -o`")
    parser.add_argument("point", nargs="+", metavar="NAME=VALUE")
    parser.add_argument("--metric", action="append", help="only this metric (repeatable)")
    parser.add_argument(
        "--callpath",
        action="append",
        help="only these call paths (repeatable): a call path, a function name, or a glob",
    )
    parser.add_argument(
        "--level",
        type=probability,
        default=DEFAULT_LEVEL,
        help="probability of the prediction interval printed beside each value "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--full-names",
        action="store_true",
        help="print call paths in full (default: function names, C++ signatures shortened)",
    )
    parser.set_defaults(handler=run)


def parse_value_lists(items: list[str]) -> dict[str, list[float]]:
    """``["p=64,512", "size=30"]`` -> ``{"p": [64, 512], "size": [30, 30]}``: the values of
    each parameter at several points, so here the comma separates points (a single point,
    whose comma separates coordinates, is :func:`perfcast.experiment.points.parse_point`);
    lists of one value are repeated to the length of the others."""
    point: dict[str, list[float]] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise InputError(f"cannot read {item!r}: write parameter values as NAME=VALUE")
        if name in point:
            raise InputError(f"{name!r} is given twice: give all its values in one {name}=A,B,C")
        try:
            values = [float(v) for v in text.split(",")]
        except ValueError:
            raise InputError(f"value of {name!r} is not a number: {text!r}") from None
        if not all(math.isfinite(v) for v in values):
            raise InputError(f"value of {name!r} is not a finite number: {text!r}")
        point[name] = values
    lengths = {len(v) for v in point.values()} - {1}
    if len(lengths) > 1:
        given = ", ".join(f"{name}: {len(values)}" for name, values in point.items())
        raise InputError(
            f"give every parameter the same number of comma-separated values, or a single "
            f"value to use at every point ({given})"
        )
    count = max(lengths, default=1)
    return {name: values * count if len(values) == 1 else values for name, values in point.items()}


def run(args: argparse.Namespace) -> int:
    request = PredictRequest(
        ModelSet.load(args.models),
        parse_value_lists(args.point),
        metrics=tuple(args.metric) if args.metric else None,
        callpaths=tuple(args.callpath) if args.callpath else None,
        level=args.level,
        source=args.models,
    )
    result = predict(request)
    header = ["callpath", "metric"] + [format_point(point) for point in result.points]
    names = (
        {p.callpath: p.callpath for p in result.predictions}
        if args.full_names
        else display_names(p.callpath for p in result.predictions)
    )
    rows = [
        [names[p.callpath], p.metric]
        + [_with_interval(*cell) for cell in zip(p.values, p.low, p.high, strict=True)]
        for p in result.predictions
    ]
    print("\n".join(aligned([header, *rows])))
    for note in result.notes:
        print(f"note: {note.text}", file=sys.stderr)
    return 0


def _with_interval(value: float, low: float, high: float) -> str:
    """``12.5 [11.9, 13.1]``; the value alone where the model has no interval."""
    if math.isnan(low):
        return f"{value:.6g}"
    return f"{value:.6g} [{low:.4g}, {high:.4g}]"
