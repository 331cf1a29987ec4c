"""An experiment reshaped into the arrays the search works on: repetitions per call path
and point.

An :class:`~perfcast.experiment.Experiment` is a long table, one row per measured value.
The modeler needs, per (call path, metric), every point's repetitions side by side: a
:class:`RepetitionGrid` of shape (call paths, points, repetitions), NaN-padded where a
point has fewer repetitions than the most repeated one, or none (a call path absent from
a point). The same grid is what the noise test (:mod:`perfcast.modeling.noise`) analyses
and what the robust centres (:mod:`perfcast.modeling.robust`) reduce to one value per point.

Call paths measured at the same points with the same prior are searched together
(:class:`CallPathGroup`): their fits share one design.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from perfcast.experiment.experiment import first_use_codes
from perfcast.modeling.model_warnings import existence_note

if TYPE_CHECKING:
    from perfcast.experiment.experiment import Experiment
    from perfcast.modeling.prior import Prior

Key = tuple[str, str]
"""(call path, metric)."""


@dataclass(frozen=True)
class RepetitionGrid:
    """Repetitions arranged per call path and coordinate: values (K, n, r) padded with NaN.

    Each (call path, coordinate) pair is one cell of the analysis of variance."""

    coordinates: np.ndarray  # (n, m)
    values: np.ndarray  # (K, n, r)

    @cached_property
    def counts(self) -> np.ndarray:
        """(K, n) repetitions measured in each cell (computed once: the search asks per
        call path)."""
        return np.sum(~np.isnan(self.values), axis=2)

    def along(self, columns: Sequence[int]) -> RepetitionGrid:
        """The same repetitions with the coordinates of the parameters ``columns`` only."""
        return RepetitionGrid(self.coordinates[:, list(columns)], self.values)


def occurrence(codes: np.ndarray) -> np.ndarray:
    """How many earlier entries share each entry's code (0 for the first), in order."""
    order = np.argsort(codes, kind="stable")
    ordered = codes[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    run_start = np.repeat(starts, np.diff(np.r_[starts, len(codes)]))
    out = np.empty(len(codes), dtype=np.int64)
    out[order] = np.arange(len(codes)) - run_start
    return out


def experiment_grid(experiment: Experiment) -> tuple[list[Key], RepetitionGrid]:
    """Every (call path, metric) of ``experiment`` in order of first appearance, and their
    repetitions at every point of the experiment (NaN where a call path was not measured).

    Built from the experiment's integer codes instead of group-bys: on large experiments
    (10^6 rows) pandas group-bys cost more than the whole search."""
    table = experiment.columns
    n_metrics = len(table.metrics)
    key_codes, pairs = first_use_codes(table.callpath * n_metrics + table.metric)
    keys = [
        (
            str(table.callpaths[int(pair) // n_metrics]),
            str(table.metrics[int(pair) % n_metrics]),
        )
        for pair in pairs
    ]
    point_codes, coords = table.points()
    n_keys, n_points = len(keys), len(coords)
    reps = occurrence(key_codes * n_points + point_codes)
    repetitions = np.full((n_keys, n_points, int(reps.max()) + 1), np.nan)
    repetitions[key_codes, point_codes, reps] = table.value
    return keys, RepetitionGrid(coords, repetitions)


@dataclass
class CallPathGroup:
    """Call paths (of any metric) measured at the same coordinates with the same prior:
    what one search works on."""

    keys: list[Key]
    grid: RepetitionGrid  # the group's points and raw repetitions (K, n, r)
    values: np.ndarray  # (K, n) aggregated
    noise: np.ndarray  # (K,) robust relative noise of one repetition (robust.robust_noise)
    prior: Prior | None
    warnings: list[list[str]] = field(default_factory=list)

    @property
    def coordinates(self) -> np.ndarray:
        """(n, m) the group's points."""
        return self.grid.coordinates

    @property
    def repetitions(self) -> np.ndarray:
        """(K, n, r) raw repetitions, NaN-padded."""
        return self.grid.values


def call_path_groups(
    keys: Sequence[Key],
    grid: RepetitionGrid,
    values: np.ndarray,
    noise: np.ndarray,
    priors: Mapping[str, Prior],
    parameters: Sequence[str],
) -> Iterable[CallPathGroup]:
    """Split the whole experiment's ``grid`` with its aggregated ``values`` (K, n) and
    robust ``noise`` (K,) into groups of call paths present at the same points with the
    same prior (by call path). A group present at some points only is fitted there, with
    a note saying where it exists (:func:`~perfcast.modeling.model_warnings.existence_note`)."""
    present = ~np.isnan(values)
    signature = [(present[k].tobytes(), priors.get(keys[k][0])) for k in range(len(keys))]
    members: dict[tuple[bytes, Prior | None], list[int]] = {}
    for k, sig in enumerate(signature):
        members.setdefault(sig, []).append(k)
    for (_, prior), rows in members.items():
        mask = present[rows[0]]
        domain = None if mask.all() else existence_note(parameters, grid.coordinates, mask)
        yield CallPathGroup(
            keys=[keys[k] for k in rows],
            grid=RepetitionGrid(grid.coordinates[mask], grid.values[rows][:, mask, :]),
            values=values[rows][:, mask],
            noise=noise[rows],
            prior=prior,
            warnings=[[] if domain is None else [domain] for _ in rows],
        )
