"""What perfcast's instrumentation costs per measured call, and where it costs more than
the call path it measures (issue 25).

Every measured call runs the runtime's entry and exit: two clock reads and a call-path
lookup, about 0.06 us here, and with ``PERFCAST_CPU_TIME=1`` two reads of the thread's CPU
clock more (a system call: about 0.4 us in all). Filtered to kernels this is nothing; an
inline helper of a header kept out of line (``keep_inlined``) and called 5.7 million times
per rank turned HPCG's 0.2 s setup into 9 s, and then led the summary with 72 % of the time,
nearly all of it perfcast's own.

* **Calibration** (:func:`calibrate`): ``calibrate.c``, built with ``perfcast build``, times
  a loop over a tiny function with the function measured and unpatched (``PERFCAST_FILTER``
  naming only ``main``), and once more with CPU time; the difference per call is the
  instrumentation's cost on this machine. ``perfcast measure`` runs it once per store (about
  a second) and keeps it beside the store as ``app.overhead.json``
  (:data:`OVERHEAD_SUFFIX`), where ``perfcast model`` reads it.
* **Per call path** (:func:`instrumentation_cost`): visits x the cost per call against the
  call path's measured exclusive time, summed over every run. Where it is at least
  :data:`DOMINATED_SHARE` of that time, the time is mostly instrumentation: the model set's
  provenance names the call path, and :mod:`perfcast.modeling.extrapolation` sets it apart
  (reason "instrumentation dominates") so no summary ranks it as a hot spot.
* **Per campaign** (:func:`campaign_note`): the cost per call x every measured call of a
  rank, against the rank's measured time, at the point where that share is largest. It is
  an estimate from the calibration, not an uninstrumented run, and says so.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from perfcast.appspec import beside
from perfcast.errors import InputError, PerfcastError
from perfcast.experiment.experiment import Experiment
from perfcast.experiment.metrics import CPU_TIME_METRIC, TIME_METRIC, VISITS_METRIC
from perfcast.experiment.points import format_point
from perfcast.inputs import JsonChecker, read_json
from perfcast.modeling.provenance import Instrumentation
from perfcast.outputs import OutputKind, json_with, write_output

OVERHEAD_SUFFIX = ".overhead.json"
"""A campaign store ``app.sqlite``'s calibration is ``app.overhead.json`` beside it."""

FORMAT = "perfcast-overhead/1"
SOURCE = Path(__file__).with_name("calibrate.c")
CALLS = 200_000
"""Calls per timed loop: 10 ms measured, 80 ms with CPU time."""
REPEATS = 5
"""Timed loops per variant; the fastest counts (the least disturbed by other work)."""
LEAF = "perfcast_calibration_leaf"
DOMINATED_SHARE = 0.5
"""A call path whose instrumentation, calls x cost per call, is at least this share of its
measured exclusive time is reported as measuring mostly perfcast."""

OVERHEAD_FILE = OutputKind("a perfcast calibration", json_with(FORMAT))


@dataclass(frozen=True)
class Calibration:
    """The instrumentation's cost per measured call on one machine, in ns."""

    wall_ns: float
    """Entry and exit with wall time only."""
    cpu_ns: float
    """The same with ``PERFCAST_CPU_TIME=1``."""
    host: str

    def per_call_ns(self, cpu_time: bool) -> float:
        return self.cpu_ns if cpu_time else self.wall_ns

    def to_json(self) -> dict[str, object]:
        return {
            "format": FORMAT,
            "wall_ns": self.wall_ns,
            "cpu_ns": self.cpu_ns,
            "host": self.host,
            "command": f"perfcast build -- cc -O2 calibrate.c; calibrate {CALLS} {REPEATS}",
        }


def calibration_path(store: Path) -> Path:
    """``app.overhead.json`` beside the campaign store ``app.sqlite``."""
    return beside(store, OVERHEAD_SUFFIX)


def calibrate(timeout: float = 120) -> Calibration:
    """Build ``calibrate.c`` with ``perfcast build`` and time the three variants."""
    with tempfile.TemporaryDirectory(prefix="perfcast-overhead-") as work:
        directory = Path(work)
        program = directory / "calibrate"
        build = [sys.executable, "-m", "perfcast", "build", "--", "cc", "-O2", str(SOURCE)]
        _run([*build, "-o", str(program)], directory, {}, timeout, "building")
        only_main = directory / "main.filter"
        only_main.write_text("main\n", encoding="utf-8")
        loop = [str(program), str(CALLS), str(REPEATS)]
        unpatched = _timed(loop, directory, {"PERFCAST_FILTER": str(only_main)}, timeout)
        wall = _timed(loop, directory, {}, timeout)
        cpu = _timed(loop, directory, {"PERFCAST_CPU_TIME": "1"}, timeout)
    return Calibration(max(wall - unpatched, 0.0), max(cpu - unpatched, 0.0), socket.gethostname())


def _timed(argv: list[str], directory: Path, env: Mapping[str, str], timeout: float) -> float:
    output = _run(argv, directory, env, timeout, "running")
    try:
        return float(output.strip())
    except ValueError:
        raise PerfcastError(f"the calibration printed {output.strip()[:80]!r}") from None


