"""Lines of a measurement design: the points that differ in one parameter only.

A parameter's effect is judged apart from the others line by line: the noise F-test
(:mod:`perfcast.modeling.noise`), the single-parameter search of the modelers
(:mod:`perfcast.modeling.modeler`, :mod:`perfcast.effort.counts`) and the counters' check
that a count varies at all. One definition here keeps those stages agreeing on what a line
is and in which order its points come.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def lines_along(coordinates: np.ndarray, index: int) -> list[np.ndarray]:
    """Per line of the design along parameter ``index`` (every other parameter fixed), the
    row numbers of its points in ``coordinates`` (n, m), ordered by the parameter's value
    (ties in row order). One sort, so the cost stays linear in the lines."""
    others = np.delete(coordinates, index, axis=1)
    _, line_of = np.unique(others, axis=0, return_inverse=True)
    line_of = line_of.reshape(-1)
    order = np.lexsort((coordinates[:, index], line_of))  # stable: ties keep row order
    return np.split(order, np.cumsum(np.bincount(line_of))[:-1])


def batched_lines(
    coordinates: np.ndarray, index: int, keep: Callable[[np.ndarray], bool]
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The lines along ``index`` whose parameter values ``x`` ``keep(x)`` accepts, batched
    by identical ``x`` so that one least-squares solve serves the whole batch:
    ``(x, members)`` with ``members`` (lines, len(x)) the row numbers of each line's points."""
    batches: dict[bytes, tuple[np.ndarray, list[np.ndarray]]] = {}
    for members in lines_along(coordinates, index):
        x = coordinates[members, index]
        if keep(x):
            batches.setdefault(x.tobytes(), (x, []))[1].append(members)
    return [(x, np.stack(lines)) for x, lines in batches.values()]
