"""Issue 25, item 8: should the threshold rule read the source text (libclang, as it does) or
the compiler's IR (a pass plugin loaded into clang, as perf-taint's loop analysis is)?

The question is decided by where each application's time is and why the rule leaves those
loops alone. For each application of ``../shared/apps`` (the builds and points of
``apps_matrix.py``, whose cache this script shares):

1. **time**: the program built by ``perfcast build --filter APP.taint.json --keep-inlined``
   (the taint profile's functions measured and kept out of line, so a kernel inlined at
   ``-O2`` still has its own time; what other functions take counts in their nearest measured
   caller), one run at the apps matrix's native point; each function's exclusive wall time,
   summed over its call paths, as a share of all measured time (MPI calls included, so the
   shares add up to 100).
2. **verdicts**: what ``perfcast build --trace --threshold APP.taint.json`` printed for every
   parameter-dependent loop of the taint profile (the apps matrix's threshold build), and
   the loops it printed nothing for (they are in files the build did not compile: headers,
   templates).
3. **classes**: each refusal's reason sorted by whether a pass on the IR would meet it too:

   ``text only``
       what only the text hides: a loop written in a macro, under a pragma, in a header the
       build does not rewrite (no verdict), a header that calls an accessor (inlined away in
       the IR), a write through a C++ reference or a non-const method (the IR's stores say
       what memory it writes), a callee in another file of the program.
   ``any level``
       what the IR shows as well: a value or memory kind of the body deciding a branch, an
       MPI argument or an allocation; MPI calls, I/O, ``break``/``return`` out of the loop,
       calls through function pointers, functions whose address is taken, globals.

A function's time is split evenly between its parameter-dependent loops (a function's loops
are rarely timed apart; the split is stated, not measured). The table gives, per application,
the shares of time in loops the rule takes, in loops refused for text-only reasons (what an IR
pass could at most add), in loops refused for reasons any level meets, and in functions with
no parameter-dependent loop. The verdict is the README's (``perfcast/measure/README.md``,
"Which level"). Run after ``apps_matrix.py`` (its threshold stage)::

    python3 benchmarks/threshold_coverage.py --output benchmarks/results/threshold_coverage.txt
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from apps_matrix import (  # the sibling benchmark; benchmarks/ is not a package
    APPLICATIONS,
    MPIRUN,
    VERDICT,
    AppRun,
    StageError,
    _reason_label,
    machine_setup,
    shell,
)

from perfcast.csource.verdicts import Reason
from perfcast.measure.elf_symbols import qualified_name
from perfcast.measure.profiles import read_rank_profile

TEXT_ONLY = frozenset(
    {
        Reason.MACRO,
        Reason.PRAGMA,
        Reason.CONSTEXPR,
        Reason.NO_LOOP,
        Reason.SEVERAL_LOOPS,
        Reason.NOT_BUILT,
        Reason.HEADER_CALLS,
        Reason.WRITES_REFERENCE,
        Reason.STORED_BY_REFERENCE,
        Reason.UNSEEN_CALLEE,
        Reason.PASSED_TO_UNSEEN,
        Reason.CALLERS_NOT_PARSED,
        Reason.READERS_NOT_PARSED,
    }
)
"""Refusals a pass on the IR would not meet: each is about how the source is written or which
files the text rule can see, not about what the loop's results do."""

APPLIED = "applied"
UNSEEN = "no verdict (header)"
CLASSES = (APPLIED, "text only", "any level", UNSEEN)


@dataclass(frozen=True)
class Loop:
    function: str
    file: str
    line: int


def profile_loops(profile: dict) -> Iterator[Loop]:
    """The parameter-dependent loops of a taint profile, each with its function."""

    def walk(function: str, file: str, loops: list[dict]) -> Iterator[Loop]:
        for loop in loops:
            if loop.get("params"):
                yield Loop(function, file, int(loop["line"]))
            yield from walk(function, file, loop.get("loops", []))

    for name, entry in profile["functions"].items():
        yield from walk(name, str(entry.get("file", "")), entry.get("loops", []))


def verdicts(printed: str) -> dict[tuple[str, int], Reason | None]:
    """(file's base name, line) -> the reason the build refused the loop, or None where it
    applied the rule."""
    found: dict[tuple[str, int], Reason | None] = {}
    by_value = {reason.value: reason for reason in Reason}
    for text in printed.splitlines():
        match = VERDICT.search(text)
        if match is None:
            continue
        file = Path(match.group("file")).name  # profiles name files by their base name
        reason = match.group("reason")
        found[(file, int(match.group("line")))] = (
            None if reason is None else by_value.get(_reason_label(reason), Reason.NO_LOOP)
        )
    return found


def loop_class(reason: Reason | None, seen: bool) -> str:
    if not seen:
        return UNSEEN
    if reason is None or reason is Reason.COVERED:
        return APPLIED
    return "text only" if reason in TEXT_ONLY else "any level"


