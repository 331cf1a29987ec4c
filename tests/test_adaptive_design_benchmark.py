"""benchmarks/adaptive_design.py: the comparison its tables rest on.

Its strategies are compared on common random numbers: the k-th run at a point is the same
draw whichever strategy asks for it, in whatever batches and order. Without that, the
full factorial drawn twice missed its own median error, and 'to reach' measured the luck
of the draws more than the designs."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def design_bench():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module("adaptive_design")
    finally:
        sys.path.remove(str(BENCHMARKS))


def _problem(design_bench, level=0.1):
    grid = {"p": design_bench.GRID["p"], "n": design_bench.GRID["n"]}
    truth = design_bench.random_function(
        design_bench.CALLPATH,
        {name: max(values) for name, values in grid.items()},
        np.random.default_rng(3),
        space=design_bench.SPACE,
    )
    return design_bench.synthetic(truth, grid, design_bench.Noise("uniform", level, symmetric=True))


def test_every_strategy_of_a_seed_gets_the_same_kth_run_at_a_point(design_bench):
    problem = _problem(design_bench)
    corner, far = (64.0, 8000.0), (1024.0, 40000.0)
    batched = design_bench.Campaign(problem, 7)
    batched.run(corner, 3)
    batched.run(far, 1)
    batched.run(corner, 2)
    at_once = design_bench.Campaign(problem, 7)
    at_once.run(far, 1)
    at_once.run(corner, 5)
    assert batched.runs == at_once.runs
    assert batched.core_hours == pytest.approx(at_once.core_hours)
    assert len(set(batched.runs[corner])) == 5  # noisy draws, not one value repeated
    other_seed = design_bench.Campaign(problem, 8)
    other_seed.run(corner, 5)
    assert other_seed.runs[corner] != batched.runs[corner]


def test_quick_run_prints_the_summary_with_the_paired_column():
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "adaptive_design.py"), "--quick", "--no-extrap"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    summary = done.stdout.rsplit("-" * 20, 1)[-1].strip().splitlines()
    assert len(summary) == 1  # one group: 2 parameters, 5 % noise
    fields = summary[0].split()
    assert fields[:3] == ["2", "5%", "2"]  # parameters, noise, seeds
    assert any(f.endswith("/2") for f in fields)  # seeds at most the full factorial's error
    assert "<=full" in done.stdout
