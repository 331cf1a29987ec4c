"""How `perfcast model` scales with the number of call paths: time and memory per stage.

Synthetic inputs (one random PMNF truth per call path, :mod:`perfcast.synth`, 2
parameters x 5 values, 5 repetitions, 5 % uniform noise) are written once per size with
perfcast's own Extra-P text (or JSON) writer. For each size a fresh Python process runs the
stages `perfcast model` runs, in order, each timed and with its own peak resident memory:

* read: the file into an Experiment (:func:`perfcast.experiment.read_experiment`);
* fit: :class:`perfcast.modeling.PMNFModeler` with its defaults;
* summary: the default output (:func:`perfcast.report.summary.render_summary`);
* full: the ``--full`` listing (:func:`perfcast.report.render_models`);
* save: the model file (:meth:`perfcast.modeling.modelset.ModelSet.save`).

A stage's peak is the process's peak resident set size while it ran (Linux resets the
peak through ``/proc/self/clear_refs`` before each stage), so it includes what earlier
stages left alive, as in the real command. The whole command is then timed as a user runs
it, ``perfcast model FILE -o OUT`` and again with ``--full``, under ``/usr/bin/time -v``
(wall time and peak RSS of the whole process, imports included).

The last two columns are growth exponents between the two largest sizes, the slope of
log(CPU time) and of log(peak memory) over log(call paths): about 1 is linear, 2
quadratic. Small sizes are dominated by fixed costs (imports, about 100 MB of libraries),
so slopes from them are lower and say little. CPU time is the measure to compare: the
process keeps one core busy, and wall time on a shared machine depends on its load.

One million call paths (``--sizes 100000 1000000``) needs some 15 GB of memory (about
1.5 GB per 100,000 call paths at the peaks) and half an hour; run it where that fits.

    python3 benchmarks/scale.py --output benchmarks/results/scale.txt
    python3 benchmarks/scale.py --sizes 1000 10000      # about a minute

Generated inputs are kept in ``--workdir`` (default: a temporary directory) and reused
when the same size, seed and format are asked for again.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

SIZES = (1_000, 10_000, 100_000)
STAGES = ("read", "fit", "summary", "full", "save")
COMMANDS = {"model": (), "model --full": ("--full",)}
TARGET_CALLPATHS = 100_000
TARGET_SECONDS = 60.0
TARGET_MEMORY_GB = 4.0
"""Issue 14: 100,000 call paths x 2 parameters x 25 points x 5 repetitions modeled
whole-process in at most 60 s and 4 GB on the project's 2-core machine."""
NOISE = 0.05

T = TypeVar("T")
Cell = tuple[float, float, float]
"""Wall seconds, CPU seconds, peak resident MB."""


def generate_input(size: int, seed: int, fmt: str, workdir: Path) -> Path:
    """The measurement file for ``size`` call paths, written once and then reused."""
    import numpy as np

    from perfcast.experiment import write_experiment
    from perfcast.synth import Noise, generate

    path = workdir / f"scale_{size}_seed{seed}.{'txt' if fmt == 'text' else 'json'}"
    if path.exists():
        return path
    rng = np.random.default_rng(seed)
    benchmark = generate(size, rng)
    experiment = Noise("uniform", NOISE).apply_to(benchmark.experiment, rng)
    partial = path.with_name(path.name + ".partial")
    partial.unlink(missing_ok=True)
    write_experiment(experiment, partial, fmt)
    partial.rename(path)
    return path


# -- one size, in a fresh process ---------------------------------------------------------


def _peak_kb() -> int:
    status = Path("/proc/self/status").read_text()
    match = re.search(r"VmHWM:\s+(\d+) kB", status)
    return int(match.group(1)) if match else 0


def _reset_peak() -> None:
    """Make the peak RSS start again from the current RSS (Linux 4.0+)."""
    Path("/proc/self/clear_refs").write_text("5")


def stages(path: str, workdir: str) -> None:
    """Run the stages on ``path`` and print one JSON object: stage -> (wall seconds, CPU
    seconds, peak MB)."""
    from perfcast.experiment import read_experiment
    from perfcast.modeling import PMNFModeler
    from perfcast.report import render_models
    from perfcast.report.summary import render_summary

    results: dict[str, Cell] = {}

    def timed(name: str, step: Callable[[], T]) -> T:
        _reset_peak()
        start, cpu = time.perf_counter(), time.process_time()
        result = step()
        results[name] = (time.perf_counter() - start, time.process_time() - cpu, _peak_kb() / 1024)
        return result

    experiment = timed("read", lambda: read_experiment(path))
    models = timed("fit", lambda: PMNFModeler().fit(experiment))
    timed("summary", lambda: render_summary(models, experiment.coordinates()))
    timed("full", lambda: render_models(models))
    out = Path(workdir) / "scale_models.json"
    out.unlink(missing_ok=True)
    timed("save", lambda: models.save(out))
    print(json.dumps(results))


