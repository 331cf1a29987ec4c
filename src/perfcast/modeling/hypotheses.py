"""Hypotheses of the search and the pool of each call path's best-screened ones.

A hypothesis (:class:`Hypothesis`) is a term family (:mod:`perfcast.modeling.space`) with,
per parameter, which of its kept candidate shapes it uses; :class:`Finalists` keeps each
call path's best-screened hypotheses over every stage of the search
(:mod:`perfcast.modeling.search`) and orders them for selection.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from perfcast.modeling.space import Family

ColumnKey = tuple[tuple[str, int, int], ...]
"""A design column: (parameter, candidate rank, shape term) for each factor of a product."""


@dataclass(frozen=True)
class Hypothesis:
    """A term family plus, per parameter, which kept candidate shape it uses."""

    family: Family
    slots: tuple[tuple[str, int], ...]  # (parameter, candidate rank)
    term_slots: tuple[tuple[int, str, int], ...] = ()
    """(term index, parameter, candidate rank): a parameter with its own shape in that term,
    for sums like ``n^2/p + log2(p)`` whose parameter falls in one term and rises in another."""


class Finalists:
    """Each call path's ``size`` best-screened hypotheses so far, over every stage.

    Hypotheses get ids in the order they are first offered (stage A's simple structures
    first), and screening ties are broken by that order."""

    def __init__(self, rows: int, size: int):
        self.hypotheses: list[Hypothesis] = []
        self._ids: dict[Hypothesis, int] = {}
        self.score = np.full((rows, size), np.inf)
        self.id = np.full((rows, size), -1)

    def register(self, hypotheses: Sequence[Hypothesis]) -> np.ndarray:
        for h in hypotheses:
            if h not in self._ids:
                self._ids[h] = len(self.hypotheses)
                self.hypotheses.append(h)
        return np.array([self._ids[h] for h in hypotheses])

    def offer(self, members: np.ndarray, hypotheses: list[Hypothesis], score: np.ndarray) -> None:
        """Merge the screening scores (len(members), H) of ``hypotheses`` into the pool."""
        ids = np.broadcast_to(self.register(hypotheses), score.shape)
        all_scores = np.concatenate([self.score[members], score], axis=1)
        all_ids = np.concatenate([self.id[members], ids], axis=1)
        unused = np.where(all_ids < 0, np.iinfo(all_ids.dtype).max, all_ids)
        order = np.lexsort((unused, all_scores), axis=-1)[:, : self.score.shape[1]]
        self.score[members] = np.take_along_axis(all_scores, order, axis=1)
        self.id[members] = np.take_along_axis(all_ids, order, axis=1)

    def prefer_simplest(
        self,
        terms: np.ndarray,
        shapes: np.ndarray,
        tolerance: np.ndarray,
        shape_tolerance: np.ndarray,
    ) -> None:
        """Move each row's simplest hypothesis to the front, the others keeping their order
        behind it: among those scoring within ``tolerance`` (K,) of the best, the fewest
        ``terms`` (K, size, like the pool); among those, the one with the smallest
        ``shapes`` key that scores within ``shape_tolerance`` (K,) of the best of them;
        ties go to the best-scored."""
        big = np.iinfo(terms.dtype).max
        best = self.score.min(axis=1, keepdims=True)
        eligible = np.isfinite(self.score) & (self.score <= best + tolerance[:, None])
        fewest = np.where(eligible, terms, big)
        eligible &= fewest == fewest.min(axis=1, keepdims=True)
        best_fewest = np.where(eligible, self.score, np.inf).min(axis=1, keepdims=True)
        eligible &= self.score <= best_fewest + shape_tolerance[:, None]
        chosen = np.argmin(np.where(eligible, shapes, big), axis=1)[:, None]
        slots = np.arange(self.score.shape[1])
        order = np.argsort(np.where(slots == chosen, -1, slots), axis=1, kind="stable")
        self.score = np.take_along_axis(self.score, order, axis=1)
        self.id = np.take_along_axis(self.id, order, axis=1)

    def within(self, tolerance: np.ndarray) -> np.ndarray:
        """(K, size) ids of each row's hypotheses scoring within ``tolerance`` (K,) of its
        best; -1 elsewhere."""
        best = self.score.min(axis=1, keepdims=True)
        close = np.isfinite(self.score) & (self.score <= best + tolerance[:, None])
        return np.where(close, self.id, -1)

    def finalist_ids(self, always: int, count: int) -> np.ndarray:
        """(K, count + 1) ids of each row's first ``count`` hypotheses, sorted per row, plus
        ``always``; -1 pads unused slots."""
        ids = np.where(np.isfinite(self.score), self.id, -1)[:, :count]
        ids = np.concatenate([ids, np.full((len(ids), 1), always)], axis=1)
        ids[:, :-1][ids[:, :-1] == always] = -1  # already a finalist: no second copy
        last = np.iinfo(ids.dtype).max
        ordered = np.sort(np.where(ids < 0, last, ids), axis=1)
        return np.where(ordered == last, -1, ordered)
