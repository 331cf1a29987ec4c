"""Extra-P 4.2.5 reads what perfcast writes, and perfcast reads what Extra-P reads.

Two checks against Extra-P's own readers, run in Extra-P's virtual environment
(``_extrap.py`` creates it once, under a file lock shared with the other benchmarks):

1. Round trip: every Extra-P example file (``../shared/data/extrap-formats``) and three
   synthetic experiments are read by perfcast, written with perfcast's text and JSON
   writers, and loaded by Extra-P's ``TextFileReader``/``JsonFileReader``; the call paths,
   metrics, points and every repetition's value must equal perfcast's table.
2. Reader parity: Extra-P and perfcast read the same original files; both must accept
   or both reject, and accepted files must give the same cells and values.

A cell is (call path, metric, point) with its multiset of values; Cube values are per
process/thread and profile, which Extra-P stores per profile and perfcast as repetitions.
The last table compares read times on the largest synthetic experiment (ratios are
Extra-P / perfcast; Extra-P runs with ``keep_values=True``, which only keeps the arrays it
builds anyway).

    python3 benchmarks/extrap_roundtrip.py --output benchmarks/results/extrap_roundtrip.txt
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parent
DEFAULT_DATA = BENCHMARKS.parent.parent / "shared" / "data" / "extrap-formats"
EXTRAP_READERS = {"text": "TextFileReader", "json": "JsonFileReader", "talpas": "TalpasFileReader"}
"""Extra-P reader class per source family; JSON Lines go through JsonFileReader, as in
Extra-P's own command line."""

SYNTHETIC = {
    # name: (parameters, call paths, values per parameter, repetitions, ragged)
    "synthetic 3p x 1000 call paths": (["p", "n", "s"], 1000, 5, 5, False),
    "synthetic 4p, ragged repetitions": (["p", "n", "s", "t"], 20, 4, 3, True),
    "synthetic 6p (JSON only)": (["a", "b", "c", "d", "e", "f"], 5, 2, 2, False),
}
SUMMARY_RTOL = 1e-12
"""Where only Extra-P's mean/median are available, they must agree to rounding."""
TEXT_PARAMETER_LIMIT = 4
"""Extra-P's text reader refuses more parameters; JSON has no such limit."""

Cells = dict[tuple[str, str, tuple[float, ...]], Any]
"""(call path, metric, point) -> sorted values, or Extra-P's summary of them."""


# -- inside Extra-P's venv ---------------------------------------------------------------


def extrap_side(jobs_file: str, output_file: str) -> None:
    """Read each job's path with Extra-P's reader; dump cells (or the error) as JSON."""
    import warnings

    warnings.simplefilter("ignore")
    from extrap.fileio.file_reader.cube_file_reader2 import CubeFileReader2
    from extrap.fileio.file_reader.json_file_reader import JsonFileReader
    from extrap.fileio.file_reader.talpas_file_reader import TalpasFileReader
    from extrap.fileio.file_reader.text_file_reader import TextFileReader

    readers = {
        "TextFileReader": TextFileReader,
        "JsonFileReader": JsonFileReader,
        "TalpasFileReader": TalpasFileReader,
        "CubeFileReader2": CubeFileReader2,
    }
    results: dict[str, dict[str, Any]] = {}
    for job in json.loads(Path(jobs_file).read_text()):
        reader = readers[job["reader"]]()
        reader.keep_values = True
        start = time.perf_counter()
        try:
            experiment = reader.read_experiment(job["path"])
        except Exception as exc:  # report Extra-P's verdict, whatever it raises
            results[job["id"]] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        seconds = time.perf_counter() - start
        cells = [
            [m.callpath.name, m.metric.name, list(m.coordinate), _values_or_summary(m)]
            for measurements in experiment.measurements.values()
            for m in measurements
        ]
        parameters = [p.name for p in experiment.parameters]
        results[job["id"]] = {"seconds": seconds, "parameters": parameters, "cells": cells}
    Path(output_file).write_text(json.dumps(results))


def _values_or_summary(measurement: Any) -> list[float] | dict[str, float]:
    """The raw values where the reader kept them; Extra-P's JSON Lines path drops them
    (it ignores ``keep_values``), so there only its summary statistics are compared."""
    if measurement.values is not None:
        return measurement.values.ravel().tolist()
    names = ("mean", "median", "minimum", "maximum", "repetitions")
    return {name: float(getattr(measurement, name)) for name in names}


# -- perfcast side -------------------------------------------------------------------------