def run_stages(path: Path, workdir: Path) -> dict[str, Cell]:
    done = subprocess.run(
        [sys.executable, __file__, "--stages-of", str(path), "--workdir", str(workdir)],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        sys.exit(f"the stages failed on {path}:\n{done.stderr}")
    results = json.loads(done.stdout.splitlines()[-1])
    return {name: (wall, cpu, mb) for name, (wall, cpu, mb) in results.items()}


def run_command(path: Path, extra: Sequence[str], workdir: Path) -> Cell:
    """Wall seconds, CPU seconds (user + system) and peak RSS (MB) of
    ``perfcast model PATH -o OUT [extra]``."""
    out = workdir / "scale_command_models.json"
    out.unlink(missing_ok=True)
    command = ["perfcast", "model", str(path), "-o", str(out), *extra]
    done = subprocess.run(["/usr/bin/time", "-v", *command], capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{shlex.join(command)} failed:\n{done.stderr}")
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", done.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    cpu = re.findall(r"(?:User|System) time \(seconds\): (\S+)", done.stderr)
    assert wall and rss and len(cpu) == 2, done.stderr[-2000:]
    seconds = sum(float(part) * 60**i for i, part in enumerate(reversed(wall[1].split(":"))))
    return seconds, float(cpu[0]) + float(cpu[1]), int(rss[1]) / 1024


# -- the table ----------------------------------------------------------------------------


def slope(sizes: Sequence[int], values: Sequence[float]) -> float:
    """Growth exponent between the two largest sizes (log-log slope)."""
    (n0, n1), (v0, v1) = sizes[-2:], values[-2:]
    if min(v0, v1) <= 0:
        return math.nan
    return math.log(v1 / v0) / math.log(n1 / n0)


def table(sizes: Sequence[int], rows: dict[str, list[Cell]]) -> list[str]:
    lines = [
        "Per stage and call-path count: wall seconds / CPU seconds / peak resident MB.",
        f"Slopes: growth exponent of CPU time and of memory from {sizes[-2]:,} to "
        f"{sizes[-1]:,} call paths (1 = linear; wall time follows the machine's load)."
        if len(sizes) > 1
        else "",
        "",
        f"{'stage':<21}"
        + "".join(f"{f'{n:,} call paths':>24}" for n in sizes)
        + "  slope: CPU  MB",
    ]
    for name, cells in rows.items():
        text = "".join(f"{f'{w:.1f} / {c:.1f} / {m:,.0f}':>24}" for w, c, m in cells)
        if len(sizes) > 1:
            text += f"{slope(sizes, [c for _, c, _ in cells]):>12.2f}"
            text += f"{slope(sizes, [m for _, _, m in cells]):>5.2f}"
        lines.append(f"{name:<21}{text}")
    return lines


def verdict(sizes: Sequence[int], rows: dict[str, list[Cell]]) -> list[str]:
    """The target judged on CPU time: the process keeps one core busy (BLAS runs one thread
    while fitting), so its CPU time is its wall time on an idle machine, while the wall
    time measured here grows with whatever else the shared machine runs."""
    if TARGET_CALLPATHS not in sizes:
        return []
    at = sizes.index(TARGET_CALLPATHS)
    lines = [
        "",
        f"Target at {TARGET_CALLPATHS:,} call paths, whole process: <= {TARGET_SECONDS:g} s "
        f"and <= {TARGET_MEMORY_GB:g} GB (time judged as CPU time: one core busy)",
    ]
    for command in COMMANDS:
        wall, cpu, mb = rows[f"perfcast {command}"][at]
        fits = cpu <= TARGET_SECONDS and mb <= TARGET_MEMORY_GB * 1024
        lines.append(
            f"  perfcast {command:<14} {cpu:6.1f} s CPU, {mb / 1024:5.2f} GB: "
            f"{'met' if fits else 'not met'} ({wall:.1f} s wall on the loaded machine)"
        )
    return lines


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min), {os.cpu_count()} cores"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", type=Path, help="keep generated inputs here")
    parser.add_argument("--output", type=Path, help="also write the table here")
    parser.add_argument("--stages-of", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.stages_of:
        stages(args.stages_of, str(args.workdir))
        return 0
    sizes = sorted(set(args.sizes))
    with tempfile.TemporaryDirectory() as scratch:
        workdir = args.workdir or Path(scratch)
        workdir.mkdir(parents=True, exist_ok=True)
        lines = [
            "$ python3 " + shlex.join(["benchmarks/scale.py", *(argv or sys.argv[1:])]),
            "",
            f"perfcast model on synthetic {args.format} files: 2 parameters x 5 values, "
            f"5 repetitions, {NOISE:.0%} uniform noise, seed {args.seed}; {load()} at the start",
        ]
        rows: dict[str, list[Cell]] = {name: [] for name in STAGES}
        rows.update({f"perfcast {command}": [] for command in COMMANDS})
        for size in sizes:
            path = generate_input(size, args.seed, args.format, workdir)
            print(f"{size:,} call paths: {path.stat().st_size / 1e6:.0f} MB", file=sys.stderr)
            for name, cell in run_stages(path, workdir).items():
                rows[name].append(cell)
            for command, extra in COMMANDS.items():
                rows[f"perfcast {command}"].append(run_command(path, extra, workdir))
        lines += table(sizes, rows)
        lines += verdict(sizes, rows)
        lines.append(f"({load()} at the end)")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.output:
        args.output.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
