"""``perfcast static``: instruction-count models from source and binary, without running.

Build a model (a Python module plus a JSON summary next to it)::

    perfcast static app.c --binary app -o model.py [--arch my.yaml] [--cflags "-DN=3"]
                   [--function NAME]

Without an include directory holding mpi.h in --cflags, the MPI wrapper's own compile
flags (``mpicc``/``mpicxx --showme:compile``) are added. A function the analysis cannot
handle is skipped, with the reason, and the others are still modeled.

Evaluate it for one function::

    perfcast static eval model.py --function dgemm n=1000 [--json]

The binary must be compiled with ``-g`` (any optimisation level). Loops the polyhedral
model cannot count become named parameters; ``#pragma @Annotation {lp_init:x, lp_cond:y}``
inside such a loop names its bounds instead.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shlex
from fractions import Fraction
from pathlib import Path
from typing import Any

from perfcast.errors import InputError


def _options() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="perfcast static",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "inputs",
        nargs="+",
        metavar="SOURCE | eval MODEL NAME=VALUE",
        help="the C/C++ source file, or `eval` followed by a model and parameter values",
    )
    parser.add_argument("--binary", type=Path, help="the program compiled from SOURCE with -g")
    parser.add_argument("-o", "--output", type=Path, help="Python model to write (and .json)")
    parser.add_argument("--arch", type=Path, help="architecture description (YAML)")
    parser.add_argument("--cflags", default="", help="compiler flags for parsing (quoted)")
    parser.add_argument(
        "--function",
        help="eval: the model function to evaluate; build: model only this source function "
        "(and what it calls)",
    )
    parser.add_argument("--json", action="store_true", help="eval: print JSON")
    return parser


def register(subparsers: Any) -> None:
    # Options and NAME=VALUE pairs may interleave, which needs argparse's intermixed
    # parsing: the arguments are collected here and parsed by _options() in run().
    parser = subparsers.add_parser(
        "static",
        help="static instruction-count model from source and binary",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "arguments",
        nargs=argparse.REMAINDER,
        help="SOURCE --binary BINARY -o MODEL.py [--arch FILE] [--cflags FLAGS] "
        "[--function NAME] | "
        "eval MODEL.py --function NAME [NAME=VALUE ...] [--json]",
    )
    parser.set_defaults(handler=run)


def _attach_flag_values(arguments: list[str]) -> list[str]:
    """``--cflags "-DN=3"`` as ``--cflags=-DN=3``: argparse takes a value that starts with
    ``-`` for an option of its own and refuses it, and compiler flags always start so."""
    attached: list[str] = []
    words = iter(arguments)
    for word in words:
        if word == "--cflags":
            value = next(words, None)
            attached.append(word if value is None else f"--cflags={value}")
        else:
            attached.append(word)
    return attached


def run(args: argparse.Namespace) -> int:
    options = _options().parse_intermixed_args(_attach_flag_values(args.arguments))
    if options.inputs[0] == "eval":
        return _evaluate(options)
    return _build(options)


def _build(args: argparse.Namespace) -> int:
    missing = [
        text
        for text, absent in (
            ("--binary BINARY (the program compiled from SOURCE with -g)", args.binary is None),
            ("-o MODEL.py (the model to write)", args.output is None),
        )
        if absent
    ]
    if len(args.inputs) != 1 or missing:
        what = f"one SOURCE, not {len(args.inputs)}" if len(args.inputs) != 1 else ""
        raise InputError(
            "usage: perfcast static SOURCE --binary BINARY -o MODEL.py: missing "
            + "; ".join(filter(None, [what, *missing]))
        )
    from perfcast.static import DEFAULT_ARCHITECTURE, analyze
    from perfcast.static.codegen import check_model_targets, summary, write_model
    from perfcast.static.source import finds_mpi_header, mpi_wrapper_flags, source_language

    check_model_targets(args.output)
    flags = shlex.split(args.cflags)
    if not finds_mpi_header(flags):
        # MPI programs include mpi.h from wherever the wrapper keeps it; its own flags
        # are the ones the program was compiled with, so no one has to spell them out.
        shown, wrapper_flags = mpi_wrapper_flags(source_language(args.inputs[0]))
        if wrapper_flags:
            print(f"note: parsing with the MPI flags of `{shown}`: {' '.join(wrapper_flags)}")
            flags = [*wrapper_flags, *flags]
    model = analyze(
        args.inputs[0],
        args.binary,
        args.arch or DEFAULT_ARCHITECTURE,
        tuple(flags),
        only=args.function,
    )
    python_path, json_path = write_model(model, args.output)
    for warning in model.warnings:
        print(f"warning: {warning}")
    for name, reason in model.skipped.items():
        print(f"skipped: {name}: {reason}")
    print(f"wrote {python_path} and {json_path}")
    for entry in summary(model)["functions"]:
        parameters = ", ".join(entry["parameters"]) or "-"
        print(f"  {entry['name']}({parameters}): instructions = {entry['instructions']}")
        print(f"  {' ' * len(entry['name'])}  fp_instructions = {entry['fp_instructions']}")
    if model.skipped:
        print(f"{len(model.skipped)} function(s) skipped (listed above and in {json_path})")
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    if len(args.inputs) < 2 or not args.function:
        raise InputError("usage: perfcast static eval MODEL.py --function NAME [NAME=VALUE...]")
    path = Path(args.inputs[1])
    if not path.is_file():
        raise InputError("model file not found", path=path)
    values = dict(_assignment(text) for text in args.inputs[2:])
    module = _load(path)
    if args.function not in module.FUNCTIONS:
        raise InputError(
            f"no model function {args.function!r}; it has {sorted(module.FUNCTIONS)}", path=path
        )
    needed = module.PARAMETERS[args.function]
    missing = [p for p in needed if p not in values]
    if missing:
        raise InputError(
            f"{args.function} needs values for {missing} (give them as NAME=VALUE)", path=path
        )
    unknown = sorted(set(values) - set(needed))
    if unknown:
        raise InputError(f"{args.function} has no parameters {unknown}; it takes {needed}")
    result = module.evaluate(args.function, **values)
    counts = result["counts"]
    fp = result["fp_instructions"]
    memory = sum(v for k, v in counts.items() if "data_movement" in k or k == "data_transfer")
    result["fp_per_data_movement"] = fp / memory if memory else None
    if args.json:
        print(json.dumps(result, indent=2, default=str))
        return 0
    print(f"{args.function}({', '.join(f'{k}={v}' for k, v in result['parameters'].items())})")
    for category, value in counts.items():
        print(f"  {category:<28} {value:>16,}")
    print(f"  {'floating-point instructions':<28} {fp:>16,}")
    print(f"  {'instructions':<28} {result['instructions']:>16,}")
    if result["fp_per_data_movement"] is not None:
        print(f"  {'fp / data movement':<28} {result['fp_per_data_movement']:>16.3f}")
    return 0


def _assignment(text: str) -> tuple[str, int | Fraction]:
    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        raise InputError(f"parameter values are NAME=VALUE, got {text!r}")
    try:
        number = Fraction(value)
    except ValueError as exc:
        raise InputError(f"parameter {name}: {value!r} is not a number") from exc
    return name, int(number) if number.denominator == 1 else number


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"perfcast_static_model_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise InputError("cannot load the model", path=path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # a hand-edited or foreign file
        raise InputError(f"is not a perfcast static model ({exc})", path=path) from exc
    if not hasattr(module, "FUNCTIONS") or not hasattr(module, "evaluate"):
        raise InputError("is not a perfcast static model (no FUNCTIONS/evaluate)", path=path)
    return module
