"""Extra-P, the comparison peer, in its own virtual environment.

Extra-P 4.2.5 pins ``numpy<2`` and pulls in PySide6, so it cannot share perfcast's
interpreter: benchmarks run it in ``benchmarks/.extrap-venv`` through a subprocess. Several
engineers (or several benchmark runs) may need the venv at the same time, so creation is
guarded by an exclusive lock on a file next to it; whoever gets the lock second finds a
working venv and uses it.

This file is also the script that runs *inside* that venv (it imports nothing from
perfcast, which needs NumPy 2)::

    python benchmarks/_extrap.py                      # create the venv if missing
    .extrap-venv/bin/python _extrap.py model IN.txt OUT.json [--measure mean]

:func:`run_extrap_cli` times Extra-P's own ``extrap`` command as a whole process instead.

``model`` reads an Extra-P text file, runs Extra-P's default model generator (single- or
multi-parameter, chosen by Extra-P from the parameter count, as ``extrap --text`` does),
and writes the seconds spent reading + modeling and every model in perfcast's model JSON
layout (constant, terms with factors ``{"parameter", "exponent": "p/q", "log_exponent"}``).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

EXTRAP_VERSION = "4.2.5"
"""The Extra-P release perfcast is measured against (the one users run today)."""

VENV_DIR = Path(__file__).resolve().parent / ".extrap-venv"


def venv_python(venv: Path = VENV_DIR) -> Path:
    return venv / "bin" / "python"


def is_working(venv: Path = VENV_DIR) -> bool:
    """True if the venv imports the expected Extra-P version."""
    python = venv_python(venv)
    if not python.exists():
        return False
    probe = "import importlib.metadata as m, extrap; print(m.version('extrap'))"
    result = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, check=False)
    return result.returncode == 0 and result.stdout.strip() == EXTRAP_VERSION


def ensure_extrap(venv: Path = VENV_DIR) -> Path:
    """Return the venv's Python, creating the venv and installing Extra-P if needed."""
    if is_working(venv):
        return venv_python(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.with_name(venv.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # blocks while another process installs
        try:
            if not is_working(venv):
                _install(venv)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    if not is_working(venv):
        raise RuntimeError(f"Extra-P {EXTRAP_VERSION} does not import from {venv} after install")
    return venv_python(venv)


def _install(venv: Path) -> None:
    print(f"installing Extra-P {EXTRAP_VERSION} into {venv} (once, ~650 MB)", file=sys.stderr)
    # --clear: a half-built venv from an interrupted install is rebuilt from scratch.
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    pip = [str(venv_python(venv)), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, f"extrap=={EXTRAP_VERSION}"], check=True)


def run_extrap_cli(
    text_file: Path,
    output: Path,
    *,
    measure: str = "mean",
    environment: dict[str, str] | None = None,
    venv: Path = VENV_DIR,
) -> float:
    """Seconds of Extra-P's own command line on ``text_file``, as a user runs it: start,
    imports, reading, modeling, and every model written to ``output`` (``--out``);
    ``environment`` replaces the process environment (None: this one's)."""
    ensure_extrap(venv)
    command = [
        str(venv / "bin" / "extrap"),
        "--text",
        str(text_file),
        "--measure",
        measure,
        "--disable-progress",
        "--out",
        str(output),
    ]
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=environment)
    return time.perf_counter() - start


def run_extrap(
    text_file: Path,
    output: Path,
    *,
    measure: str = "mean",
    at: list[float] | None = None,
    venv: Path = VENV_DIR,
) -> dict:
    """Model ``text_file`` with Extra-P in the venv; returns the ``model`` command's JSON.

    ``at``: a point (one value per parameter) where Extra-P evaluates each of its models
    itself, so the caller can check that the translated models compute the same.
    """
    python = ensure_extrap(venv)
    command = [str(python), __file__, "model", str(text_file), str(output), "--measure", measure]
    if at is not None:
        command += ["--at", ",".join(repr(float(v)) for v in at)]
    subprocess.run(command, check=True)
    return json.loads(output.read_text())


