"""Issue 27's table, rerun: hostile inputs per surface, and how many ended in a traceback,
a hang, an input overwritten, or code run from a name.

Each surface draws its cases from the property-based suites under ``tests/`` (the same
strategies and the same per-case runner, so a case here is one those suites run):

* simulate: damaged traces synthesised (``test_fuzz_traces``) and hostile ``simulate``
  options, with ``--synthesize`` or replayed by SimGrid (``test_fuzz_options``);
* platform XML: damaged platform files (``test_fuzz_platforms``);
* report, model, predict: measurements at their edges (constant, zero, one point,
  negative, 1e-300 to 1.7e308, a spread of 1e280) through ``model -o``, ``report --at
  x=1e20`` and ``predict x=1e20`` (:func:`edges`);
* taint import: damaged perf-taint files (``test_fuzz_taint_import``);
* synth: hostile options (``test_fuzz_options``);
* static: damaged binaries and hostile C sources (``test_fuzz_static``);
* platform describe and calibrate: hostile options, ``-o`` paths and names
  (``test_fuzz_platform_options``; calibrate's measurement stubbed, and a case refused
  after it was reached counts as a failed property);
* names and outputs across commands: names and values that run ``touch MARK`` if expanded
  or evaluated, and files of the user's at every ``-o`` target, through model, report,
  predict, export, platform describe and calibrate, synth, simulate ``--synthesize``,
  taint import, init and static with ``static eval`` (``test_fuzz_names``).

A case is a traceback when an exception other than perfcast's own escaped, or NumPy
printed a RuntimeWarning (counted by its innermost perfcast frame: cases / sites); a hang
when it ran past the suite's per-case limit; overwritten when a file the command did not
name as its output changed (the options suites, and the names suite, which puts the
user's files at every target, check every file of their case). Code run is checked in
the names suite (a file MARK that must not appear) and, for the static row, by ``static``
on three sources named to close the generated model's docstring, then ``static eval``.

    PYTHONPATH=src python3 benchmarks/hostile_inputs.py [SCALE] [--seed N | --random]

SCALE (default 1) multiplies the case counts (1: 1,533 cases, under a minute on two
cores). The cases are drawn with a fixed seed (default 27, issue 27), so a rerun
draws the same cases and the committed table is reproducible; ``--random`` draws new ones.
Results: ``benchmarks/results/hostile_inputs.txt``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import fuzz_helpers
import test_fuzz_names
import test_fuzz_options
import test_fuzz_platform_options
import test_fuzz_platforms
import test_fuzz_taint_import
import test_fuzz_traces

import perfcast.cli as cli

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "hostile_inputs.txt"
CODE_SOURCE = """\
double tri(int n) { double s = 0;
  for (int i = 0; i < n; i++) s += i;
  return s; }
