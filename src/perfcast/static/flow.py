"""Execution counts of basic blocks by flow conservation over symbolic counts.

Every block is entered as often as it is left; the function is entered once per call;
each binary loop is entered and iterated as often as its source loop's domain says.
With those facts most edge counts are fixed; the rest (a branch inside a loop, a
remainder block) take the count of their most specific source construct. The unknowns
are edge counts, the right-hand sides linear combinations of symbols, and the system is
kept in reduced row-echelon form with exact fractions so that consistency of each new
fact can be checked: a fact that contradicts the ones already accepted is dropped.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from fractions import Fraction

from perfcast.static.domains import Combination

Row = dict[int, Fraction]


def _axpy(target: dict, factor: Fraction, source: dict) -> None:
    """target += factor * source, dropping zeros."""
    for key, value in source.items():
        new = target.get(key, Fraction(0)) + factor * value
        if new:
            target[key] = new
        else:
            target.pop(key, None)


class FlowSystem:
    """Linear equations over edge counts with symbolic right-hand sides.

    Args:
        vanishes: tells whether a combination of symbols is zero for every parameter value
            (different symbols can be equal, ``n`` iterations of an outer loop and ``n``
            entries into an inner one). Such an identity is then used to eliminate a
            symbol instead of rejecting the equation that revealed it.
    """

    def __init__(self, vanishes: Callable[[Combination], bool] = lambda _: False) -> None:
        self.pivots: dict[int, tuple[Row, Combination]] = {}
        self.vanishes = vanishes
        self.identities: dict[str, Combination] = {}  # symbol -> its replacement

    def _substitute(self, rhs: Combination) -> Combination:
        out = dict(rhs)
        for symbol in [s for s in out if s in self.identities]:
            factor = out.pop(symbol)
            _axpy(out, factor, self.identities[symbol])
        return out

    def _identify(self, zero: Combination) -> None:
        """Use ``zero`` (a vanishing combination) to eliminate one symbol everywhere."""
        symbol = max(zero)
        factor = zero[symbol]
        replacement = {k: -v / factor for k, v in zero.items() if k != symbol}
        for other, value in self.identities.items():
            if symbol in value:
                coefficient = value.pop(symbol)
                _axpy(value, coefficient, replacement)
            self.identities[other] = value
        self.identities[symbol] = replacement
        for _, rhs in self.pivots.values():
            if symbol in rhs:
                coefficient = rhs.pop(symbol)
                _axpy(rhs, coefficient, replacement)

    def _reduce(self, row: Row, rhs: Combination) -> tuple[Row, Combination]:
        row, rhs = dict(row), self._substitute(rhs)
        for variable in [v for v in row if v in self.pivots]:
            factor = row.get(variable)
            if not factor:
                continue
            pivot_row, pivot_rhs = self.pivots[variable]
            _axpy(row, -factor, pivot_row)
            _axpy(rhs, -factor, pivot_rhs)
        return row, rhs

    def add(self, row: Row, rhs: Combination) -> bool:
        """Add ``sum(row[e] * x_e) = rhs``; False (and no change) if it contradicts."""
        row, rhs = self._reduce({k: Fraction(v) for k, v in row.items() if v}, rhs)
        if not row:
            if rhs and self.vanishes(rhs):
                self._identify(rhs)
                return True
            return not rhs
        pivot = min(row)
        scale = 1 / row[pivot]
        row = {k: v * scale for k, v in row.items()}
        rhs = {k: v * scale for k, v in rhs.items()}
        for other_row, other_rhs in self.pivots.values():
            factor = other_row.get(pivot)
            if factor:
                _axpy(other_row, -factor, row)
                _axpy(other_rhs, -factor, rhs)
        self.pivots[pivot] = (row, rhs)
        return True

    def value(self, row: Row) -> Combination | None:
        """The combination ``sum(row[e] * x_e)`` equals, or None if not yet determined.

        Reducing the equation ``row . x = 0`` by the pivots leaves ``remaining . x =
        -value``: with nothing remaining, the value is known (exact, in fractions)."""
        remaining, negated = self._reduce(row, {})
        return None if remaining else {k: -v for k, v in self._substitute(negated).items()}

    def free_variables(self, variables: range) -> list[int]:
        """Variables no accepted equation pins down (yet)."""
        return [v for v in variables if v not in self.pivots]


class EdgeIndex:
    """Numbers the edges of a CFG plus a virtual entry edge and one exit edge per exit."""

    def __init__(self, blocks: dict[int, list[int]], exits: set[int], entry: int):
        self.edges: list[tuple[int | None, int | None]] = [(None, entry)]
        for start in sorted(blocks):
            for successor in blocks[start]:
                self.edges.append((start, successor))
            if start in exits:
                self.edges.append((start, None))
        self.incoming: dict[int, list[int]] = defaultdict(list)
        self.outgoing: dict[int, list[int]] = defaultdict(list)
        for index, (source, target) in enumerate(self.edges):
            if target is not None:
                self.incoming[target].append(index)
            if source is not None:
                self.outgoing[source].append(index)

    def is_jump(self, edge: int, blocks) -> bool:
        """Is this edge the taken side of a conditional jump (not its fall-through)?"""
        source, target = self.edges[edge]
        if source is None or target is None:
            return False
        block = blocks[source]
        return len(block.successors) == 2 and block.successors[0] == target

    def block_row(self, block: int) -> Row:
        return {e: Fraction(1) for e in self.incoming[block]}

    def edge_row(self, edges: list[tuple[int, int]]) -> Row:
        wanted = set(edges)
        return {i: Fraction(1) for i, edge in enumerate(self.edges) if edge in wanted}