def perfcast_cells(experiment: Any) -> Cells:
    data = experiment.data
    keys = ["callpath", "metric", *experiment.parameters]
    cells: Cells = {}
    for key, values in data.groupby(keys, sort=False)["value"]:
        callpath, metric, *point = key
        cells[(callpath, metric, tuple(float(v) for v in point))] = sorted(values.tolist())
    return cells


def extrap_cells(result: dict, metrics: set[str] | None = None) -> Cells:
    return {
        (callpath, metric, tuple(point)): sorted(values) if isinstance(values, list) else values
        for callpath, metric, point, values in result["cells"]
        if metrics is None or metric in metrics
    }


def same_values(ours: list[float], theirs: list[float] | dict[str, float]) -> bool:
    if isinstance(theirs, list):
        return ours == theirs
    import numpy as np

    summary = [float(np.mean(ours)), float(np.median(ours)), min(ours), max(ours), len(ours)]
    expected = [theirs[k] for k in ("mean", "median", "minimum", "maximum", "repetitions")]
    return bool(np.allclose(summary, expected, rtol=SUMMARY_RTOL, atol=0))


def compare(ours: Cells, theirs: Cells) -> str:
    """'yes' or what differs, for the table."""
    missing, extra = ours.keys() - theirs.keys(), theirs.keys() - ours.keys()
    differing = sum(not same_values(ours[k], theirs[k]) for k in ours.keys() & theirs.keys())
    if not (missing or extra or differing):
        return "yes"
    return f"NO: {len(missing)} cells missing, {len(extra)} extra, {differing} differ"