def _run(
    argv: list[str], directory: Path, env: Mapping[str, str], timeout: float, what: str
) -> str:
    """Run one step of the calibration with perfcast's own run-time settings cleared."""
    clean = {
        k: v for k, v in os.environ.items() if k not in ("PERFCAST_FILTER", "PERFCAST_CPU_TIME")
    }
    clean["PERFCAST_PROFILE_DIR"] = str(directory / "profile")
    try:
        done = subprocess.run(
            argv,
            cwd=directory,
            env={**clean, **env},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise PerfcastError(f"{what} the calibration ran past {timeout:g} s") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise PerfcastError(f"{what} the calibration failed: {' / '.join(tail)}")
    return done.stdout


def read_calibration(path: Path) -> Calibration:
    """A calibration file, checked (errors name the file and the key)."""
    hint = "delete the file: perfcast measure calibrates again"
    check = JsonChecker(path, hint)
    data = check.table(read_json(path, "calibration", hint), "the calibration")
    if data.get("format") != FORMAT:
        raise InputError(f"'format' is not {FORMAT!r}; {hint}", path=path)
    numbers = {}
    for key in ("wall_ns", "cpu_ns"):
        value = check.required(data, key, "the calibration")
        if not isinstance(value, int | float) or isinstance(value, bool) or not value >= 0:
            raise check.fail(key, "a number of nanoseconds, at least 0")
        numbers[key] = float(value)
    host = check.text(check.required(data, "host", "the calibration"), "host")
    return Calibration(numbers["wall_ns"], numbers["cpu_ns"], host)


def calibrated(store: Path) -> tuple[Calibration, str]:
    """The store's calibration: the one kept beside it, else a new one written there; and a
    line saying which."""
    path = calibration_path(store)
    if path.is_file():
        found = read_calibration(path)
        return found, f"calibration: {_per_call_text(found)} (kept in {path})"
    made = calibrate()
    write_output(path, json.dumps(made.to_json(), indent=1) + "\n", OVERHEAD_FILE)
    return made, f"calibration: {_per_call_text(made)} (measured now, kept in {path})"


def _per_call_text(calibration: Calibration) -> str:
    return (
        f"perfcast's instrumentation costs {calibration.wall_ns:.3g} ns per measured call, "
        f"{calibration.cpu_ns:.3g} ns with PERFCAST_CPU_TIME=1, on {calibration.host}"
    )


def _values(experiment: Experiment, metric: str) -> dict[tuple[int, int, int], float]:
    """``metric``'s values keyed by (call path code, point index, repetition)."""
    columns = experiment.columns
    if metric not in columns.metrics:
        return {}
    point, _ = columns.points()
    rows = np.flatnonzero(columns.metric == columns.metrics.index(metric))
    keys = zip(
        columns.callpath[rows].tolist(),
        point[rows].tolist(),
        columns.repetition[rows].tolist(),
        strict=True,
    )
    return dict(zip(keys, columns.value[rows].tolist(), strict=True))


def _pairs(experiment: Experiment) -> list[tuple[int, int, int, float, float]]:
    """(call path, point, repetition, visits, exclusive time) where both were measured."""
    visits = _values(experiment, VISITS_METRIC)
    times = _values(experiment, TIME_METRIC)
    return [(*key, visits[key], time) for key, time in times.items() if key in visits]


def uses_cpu_time(experiment: Experiment) -> bool:
    """The runs read the CPU clock at every call (they measured ``cpu_time``)."""
    return CPU_TIME_METRIC in experiment.columns.metrics


def instrumentation_cost(experiment: Experiment, calibration: Calibration) -> Instrumentation:
    """Per call path, visits x the cost per call over its measured exclusive time, summed
    over every run; the call paths at or above :data:`DOMINATED_SHARE` are named."""
    cpu = uses_cpu_time(experiment)
    per_call = calibration.per_call_ns(cpu)
    spent: dict[int, float] = {}
    measured: dict[int, float] = {}
    for callpath, _, _, visits, time in _pairs(experiment):
        spent[callpath] = spent.get(callpath, 0.0) + visits * per_call * 1e-9
        measured[callpath] = measured.get(callpath, 0.0) + time
    names = experiment.columns.callpaths
    dominated = {}
    for code, seconds in spent.items():
        own = measured[code]
        if seconds > 0 and (own <= 0 or seconds >= DOMINATED_SHARE * own):
            dominated[names[code]] = seconds / own if own > 0 else float("inf")
    return Instrumentation(per_call, "wall and CPU" if cpu else "wall", dominated)


def campaign_note(experiment: Experiment, calibration: Calibration) -> str | None:
    """The campaign's overhead against an uninstrumented run, estimated at the point where
    it is largest (``None``: the runs have no visits or no time)."""
    per_call = calibration.per_call_ns(uses_cpu_time(experiment)) * 1e-9
    spent: dict[tuple[int, int], float] = {}
    measured: dict[tuple[int, int], float] = {}
    for _, point, repetition, visits, time in _pairs(experiment):
        key = (point, repetition)
        spent[key] = spent.get(key, 0.0) + visits * per_call
        measured[key] = measured.get(key, 0.0) + time
    shares = {key: spent[key] / measured[key] for key in spent if measured[key] > 0}
    if not shares:
        return None
    worst = max(shares, key=lambda key: shares[key])
    _, points = experiment.columns.points()
    where = format_point(zip(experiment.parameters, points[worst[0]].tolist(), strict=True))
    share = min(shares[worst], 1.0)
    slower = (
        f"about {1 / (1 - share):.3g}x an uninstrumented run"
        if share < 1
        else ("more than the whole measured time: the calibration and these runs disagree")
    )
    return (
        f"instrumentation overhead (estimated: calibrated cost per call x the measured calls, "
        f"no uninstrumented run): at most {100 * share:.3g} % of a rank's measured time, "
        f"{spent[worst]:.3g} s of {measured[worst]:.3g} s at {where or 'the one point'}, "
        f"so the instrumented runs take {slower}"
    )