def function_times(run: AppRun) -> dict[str, float]:
    """Exclusive wall seconds per function (summed over its call paths) of one run of the
    profile build at the native point, MPI calls included."""
    executable, _ = run.built("profile")
    directory = run.root / "profile-run"
    shutil.rmtree(directory, ignore_errors=True)
    ranks, arguments = run.app.native
    shell(
        "profiled run",
        f"{MPIRUN} -np {ranks} -x PERFCAST_PROFILE_DIR {executable} {arguments}",
        executable.parent,
        600,
        env={"PERFCAST_PROFILE_DIR": str(directory)},
        log=run.log("profile-run"),
    )
    profiles = sorted(directory.glob("*"))
    if not profiles:
        raise StageError("FAILS", f"the profiled run wrote nothing into {directory}")
    rank = read_rank_profile(profiles[0])
    times: dict[str, float] = defaultdict(float)
    for path, record in rank.callpaths.items():
        times[function_key(path.split("->")[-1])] += record.exclusive_ns * 1e-9
    return dict(times)


def function_key(name: str) -> str:
    """A function as both the profile and the program name it: a template instantiation
    (``void ns::f<double>(double)``) and its source spelling (``ns::f(T)``) are one."""
    return qualified_name(name) or name


def coverage(name: str, setup: tuple) -> tuple[list[str], list[str]]:
    """The application's row of the summary and its lines of detail."""
    platform, clock, _ = setup
    run = AppRun(APPLICATIONS[name], platform, clock)
    profile = json.loads(run.profile.read_text())
    _, printed = run.built("threshold")
    said = verdicts(printed)
    times = function_times(run)
    total = sum(times.values())
    loops = list(profile_loops(profile))
    by_function: dict[str, list[str]] = defaultdict(list)
    reasons: Counter[str] = Counter()
    for loop in loops:
        key = (Path(loop.file).name, loop.line)
        reason = said.get(key)
        kind = loop_class(reason, key in said)
        by_function[function_key(loop.function)].append(kind)
        if kind in ("text only", "any level") and reason is not None:
            reasons[f"{kind}: {reason.value}"] += 1
    share: dict[str, float] = defaultdict(float)
    for function, kinds in by_function.items():
        for kind in kinds:
            share[kind] += times.get(function, 0.0) / len(kinds)
    covered = sum(share.values())
    row = [name, f"{total:.3f}", *(f"{100 * share[c] / total:.1f}" for c in CLASSES)]
    row.append(f"{100 * (total - covered) / total:.1f}")
    counts = Counter(kind for kinds in by_function.values() for kind in kinds)
    details = [
        f"## {name}: {len(loops)} parameter-dependent loops: "
        + ", ".join(f"{counts[c]} {c}" for c in CLASSES),
        *(f"  {n:3d}x {label}" for label, n in reasons.most_common()),
        "  the functions with most time (exclusive s, share, their loops' classes):",
    ]
    for function, seconds in sorted(times.items(), key=lambda item: -item[1])[:8]:
        classes = Counter(by_function.get(function, []))
        described = ", ".join(f"{n} {k}" for k, n in classes.items()) or "no parameter loop"
        details.append(
            f"  {seconds:9.4f} {100 * seconds / total:5.1f}%  {function[:70]}  [{described}]"
        )
    return row, details


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--apps", nargs="+", choices=sorted(APPLICATIONS), default=None)
    parser.add_argument("--output", type=Path, help="also write the report to this file")
    args = parser.parse_args()
    names = args.apps or list(APPLICATIONS)
    setup = machine_setup()
    header = ("app", "total s", *(f"{c} %" for c in CLASSES), "no param loop %")
    rows: list[list[str]] = []
    details: list[str] = []
    for name in names:
        try:
            row, lines = coverage(name, setup)
        except StageError as failure:
            row, lines = [name, "-", *["-"] * (len(header) - 2)], [f"## {name}: {failure.text}"]
        rows.append(row)
        details += [*lines, ""]
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    table = [" | ".join(str(c).rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    command = "python3 benchmarks/threshold_coverage.py " + " ".join(sys.argv[1:])
    lines = [
        f"$ {command.strip()}",
        "",
        "share of each application's measured time (exclusive, the taint profile's functions "
        "measured and kept out of line, one run at the apps matrix's native point) in its "
        "parameter-dependent loops, by the threshold rule's verdict: applied; refused for "
        "what only the source text hides (text only: what an IR pass could at most add); "
        "refused for what any level meets; "
        "loops in files the build did not rewrite (no verdict); and time in functions "
        "without such loops. A function's time is split evenly between its loops.",
        "",
        " | ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)),
        *table,
        "",
        *details,
    ]
    text = "\n".join(lines).rstrip() + "\n"
    print(text, end="")
    if args.output is not None:
        args.output.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