class Advisor:
    """Extra-P's measurement-point advisor in a process of the venv (``advise``), asked one
    JSON request at a time; a context manager that ends the process."""

    def __init__(self, venv: Path = VENV_DIR) -> None:
        python = ensure_extrap(venv)
        self._process = subprocess.Popen(
            [str(python), __file__, "advise"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError(f"Extra-P's advisor ended (exit status {self._process.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        self._process.wait()

    def __enter__(self) -> Advisor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- inside the venv -----------------------------------------------------------------------


def _model(text_file: str, output: str, measure: str, at: list[float] | None) -> None:
    from extrap.entities.measurement import Measure
    from extrap.fileio.file_reader.text_file_reader import TextFileReader
    from extrap.modelers.model_generator import ModelGenerator

    start = time.perf_counter()
    experiment = TextFileReader().read_experiment(text_file)
    generator = ModelGenerator(experiment, use_measure=Measure.from_str(measure))
    generator.model_all()
    seconds = time.perf_counter() - start

    names = [p.name for p in experiment.parameters]
    models = [
        {
            "callpath": callpath.name,
            "metric": metric.name,
            **_function_json(model.hypothesis.function, names),
            **({} if at is None else {"value_at": _evaluate(model.hypothesis.function, at)}),
        }
        for (callpath, metric), model in generator.models.items()
    ]
    result = {"seconds": seconds, "extrap": EXTRAP_VERSION, "parameters": names, "models": models}
    Path(output).write_text(json.dumps(result))


def _evaluate(function: Any, point: list[float]) -> float:
    """Extra-P's own evaluation; a tuple works for single- and multi-parameter functions."""
    return float(function.evaluate(tuple(point)))


def _function_json(function: Any, names: list[str]) -> dict:
    """An Extra-P function as perfcast's ``constant`` + ``terms``.

    Single-parameter functions hold ``CompoundTerm``s; multi-parameter ones hold
    ``MultiParameterTerm``s of (parameter index, CompoundTerm) pairs, where both levels
    carry a coefficient.
    """
    terms = []
    for term in function.compound_terms:
        pairs = getattr(term, "parameter_term_pairs", None)
        if pairs is None:
            pairs, coefficient = [(0, term)], 1.0
        else:
            coefficient = float(term.coefficient)
        factors = []
        for index, compound in pairs:
            coefficient *= float(compound.coefficient)
            exponent, log_exponent = Fraction(0), 0
            for simple in compound.simple_terms:
                if simple.term_type == "polynomial":
                    exponent = Fraction(simple.exponent).limit_denominator(100)
                else:
                    log_exponent = round(float(simple.exponent))
            factors.append(
                {"parameter": names[index], "exponent": str(exponent), "log_exponent": log_exponent}
            )
        terms.append({"coefficient": coefficient, "factors": factors})
    return {"constant": float(function.constant_coefficient), "terms": terms}


def _advise() -> None:
    """Extra-P's measurement-point advisor as a server: one JSON request a line on stdin,
    one JSON answer a line on stdout (see ``adaptive_design.py``).

    A request holds ``parameters``, ``measurements`` (``[point, [values...]]`` of one call
    path, ``main``, metric ``time``: its run times), ``budget`` (core-seconds: run time x
    the process parameter, Extra-P's own cost), ``series`` (each parameter's allowed
    values, the GUI's manual value series), ``process`` (the index of the process
    parameter) and ``target``. The answer: the selection mode Extra-P was in, the points
    it suggests (one run each, in its order), their repetition numbers (gpr mode), its
    current cost, and its own model's value at the target (the model the advisor used).

    NumPy's global generator is seeded from each request's text before the advisor runs: its
    Gaussian process restarts its optimiser 20 times from points drawn there
    (``extrap.mpa.gpr_selection_strategy``, ``random_state=None``), so unseeded the same
    campaign got other suggestions on every run of the benchmark (3 parameters, 10 % noise:
    'to reach' 3.3x in one run, 10x in the next). Seeded, a rerun asks and gets the same.
    """
    import hashlib
    import logging
    import warnings

    import numpy as np
    from extrap.entities.callpath import Callpath
    from extrap.entities.coordinate import Coordinate
    from extrap.entities.experiment import Experiment
    from extrap.entities.measurement import Measurement
    from extrap.entities.metric import Metric
    from extrap.entities.parameter import Parameter
    from extrap.fileio.io_helper import create_call_tree
    from extrap.modelers.model_generator import ModelGenerator
    from extrap.mpa.measurement_point_advisor import MeasurementPointAdvisor
    from extrap.mpa.util import identify_selection_mode

    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    for line in sys.stdin:
        request = json.loads(line)
        digest = hashlib.blake2b(line.strip().encode(), digest_size=4).digest()
        np.random.seed(int.from_bytes(digest, "little"))
        experiment = Experiment()
        for name in request["parameters"]:
            experiment.add_parameter(Parameter(name))
        callpath, metric = Callpath("main"), Metric("time")
        experiment.add_callpath(callpath)
        experiment.add_metric(metric)
        for point, values in request["measurements"]:
            coordinate = Coordinate(*(float(v) for v in point))
            experiment.add_coordinate(coordinate)
            experiment.add_measurement(
                Measurement(coordinate, callpath, metric, values, keep_values=True)
            )
        experiment.call_tree = create_call_tree(experiment.callpaths)
        generator = ModelGenerator(experiment)
        generator.model_all()
        series = request["series"]
        advisor = MeasurementPointAdvisor(
            budget=request["budget"],
            process_parameter_id=request["process"],
            experiment=experiment,
            manual_pms_selection=True,
            manual_parameter_value_series=[",".join(repr(float(v)) for v in s) for s in series],
            calculate_cost_manual=False,
            number_processes=0,
            model_generator=generator,
        )
        mode = identify_selection_mode(experiment, advisor.min_points)
        points, reps = advisor.suggest_points([callpath], metric)
        function = generator.models[callpath, metric].hypothesis.function
        answer = {
            "mode": mode,
            "points": [list(map(float, c.as_tuple())) for c in points],
            "repetitions": None if reps is None else [int(r) for r in reps],
            "cost": float(advisor.calculate_current_cost([callpath], metric)),
            "value_at_target": _evaluate(function, request["target"]),
        }
        print(json.dumps(answer), flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command")
    model = commands.add_parser("model", help="model an Extra-P text file (inside the venv)")
    model.add_argument("text_file")
    model.add_argument("output")
    model.add_argument("--measure", default="mean", choices=["mean", "median", "minimum"])
    model.add_argument("--at", help="comma-separated point at which to evaluate each model")
    commands.add_parser("advise", help="Extra-P's measurement-point advisor, JSON lines")
    args = parser.parse_args(argv)
    if args.command == "advise":
        _advise()
    elif args.command == "model":
        at = None if args.at is None else [float(v) for v in args.at.split(",")]
        _model(args.text_file, args.output, args.measure, at)
    else:
        print(ensure_extrap())


if __name__ == "__main__":
    main()
