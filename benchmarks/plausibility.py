"""Is the first answer one an HPC engineer can believe? perfcast's default models of the
four applications in ``../shared/apps`` against each kernel's complexity read from its code.

Each application is measured as README.md tells a user: one ``perfcast measure
perfcast.toml`` (three repetitions, ``PERFCAST_CPU_TIME=1`` since ranks share this machine's
cores), which times the light build and then runs its counting pass (the same build with
counters, in a copy of the app directory, once per point) into ``app.counts.sqlite`` beside
the store; the time of both is stated. Then three models of every call path's
``cpu_time``, each from its own command line:

* **default**: ``perfcast model app.sqlite --metric cpu_time``, no other flag (it reads the
  counts beside the store: priors are the default);
* **black-box**: the same with ``--priors none`` (perfcast's search alone);
* **Extra-P** 4.2.5 on the same timing data (``perfcast export``), its default modeler.

For the application's top compute call paths (non-MPI, the most ``cpu_time`` at the largest
measured point, at least :data:`MIN_SHARE` of it each) the table gives the complexity known
from the code (``plausibility/expected.toml``: the loop bounds, with file and line) and
whether each model's **lead term** matches it: among the model's non-constant terms, the one
with the largest value at the largest measured point must have exactly the expected
exponent and logarithm of every parameter in the expectation, and no other parameter (a
model without a non-constant term misses). Measured with a fixed ``iterations`` or class,
each kernel's expected term is its cost per rank and run.

Campaigns are kept in ``benchmarks/.plausibility-cache/APP/`` and reused (``--remeasure``
runs them again), so the modeling can be rerun in seconds after a change::

    python3 benchmarks/plausibility.py --output benchmarks/results/plausibility.txt
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import _extrap  # the sibling helper; benchmarks/ is not a package
import numpy as np

from perfcast.experiment import read_experiment
from perfcast.experiment.calltree import split_callpath
from perfcast.experiment.names import function_name
from perfcast.measure.counting import cost_note
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.pmnf import Factor, Model

HERE = Path(__file__).resolve().parent
APPS = HERE.parent.parent / "shared" / "apps"
CACHE = HERE / ".plausibility-cache"
EXPECTED = HERE / "plausibility" / "expected.toml"
METRIC = "cpu_time"
MIN_SHARE = 0.005
"""Least share of the application's compute cpu_time at the largest point for a call path
to be judged (the issue's 0.5 %)."""
TOP = 8
"""Most call paths judged per application."""


@dataclass(frozen=True)
class App:
    """One application's campaigns: where its sources are, how it builds and runs."""

    name: str
    source: str  # under ../shared/apps
    build: str  # the [build] table
    command: str
    parameters: str  # the [parameters] table
    prepare: tuple[str, ...] = ()  # shell commands run once in the copy before building
    files: tuple[tuple[str, str], ...] = ()  # (name, text) written into the copy


COMD_WRAPPER = """#!/bin/sh
# $1 is the perfcast build command; CoMD writes $(CC) into a C string literal
# (CoMD_info.h), which a compiler command with spaces and quotes breaks: wrap it
printf '#!/bin/sh\\nexec %s mpicc "$@"\\n' "$1" > pcc
chmod +x pcc
make -s -C src-mpi CC="$PWD/pcc" OPTFLAGS="-O2 -fno-inline"
"""


APPLICATIONS = {
    "lulesh": App(
        "lulesh",
        "lulesh",
        'sources = ["lulesh.cc", "lulesh-comm.cc", "lulesh-viz.cc", "lulesh-util.cc", '
        '"lulesh-init.cc"]\ncompiler = "mpicxx"\n'
        'flags = ["-O2", "-DUSE_MPI=1", "-fno-inline"]\noutput = "lulesh2.0"',
        "./lulesh2.0 -s {size} -i 5 -q",
        "p = [1, 8, 27]\nsize = [4, 5, 6, 7, 8]",
    ),
    "minife": App(
        "minife",
        "minife/ref",
        "command = \"make -s -C src CXX='{perfcast_build} mpicxx' CC='{perfcast_build} mpicc' "
        'CFLAGS=-O2"',
        "src/miniFE.x -nx {nx}",
        "p = [1, 2, 4]\nnx = [16, 20, 24, 28, 32]",
    ),
    "comd": App(
        "comd",
        "comd",
        # CoMD writes $(CC) into a C string (CoMD_info.h): a compiler with spaces and quotes
        # breaks it, so perfcast build goes into a one-word wrapper script
        "command = \"sh perfcast-cc.sh '{perfcast_build}'\"",
        "bin/CoMD-mpi -i {p} -j 1 -k 1 -x {n} -y {n} -z {n} -N 5",
        "p = [1, 2, 4]\nn = [16, 24, 32, 40, 48]",
        prepare=("cp src-mpi/Makefile.vanilla src-mpi/Makefile",),
        files=(("perfcast-cc.sh", COMD_WRAPPER),),
    ),
    "is": App(
        "is",
        "npb/NPB3.4-MPI",
        "command = \"make -s is CLASS=W MPICC='{perfcast_build} mpicc' CFLAGS='-O2 -fno-inline'\"",
        "bin/is.W.x",
        "p = [1, 2, 4, 8, 16]",
        prepare=("cp config/make.def.template config/make.def", "mkdir -p bin"),
    ),
}


def spec(app: App) -> str:
    """The application's perfcast.toml."""
    return (
        f'[app]\nname = "{app.name}"\nstore = "{app.name}.sqlite"\n\n'
        f"[build]\n{app.build}\n\n"
        f'[run]\ncommand = "{app.command}"\nrepetitions = 3\n'
        f"timeout = 300\n\n[parameters]\n{app.parameters}\n"
    )


def measure(app: App, remeasure: bool) -> tuple[Path, float, str]:
    """The campaign of ``app`` in the cache (reused unless ``remeasure``): the timing
    store, the seconds measuring took (0 when reused) and what the counting pass cost."""
    directory = CACHE / app.name
    store = directory / f"{app.name}.sqlite"
    counts = directory / f"{app.name}.counts.sqlite"
    if not remeasure and store.is_file() and counts.is_file():
        return store, 0.0, cost_note(store, counts) or ""
    shutil.rmtree(directory, ignore_errors=True)
    shutil.copytree(APPS / app.source, directory)
    for command in app.prepare:
        subprocess.run(command, shell=True, cwd=directory, check=True)
    for name, text in app.files:
        (directory / name).write_text(text)
    (directory / "perfcast.toml").write_text(spec(app))
    environment = {**os.environ, "PERFCAST_CPU_TIME": "1"}
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "perfcast", "measure", "perfcast.toml"],
        cwd=directory,
        env=environment,
        check=True,
    )
    return store, time.perf_counter() - start, cost_note(store, counts) or ""