int main(int c, char **v) { return (int) tri(c); }
"""
VALUES = (0.0, 5.0, -3.0, 1e-300, 5e-324, 1e-140, 1e140, 1e149, 1e300, 1.7e308, 1.0)


@st.composite
def edges(draw: st.DrawFn) -> tuple[str, list[list[float]], int]:
    """A command and an Extra-P text file's rows of repetitions at x = 20..60 (fewer for
    one or two points), each value from :data:`VALUES` or a steady growth."""
    command = draw(st.sampled_from(["model", "report", "predict"]))
    points = draw(st.sampled_from([1, 2, 5, 5]))
    rows = []
    for point in range(points):
        repetitions = draw(st.integers(1, 3))
        if draw(st.booleans()):
            rows.append([float(20 + 10 * point)] * repetitions)
        else:
            rows.append([draw(st.sampled_from(VALUES)) for _ in range(repetitions)])
    return command, rows, points


def run_edges(case: tuple[str, list[list[float]], int], directory: Path) -> str:
    command, rows, points = case
    directory.mkdir(parents=True, exist_ok=True)
    text = directory / "edges.txt"
    xs = "".join(f"POINTS ( {20 + 10 * i} )\n" for i in range(points))
    data = "".join("DATA " + " ".join(repr(v) for v in row) + "\n" for row in rows)
    text.write_text(f"PARAMETER x\n\n{xs}\nREGION r\nMETRIC time\n{data}")
    models = directory / "models.json"
    models.unlink(missing_ok=True)
    argv = {
        "model": ["model", str(text), "-o", str(models)],
        "report": ["report", str(text), "--at", "x=1e20", "-o", str(directory / "r.html")],
        "predict": ["predict", str(models), "x=1e20"],
    }
    error = io.StringIO()
    with (
        fuzz_helpers.time_limit(60),
        fuzz_helpers.numpy_warnings_fail(),
        contextlib.redirect_stderr(error),
        contextlib.redirect_stdout(io.StringIO()),
    ):
        if command == "predict":
            cli.main(argv["model"])
        status = cli.main(argv[command])
    assert status in (0, 2), f"{argv[command]} exited {status}"
    return "done" if status == 0 else "refused"


def code_run(directory: Path) -> tuple[int, int]:
    """(inputs, how many ran code): ``static`` on sources whose names close the generated
    model's docstring, then ``static eval`` on the model."""
    clang = shutil.which("clang-16") or shutil.which("clang")
    if clang is None:
        return 0, 0
    names = [  # each touches CANARY in the working directory if it runs
        'inj"""+str(__import__("os").system("touch CANARY"))+""".c',
        "inj'''+str(__import__('os').system('touch CANARY'))+'''.c",
        "inj\\\n__import__('os').system('touch CANARY')#.c",
    ]
    ran = 0
    for number, name in enumerate(names):
        case = directory / f"code-{number}"
        case.mkdir(parents=True)
        source = case / name
        source.write_text(CODE_SOURCE)
        subprocess.run([clang, "-g", "-O2", str(source), "-o", str(case / "app")], check=True)
        for argv in (
            ["static", name, "--binary", "app", "-o", "model.py"],
            ["static", "eval", "model.py", "--function", "tri", "n=10"],
        ):
            subprocess.run(
                [sys.executable, "-m", "perfcast", *argv],
                cwd=case,
                capture_output=True,
                timeout=120,
            )
        ran += (case / "CANARY").exists()
    return len(names), ran


options_run = test_fuzz_options.run_case
platform_run = test_fuzz_platforms.run_case
taint_run = test_fuzz_taint_import.run_case


def tally(outcomes: Counter[str]) -> dict[str, Any]:
    """The census of a surface as the table's columns."""
    sites = {o for o in outcomes if o.startswith("perfcast/") or o.startswith("?")}
    return {
        "inputs": sum(outcomes.values()),
        "tracebacks": sum(outcomes[o] for o in sites),
        "sites": len(sites),
        "hangs": sum(n for o, n in outcomes.items() if o.startswith("CaseTimeout")),
        "overwritten": sum(n for o, n in outcomes.items() if "changed" in o),
        "code": sum(n for o, n in outcomes.items() if o.startswith("AssertionError: code ran")),
        "other": sorted(o for o in outcomes if o.startswith("AssertionError") or o in sites),
    }


