"""perfcast taint against parameter sets read from the code, function by function.

Issue 18 measured perfcast's taint profile against another tool's results; this benchmark
measures it against the code itself. For each program, ``benchmarks/taint_expected/*.json``
holds the parameters each function's cost depends on, written by reading the source (every
function's ``comment`` names the loop bounds and library calls read, and the file's
``rule`` says what counts). ``perfcast taint`` then runs the program twice, with control-flow
taint and with data flow only (``--no-control-flow``), and each function's inclusive
per-call parameter set is compared with the expected one.

For every difference the output gives the reason: the class of issue 18 recorded in the
expected file for that function and parameter (1 whole-object taint, 2 registration adds,
3 call sites merged, 4 static functions merged, 5 database choice, 6 position-only
branch, or another reason), and, read from the profile itself, where the parameter enters
(a loop or branch line of the function, a library routine, a callee). A difference with
no recorded reason is printed as ``UNEXPLAINED``.

Programs: the bundled stencil (``src/perfcast/examples/stencil``), NAS IS class S and
LULESH 2.0 from ``../shared/apps`` (copied to a temporary directory and built there; their
code never enters this repository).

    python3 benchmarks/taint_accuracy.py [--output benchmarks/results/taint_accuracy.txt] \\
        [--program stencil|nas_is|lulesh ...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from perfcast.experiment.calltree import split_callpath
from perfcast.experiment.names import function_name
from perfcast.taint import ArgvParameter, TaintOptions, taint_program
from perfcast.taint.profile_model import Loop, TaintProfile, parameters_of

REPO = Path(__file__).resolve().parent.parent
EXPECTED = REPO / "benchmarks" / "taint_expected"
APPS = Path(os.environ.get("PERFCAST_APPS", REPO.parent / "shared" / "apps"))
MPIRUN = "mpirun --allow-run-as-root --oversubscribe"
MODES = {"control_flow": True, "data_flow": False}
MODE_TITLES = {"control_flow": "control flow + data flow", "data_flow": "data flow only"}


@dataclass(frozen=True)
class Build:
    """How one taint run builds and runs the program in its directory."""

    compile_command: list[str]
    run_command: str
    parameters: list[str]
    cwd: Path


@dataclass(frozen=True)
class Program:
    name: str
    """The expected file's stem."""
    prepare: Callable[[Path], Build]
    """Copies the sources into the directory given and says how to taint them."""


def stencil(directory: Path) -> Build:
    source = REPO / "src" / "perfcast" / "examples" / "stencil"
    work = directory / "stencil"
    shutil.copytree(source, work)
    return Build(
        ["mpicc", "-O2", "jacobi.c", "grid.c", "halo.c", "-o", "jacobi", "-lm"],
        f"{MPIRUN} -np 2 ./jacobi 16 3",
        ["size=argv:1", "iterations=argv:2"],
        work,
    )


def nas_is(directory: Path) -> Build:
    """NAS IS class S: its Makefile generates ``npbparams.h`` (the class's sizes), then
    ``perfcast taint`` compiles the benchmark's own sources with that header."""
    tree = directory / "NPB3.4-MPI"
    shutil.copytree(APPS / "npb" / "NPB3.4-MPI", tree)
    shutil.copy(tree / "config" / "make.def.template", tree / "config" / "make.def")
    (tree / "bin").mkdir(exist_ok=True)
    subprocess.run(["make", "is", "CLASS=S"], cwd=tree, check=True, capture_output=True, text=True)
    sources = ["is.c", "../common/c_print_results.c", "../common/c_timers.c"]
    return Build(
        ["mpicc", "-O2", "-I../common", *sources, "-o", "is.S.x", "-lm"],
        f"{MPIRUN} -np 2 ./is.S.x",
        [],
        tree / "IS",
    )


def lulesh(directory: Path) -> Build:
    """LULESH at 8 ranks (a cube, so every rank has neighbours to exchange with)."""
    work = directory / "lulesh"
    shutil.copytree(APPS / "lulesh", work)
    files = ["lulesh.cc", "lulesh-comm.cc", "lulesh-init.cc", "lulesh-util.cc", "lulesh-viz.cc"]
    return Build(
        ["mpicxx", "-DUSE_MPI=1", "-O2", *files, "-o", "lulesh2.0"],
        f"{MPIRUN} -np 8 ./lulesh2.0 -s 4 -i 2 -r 11 -b 1 -c 1",
        [
            "size=flag:-s",
            "iterations=flag:-i",
            "regions=flag:-r",
            "balance=flag:-b",
            "cost=flag:-c",
        ],
        work,
    )


PROGRAMS = {
    p.name: p
    for p in (Program("stencil", stencil), Program("nas_is", nas_is), Program("lulesh", lulesh))
}


@dataclass(frozen=True)
class Verdict:
    """One function in one mode: what the code says, what perfcast found."""

    function: str
    expected: frozenset[str]
    found: frozenset[str] | None
    """None: the profile does not have the function at all."""
    how: str
    """``dependency`` as the profile writes it, or why there is none (pruned, ...)."""

    @property
    def exact(self) -> bool:
        return self.found == self.expected


def found_sets(profile: TaintProfile) -> dict[str, tuple[frozenset[str], str]]:
    """Function name (no signature) -> its inclusive per-call parameters and dependency;
    functions the static pre-pass pruned or the run found constant are empty sets."""
    sets: dict[str, tuple[frozenset[str], str]] = {}
    for name in profile.pruned:
        sets[function_name(name)] = (frozenset(), "pruned (constant)")
    for name in profile.constant:
        sets[function_name(name)] = (frozenset(), "constant")
    for name, entry in profile.functions.items():
        if entry.is_library:
            continue
        short = function_name(name)
        params = frozenset(parameters_of(entry.terms))
        if short in sets and sets[short][0] != params:  # overloads or same-named statics
            params |= sets[short][0]
        sets[short] = (params, entry.dependency)
    return sets