def fit(store: Path, *flags: str) -> ModelSet:
    """``perfcast model STORE --metric cpu_time FLAGS`` as a user runs it."""
    output = store.with_name(
        f"{store.stem}.{'-'.join(f.strip('-') for f in flags) or 'default'}.json"
    )
    command = [sys.executable, "-m", "perfcast", "model", str(store), "--metric", METRIC]
    subprocess.run([*command, *flags, "-o", str(output)], check=True, capture_output=True)
    return ModelSet.load(output)


def extrap(store: Path) -> dict[str, Model]:
    """Extra-P's default models of the store's cpu_time, by call path."""
    text = store.with_suffix(".txt")
    experiment = read_experiment(store).restricted(metrics=[METRIC])
    from perfcast.experiment.io import write_experiment

    write_experiment(experiment.with_absent_as_zero()[0], text)
    result = _extrap.run_extrap(text, text.with_suffix(".extrap.json"))
    return {entry["callpath"]: Model.from_json(entry) for entry in result["models"]}


def top_callpaths(store: Path) -> tuple[list[str], dict[str, float]]:
    """The compute call paths with the most cpu_time at the largest measured point."""
    experiment = read_experiment(store).restricted(metrics=[METRIC])
    table = experiment.aggregate("median")
    parameters = experiment.parameters
    largest = table[parameters].max()
    at = table[(table[parameters] == largest).all(axis=1)]
    compute = at[[not split_callpath(c)[-1].startswith("MPI_") for c in at["callpath"]]]
    total = float(compute["value"].sum())
    ranked = compute.sort_values("value", ascending=False)
    kept = [
        (str(c), float(v) / total) for c, v in zip(ranked["callpath"], ranked["value"], strict=True)
    ]
    chosen = [c for c, share in kept if share >= MIN_SHARE][:TOP]
    return chosen, dict(kept)


def lead_shape(model: Model | None, largest: dict[str, float]) -> tuple[Factor, ...] | None:
    """The non-constant term with the largest value at ``largest``, as its factors."""
    if model is None or not model.terms:
        return None
    values = [
        abs(t.coefficient * float(t.basis({p: np.array(v) for p, v in largest.items()})))
        for t in model.terms
    ]
    return model.terms[int(np.argmax(values))].factors


def matches(shape: tuple[Factor, ...] | None, expected: dict[str, tuple[Fraction, int]]) -> bool:
    if shape is None:
        return False
    got = {f.parameter: (f.exponent, f.log_exponent) for f in shape}
    return got == expected