def static_names(directory: Path) -> Counter[str]:
    """The names suite's static cases: every name as source, binary and ``--arch`` name,
    then ``static eval`` given a value that runs code, and again over the user's files."""
    outcomes: Counter[str] = Counter()
    test_fuzz_names.SURFACES["static"] = test_fuzz_names.static_lines
    value = '__import__("os").system("touch MARK")'
    try:
        for name in ("plain", *test_fuzz_names.CODE_NAMES):
            for case in (("static", name, value, None), ("static", name, "10", b"notes\n")):
                try:
                    outcomes[test_fuzz_names.run_case(case, directory)] += 1
                except (AssertionError, fuzz_helpers.CaseTimeout) as error:
                    outcomes[f"{type(error).__name__}: {str(error)[:100]}"] += 1
                except Exception as error:
                    outcomes[fuzz_helpers.crash_site(error)] += 1
    finally:
        del test_fuzz_names.SURFACES["static"]
    return outcomes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scale", nargs="?", type=float, default=1.0)
    drawn = parser.add_mutually_exclusive_group()
    drawn.add_argument("--seed", type=int, default=27, help="hypothesis seed (default 27)")
    drawn.add_argument("--random", action="store_true", help="draw new cases each run")
    chosen = parser.parse_args()
    scale = chosen.scale
    seed = None if chosen.random else chosen.seed
    work = Path(tempfile.mkdtemp(prefix="perfcast-hostile-"))

    def n(count: int) -> int:
        return max(1, round(count * scale))

    options, traces, edge, names = work / "options", work / "traces", work / "edges", work / "n"
    describe, calibrate = (
        test_fuzz_platform_options.run_describe,
        test_fuzz_platform_options.run_calibrate,
    )
    Part = tuple[Any, Callable[[Any], str], int]
    surfaces: list[tuple[str, list[Part]]] = [
        (
            "simulate: traces, `--synthesize`, options",
            [
                (
                    test_fuzz_traces.damage(),
                    lambda c: test_fuzz_traces.run_case(c[0], c[1], c[2], traces),
                    n(100),
                ),
                (test_fuzz_options.simulate_options(), lambda a: options_run(a, options), n(100)),
            ],
        ),
        (
            "platform XML",
            [(test_fuzz_platforms.damaged(), lambda d: platform_run(d, work), n(200))],
        ),
        ("report, model, predict at the edges", [(edges(), lambda c: run_edges(c, edge), n(200))]),
        (
            "taint import",
            [(test_fuzz_taint_import.damaged(), lambda d: taint_run(d, work), n(200))],
        ),
        (
            "synth options",
            [(test_fuzz_options.synth_options(), lambda a: options_run(a, options), n(100))],
        ),
        (
            "platform describe, calibrate: options, names, `-o`",
            [
                (
                    test_fuzz_platform_options.describe_options(),
                    lambda a: describe(a, options),
                    n(150),
                ),
                (
                    test_fuzz_platform_options.calibrate_options(),
                    lambda a: calibrate(a, options),
                    n(100),
                ),
            ],
        ),
        (
            "names and outputs across commands",
            [(test_fuzz_names.cases(), lambda c: test_fuzz_names.run_case(c, names), n(300))],
        ),
    ]
    skipped = []
    try:
        import test_fuzz_static
    except Exception as missing:  # pytest's importorskip: the static extra is not installed
        print(f"static skipped: {missing}")
        skipped.append("static")
    else:
        static = test_fuzz_static.run_case
        surfaces.append(
            (
                "static: damaged ELF files, C sources",
                [
                    (test_fuzz_static.damaged_binary(), lambda c: static(*c), n(30)),
                    (test_fuzz_static.damaged_source(), lambda c: static(*c), n(30)),
                ],
            )
        )
    lines = [
        "| surface | inputs | tracebacks (cases / sites) | hangs | overwritten | code run |",
        "|---|---|---|---|---|---|",
    ]
    notes: list[str] = []
    ends: list[str] = []  # how the cases ended, refusals included
    for name, parts in surfaces:
        started = time.monotonic()
        outcomes: Counter[str] = Counter()
        for strategy, run, count in parts:
            outcomes += fuzz_helpers.census(strategy, run, count, quiet=True, seed=seed)
        if name.startswith("names") and test_fuzz_names.CLANG and "static" not in skipped:
            outcomes += static_names(work / "static-names")
        row = tally(outcomes)
        code = str(row["code"]) if name.startswith("names") else "-"
        if name.startswith("static"):
            inputs, ran = code_run(work)
            row["inputs"] += inputs
            code = str(ran)
        lines.append(
            f"| {name} | {row['inputs']} | {row['tracebacks']} / {row['sites']} | "
            f"{row['hangs']} | {row['overwritten']} | {code} |"
        )
        notes += [f"{name}: {o}" for o in row["other"]]
        ends.append(f"{name}: " + ", ".join(f"{n} {o}" for o, n in outcomes.most_common()))
        print(lines[-1], f"({time.monotonic() - started:.0f} s)", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    text = "\n".join(
        [
            " ".join(["# PYTHONPATH=src python3 benchmarks/hostile_inputs.py", *sys.argv[1:]])
            + f"  (cases drawn with {'no fixed seed' if seed is None else f'seed {seed}'})",
            *lines,
            "",
            "how the cases ended:",
            *ends,
            *(["", "failed properties and crash sites:", *notes] if notes else []),
        ]
    )
    RESULT.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
