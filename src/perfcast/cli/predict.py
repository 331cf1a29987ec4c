"""``perfcast predict models.json p=4096 n=48000``: evaluate saved models anywhere."""

from __future__ import annotations

import argparse
from pathlib import Path

from perfcast.errors import InputError
from perfcast.modeling import ModelSet


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "predict",
        help="evaluate saved models at a point",
        description="Evaluate the models of a model file at parameter values given as "
        "NAME=VALUE; a comma list (p=64,128,256) evaluates several points.",
    )
    parser.add_argument("models", type=Path, help="model file written by `perfcast model -o`")
    parser.add_argument("point", nargs="+", metavar="NAME=VALUE")
    parser.add_argument("--metric", action="append", help="only this metric (repeatable)")
    parser.add_argument("--callpath", action="append", help="only this call path (repeatable)")
    parser.set_defaults(handler=run)


def parse_point(items: list[str]) -> dict[str, list[float]]:
    point: dict[str, list[float]] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise InputError(f"cannot read {item!r}: write parameter values as NAME=VALUE")
        try:
            point[name] = [float(v) for v in text.split(",")]
        except ValueError:
            raise InputError(f"value of {name!r} is not a number: {text!r}") from None
    lengths = {len(v) for v in point.values()}
    if len(lengths) > 1:
        raise InputError("give every parameter the same number of comma-separated values")
    return point


def run(args: argparse.Namespace) -> int:
    models = ModelSet.load(args.models)
    point = parse_point(args.point)
    unknown = sorted(set(point) - set(models.parameters))
    if unknown:
        raise InputError(
            f"the models have parameters {models.parameters}, not {unknown}", path=args.models
        )
    predictions = models.predict(point)
    header = ["callpath", "metric"] + [
        ", ".join(f"{p}={point[p][i]:g}" for p in models.parameters)
        for i in range(len(next(iter(point.values()))))
    ]
    rows = [
        [callpath, metric] + [f"{v:.6g}" for v in values.reshape(-1)]
        for (callpath, metric), values in predictions.items()
        if (not args.metric or metric in args.metric)
        and (not args.callpath or callpath in args.callpath)
    ]
    if not rows:
        raise InputError("no model matches the --callpath/--metric selection", path=args.models)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0
