"""Synthetic measurements: known functions sampled on a full-factorial grid.

Mirrors the measurement design of ``noise-resilient-priors.txt`` V-A4: 5 values per
parameter, all 5^m combinations, 5 repetitions each. Without noise every repetition equals
the truth exactly; noise is a separate, explicit step (:mod:`perfcast.synth.noise`), so the
same clean benchmark can be perturbed at several intensities.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from perfcast.errors import InputError
from perfcast.experiment.experiment import (
    CALLPATH,
    METRIC,
    REPETITION,
    VALUE,
    Experiment,
    Metric,
)
from perfcast.experiment.metrics import TIME_METRIC
from perfcast.modeling.pmnf import Model
from perfcast.synth.functions import FunctionSpace, Structure, random_function

PAPER_GRIDS: dict[str, tuple[float, ...]] = {
    "p": (128, 256, 512, 1024, 2048),
    "n": (8000, 16000, 24000, 32000, 40000),
    "m": (10, 20, 30, 40, 50),
    "t": (2, 4, 8, 16, 32),
}
"""Default parameter values. ``p`` and ``n`` are the training values of the paper's
synthetic evaluation (V-B: ranks doubling, problem size in equal steps); ``m`` and ``t``
add one more arithmetic and one more geometric grid for 3 and 4 parameters."""

DEFAULT_REPETITIONS = 5
CALLPATH_ROOT = "main"


def default_grid(n_parameters: int) -> dict[str, tuple[float, ...]]:
    """The first ``n_parameters`` of :data:`PAPER_GRIDS`."""
    if not 1 <= n_parameters <= len(PAPER_GRIDS):
        raise InputError(
            f"default grids exist for 1 to {len(PAPER_GRIDS)} parameters, got {n_parameters}"
        )
    return dict(itertools.islice(PAPER_GRIDS.items(), n_parameters))


def grid_points(grid: Mapping[str, Sequence[float]]) -> np.ndarray:
    """All combinations of the grid's values, shape (n_points, n_parameters), parameters in
    the grid's order and the last parameter varying fastest. (A campaign's full design of
    run points and repetitions is :func:`perfcast.measure.design.full_factorial`.)"""
    if not grid:
        raise InputError("the grid has no parameter")
    for name, values in grid.items():
        if len(values) == 0:
            raise InputError(f"parameter {name!r} has no values in the grid")
    return np.array(list(itertools.product(*grid.values())), dtype=float)


def next_point(values: Sequence[float]) -> float:
    """The next value "following the same interval rule" (paper V-A5): ``{2^5..2^9}``
    continues with ``2^10`` and ``{8000, 16000, .., 40000}`` with ``48000``."""
    v = np.asarray(values, dtype=float)
    if len(v) < 2:
        raise InputError(f"need at least two values to continue a sequence, got {list(values)}")
    steps = np.diff(v)
    if np.allclose(steps, steps[0], rtol=1e-9):
        return float(v[-1] + steps[0])
    if (v > 0).all():
        ratios = v[1:] / v[:-1]
        if np.allclose(ratios, ratios[0], rtol=1e-9):
            return float(v[-1] * ratios[0])
    raise InputError(
        f"values {list(values)} are neither evenly spaced nor a geometric sequence; "
        "give the test point explicitly"
    )


def evaluation_point(grid: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """The unseen test point of the RE metric: every parameter one step beyond its grid."""
    return {name: next_point(values) for name, values in grid.items()}


def sample(
    truths: Sequence[Model],
    grid: Mapping[str, Sequence[float]],
    *,
    repetitions: int = DEFAULT_REPETITIONS,
    metric: Metric | None = None,
) -> Experiment:
    """Noise-free measurements of every truth at every grid point, ``repetitions`` times.

    Call paths come from the truths; all truths must measure the same metric.
    """
    if repetitions < 1:
        raise InputError(f"repetitions must be at least 1, got {repetitions}")
    if not truths:
        raise InputError("no functions to sample")
    parameters = list(grid)
    metric = metric or Metric(truths[0].metric)
    for truth in truths:
        if truth.metric != metric.name:
            raise InputError(
                f"function {truth.callpath!r} measures {truth.metric!r}, not {metric.name!r}"
            )
        unknown = [p for p in truth.parameters if p not in grid]
        if unknown:
            raise InputError(f"function {truth.callpath!r} uses parameters {unknown} not in grid")
    points = grid_points(grid)
    columns = {p: points[:, k] for k, p in enumerate(parameters)}
    values = np.stack([np.broadcast_to(t.evaluate(columns), len(points)) for t in truths])
    n_truths, n_points = values.shape
    shape = (n_truths, n_points, repetitions)
    frame = pd.DataFrame(
        {
            CALLPATH: np.repeat([t.callpath for t in truths], n_points * repetitions),
            METRIC: metric.name,
            **{
                p: np.broadcast_to(points[None, :, k, None], shape).ravel()
                for k, p in enumerate(parameters)
            },
            REPETITION: np.broadcast_to(np.arange(repetitions), shape).ravel(),
            VALUE: np.broadcast_to(values[:, :, None], shape).ravel(),
        }
    )
    return Experiment(parameters, frame, [metric], source="synthetic")


@dataclass
class SyntheticBenchmark:
    """Measurements with their ground truth: one known function per call path."""

    experiment: Experiment
    truths: dict[str, Model]
    grid: dict[str, tuple[float, ...]]

    @property
    def test_point(self) -> dict[str, float]:
        return evaluation_point(self.grid)


def generate(
    n_callpaths: int,
    rng: np.random.Generator,
    *,
    grid: Mapping[str, Sequence[float]] | None = None,
    n_parameters: int = 2,
    repetitions: int = DEFAULT_REPETITIONS,
    structure: Structure | str = Structure.MIXED,
    space: FunctionSpace | None = None,
    metric: str = TIME_METRIC,
) -> SyntheticBenchmark:
    """``n_callpaths`` random truths over ``grid`` (default: :func:`default_grid`), balanced
    at the grid's largest point and sampled without noise. Call paths are
    ``main->kernel_0000``, ``main->kernel_0001``, ..."""
    if n_callpaths < 1:
        raise InputError(f"need at least one call path, got {n_callpaths}")
    chosen = {k: tuple(v) for k, v in (grid or default_grid(n_parameters)).items()}
    width = max(4, len(str(n_callpaths - 1)))
    largest = {name: max(values) for name, values in chosen.items()}
    truths = {}
    for index in range(n_callpaths):
        callpath = f"{CALLPATH_ROOT}->kernel_{index:0{width}d}"
        truths[callpath] = random_function(
            callpath, largest, rng, structure=structure, space=space, metric=metric
        )
    experiment = sample(list(truths.values()), chosen, repetitions=repetitions)
    return SyntheticBenchmark(experiment, truths, chosen)
