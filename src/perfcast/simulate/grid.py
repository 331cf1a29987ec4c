"""Cartesian rank grids for trace synthesis (``perfcast simulate --synthesize P --grid``).

Programs that decompose a 2-D or 3-D domain (HPCG, LULESH, a 5-point stencil) place rank r
at a position in a grid of ``dims`` ranks (one index per dimension), row-major (the last
dimension fastest, as MPI_Cart_create and LULESH's ``col = rank % n`` do), and exchange
halos with the ranks at fixed offsets from that position; the position decides which
neighbours exist. (Positions, not coordinates: perfcast's coordinates are the points of
parameter values an experiment measured.) The grid at each p follows the program's rule:
MPI_Dims_create's balanced factorisation, or a cube (LULESH). This module holds the grid
arithmetic; :mod:`perfcast.simulate.synthesis` infers which grid the traces were run on and
synthesises the target's.
"""

from __future__ import annotations

import math

from perfcast.errors import InputError

RULES = ("dims_create", "cube")
"""Named rules for the grid at a rank count: ``dims_create`` MPI_Dims_create's balanced
factorisation (2-D or 3-D, whichever the traces fit), ``cube`` the same restricted to cubes
(3-D, as LULESH requires)."""
CLASSES = ("low", "mid", "high", "only")
"""Where a rank sits along one dimension: at its first or last index, between them, or
alone (a dimension of one rank). These decide which of its neighbours exist."""

Dims = tuple[int, ...]


def dims_create(ranks: int, dimensions: int) -> Dims:
    """MPI_Dims_create's balanced factorisation of ``ranks`` into ``dimensions`` factors,
    largest first: prime factors, largest first, each to the dimension with the smallest
    product so far: the same as Open MPI 4.1.4's MPI_Dims_create for every p from 1 to 130
    in 2-D and 3-D (checked here; 12 -> 3x2x2, 16 -> 4x2x2, 24 -> 4x3x2, 36 -> 6x6)."""
    factors: list[int] = []
    rest, divisor = ranks, 2
    while divisor * divisor <= rest:
        while rest % divisor == 0:
            factors.append(divisor)
            rest //= divisor
        divisor += 1
    if rest > 1:
        factors.append(rest)
    dims = [1] * dimensions
    for factor in sorted(factors, reverse=True):
        smallest = dims.index(min(dims))
        dims[smallest] *= factor
    return tuple(sorted(dims, reverse=True))


def cube(ranks: int) -> Dims | None:
    """The edge of a cube of ``ranks`` ranks as a 3-D grid, or None where it is no cube."""
    edge = round(ranks ** (1 / 3))
    return (edge, edge, edge) if edge**3 == ranks else None


def by_rule(rule: str, ranks: int, dimensions: int, ascending: bool) -> Dims | None:
    """The grid ``rule`` gives ``ranks`` (None where it gives none: a non-cube), its
    factors in the order the traces showed (largest first, or smallest first as programs
    that make x the largest and the fastest dimension have it)."""
    if rule == "cube":
        return cube(ranks) if dimensions == 3 else None
    dims = dims_create(ranks, dimensions)
    return tuple(reversed(dims)) if ascending else dims


def parse(text: str, ranks: int) -> tuple[Dims | None, str]:
    """``--grid``'s value: a target grid (``4x4x4``, its product ``ranks``) or a rule name;
    returns (the target's dims or None, the rule for the traces' grids)."""
    if text in RULES:
        return None, text
    try:
        dims = tuple(int(part) for part in text.lower().split("x"))
    except ValueError:
        dims = ()
    if len(dims) not in (2, 3) or min(dims) < 1:
        raise InputError(
            f"--grid {text!r}: give the target's grid as AxB or AxBxC (ranks along each "
            f"dimension, the last the fastest in rank order) or a rule: {', '.join(RULES)}"
        )
    if math.prod(dims) != ranks:
        raise InputError(
            f"--grid {text}: {math.prod(dims)} ranks, but --synthesize asks for {ranks}: "
            "give a grid whose product is the target's rank count"
        )
    return dims, "dims_create"


def position(rank: int, dims: Dims) -> tuple[int, ...]:
    """Rank ``rank``'s index along each dimension, row-major (the last dimension fastest):
    the inverse of :func:`rank_at`."""
    found = []
    for size in reversed(dims):
        rank, index = divmod(rank, size)
        found.append(index)
    return tuple(reversed(found))


def rank_at(position: tuple[int, ...], dims: Dims) -> int:
    rank = 0
    for index, size in zip(position, dims, strict=True):
        rank = rank * size + index
    return rank


def role(rank: int, dims: Dims) -> str:
    """The rank's place along every dimension (:data:`CLASSES`), comma-separated: ranks
    with one role have the same neighbour directions (a corner, an edge, a face, the
    interior)."""
    return ",".join(
        _place(index, size) for index, size in zip(position(rank, dims), dims, strict=True)
    )


def _place(index: int, size: int) -> str:
    if size == 1:
        return "only"
    if index == 0:
        return "low"
    return "high" if index == size - 1 else "mid"


def text(dims: Dims) -> str:
    return "x".join(map(str, dims))


def smallest_with(role_name: str) -> Dims:
    """The smallest grid that has a rank of role ``role_name``: the run to trace where the
    traces lack it (3 ranks along a dimension where it is between the ends, 2 at an end,
    1 alone)."""
    sizes = {"low": 2, "high": 2, "mid": 3, "only": 1}
    return tuple(sizes[place] for place in role_name.split(","))


def offset_fits(offset: int, place: str, size: int) -> bool:
    """Whether every rank at ``place`` along a dimension of ``size`` ranks has a neighbour
    at ``offset`` along it, without wrapping: a stencil wider than one neighbour reaches
    outside the grid from ranks its roles do not tell apart."""
    if place == "only":
        return offset == 0
    if place == "low":
        return 0 <= offset <= size - 1
    if place == "high":
        return -(size - 1) <= offset <= 0
    return -1 <= offset <= 1