def parse_expected(text: str) -> dict[str, tuple[Fraction, int]]:
    """``"size^3"``, ``"nx^3 * p^-1"``: parameter -> (exponent, log exponent)."""
    out = {}
    for part in text.split("*"):
        name, _, power = part.strip().partition("^")
        out[name] = (Fraction(power or "1"), 0)
    return out


def expectation(app: str, callpath: str, table: dict) -> dict | None:
    """The entry of ``expected.toml`` whose function is the call path's innermost frame, by
    the name perfcast prints for it (C++ templates folded, return type and arguments
    dropped: ``miniFE::cg_solve<...>``); ``"caller->callee"`` keys first, for a function
    whose cost depends on who calls it."""
    names = [function_name(frame) for frame in split_callpath(callpath)]
    entries = table.get(app, {})
    return entries.get("->".join(names[-2:])) or entries.get(names[-1])


def report(apps: list[str], remeasure: bool) -> list[str]:
    table = tomllib.loads(EXPECTED.read_text())
    lines: list[str] = []
    totals = {"default": [0, 0], "black-box": [0, 0], "Extra-P": [0, 0]}
    for name in apps:
        app = APPLICATIONS[name]
        store, seconds, cost = measure(app, remeasure)
        start = time.perf_counter()
        default = fit(store)
        blackbox = fit(store, "--priors", "none")
        peer = extrap(store)
        modeling = time.perf_counter() - start
        experiment = read_experiment(store)
        largest = {p: float(high) for p, (_, high) in experiment.ranges().items()}
        chosen, shares = top_callpaths(store)
        lines += [
            "",
            f"## {name} ({app.command}; {app.parameters.replace(chr(10), ', ')}; "
            f"{f'measured in {seconds:.0f} s' if seconds else 'campaigns from the cache'}, "
            f"modeled in {modeling:.0f} s)",
            *([cost] if cost else []),
            f"{'call path':<44} {'share':>6}  {'known (code)':<14} {'default: lead term':<28} "
            f"{'black-box: lead term':<28} {'Extra-P: lead term':<28} match D/B/E",
        ]
        for callpath in chosen:
            entry = expectation(name, callpath, table)
            if entry is None:
                # judged call paths are the costliest ones, not the ones with an entry:
                # a missing entry must be written, not skipped
                raise SystemExit(
                    f"{EXPECTED}: no entry for {name}'s call path {callpath} "
                    f"({100 * shares[callpath]:.1f} % of the compute time): add its "
                    "complexity, read from the code"
                )
            expected = parse_expected(entry["complexity"])
            leads, verdicts, details = [], [], []
            for label, model in (
                ("default", default.get((callpath, METRIC))),
                ("black-box", blackbox.get((callpath, METRIC))),
                ("Extra-P", peer.get(callpath)),
            ):
                shape = lead_shape(model, largest)
                ok = matches(shape, expected)
                totals[label][0] += ok
                totals[label][1] += 1
                verdicts.append("yes" if ok else "no")
                leads.append(" * ".join(f.text() for f in shape) if shape else "constant")
                details.append(f"{label}: {model.text(3) if model is not None else '-'}")
            short = function_name(split_callpath(callpath)[-1])[:44]
            lines.append(
                f"{short:<44} {100 * shares[callpath]:5.1f}%  {entry['complexity']:<14} "
                + " ".join(f"{lead[:28]:<28}" for lead in leads)
                + " "
                + "/".join(verdicts)
            )
            lines.append(f"{'':<4}code: {entry['where']}")
            lines += [f"{'':<4}{detail}" for detail in details]
    lines += ["", "lead term matches the code's complexity:"]
    for label, (hits, count) in totals.items():
        rate = 100 * hits / count if count else float("nan")
        lines.append(f"  {label:<10} {hits} of {count} ({rate:.0f} %)")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--apps", nargs="+", choices=sorted(APPLICATIONS), default=list(APPLICATIONS)
    )
    parser.add_argument("--remeasure", action="store_true", help="run the campaigns again")
    parser.add_argument("--output", type=Path, help="also write the report to this file")
    args = parser.parse_args(argv)
    command = (
        "python3 benchmarks/plausibility.py"
        + (" --remeasure" if args.remeasure else "")
        + (f" --output {args.output}" if args.output else "")
    )
    lines = [f"$ {command}", "", __doc__.split("\n\n")[0].replace("\n", " ")]
    lines += report(args.apps, args.remeasure)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output:
        args.output.write_text(text)


if __name__ == "__main__":
    main()
