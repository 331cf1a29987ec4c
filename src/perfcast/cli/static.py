"""``perfcast static``: instruction-count models from source and binary, without running.

Build a model (a Python module plus a JSON summary next to it; ``build`` is the default
sub-command and may be left out)::

    perfcast static [build] app.c --binary app -o model.py [--arch my.yaml]
                    [--cflags "-DN=3"] [--function NAME]

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

from perfcast.columns import aligned
from perfcast.errors import InputError

SUB_COMMANDS = {
    "build": "model SOURCE and its binary (the default: `perfcast static SOURCE ...`)",
    "eval": "evaluate one function of a model at parameter values",
}


def _parsers() -> dict[str, argparse.ArgumentParser]:
    """One argparse parser per sub-command of :data:`SUB_COMMANDS`.

    Not ``add_subparsers``: a sub-parser is parsed with ``parse_known_args``, which leaves
    NAME=VALUE pairs after ``--function NAME`` unrecognised, argparse refuses intermixed
    parsing for a parser that has sub-parsers, and ``build`` must stay the default so
    ``perfcast static SOURCE ...`` keeps working; :func:`_parse` picks the parser by the
    first word and parses the rest with ``parse_intermixed_args``.
    """
    build = argparse.ArgumentParser(prog="perfcast static build", description=SUB_COMMANDS["build"])
    build.add_argument("source", metavar="SOURCE", help="the C/C++ source file")
    build.add_argument("--binary", type=Path, help="the program compiled from SOURCE with -g")
    build.add_argument("-o", "--output", type=Path, help="Python model to write (and .json)")
    build.add_argument("--arch", type=Path, help="architecture description (YAML)")
    build.add_argument("--cflags", default="", help="compiler flags for parsing (quoted)")
    build.add_argument("--function", help="model only this source function (and its callees)")
    evaluate = argparse.ArgumentParser(
        prog="perfcast static eval", description=SUB_COMMANDS["eval"]
    )
    evaluate.add_argument("model", type=Path, metavar="MODEL.py", help="the model to evaluate")
    evaluate.add_argument(
        "values", nargs="*", metavar="NAME=VALUE", help="the function's parameter values"
    )
    evaluate.add_argument("--function", required=True, help="the model function to evaluate")
    evaluate.add_argument("--json", action="store_true", help="print JSON")
    return {"build": build, "eval": evaluate}


def register(subparsers: Any) -> None:
    # Options and NAME=VALUE pairs may interleave, and SOURCE may come without `build`:
    # the words are collected here and parsed in run() (see _parsers).
    listed = "\n".join(f"  {name:<6} {text}" for name, text in SUB_COMMANDS.items())
    parser = subparsers.add_parser(
        "static",
        description=__doc__,
        epilog=f"sub-commands (`perfcast static SUB-COMMAND --help` shows its options):\n{listed}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "arguments",
        nargs=argparse.REMAINDER,
        metavar="[build] SOURCE ... | eval MODEL.py ...",
        help="a sub-command and its arguments",
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


def _parse(arguments: list[str]) -> argparse.Namespace:
    """The words after ``perfcast static``, parsed (``action`` names the sub-command)."""
    words = _attach_flag_values(arguments)
    action, *rest = words if words and words[0] in SUB_COMMANDS else ["build", *words]
    options = _parsers()[action].parse_intermixed_args(rest)
    options.action = action
    return options


def run(args: argparse.Namespace) -> int:
    options = _parse(args.arguments)
    if options.action == "eval":
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
    if missing:
        raise InputError(
            "usage: perfcast static SOURCE --binary BINARY -o MODEL.py: missing "
            + "; ".join(missing)
        )
    from perfcast.csource.languages import language_of
    from perfcast.static import DEFAULT_ARCHITECTURE, analyze
    from perfcast.static.codegen import check_model_targets, summary, write_model
    from perfcast.static.source import finds_mpi_header, mpi_wrapper_flags

    check_model_targets(args.output)
    flags = shlex.split(args.cflags)
    if not finds_mpi_header(flags):
        # MPI programs include mpi.h from wherever the wrapper keeps it; its own flags
        # are the ones the program was compiled with, so no one has to spell them out.
        shown, wrapper_flags = mpi_wrapper_flags(language_of(args.source))
        if wrapper_flags:
            print(f"note: parsing with the MPI flags of `{shown}`: {' '.join(wrapper_flags)}")
            flags = [*wrapper_flags, *flags]
    model = analyze(
        args.source,
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
    path = args.model
    if not path.is_file():
        raise InputError("model file not found", path=path)
    values = dict(_assignment(text) for text in args.values)
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
    rows = [(category, f"{value:,}") for category, value in counts.items()]
    rows += [("floating-point instructions", f"{fp:,}")]
    rows += [("instructions", f"{result['instructions']:,}")]
    if result["fp_per_data_movement"] is not None:
        rows += [("fp / data movement", f"{result['fp_per_data_movement']:.3f}")]
    print("\n".join(aligned(rows, right={1}, indent="  ")))
    return 0


MAX_VALUE = 2**63
"""Largest magnitude (and denominator) of a parameter value: the model counts a program's
instructions, whose loop bounds are 64-bit integers; ``n=1e5000`` would only make numbers
with thousands of digits."""


def _assignment(text: str) -> tuple[str, int | Fraction]:
    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        raise InputError(f"parameter values are NAME=VALUE, got {text!r}")
    try:
        number = Fraction(value)
    except (ValueError, ZeroDivisionError):
        raise InputError(f"parameter {name}: {value[:40]!r} is not a number") from None
    if abs(number) > MAX_VALUE or number.denominator > MAX_VALUE:
        raise InputError(
            f"parameter {name}: {value[:40]!r} is beyond what a program's 64-bit loop bounds "
            f"hold (at most 2^63 in size, and no finer than 1/2^63)"
        )
    return name, int(number) if number.denominator == 1 else number


def _load(path: Path):
    """The generated model module, imported.

    The one place perfcast runs code from a file, deliberately: the model is a standalone
    Python program (usable without perfcast) that the user generated and asks to run, as
    ``python model.py`` would. Formula texts read as data (derived parameters, call
    arguments, the JSON summary) go through :mod:`perfcast.static.arithmetic` instead.
    """
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