def synthetic_experiment(
    parameters: list[str], n_callpaths: int, levels: int, reps: int, ragged: bool
) -> Any:
    """Random long-form data on a full grid, built from arrays: ``n_callpaths`` call paths
    with metric ``time`` plus up to three with the unnamed metric ``""``. With ``ragged``,
    series s has s % 3 fewer repetitions at every other point."""
    import numpy as np
    import pandas as pd

    from perfcast.experiment import Experiment, Metric

    rng = np.random.default_rng(2025)
    axes = np.meshgrid(*[2.0 ** np.arange(1, levels + 1)] * len(parameters), indexing="ij")
    points = np.stack(axes, -1).reshape(-1, len(parameters))
    names = ["main"] + [f"main->kernel_{i}" for i in range(1, n_callpaths)]
    series = [(c, "time") for c in names] + [(c, "") for c in names[:3]]
    counts = np.full((len(series), len(points)), reps)
    if ragged:
        counts[:, 1::2] -= np.arange(len(series))[:, None] % 3
    cell = np.repeat(np.arange(counts.size), counts.ravel())
    start = np.repeat(np.cumsum(counts.ravel()) - counts.ravel(), counts.ravel())
    columns = {
        "callpath": np.array([c for c, _ in series], dtype=object)[cell // len(points)],
        "metric": np.array([m for _, m in series], dtype=object)[cell // len(points)],
        **{p: points[cell % len(points), i] for i, p in enumerate(parameters)},
        "repetition": np.arange(len(cell)) - start,
        "value": rng.lognormal(size=len(cell)),
    }
    return Experiment(parameters, pd.DataFrame(columns), [Metric("time", "s")])


def shared_sources(data: Path) -> list[tuple[str, Path, str]]:
    """(name, path, Extra-P reader) for every example file and Cube set."""
    sources = []
    for family, pattern, reader in [
        ("text", "*.txt", "TextFileReader"),
        ("json", "*", "JsonFileReader"),
        ("jsonlines", "*.jsonl", "JsonFileReader"),
        ("talpas", "*.txt", "TalpasFileReader"),
    ]:
        for path in sorted((data / family).rglob(pattern)):
            if path.is_file():
                sources.append((str(path.relative_to(data)), path, reader))
    for path in sorted((data / "cubeset").iterdir()):
        sources.append((str(path.relative_to(data)), path, "CubeFileReader2"))
    return sources


def run_extrap_jobs(python: Path, jobs: list[dict], workdir: Path) -> dict:
    jobs_file, output_file = workdir / "jobs.json", workdir / "extrap.json"
    jobs_file.write_text(json.dumps(jobs))
    command = [str(python), __file__, "--extrap-side", str(jobs_file), str(output_file)]
    subprocess.run(command, check=True)
    return json.loads(output_file.read_text())


def table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True))
        for row in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="Extra-P example files")
    parser.add_argument("--output", type=Path, help="also write the report here")
    parser.add_argument("--extrap-side", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.extrap_side:
        extrap_side(*args.extrap_side)
        return 0

    sys.path.insert(0, str(BENCHMARKS))
    import _extrap  # the sibling helper; benchmarks/ is not a package

    from perfcast.errors import PerfcastError
    from perfcast.experiment import read_experiment, write_experiment

    if not args.data.is_dir():
        parser.error(f"Extra-P example files not found at {args.data}; pass --data")
    python = _extrap.ensure_extrap()

    with tempfile.TemporaryDirectory(prefix="extrap-roundtrip-") as tmp:
        workdir = Path(tmp)
        experiments: dict[str, Any] = {}
        read_errors: dict[str, str] = {}
        parity_jobs, sources = [], shared_sources(args.data)
        for name, path, reader in sources:
            parity_jobs.append({"id": name, "path": str(path), "reader": reader})
            try:
                experiments[name] = read_experiment(path)
            except PerfcastError as exc:
                read_errors[name] = str(exc).replace(str(args.data) + "/", "")
        read_seconds: dict[str, float] = {}
        for name, spec in SYNTHETIC.items():
            experiments[name] = synthetic_experiment(*spec)

        roundtrip_jobs = []
        for index, (name, experiment) in enumerate(experiments.items()):
            for suffix in (".txt", ".json"):
                if suffix == ".txt" and len(experiment.parameters) > TEXT_PARAMETER_LIMIT:
                    continue
                path = workdir / f"case{index}{suffix}"
                write_experiment(experiment, path)
                reader = "TextFileReader" if suffix == ".txt" else "JsonFileReader"
                roundtrip_jobs.append(
                    {"id": f"{name}|{suffix}", "path": str(path), "reader": reader}
                )
                if name == next(iter(SYNTHETIC)):
                    start = time.perf_counter()
                    read_experiment(path)
                    read_seconds[suffix] = time.perf_counter() - start

        extrap = run_extrap_jobs(python, parity_jobs + roundtrip_jobs, workdir)

    arguments = " ".join(sys.argv[1:] if argv is None else argv)
    report = [f"command: python3 benchmarks/{Path(__file__).name} {arguments}".rstrip()]
    report.append(
        f"Extra-P {_extrap.EXTRAP_VERSION} in {_extrap.VENV_DIR.name}; data: {args.data.name}\n"
    )

    rows, failures = [], 0
    for job in roundtrip_jobs:
        name, suffix = job["id"].split("|")
        experiment, result = experiments[name], extrap[job["id"]]
        if "error" in result:
            verdict = "NO: Extra-P rejects: " + result["error"][:60]
        else:
            verdict = compare(perfcast_cells(experiment), extrap_cells(result))
        failures += verdict != "yes"
        rows.append(
            [
                name,
                suffix[1:],
                len(experiment.parameters),
                len(experiment.callpaths),
                len(experiment.coordinates()),
                len(experiment),
                verdict,
            ]
        )
    report.append(
        "1. Extra-P reads perfcast's files (writer -> Extra-P reader -> same cells and values)"
    )
    report.append(
        table(["source", "written", "params", "callpaths", "points", "values", "identical"], rows)
    )

    rows = []
    for name, _, _ in sources:
        result = extrap[name]
        if "error" in result or name in read_errors:
            both = "error" in result and name in read_errors
            verdict = "yes, both reject" if both else "NO: only one rejects"
            detail = read_errors.get(name, result.get("error", ""))[:90]
        else:
            ours = experiments[name]
            theirs = extrap_cells(result, set(ours.metrics))
            verdict = compare(perfcast_cells(ours), theirs)
            detail = f"{len(theirs)} cells, {sum(len(v) for v in theirs.values())} values"
        failures += not verdict.startswith("yes")
        rows.append([name, verdict, detail])
    report.append("\n2. Reader parity on the original files (Cube: metrics time and visits)")
    report.append(table(["file", "same as Extra-P", "compared / perfcast's message"], rows))

    name = next(iter(SYNTHETIC))
    rows = []
    for suffix, label in ((".txt", "text"), (".json", "JSON")):
        theirs = extrap[f"{name}|{suffix}"]["seconds"]
        ours = read_seconds[suffix]
        rows.append([f"read {label}", f"{ours:.2f} s", f"{theirs:.2f} s", f"{theirs / ours:.1f}x"])
    report.append(f"\n3. Read time, {name} ({len(experiments[name])} values)")
    report.append(table(["step", "perfcast", "Extra-P", "Extra-P / perfcast"], rows))
    report.append(f"\n{'all checks passed' if not failures else f'{failures} check(s) FAILED'}")

    text = "\n".join(report) + "\n"
    print(text, end="")
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