def verdicts(profile: TaintProfile, expected: dict[str, dict]) -> list[Verdict]:
    found = found_sets(profile)
    out = []
    for function, entry in expected.items():
        params, how = found.get(function, (None, "not in the profile"))
        out.append(Verdict(function, frozenset(entry["params"]), params, how))
    return out


def walk(loops: tuple[Loop, ...]) -> Iterator[Loop]:
    for loop in loops:
        yield from loop.walk()


def evidence(profile: TaintProfile, function: str, parameter: str) -> str:
    """Where ``parameter`` enters ``function`` in the profile: its own loops and branches
    (lines), library routines, callees whose dependency carries it."""
    names = [n for n in profile.functions if function_name(n) == function]
    places: list[str] = []
    for name in names:
        entry = profile.functions[name]
        lines = sorted({loop.line for loop in walk(entry.loops) if parameter in loop.params})
        places += [f"loop at line {line}" for line in lines[:3]]
        if len(lines) > 3:
            places.append(f"{len(lines) - 3} more loops")
        branches = sorted({b.line for b in entry.branches if parameter in b.params})
        if branches:
            places.append(f"branches at lines {', '.join(map(str, branches[:3]))}")
        places += [f"{r}" for r, use in entry.mpi.items() if parameter in use.params]
        callees = set()
        for other, callee in profile.functions.items():
            for path in callee.callpaths:
                frames = split_callpath(path)
                if (
                    len(frames) > 1
                    and frames[-2] == name
                    and other != name
                    and parameter in parameters_of(callee.terms)
                ):
                    callees.add(function_name(other))
        places += [f"callee {c}" for c in sorted(callees)[:4]]
    return "; ".join(places) or "nothing in the profile carries it"


def report(
    name: str,
    mode: str,
    profile: TaintProfile,
    expected: dict,
    seconds: float,
) -> tuple[list[str], int, int, int]:
    """The table of one program in one mode, and (exact, total, unexplained)."""
    results = verdicts(profile, expected["functions"])
    reasons = expected.get("differences", {}).get(mode, {})
    width = max(len(v.function) for v in results)
    rows = [
        f"== {expected['program']}: {MODE_TITLES[mode]} (taint run {seconds:.0f} s)",
        f"  {'function':<{width}}  {'expected':<32} {'perfcast':<32} exact",
    ]
    unexplained = 0
    for verdict in results:
        shown = "-" if verdict.found is None else ",".join(sorted(verdict.found)) or "{}"
        rows.append(
            f"  {verdict.function:<{width}}  {','.join(sorted(verdict.expected)) or '{}':<32} "
            f"{shown:<32} {'yes' if verdict.exact else 'NO'}"
        )
        if verdict.exact:
            continue
        found = verdict.found or frozenset()
        known = reasons.get(verdict.function, {})
        changes = [(f"+{p}", p) for p in sorted(found - verdict.expected)]
        changes += [(f"-{p}", p) for p in sorted(verdict.expected - found)]
        if verdict.found is None:
            changes = [("absent", "")]
        grouped: dict[tuple[str, str], list[str]] = {}  # one line per reason and evidence
        for label, parameter in changes:
            reason = known.get(parameter) or known.get("*")
            if reason is None:
                unexplained += 1
                reason = "UNEXPLAINED"
            where = evidence(profile, verdict.function, parameter) if parameter else verdict.how
            grouped.setdefault((reason, where), []).append(label)
        for (reason, where), labels in grouped.items():
            rows.append(f"      {' '.join(labels)}: {reason}")
            rows.append(f"          (in the profile: {where})")
    exact = sum(v.exact for v in results)
    rows.append(f"  {name} ({MODE_TITLES[mode]}): {exact}/{len(results)} functions exact")
    return rows, exact, len(results), unexplained


def taint(build: Build, control_flow: bool) -> tuple[TaintProfile, float]:
    start = time.perf_counter()
    profile = taint_program(
        build.compile_command,
        build.run_command,
        [ArgvParameter.parse(text) for text in build.parameters],
        cwd=build.cwd,
        options=TaintOptions(control_flow=control_flow),
    )
    return profile, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, help="also write the report here")
    parser.add_argument("--program", action="append", choices=sorted(PROGRAMS), help="default: all")
    args = parser.parse_args()
    for tool in ("mpicc", "mpicxx", "mpirun", "make"):
        if shutil.which(tool) is None:
            print(f"taint_accuracy: {tool} not found (install Open MPI and make)")
            return 2
    lines = [
        "python3 benchmarks/taint_accuracy.py" + "".join(f" {flag}" for flag in sys.argv[1:]),
        "",
    ]
    summary = []
    failed = 0
    for name in args.program or list(PROGRAMS):
        expected = json.loads((EXPECTED / f"{name}.json").read_text())
        for mode, control_flow in MODES.items():
            with tempfile.TemporaryDirectory(prefix="taint-accuracy-") as scratch:
                build = PROGRAMS[name].prepare(Path(scratch))
                profile, seconds = taint(build, control_flow)
            rows, exact, total, unexplained = report(name, mode, profile, expected, seconds)
            print("\n".join(rows) + "\n", flush=True)
            lines += [*rows, ""]
            summary.append(
                f"{name:<8} {MODE_TITLES[mode]:<25} {exact:>3}/{total:<3} exact"
                + (f", {unexplained} differences unexplained" if unexplained else "")
            )
            failed += unexplained
    lines += ["summary (exact / functions with expected sets):", *summary]
    print("summary (exact / functions with expected sets):\n" + "\n".join(summary))
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text("\n".join(lines) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
