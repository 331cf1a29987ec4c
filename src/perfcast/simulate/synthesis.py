"""Traces of rank counts nobody ran: from traced runs at a few small p, the trace at a large p,
in the format ``perfcast simulate`` replays (issue 16; the idea is dPerf's block
benchmarking, ``dperf-block-benchmarking-prediction.txt``, carried over from one traced
run to a family of them). ``perfcast simulate TRACE... --synthesize P -o DIR`` runs it.

Method. Every rank's action file is read as a sequence of MPI actions, each carrying the
compute that precedes it (a compute block of zero length writes no line, so compute is
attached to the action it leads to rather than aligned on its own). A rank's *role* picks
its template: rank 0 is ``first``, rank p-1 ``last``, the others ``interior`` (or its place
in a Cartesian grid: "Grids" below). Then:

1. **Structure.** Every rank of a role, in every input trace, must run the same sequence of
   actions: the same operations with the same tags, datatypes and SimGrid's fixed fields.
   Anything else (ranks of one role that differ, such as a 2-D grid's edge ranks read as
   a chain's interior, which is why a grid is tried next; a sequence
   whose length grows with p, such as a hand-written recursive doubling; two different
   programs) is refused with the trace, rank, action, line and what differs: the structure
   at the target cannot be derived from such runs, and guessing it would replay another
   program.
2. **Peers.** Each peer field (send/receive partners, a wait's source and destination, a
   collective's root) gets the relation to the rank that every observation of every input
   satisfies: an offset modulo p (``r+1``, ``r-1``: rings and neighbours), or an absolute
   rank counted from the first or the last rank (``0``, ``p-1``). Of the offsets that fit
   (they differ by multiples of every input p) the smallest is taken, the neighbour a
   program means; where relations of different kinds fit every input but name different
   ranks at the target, the synthesis is refused, asking for a run that tells them apart.
   A peer that follows none (a tree, a random partner) is refused.
3. **Amounts.** Message counts (per aligned action and field) and compute blocks are
   modeled in p by perfcast's PMNF modeler over the input rank counts, every observation a
   repetition and the mean the point's value (``aggregation="mean"``), so that a block's
   total at the target is its count times that mean. Blocks are keyed by the pair of
   actions around them, every role and occurrence together, as a traced run's blocks are
   keyed by the call paths around them whichever rank ran them. A quantity that does not
   change with p is modeled as a constant (the modeler's noise test picks it;
   ``tests/test_simulate_synthesis.py`` checks it), so a halo of 128 doubles stays 128
   doubles at p = 65536. A model that predicts a negative amount at the target is refused.
   Where the means go up and down with p the series is given the constant model
   (:func:`_monotone` says why: one rank's single block is otherwise extrapolated from
   noise to hours).

Compute per rank (``noise``): ``mean`` writes every block at its modeled mean, the run
without the machine's noise; ``resample`` multiplies it by ratios drawn independently per
rank and occurrence from the ratios the inputs show (a value over its rank count's mean), so
the wait for the slowest rank at every synchronisation grows with p as it did in the traced
runs; ``correlated`` splits every ratio into the share all ranks of its input had at that
occurrence (a step in which the machine was slow) and the rank's own (one slow rank), draws
the first once per occurrence for every rank and the second per rank, so that only the
ranks' own spread makes the slowest rank wait: under ``resample`` a step the whole machine
was slow in is drawn for one rank at a time, as if that rank alone had been slow
(``tests/test_simulate_synthesis.py`` checks both: slowdowns every rank shares give no wait
under ``correlated``). Which one is right depends on where the target's noise comes from:
shared (ranks that share nodes, a file system) or each node's own. Measured on the stencil's
sweep (one set of traces at p = 3..8): the occurrence's share is 11-35 % of the ratios'
variance, a rank's own across its steps 1-2 % at p = 6 and 8 (17-46 % at p = 3..5, where
ranks keep their cores). Over nine runs of ``benchmarks/synthesis_vs_simulated.py
--quick``, each tracing anew, the slowest of 64 synthesised ranks is 1.4-1.7 times the mean
under ``correlated`` and 1.7-2.2 under ``resample``; SMPI's direct run shows 1.9-2.5, its
noise being this host's, drawn burst by burst as one process runs every rank in turn
(independently, as ``resample`` draws). Against that run ``correlated`` is -8 to +15 % at p
= 16 (``resample`` 0 to +27 %), and -23 to -9 % at p = 64 (``resample`` -15 to +11 %);
neither is better everywhere on the stencil. The benchmark reports how much
of the direct time the growth of SMPI's own bursts with p accounts for (3-16 % at p = 64 in
those runs), which no synthesis should imitate. Earlier measurements, before ``correlated``
(the stencil, 128 x 128 per rank, 50 steps, from CPU-clock traces at p = 3..8 on this shared
2-core machine, 1 us links; against SMPI simulating the uninstrumented program): ``mean`` is
6 % short at p = 16 and 12-37 % short at p = 64..1024, ``resample`` 6-13 % long up to p =
256 and 30 % at 1024; against the replay of the trace recorded at 16 ranks, ``mean`` was
7-26 % short and ``resample`` 9 % short to 16 % long over seven runs of the benchmark. What
``mean`` leaves out is the wait for the slowest rank: the slowest rank's sweep over the mean
one, summed over steps, is 1.0-1.5 in the traced runs and in SMPI at p = 16, 2.0 in SMPI at
p = 64 and 2.35 in ``resample`` (it draws the inputs' outliers as often as they occurred,
which at large p is every step). On 10 us links, where messages weigh more, ``mean`` is
within 3 % of the recorded trace at p = 16 (the test).

Validation (``benchmarks/synthesis_vs_simulated.py``, synthesised against SMPI simulating
the program itself at p ranks, the least of three direct runs). Communication-bound (the
stencil on 50 us links): every mode within 1.5 % at p = 16 ... 1024. Compute-bound with
millisecond bursts that stay in the cache (``--program ring``, 20 steps of 1.1 ms, traced
by mpirun at p = 3..8 on this idle 2-core machine,
``benchmarks/results/synthesis_vs_simulated_ring.txt``): ``resample`` +1.6, +1.0, +0.8 and
-4.7 % at p = 16, 64, 256 and 1024, ``correlated`` -0.4, -0.6, -0.7 and -5.7 %, ``mean``
-3.6, -5.2, -6.3 and -11.6 %: without the ranks' spread the slowest rank's wait is missing,
and it grows with p. From traces of virtual runs (``--inputs virtual``, the same build run
by smpirun at p = 3..8 and directly at p), whose spread is larger than the direct runs'
(slowest over mean 1.1 at p = 8), ``resample`` is +13 % at p = 16 and 64 and -10 % at 1024
(``..._ring_virtual.txt``). Repeated direct runs themselves differ: the largest of three
was 1.01 to 2.3 times the least, one of them slowed by a single stall of this host that
every rank then waits for. Microsecond bursts (the stencil's 22 us sweep) are the host's
jitter more than the program's, and SMPI's own bursts there grow with p (its cache: +68 %
at p = 256, 26 % of the direct time): on an idle machine ``resample`` was +12.3, +8.3, -6.1
and -2.2 % at p = 16 ... 1024, ``correlated`` +8.0, -9.3, -21 (+6.1 without SMPI's cache
step) and -12.8 %, ``mean`` -6 to -37 % (``synthesis_vs_simulated.txt``). For a
compute-bound program at large p, ``--noise correlated`` is the measured choice; ``mean``
stays the default because it is the program's cost without any machine's noise, which is
what a trace for another machine should carry unless that machine's noise is known.

Limits. The ranks of a role share their template and the blocks their models: imbalance
between ranks that run the same structure (rank 0's output at the end) is spread over them,
and the difference between a block's first and later occurrences is averaged away (the total
is kept). Per-rank arrays whose length is p (``allgatherv``, ``alltoallv``,
``reducescatter``: NAS IS) are refused: their entries cannot be aligned across rank counts.
Structures that are neither a chain nor a grid (trees, a partner that changes with the step)
are refused, not approximated. Extrapolation is only as good as the models' reach: p = 65536
from p <= 8 is far beyond the data, and a trend the traced machine adds (ranks sharing 2
cores slow each other's caches a little more at every p) is extrapolated with the rest:
trace with few ranks per core. Measured: in 6 of 25 sets of stencil traces at p = 3..8 (4
ranks per core at p = 8) the block after each MPI_Allreduce, 0.4 us at p = 3 and up to 0.7
us at p = 8, was modeled with p log2(p)^2 up to p^3 log2(p)^2: 0.4 ms to 6 s per occurrence
at p = 1024 (in 3 more, 0.13-0.19 ms), and the synthesised run is as wrong.

Grids. Where the chain reading refuses (HPCG: rank 0 of 4 receives from rank 2, rank 0 of
3 sends to rank 1), the ranks are read as a 2-D or 3-D Cartesian grid, row-major (the last
dimension fastest, as MPI_Cart_create and LULESH number them), each trace's grid being
MPI_Dims_create's factorisation of its p (:mod:`perfcast.simulate.grid`), largest factor
first or, for programs that make the fastest dimension the largest, smallest first. The
readings are tried in that order, 2-D before 3-D, and the first under which every traced
rank's role (its place along every dimension: ``low``, ``mid``, ``high``, or ``only`` in a
dimension of one rank; a corner, an edge, a face or the interior) runs one sequence in every
trace, and every peer is one offset in grid positions (wrapped around where the grid is
periodic), is taken: every traced role, not only the target's, must fit, which is what tells
readings apart (a 3-D stencil read on 4x2 at p = 8 and 9x3 at p = 27 has rank 0's third
peer at (2,0) and (3,0)). ``--grid`` gives the target's grid (``4x5x4``) or the rule
(``dims_create``, ``cube``). A point-to-point peer is a grid offset even where a fixed rank
fits too: the interior of 3x3x3 is one rank, whose neighbours are fixed ranks as well, and a
decomposition's messages go to neighbours; a collective's root is a fixed rank. Each target
rank runs the template of its role, its counts and compute blocks modeled in p from the
traced ranks of that role (blocks per role here: a corner packs fewer halos between the same
two calls than the interior). A role of the target that no trace has is refused, naming the
smallest grid that has it (the interior of 4x4x4 needs a trace on 3x3x3 or larger: HPCG
traced at p = 3, 4, 6, 8 has none); so is a target whose roles the traces have at fewer
than three rank counts. A role seen at one rank count only (the interior, from 27 alone)
gets that run's amounts as constants, which the command says. Stencils wider than one
neighbour are refused where an offset would leave the grid: a rank one step from the end
differs from the interior in ways these roles do not tell apart. Measured: the 2-D halo
exchange of ``benchmarks/synthesis_grid`` (5-point) traced at p = 4, 9, 16 and synthesised
at 36, and its 27-point 3-D version traced at 8, 12, 27 and synthesised at 64, have every
rank's messages as the traced run at that p has them; so has LULESH (``-s 4 -i 10``,
traced at 8, 27, 64 with the CPU clock on 2 cores) synthesised at 125 against its trace at
125 (12.6 s to trace there). Replayed on a 125-node cluster (1 us links), the synthesised
LULESH takes 3.9 ms under ``mean``, 5.6 ms under ``correlated`` and ``resample``, and the
recorded trace 8.4 ms, of which 3.6 ms is communication: waits for ranks that 125
processes on 2 cores slowed, which the traces at 8..64 had less of.

Steep compute blocks. Hence a compute block whose model grows faster than linearly in p
from the largest traced rank count to the target (:meth:`Quantity.steep`: compute per rank
that grows so is rare in MPI programs, the traced machine's own growth is not) gets the
``steep`` policy (:data:`STEEP`, ``--steep``). ``bound``, the default, refits it with
exponents up to p^1 and no logarithms and, where even that model is steeper than linear at
the target (a negative constant under its linear term), holds it at linear growth from its
mean at the largest traced rank count (:func:`_bounded`); the :class:`Quantity` keeps the
fitted model beside the bounded one (:class:`Bound`) and the command prints both with their
values at the target. ``keep`` writes the fitted value with a warning, ``refuse`` stops with the
block's model, its means at the traced rank counts and its value at the target, before
anything is written. Message counts are left as fitted under every policy: a count that
grows with p (a gather's) is the program's structure. A block that truly grows faster than
p per rank is bounded too: ``--steep keep`` is for a program known to do so.

Large p. SimGrid 3.32's replay reads one action file per rank, and it checks the rank at the
start of every line (``xbt_replay.cpp``: "Ignore trace element not for me"): an index that
lists one file for several ranks makes all but one rank skip every action and the replay
deadlock (measured). So every rank gets its own file, written from its role's template with
the peers and (under ``resample`` and ``correlated``) the compute filled in per rank, in
chunks of :data:`CHUNK` ranks. Measured here, the stencil at 256 x 256 per rank and 20 steps
(243 actions per rank): p = 4096 synthesises in 5.3 s (24 MB) and replays in 172 s with 274
MB of memory; p = 1024 replays in 10.5 s (94 MB); p = 65536 synthesises in 39 s into 131,074
files (412 MB, 82 MB of memory), but its replay was not run: replay time grows about as p^2
here (4x the ranks, 16x the time), which puts p = 16384 near 45 minutes.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from dataclasses import field as dataclass_field
from fractions import Fraction
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from perfcast.errors import InputError, PerfcastError
from perfcast.inputs import read_text
from perfcast.simulate import grid
from perfcast.simulate.trace import (
    BLOCKS_FORMAT,
    FORMAT,
    HINT,
    INDEX_FILE,
    MAX_AMOUNT,
    SUMMARY_FILE,
    Trace,
)

if TYPE_CHECKING:
    import numpy as np

    from perfcast.modeling.pmnf import Model
    from perfcast.modeling.prior import Prior

PEER, AMOUNT, FIXED = "P", "A", "F"
SCHEMAS: dict[str, str] = {
    "init": "",
    "finalize": "",
    "barrier": "",
    "send": "PFAF",
    "recv": "PFAF",
    "isend": "PFAF",
    "irecv": "PFAF",
    "wait": "PPF",
    "bcast": "APF",
    "reduce": "AFPF",
    "allreduce": "AFF",
    "gather": "AAPFF",
    "scatter": "AAPFF",
    "allgather": "AAFF",
    "alltoall": "AAFF",
}
"""The fields of each action a traced run writes (``measure/README.md``, "Trace mode"): a
peer rank (P), an amount modeled in p (A: element counts), or a field that must be the same
everywhere (F: tags, datatype ids, SimGrid's unused zero)."""

PER_RANK_ARRAYS = ("allgatherv", "alltoallv", "reducescatter")
ROOTED = ("bcast", "reduce", "gather", "scatter")
"""Collectives whose peer field is a root: absolute relations are preferred for it."""
MIN_RANK_COUNTS = 3
"""Distinct input rank counts the modeler needs to fit a function of p at all (its
``min_points``); five make its models far more reliable."""
MIN_RANKS = 3
"""Fewest ranks of an input or the target: below three there is no interior rank."""
ROLES = ("first", "interior", "last")
NOISE = ("mean", "resample", "correlated")
"""How the synthesised compute varies between ranks and occurrences of a block: ``mean``
writes the modeled mean everywhere; ``resample`` multiplies it by ratios drawn, independently
per rank and occurrence, from those the inputs show (value over its rank count's mean);
``correlated`` splits each ratio into the occurrence's share, common to every rank (the
ranks' mean at that occurrence over the rank count's mean), drawn once per occurrence for
all ranks, and the rank's share (its value over that occurrence's mean), drawn per rank."""
STEEP = ("bound", "keep", "refuse")
"""What becomes of a compute block whose model grows faster than linearly in p from the
largest traced rank count to the target (:meth:`Quantity.steep`). Compute per rank that grows
so is rare in MPI programs, and growth between a few small traced rank counts is often the
traced machine's own: in 6 of 25 sets of stencil traces at p = 3..8 (4 ranks per core at p =
8) the 0.4-0.7 us block after each MPI_Allreduce was modeled as up to p^3 log2(p)^2, 6 s per
occurrence at p = 1024. ``bound`` refits it with growth at most linear in p
(:func:`_bounded`), ``keep`` writes the fitted model's value, ``refuse`` stops with the block
and its data. Message counts are left as fitted under every policy: a count that grows with
p (a gather's) is the program's structure, not the traced machine's noise."""
CHUNK = 4096
"""Ranks whose compute is drawn at once: bounds the memory of the draw at large p."""


@dataclass(frozen=True)
class Relation:
    """How a peer field follows from the rank ``r`` of a run of ``p`` ranks."""

    kind: str
    """``offset``: (r + value) mod p; ``first``: value; ``last``: p - 1 - value; ``grid``:
    the rank at r's grid position plus ``vector`` in the target's grid ``dims``
    (wrapped around where ``periodic``)."""
    value: int = 0
    vector: tuple[int, ...] = ()
    dims: tuple[int, ...] = ()
    periodic: bool = False

    def peer(self, rank: int, ranks: int) -> int:
        if self.kind == "grid":
            position = grid.position(rank, self.dims)
            moved = tuple(c + v for c, v in zip(position, self.vector, strict=True))
            if self.periodic:
                moved = tuple(c % size for c, size in zip(moved, self.dims, strict=True))
            return grid.rank_at(moved, self.dims)
        if self.kind == "offset":
            return (rank + self.value) % ranks
        return self.value if self.kind == "first" else ranks - 1 - self.value

    def text(self) -> str:
        if self.kind == "grid":
            if not any(self.vector):
                return "r"
            moved = "r" + "(" + ",".join(f"{v:+d}" if v else "0" for v in self.vector) + ")"
            return moved + " wrapped" if self.periodic else moved
        if self.kind == "offset":
            return "r" if self.value == 0 else f"r{self.value:+d}"
        if self.kind == "first":
            return str(self.value)
        return "p-1" if self.value == 0 else f"p-{self.value + 1}"


@dataclass(frozen=True)
class Action:
    """One MPI action of a rank, with the compute that precedes it."""

    name: str
    fields: tuple[int, ...]
    compute: float
    """Flops of the compute block before it (0 where there is none)."""
    line: int
    """Its line in the rank's action file, for messages."""

    def shape(self) -> tuple[str, tuple[int, ...]]:
        """What must match across ranks and runs: the operation and its fixed fields."""
        schema = SCHEMAS[self.name]
        return self.name, tuple(
            v for v, kind in zip(self.fields, schema, strict=True) if kind == FIXED
        )

    def text(self) -> str:
        return " ".join([self.name, *map(str, self.fields)])


@dataclass(frozen=True)
class Quantity:
    """One modeled amount of the synthesised trace.

    Attributes:
        name: where it is: a compute block by the actions around it (``wait r r+1 1 ->
            allreduce n 0 0``, with the roles that run it where not all do), a count by its
            role, action and field (``interior: irecv r+1 0 n 0 (field 3)``).
        kind: ``flops`` (a compute block, per occurrence) or ``count`` (message elements).
        places: the blocks or fields whose series hold the same data and share this
            model (``name`` is the first of them).
        occurrences: how often it occurs in one rank, all its places together.
        model: its PMNF model in p.
        value: the model at the target rank count, rounded as the trace writes it.
    """

    name: str
    kind: str
    places: int
    occurrences: int
    model: Model
    value: int
    at_largest_input: float = 0.0
    """The mean of its values at the largest traced rank count."""
    bound: Bound | None = None
    """What the ``bound`` policy changed, where it did: ``model`` and ``value`` are then the
    bounded ones the trace has, and this holds the fitted model they replace."""

    def linear_limit(self, ranks: int, largest_input: int) -> float:
        """The value at ``ranks`` of linear growth in p from the largest traced rank count
        (from one flop or element where the largest trace has less, so that a block of
        nearly nothing is not called steep for a rounding's growth)."""
        return max(self.at_largest_input, 1.0) * ranks / largest_input

    def steep(self, ranks: int, largest_input: int) -> bool:
        """Whether the model grows faster from the largest trace to ``ranks`` than linearly
        in p: compute per rank that grows so with p is rare in MPI programs, and growth
        seen between a few small rank counts on a small machine is often the traced runs'
        own (ranks sharing a core's caches: 0.4 us blocks of the stencil grew 2x from p = 3
        to 8 and were once extrapolated to 6 s at p = 1024)."""
        return self.value > self.linear_limit(ranks, largest_input)


@dataclass(frozen=True)
class Bound:
    """A steep compute block as fitted, before ``steep="bound"`` replaced its model."""

    fitted: Model
    """The model of the full search, steeper than linear in p beyond the traces."""
    fitted_value: int
    """That model at the target rank count, rounded as the trace would have written it."""
    held: bool
    """Whether even the search limited to growth at most linear in p gave a model steeper
    than linear at the target (a negative constant under a linear term does), so that the
    block is held at linear growth from its mean at the largest traced rank count."""


@dataclass(frozen=True)
class Synthesis:
    """A synthesised trace directory and what went into it."""

    directory: Path
    ranks: int
    inputs: tuple[int, ...]
    """The input traces' rank counts, in the order given."""
    noise: str
    steep: str
    """The policy for compute blocks steeper than linear in p (:data:`STEEP`)."""
    actions: int
    """Action lines written, all ranks together."""
    relations: dict[str, int]
    """Peer fields of the templates per relation (``r+1``, ``0``, ...)."""
    quantities: tuple[Quantity, ...]
    """Modeled amounts, largest contribution at the target first (compute blocks by
    flops per rank, then counts by elements per rank)."""
    grid: GridLayout | None = None
    """The Cartesian grids the ranks were read on, where not a chain."""


@dataclass(frozen=True)
class GridLayout:
    """The grids of a synthesis from a 2-D or 3-D decomposition."""

    target: tuple[int, ...]
    inputs: tuple[tuple[int, ...], ...]
    """Each input trace's grid, in the order given."""
    rule: str
    """How the grids were found: ``dims_create`` (MPI_Dims_create's factorisation, largest
    first), ``dims_create ascending`` (smallest first), ``cube``; a target given as
    ``--grid AxBxC`` adds ``, target given``."""
    roles: dict[str, tuple[int, ...]]
    """The target's roles, each with the rank counts whose traces have it: a role seen at
    one rank count gets its amounts from that run alone (a constant in p) and its peers as
    grid offsets, which one run cannot tell from fixed ranks."""


@dataclass(frozen=True)
class _Structure:
    """The ranks' communication structure: templates and peer relations by role, and which
    target ranks run each role."""

    templates: dict[str, _Template]
    relations: dict[str, dict[tuple[int, int], Relation]]
    members: Mapping[str, Sequence[int]]
    grid: GridLayout | None = None


@dataclass(frozen=True)
class _Template:
    role: str
    actions: tuple[Action, ...]
    """The sequence of the role's reference rank (shapes are equal for every rank)."""
    observations: tuple[tuple[int, int, tuple[Action, ...]], ...]
    """(p, rank, the rank's actions) for every rank of the role in every input."""


def role_of(rank: int, ranks: int) -> str:
    """Which template rank ``rank`` of ``ranks`` runs: the ends of a chain differ from its
    middle, and a program's root is usually rank 0."""
    if rank == 0:
        return "first"
    return "last" if rank == ranks - 1 else "interior"


def synthesize(
    traces: Sequence[Trace],
    ranks: int,
    output: Path,
    *,
    noise: str = "mean",
    seed: int = 0,
    steep: str = "bound",
    grid_option: str | None = None,
) -> Synthesis:
    """Write the trace of ``ranks`` ranks derived from ``traces`` (complete traces of one
    program at several rank counts) into ``output``, which must not exist or be empty.
    ``noise`` is one of :data:`NOISE` (``seed`` seeds the resampling), ``steep`` one of
    :data:`STEEP`: ``bound`` by default, since a block extrapolated from the traced
    machine's own growth makes the whole synthesised run as wrong as it is.

    ``grid_option`` (``--grid``) reads the ranks as a Cartesian grid: the target's
    (``4x4x4``) or a rule (:data:`grid.RULES`). Without it the ranks are read as a chain
    (first, interior, last) and, where a chain does not fit, as a 2-D or 3-D grid of
    MPI_Dims_create's factorisation."""
    if noise not in NOISE:
        raise InputError(f"noise {noise!r}: choose one of {', '.join(NOISE)}")
    if steep not in STEEP:
        raise InputError(f"steep {steep!r}: choose one of {', '.join(STEEP)}")
    target, rule = (None, "") if grid_option is None else grid.parse(grid_option, ranks)
    if rule == "cube" and grid.cube(ranks) is None:
        raise InputError(
            f"--grid cube: {ranks} ranks are not a cube (8, 27, 64, 125, ...): synthesise a "
            "cube number of ranks, or give the target's grid as --grid AxBxC"
        )
    _check_inputs(traces, ranks, output)
    sequences = [
        [_read_actions(path, rank) for rank, path in enumerate(t.rank_files)] for t in traces
    ]
    if grid_option is not None:
        structure = _grid_structure(traces, sequences, ranks, target, rule)
    else:
        try:
            structure = _chain_structure(traces, sequences, ranks)
        except PerfcastError as refused:
            structure = _grid_structure(traces, sequences, ranks, None, "dims_create", refused)
    quantities, counts, blocks = _model(
        structure.templates, structure.relations, ranks, steep, structure.grid is not None
    )
    written = _write(_Output(output, traces, ranks, noise, seed, steep), structure, counts, blocks)
    counted: dict[str, int] = {}
    for role_relations in structure.relations.values():
        for relation in role_relations.values():
            counted[relation.text()] = counted.get(relation.text(), 0) + 1
    return Synthesis(
        directory=output,
        ranks=ranks,
        inputs=tuple(t.ranks for t in traces),
        noise=noise,
        steep=steep,
        actions=written,
        relations=counted,
        quantities=quantities,
        grid=structure.grid,
    )


def _chain_structure(
    traces: Sequence[Trace], sequences: list[list[tuple[Action, ...]]], ranks: int
) -> _Structure:
    """The ranks as a chain: rank 0, the ranks between, rank p-1 (:func:`role_of`)."""
    roles = [[role_of(rank, t.ranks) for rank in range(t.ranks)] for t in traces]
    templates = {role: _template(role, traces, sequences, roles) for role in ROLES}
    relations = {}
    for role in ROLES:
        sample = [r for r in (0, 1, 2, ranks - 1) if r < ranks and role_of(r, ranks) == role]
        relate = partial(_relation, role=role, target=ranks, sample=sample[:2])
        relations[role] = _relations(templates[role], relate)
    members = {"first": [0], "interior": range(1, ranks - 1), "last": [ranks - 1]}
    return _Structure(templates, relations, members)


_Reading = tuple[str, tuple[grid.Dims, ...], grid.Dims | None]
"""A reading of the ranks as grids: its rule, each trace's grid, the target's (if any)."""


def _grid_candidates(
    traces: Sequence[Trace], target: grid.Dims | None, rule: str, ranks: int
) -> list[_Reading]:
    """The readings to try, in order: (rule text, each trace's grid, the target's grid or
    None where the rule gives it none). Two dimensions before three, MPI_Dims_create's
    order (largest first) before the reverse: the simplest grid that fits is taken."""
    dimensions = (len(target),) if target else (3,) if rule == "cube" else (2, 3)
    found: list[_Reading] = []
    for count in dimensions:
        for ascending in (False, True) if rule != "cube" else (False,):
            grids = [grid.by_rule(rule, t.ranks, count, ascending) for t in traces]
            known = tuple(g for g in grids if g is not None)
            if len(known) < len(grids) or known in [other[1] for other in found]:
                continue
            name = rule + (" ascending" if ascending else "")
            at_target = target or grid.by_rule(rule, ranks, count, ascending)
            found.append((name + (", target given" if target else ""), known, at_target))
    return found


def _grid_structure(
    traces: Sequence[Trace],
    sequences: list[list[tuple[Action, ...]]],
    ranks: int,
    target: tuple[int, ...] | None,
    rule: str,
    chain_refusal: PerfcastError | None = None,
) -> _Structure:
    """The ranks as a Cartesian grid: the first reading of :func:`_grid_candidates` under
    which every role's ranks run one sequence and every peer is a grid offset (or a fixed
    rank) in every trace. ``chain_refusal``, where the grid was not asked for, is what the
    chain reading said: it is the refusal where no grid fits either."""
    candidates = _grid_candidates(traces, target, rule, ranks)
    if not candidates:
        if rule == "cube":
            uneven = ", ".join(str(t.ranks) for t in traces if grid.cube(t.ranks) is None)
            raise InputError(
                f"--grid cube: the traces at p = {uneven} are not cubes: trace cube numbers "
                "of ranks (8, 27, 64, ...) or give --grid dims_create"
            )
        assert chain_refusal is not None
        raise chain_refusal
    refusals: list[tuple[str, tuple[grid.Dims, ...], PerfcastError]] = []
    for name, grids, at_target in candidates:
        try:
            fitted = _fit_grid(traces, sequences, grids)
        except PerfcastError as unfit:
            refusals.append((name, grids, unfit))
            continue
        return _on_target(traces, fitted, ranks, name, grids, at_target)
    if chain_refusal is not None:
        raise PerfcastError(
            f"{chain_refusal}; nor do the ranks fit a 2-D or 3-D grid of MPI_Dims_create's "
            "factorisation of each p (perfcast simulate ... --grid dims_create says where "
            "that grid fails)"
        ) from None
    name, grids, refused = refusals[0]
    shown = ", ".join(grid.text(g) for g in grids)
    raise PerfcastError(f"read as grids {shown} ({name}): {refused}") from None


_Fitted = tuple[dict[str, "_Template"], dict[str, dict[tuple[int, int], Relation]]]


def _fit_grid(
    traces: Sequence[Trace],
    sequences: list[list[tuple[Action, ...]]],
    grids: tuple[tuple[int, ...], ...],
) -> _Fitted:
    """Templates and relations of every role the traces have, with every trace's ranks on
    its grid in ``grids``; refused where a role's ranks differ or a peer is no grid offset.
    Every traced role must fit, not only the target's: that is what tells grids apart."""
    roles = [
        [grid.role(rank, dims) for rank in range(t.ranks)]
        for t, dims in zip(traces, grids, strict=True)
    ]
    seen = sorted({role for row in roles for role in row})
    templates = {role: _template(role, traces, sequences, roles) for role in seen}
    at = {t.ranks: dims for t, dims in zip(traces, grids, strict=True)}
    relations = {
        role: _relations(template, partial(_grid_relation, role=role, grids=at))
        for role, template in templates.items()
    }
    return templates, relations


def _on_target(
    traces: Sequence[Trace],
    fitted: _Fitted,
    ranks: int,
    name: str,
    grids: tuple[tuple[int, ...], ...],
    target: tuple[int, ...] | None,
) -> _Structure:
    """The fitted roles placed on the target's grid; a role of the target that no trace
    has is refused with the smallest grid that has it."""
    templates, relations = fitted
    if target is None:
        raise PerfcastError(
            f"the traces fit grids {', '.join(map(grid.text, grids))} ({name}), which gives "
            f"no grid for p={ranks}: give the target's grid with --grid AxBxC"
        )
    members: dict[str, list[int]] = {}
    for rank in range(ranks):
        members.setdefault(grid.role(rank, target), []).append(rank)
    # the most interior first: the role whose smallest grid has all the others
    missing = sorted(set(members) - set(templates), key=lambda r: (-r.count("mid"), r))
    if missing:
        smallest = grid.smallest_with(missing[0])
        raise PerfcastError(
            f"cannot synthesise: no traced rank has the role ({missing[0]}) of the "
            f"{grid.text(target)} grid at p={ranks}"
            + (f" (nor {len(missing) - 1} more role(s))" if len(missing) > 1 else "")
            + f"; the traces' grids are {', '.join(map(grid.text, grids))} ({name}), and a "
            "role's actions come only from traced ranks of that role: trace a run whose grid "
            f"has a rank of every role, {grid.text(smallest)} ranks or more along the "
            "dimensions (3 where a rank lies between the ends)"
        )
    placed = {role: _placed(relations[role], role, target) for role in members}
    seen_at = {
        role: tuple(sorted({p for p, _, _ in templates[role].observations})) for role in members
    }
    used = sorted({p for counts in seen_at.values() for p in counts})
    if len(used) < MIN_RANK_COUNTS:
        unused = ", ".join(
            f"{t.ranks} ({grid.text(dims)})"
            for t, dims in zip(traces, grids, strict=True)
            if t.ranks not in used
        )
        raise PerfcastError(
            f"cannot synthesise: the roles of the {grid.text(target)} grid at p={ranks} are "
            f"in the traces at p = {', '.join(map(str, used))} only; the grids at p = "
            f"{unused} have none of them (a dimension of one rank): a model in p needs "
            f"{MIN_RANK_COUNTS} or more rank counts, so trace another whose grid has 2 or "
            "more ranks along every dimension"
        )
    layout = GridLayout(target, grids, name, dict(sorted(seen_at.items())))
    return _Structure({r: templates[r] for r in members}, placed, members, layout)


def _placed(
    relations: dict[tuple[int, int], Relation], role: str, target: tuple[int, ...]
) -> dict[tuple[int, int], Relation]:
    """The role's relations on the target's grid; an offset that leaves the grid from a rank
    of the role is refused (a stencil wider than one neighbour, whose ranks near the ends
    differ in ways the roles do not tell apart)."""
    placed = {}
    for key, relation in relations.items():
        if relation.kind == "grid":
            places = role.split(",")
            if not relation.periodic and not all(
                grid.offset_fits(v, place, size)
                for v, place, size in zip(relation.vector, places, target, strict=True)
            ):
                raise PerfcastError(
                    f"cannot synthesise: the ({role}) ranks' peer {relation.text()} leaves "
                    f"the {grid.text(target)} grid from some of them: neighbours further "
                    "than the next rank along a dimension need roles this synthesis does "
                    "not have"
                )
            relation = replace(relation, dims=target)
        placed[key] = relation
    return placed


def _check_inputs(traces: Sequence[Trace], ranks: int, output: Path) -> None:
    if ranks < MIN_RANKS:
        raise InputError(
            f"{ranks} ranks: synthesise {MIN_RANKS} or more, the roles need an interior rank"
        )
    counts = sorted({t.ranks for t in traces})
    if len(counts) < MIN_RANK_COUNTS:
        raise InputError(
            f"traces at {len(counts)} rank count(s) ({', '.join(map(str, counts)) or 'none'}): "
            f"a model in p needs traces at {MIN_RANK_COUNTS} or more rank counts (5 are better)"
        )
    for trace in traces:
        if trace.ranks < MIN_RANKS:
            raise InputError(
                f"a trace of {trace.ranks} ranks has no interior rank: trace {MIN_RANKS} or "
                "more ranks",
                path=trace.directory,
            )
        for attribute in ("clock", "reference_speed"):
            if getattr(trace, attribute) != getattr(traces[0], attribute):
                raise InputError(
                    f"{attribute} {getattr(trace, attribute)!r} differs from "
                    f"{getattr(traces[0], attribute)!r} of {traces[0].directory}: trace every "
                    "run the same way",
                    path=trace.directory,
                )
    try:  # a name too long for the file system raises here rather than answering
        taken = output.exists() and (not output.is_dir() or any(output.iterdir()))
    except OSError as exc:
        raise InputError(
            f"cannot be the output: {exc.strerror}: name another", path=output
        ) from None
    if taken:
        raise InputError("exists and is not an empty directory: name a new one", path=output)


def _read_actions(path: Path, rank: int) -> tuple[Action, ...]:
    """A rank's actions; anything synthesis cannot align is refused with its line."""
    actions: list[Action] = []
    pending = 0.0
    for number, line in enumerate(read_text(path, "trace action file", HINT).splitlines(), 1):
        words = line.split()
        if not words:
            continue
        if len(words) < 2 or words[0] != str(rank):
            raise InputError(f"expected '{rank} ACTION ...'; {HINT}", path=path, line=number)
        name, values = words[1], words[2:]
        try:
            if name == "compute" and len(values) == 1:
                flops = float(values[0])
                if not 0 <= flops <= MAX_AMOUNT:  # nan and inf fail too
                    raise ValueError
                pending += flops
                continue
            if name in PER_RANK_ARRAYS:
                raise InputError(
                    f"{name} carries one count per rank, an array whose length is p: its "
                    "entries cannot be aligned across rank counts, so this program's traces "
                    "cannot be synthesised",
                    path=path,
                    line=number,
                )
            if name not in SCHEMAS:
                raise InputError(
                    f"action {name!r} is not one a traced run writes; {HINT}",
                    path=path,
                    line=number,
                )
            if len(values) != len(SCHEMAS[name]):
                raise ValueError
            numbers = tuple(int(v) for v in values)
            if any(abs(v) > MAX_AMOUNT for v in numbers):
                raise ValueError
            actions.append(Action(name, numbers, pending, number))
            pending = 0.0
        except ValueError:
            raise InputError(
                f"malformed {name} action {' '.join(values)[:80]!r} (numbers from 0 to 2^62); "
                f"{HINT}",
                path=path,
                line=number,
            ) from None
    if pending:
        raise InputError(f"compute after the last MPI action, no finalize; {HINT}", path=path)
    if not actions or actions[-1].name != "finalize":
        # a traced run writes init first and finalize last: anything else was cut short
        ended = f"ends with {actions[-1].name} (line {actions[-1].line})" if actions else "is empty"
        raise InputError(f"the rank's trace {ended}, not with finalize; {HINT}", path=path)
    return tuple(actions)


def _template(
    role: str,
    traces: Sequence[Trace],
    sequences: list[list[tuple[Action, ...]]],
    roles: list[list[str]],
) -> _Template:
    """The role's sequence, after checking that every rank of the role (``roles``: per
    trace, each rank's) in every trace runs it; the first difference is refused with both
    ranks' lines."""
    observations = [
        (trace.ranks, rank, trace.directory, actions)
        for trace, ranks_actions, ranks_roles in zip(traces, sequences, roles, strict=True)
        for rank, actions in enumerate(ranks_actions)
        if ranks_roles[rank] == role
    ]
    _, first_rank, first_directory, reference = observations[0]
    shapes = [action.shape() for action in reference]
    for _, rank, directory, actions in observations[1:]:
        if [action.shape() for action in actions] == shapes:
            continue
        where = f"rank {rank} of {directory}"
        base = f"rank {first_rank} of {first_directory}"
        # the first action that differs, or the end of the shorter sequence (a repeated
        # finalize makes one sequence the other's prefix)
        shorter = min(len(actions), len(reference))
        differs = next(
            (i for i in range(shorter) if actions[i].shape() != reference[i].shape()), shorter
        )
        if differs == shorter or "finalize" in (actions[differs].name, reference[differs].name):
            raise PerfcastError(
                f"cannot synthesise: {where} runs {len(actions)} MPI actions, {base} "
                f"{len(reference)}, both {role} ranks: the sequence changes with p or between "
                "ranks, and no fixed structure can be derived from these traces"
            )
        mine, theirs = actions[differs], reference[differs]
        raise PerfcastError(
            f"cannot synthesise: {where}, action {differs} (line {mine.line}) is "
            f"'{mine.text()}' where {base} has '{theirs.text()}' (line {theirs.line}), both "
            f"{role} ranks: their MPI calls differ in structure, so no template for the "
            f"{role} ranks can be derived from these traces"
        )
    return _Template(role, reference, tuple((p, r, a) for p, r, _, a in observations))


def _relations(
    template: _Template, relate: Callable[[list[tuple[int, int, int]], Action], Relation]
) -> dict[tuple[int, int], Relation]:
    """Per (action index, field index) of a peer field, its relation to the rank, as
    ``relate`` finds it from the (p, rank, peer) observations."""
    found: dict[tuple[int, int], Relation] = {}
    for index, action in enumerate(template.actions):
        for position, kind in enumerate(SCHEMAS[action.name]):
            if kind == PEER:
                peers = [
                    (p, r, actions[index].fields[position])
                    for p, r, actions in template.observations
                ]
                found[(index, position)] = relate(peers, action)
    return found


def _relation(
    peers: list[tuple[int, int, int]],
    action: Action,
    role: str,
    target: int,
    sample: Sequence[int],
) -> Relation:
    """The relation every (p, rank, peer) observation satisfies; refused where none does or
    where the ones that do disagree at ``target`` for the ranks of ``sample``."""
    candidates: list[Relation] = []
    residues: dict[int, set[int]] = {}
    for p, r, q in peers:
        residues.setdefault(p, set()).add((q - r) % p)
    if all(len(found) == 1 for found in residues.values()):
        widest = max(residues)
        for distance in range(widest + 1):
            fitting = [
                d
                for d in (-distance, distance)
                if all(d % p in found for p, found in residues.items())
            ]
            if fitting:
                candidates.append(Relation("offset", fitting[0]))
                break
    for kind in ("first", "last"):
        values = {q if kind == "first" else p - 1 - q for p, _, q in peers}
        if len(values) == 1 and (value := values.pop()) < target:
            candidates.append(Relation(kind, value))
    if action.name in ROOTED:
        # a root is a rank of its own, not a neighbour: rank 0 reads "0" like the others
        candidates.sort(key=lambda relation: relation.kind == "offset")
    what = f"the {role} ranks' '{action.text()}' (line {action.line} of the first such rank)"
    if not candidates:
        seen = ", ".join(f"rank {r} of {p} -> {q}" for p, r, q in peers[:6])
        raise PerfcastError(
            f"cannot synthesise: the peer of {what} follows no relation to the rank that holds "
            f"in every trace (an offset modulo p, or a fixed rank from the first or the last): "
            f"{seen}"
        )
    chosen = candidates[0]
    for other in candidates[1:]:
        if any(other.peer(r, target) != chosen.peer(r, target) for r in sample):
            raise PerfcastError(
                f"cannot synthesise: the peer of {what} fits both {chosen.text()} and "
                f"{other.text()} in every trace, which name different ranks at p={target}: "
                "add a trace with more ranks, where they differ"
            )
    return chosen


def _grid_relation(
    peers: list[tuple[int, int, int]],
    action: Action,
    role: str,
    grids: dict[int, tuple[int, ...]],
) -> Relation:
    """The relation of a peer field of the ranks at ``role`` whose traces ran on ``grids``
    (by rank count): a collective's root is a fixed rank where one fits; any other peer is
    the same offset in grid positions in every observation (without wrapping, else
    wrapped around the grid with the smallest offset that fits; wrapped also where that
    makes a move of two or more a neighbour's). A point-to-point peer is
    a neighbour even where a fixed rank fits too: a role seen in one run (the interior of
    3x3x3) cannot tell them apart, and a decomposition's messages go to neighbours."""
    if action.name in ROOTED:
        for kind in ("first", "last"):
            values = {q if kind == "first" else p - 1 - q for p, _, q in peers}
            if len(values) == 1:
                return Relation(kind, values.pop())
    moves = set()
    residues: list[dict[int, set[int]]] = []
    for p, r, q in peers:
        dims = grids[p]
        here, there = grid.position(r, dims), grid.position(q, dims)
        moves.add(tuple(b - a for a, b in zip(here, there, strict=True)))
        if not residues:
            residues = [{} for _ in dims]
        for found, a, b, size in zip(residues, here, there, dims, strict=True):
            found.setdefault(size, set()).add((b - a) % size)
    vector = [_smallest_offset(found) for found in residues]
    wrapped = tuple(v for v in vector if v is not None)
    if len(moves) == 1:
        move = next(iter(moves))
        # in a dimension that has the same size in every trace, the neighbour across the
        # wrap (position 0 -> 2 of 3) is one move in all of them: read as a move of two it
        # pairs with the wrong rank on a larger grid (CoMD, 3x3x3 .. 4x4x3 -> 4x4x4, whose
        # synthesised trace deadlocked); a decomposition's messages go to neighbours
        if not (len(wrapped) == len(move) and _nearer(wrapped, move)):
            return Relation("grid", vector=move)
    if len(wrapped) == len(vector):
        return Relation("grid", vector=wrapped, periodic=True)
    seen = ", ".join(f"rank {r} of {p} ({grid.text(grids[p])}) -> {q}" for p, r, q in peers[:6])
    raise PerfcastError(
        f"cannot synthesise: the peer of the ({role}) ranks' '{action.text()}' (line "
        f"{action.line} of the first such rank) is no fixed offset in grid positions: {seen}"
    )


def _nearer(wrapped: tuple[int, ...], move: tuple[int, ...]) -> bool:
    """Whether the wrapped reading of a peer is a neighbour (at most one position along
    every dimension) where the move without wrapping is not."""
    return max(map(abs, wrapped)) <= 1 < max(map(abs, move))


def _smallest_offset(residues: dict[int, set[int]]) -> int | None:
    """The offset of smallest size that is every observed residue modulo its dimension's
    size, or None where the residues differ within one size or no offset fits them all."""
    if any(len(found) != 1 for found in residues.values()):
        return None
    for distance in range(max(residues)):
        for offset in (-distance, distance):
            if all(offset % size in found for size, found in residues.items()):
                return offset
    return None


def _signature(action: Action, relations: dict[tuple[int, int], Relation], index: int) -> str:
    """The action as its template line: peers as relations, amounts as ``n``."""
    words = [action.name]
    for field, (kind, value) in enumerate(zip(SCHEMAS[action.name], action.fields, strict=True)):
        words.append(
            relations[(index, field)].text()
            if kind == PEER
            else "n"
            if kind == AMOUNT
            else str(value)
        )
    return " ".join(words)


def _model(
    templates: dict[str, _Template],
    relations: dict[str, dict[tuple[int, int], Relation]],
    target: int,
    steep: str,
    per_role: bool = False,
) -> tuple[tuple[Quantity, ...], dict[tuple[str, int, int], int], dict[str, list[_Block]]]:
    """Fit every amount in p and evaluate it at ``target``: the quantities, the counts by
    (role, action index, field) and the compute blocks by role. Amounts whose series hold
    the same data share one model; compute blocks steeper than linear in p are bounded,
    kept or refused as ``steep`` says (:data:`STEEP`). ``per_role`` keys compute blocks by
    role as well (a grid's roles: a corner packs fewer halos between the same two calls
    than the interior does)."""
    from perfcast.experiment.experiment import Experiment
    from perfcast.modeling.modeler import PMNFModeler
    from perfcast.modeling.pmnf import Model
    from perfcast.modeling.prior import Prior

    amounts = _Amounts()
    # compute blocks by the pair of actions around them, every role together, as a traced
    # run's blocks are keyed by the call paths around them whichever rank ran them
    positions: dict[tuple[str, str, str], dict[str, list[int]]] = {}
    for role, template in templates.items():
        signatures = [_signature(a, relations[role], i) for i, a in enumerate(template.actions)]
        for index in range(1, len(template.actions)):
            pair = (role if per_role else "", signatures[index - 1], signatures[index])
            positions.setdefault(pair, {}).setdefault(role, []).append(index)
        for index, action in enumerate(template.actions):
            for position, kind in enumerate(SCHEMAS[action.name]):
                if kind == AMOUNT:
                    data: Series = tuple(
                        (p, (float(actions[index].fields[position]),))
                        for p, _, actions in template.observations
                    )
                    name = f"{role}: {signatures[index]} (field {position + 1})"
                    amounts.slots[(role, index, position)] = amounts.add("count", name, data, 1)
    found: list[tuple[str, str, dict[str, list[int]], str, Series]] = []
    for (group, opening, closing), by_role in positions.items():
        data = tuple(
            (p, tuple(actions[i].compute for i in indices))
            for role, indices in by_role.items()
            for p, _, actions in templates[role].observations
        )
        name = f"{opening} -> {closing}"
        if group:
            name = f"({group}) {name}"
        elif len(by_role) < len(templates):
            name += f" ({_roles_text(list(by_role))} ranks)"
        most = max(len(indices) for indices in by_role.values())
        found.append((opening, closing, by_role, amounts.add("flops", name, data, most), data))
    rows = [
        (key, kind, (float(p),), value)
        for (kind, data), key in amounts.keys.items()
        for p, values in data
        for value in values
    ]
    trendless = {
        key: Prior.constant("synthesis: not monotone in p")
        for (_, data), key in amounts.keys.items()
        if not _monotone(data)
    }
    models = PMNFModeler(aggregation="mean").fit(Experiment.from_rows(["p"], rows), trendless)
    quantities = {}
    series = {key: data for (_, data), key in amounts.keys.items()}
    for (kind, data), key in amounts.keys.items():
        model = models[(key, kind)]
        name, places, occurrences = amounts.names[key], amounts.places[key], amounts.count[key]
        last = max(data, key=lambda point: point[0])[1]
        mean_last = float(sum(last) / len(last))
        if kind == "flops" and float(model.evaluate({"p": float(target)})) < 0 <= mean_last:
            # a compute block that falls with p (CPU time of a short block is noisy) must
            # not be extrapolated below zero: it is held at its mean at the largest trace
            model = Model(key, kind, mean_last, prior="synthesis: held, the fit fell below zero")
        quantities[key] = Quantity(
            name,
            kind,
            places,
            occurrences,
            model,
            _value_at(model, name, kind, target),
            mean_last,
        )
    largest = max(p for data in series.values() for p, _ in data)
    steeper = {
        key: quantity
        for key, quantity in quantities.items()
        if quantity.kind == "flops" and quantity.steep(target, largest)
    }
    if steeper and steep == "refuse":
        raise PerfcastError(
            "cannot synthesise (--steep refuse): "
            + "; ".join(_steep_text(q, series[key], target) for key, q in steeper.items())
            + ": growth between small traced rank counts is often the traced runs' own "
            "(ranks sharing a core's caches); trace with one rank per core or at more rank "
            "counts, or choose --steep bound (growth at most linear in p) or --steep keep"
        )
    if steeper and steep == "bound":
        quantities.update(_bounded(steeper, series, target, largest, trendless))
    ordered = sorted(
        quantities.values(), key=lambda q: (q.kind != "flops", -q.value * q.occurrences, q.name)
    )
    counts = {slot: quantities[key].value for slot, key in amounts.slots.items()}
    blocks: dict[str, list[_Block]] = {role: [] for role in templates}
    for opening, closing, by_role, key, data in found:
        ratios, (shared, own) = _ratios(data), _split(data)
        for role, indices in by_role.items():
            value = quantities[key].value
            block = _Block(opening, closing, tuple(indices), value, ratios, shared, own)
            blocks[role].append(block)
    return tuple(ordered), counts, blocks


def _roles_text(roles: list[str]) -> str:
    """Roles for a block's name: a chain's by name, a grid's (``low,mid,high``) each in
    parentheses, and more than four by their number (a 3-D grid has 27)."""
    if not any("," in role for role in roles):
        return ", ".join(roles)
    if len(roles) > 4:
        return f"{len(roles)} roles'"
    return " ".join(f"({role})" for role in roles)


def _value_at(model: Model, name: str, kind: str, target: int) -> int:
    """The model at ``target`` as the trace writes it; a negative amount is refused."""
    predicted = float(model.evaluate({"p": float(target)}))
    if not math.isfinite(predicted) or predicted < -0.5:
        raise PerfcastError(
            f"cannot synthesise: the model of {name} ({model.text()}) predicts "
            f"{predicted:.4g} {kind} at p={target}, below zero: the traces' rank counts do "
            "not support extrapolating that far"
        )
    return max(round(predicted), 0)


def _steep_text(quantity: Quantity, data: Series, target: int) -> str:
    """A steep block for the refusal: its model, its means at the traced rank counts and its
    value at ``target``, the evidence to judge the growth by."""
    pooled = _by_rank_count(data)
    means = ", ".join(f"{math.fsum(v) / len(v):,.0f}" for v in pooled.values())
    return (
        f"compute block {quantity.name} is modeled as {quantity.model.text()}, faster than "
        f"linearly in p: means {means} flops at p = {', '.join(map(str, pooled))}, "
        f"{quantity.value:,} at p={target}"
    )


def _bounded(
    steeper: dict[str, Quantity],
    series: dict[str, Series],
    target: int,
    largest: int,
    trendless: dict[str, Prior],
) -> dict[str, Quantity]:
    """The steep blocks refitted with growth at most linear in p, by key.

    The refit searches Extra-P's exponents up to p^1 without logarithms and nothing beyond
    them: the search space is every exponent times every log exponent, and a log factor on
    the largest sub-linear powers already grows faster than p over a synthesis's reach
    (p^(4/5) log2(p)^2 grows 540-fold from p = 8 to 1024, p 128-fold). Where even that model
    is steeper than linear at the target (a negative constant under a linear term), the
    block is held at linear growth from its mean at the largest traced rank count: the
    most a block of an MPI program's rank plausibly grows, and what the traces do support.
    The fitted model is kept beside the bounded one, so that the user sees what changed."""
    from perfcast.experiment.experiment import Experiment
    from perfcast.modeling.modeler import PMNFModeler
    from perfcast.modeling.pmnf import Factor, Model, Term
    from perfcast.modeling.space import DEFAULT_EXPONENTS, SearchSpace

    space = SearchSpace(tuple(e for e in DEFAULT_EXPONENTS if e <= 1), (0,))
    modeler = PMNFModeler(space, aggregation="mean", beyond_space=False)
    # a block of a role some traces lack (a grid's interior at 9 and 16 ranks, not at 4)
    # has too few rank counts to refit: it is held at linear growth at once
    fitted = [k for k in steeper if len({p for p, _ in series[k]}) >= modeler.min_points]
    rows = [
        (key, "flops", (float(p),), value)
        for key in fitted
        for p, values in series[key]
        for value in values
    ]
    priors = {key: prior for key, prior in trendless.items() if key in fitted}
    models = modeler.fit(Experiment.from_rows(["p"], rows), priors) if rows else None
    bounded = {}
    for key, quantity in steeper.items():
        limit = quantity.linear_limit(target, largest)
        model, value = quantity.model, quantity.value
        if models is not None and key in fitted:
            model = models[(key, "flops")]
            value = _value_at(model, quantity.name, "flops", target)
        held = key not in fitted or value > limit
        if held:
            linear = (Term(limit / target, (Factor("p", Fraction(1)),)),)
            model = Model(key, "flops", 0.0, linear, prior="synthesis: held at linear growth")
            # down, so that the value written is not steep by a rounding
            value = math.floor(limit)
        bound = Bound(quantity.model, quantity.value, held)
        bounded[key] = replace(quantity, model=model, value=value, bound=bound)
    return bounded


@dataclass(frozen=True)
class _Block:
    """One compute block of a role's template at the target."""

    opening: str
    closing: str
    positions: tuple[int, ...]
    """Indices of the actions it precedes."""
    flops: int
    """The modeled mean per occurrence."""
    ratios: tuple[float, ...]
    """Every input occurrence over its rank count's mean: the spread to resample."""
    shared: tuple[float, ...]
    """Every input occurrence's mean over the ranks over its rank count's mean: what all
    ranks share at one occurrence."""
    own: tuple[float, ...]
    """Every input occurrence over the ranks' mean at that occurrence: a rank's own share."""


def _ratios(data: Series) -> tuple[float, ...]:
    ratios: list[float] = []
    for observed in _by_rank_count(data).values():
        mean = math.fsum(observed) / len(observed)
        ratios += [value / mean if mean > 0 else 1.0 for value in observed]
    return tuple(ratios)


def _split(data: Series) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The ratios of :func:`_ratios` split into the share every rank of an input has at one
    occurrence (a step every rank is slow in: the machine's noise) and the rank's own (one
    slow rank). Only the rank's own share makes the slowest rank slower than the mean one,
    so drawing whole ratios per rank, as ``resample`` does, counts the shared slowdowns as
    if each rank had them alone."""
    shared: list[float] = []
    own: list[float] = []
    for p in sorted({p for p, _ in data}):
        rows = [values for q, values in data if q == p]
        mean = math.fsum(v for row in rows for v in row) / sum(len(row) for row in rows)
        for occurrence in range(max(len(row) for row in rows)):
            values = [row[occurrence] for row in rows if occurrence < len(row)]
            at = math.fsum(values) / len(values)
            shared.append(at / mean if mean > 0 else 1.0)
            own += [value / at if at > 0 else 1.0 for value in values]
    return tuple(shared), tuple(own)


def _by_rank_count(data: Series) -> dict[int, list[float]]:
    """A series' values pooled per rank count, in increasing rank count."""
    pooled: dict[int, list[float]] = {}
    for p, values in sorted(data):
        pooled.setdefault(p, []).extend(values)
    return pooled


Series = tuple[tuple[int, tuple[float, ...]], ...]
"""An amount's observations: per rank of a role in every input, (p, its values)."""


@dataclass
class _Amounts:
    """The amounts to model, collected slot by slot; equal series get one key."""

    keys: dict[tuple[str, Series], str] = dataclass_field(default_factory=dict)
    names: dict[str, str] = dataclass_field(default_factory=dict)
    places: dict[str, int] = dataclass_field(default_factory=dict)
    count: dict[str, int] = dataclass_field(default_factory=dict)
    slots: dict[tuple[str, int, int], str] = dataclass_field(default_factory=dict)
    """The counts' keys by (role, action index, field)."""

    def add(self, kind: str, name: str, data: Series, occurrences: int) -> str:
        key = self.keys.setdefault((kind, data), f"q{len(self.keys)}")
        self.names.setdefault(key, name)
        self.places[key] = self.places.get(key, 0) + 1
        self.count[key] = self.count.get(key, 0) + occurrences
        return key


def _monotone(data: Series) -> bool:
    """Whether the mean per rank count never falls or never rises as p grows.

    Every PMNF model whose terms share a sign is monotone in p; a series whose means go up
    and down is noise around a constant unless repetitions show otherwise, and with one
    value per rank count (a block one rank runs once) the modeler has none: measured on
    the stencil, rank 0's last block (its output: 17, 40, 20, 31, 50 us at p = 3, 4, 5, 6,
    8) was modeled as 1.8e4 + 21 p^3 log2(p) flops, 1.7e4 s at p = 4096."""
    means = [math.fsum(v) / len(v) for v in _by_rank_count(data).values()]
    steps = [b - a for a, b in itertools.pairwise(means)]
    return all(step >= 0 for step in steps) or all(step <= 0 for step in steps)


@dataclass(frozen=True)
class _Output:
    directory: Path
    traces: Sequence[Trace]
    ranks: int
    noise: str
    seed: int
    steep: str

    @property
    def run_id(self) -> str:
        return f"synthesized-p{self.ranks}"


def _write(
    output: _Output,
    structure: _Structure,
    counts: dict[tuple[str, int, int], int],
    blocks: dict[str, list[_Block]],
) -> int:
    """Write the action files, block tables, index and summary; returns the action lines."""
    import numpy as np

    try:  # under a file, or where we may not write
        output.directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(
            f"cannot create the directory: {exc.strerror}", path=output.directory
        ) from None
    base = output.directory.resolve()
    random = np.random.default_rng(output.seed)
    shared = _shared(blocks, random) if output.noise == "correlated" else {}
    written = 0
    for role, template in structure.templates.items():
        lines = _role_lines(role, template, structure.relations[role], counts)
        members = structure.members[role]
        for start in range(0, len(members), CHUNK):
            chunk = members[start : start + CHUNK]
            compute = _draw(blocks[role], len(chunk), len(lines), output.noise, random, shared)
            for row, rank in enumerate(chunk):
                written += _write_rank(base, output, rank, lines, compute[row], blocks[role])
    (base / INDEX_FILE).write_text(
        "".join(f"{base}/rank-{rank}.trace\n" for rank in range(output.ranks))
    )
    first = output.traces[0]
    summary = {
        "format": FORMAT,
        "run_id": output.run_id,
        "ranks": output.ranks,
        "reference_speed": first.reference_speed,
        "clock": first.clock,
        "program": first.program,
        # nobody ran it: no elapsed time, nothing credited
        "elapsed": [0.0] * output.ranks,
        "credited": [0.0] * output.ranks,
        "files": [f"rank-{rank}.trace" for rank in range(output.ranks)],
        "blocks": [f"rank-{rank}.blocks.tsv" for rank in range(output.ranks)],
        "synthesized_from": [
            {"directory": str(t.directory), "ranks": t.ranks} for t in output.traces
        ],
        "noise": output.noise,
        "seed": output.seed,
        "steep": output.steep,
    }
    if structure.grid is not None:
        summary["grid"] = list(structure.grid.target)
    if first.compilers is not None:  # the traces' build is the synthesised run's
        summary["compilers"] = {"measured": first.compilers.measured, "user": first.compilers.user}
    (base / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    return written


def _shared(
    blocks: dict[str, list[_Block]], random: np.random.Generator
) -> dict[tuple[str, str], np.ndarray]:
    """Under ``correlated``, each block's shares common to every rank, one per occurrence
    and drawn once: the k-th occurrence of a block is the same step in every role."""
    import numpy as np

    drawn: dict[tuple[str, str], np.ndarray] = {}
    for role_blocks in blocks.values():
        for block in role_blocks:
            key, most = (block.opening, block.closing), len(block.positions)
            if len(drawn.get(key, ())) < most:
                drawn[key] = random.choice(np.array(block.shared), size=most)
    return drawn


def _draw(
    blocks: list[_Block],
    ranks: int,
    actions: int,
    noise: str,
    random: np.random.Generator,
    shared: dict[tuple[str, str], np.ndarray],
) -> np.ndarray:
    """Flops of the block before each action, one row per rank: the modeled mean, times
    ratios drawn independently per rank and occurrence under ``resample``, or the
    occurrence's shared ratio times one drawn per rank under ``correlated``."""
    import numpy as np

    compute = np.zeros((ranks, actions), dtype=np.int64)
    for block in blocks:
        columns = list(block.positions)
        if noise == "resample":
            ratios = random.choice(np.array(block.ratios), size=(ranks, len(columns)))
        elif noise == "correlated":
            ratios = random.choice(np.array(block.own), size=(ranks, len(columns)))
            ratios *= shared[(block.opening, block.closing)][: len(columns)]
        else:
            compute[:, columns] = block.flops
            continue
        compute[:, columns] = np.rint(block.flops * ratios).astype(np.int64)
    return compute


def _write_rank(
    base: Path,
    output: _Output,
    rank: int,
    lines: list[str | _PeerLine],
    compute: np.ndarray,
    blocks: list[_Block],
) -> int:
    """One rank's action file and block table; returns its action lines."""
    prefix = f"{rank} "
    text: list[str] = []
    for flops, line in zip(compute.tolist(), lines, strict=True):
        if flops > 0:
            text.append(f"{prefix}compute {flops}\n")
        text.append(prefix + (line if isinstance(line, str) else line(rank, output.ranks)) + "\n")
    (base / f"rank-{rank}.trace").write_text("".join(text))
    speed = output.traces[0].reference_speed
    rows = [f"# {BLOCKS_FORMAT} run={output.run_id} rank={rank}\n# open\tclose\tcount\tseconds\n"]
    for block in blocks:
        seconds = int(compute[list(block.positions)].sum()) / speed
        rows.append(f"{block.opening}\t{block.closing}\t{len(block.positions)}\t{seconds:.9f}\n")
    (base / f"rank-{rank}.blocks.tsv").write_text("".join(rows))
    return len(text)


@dataclass(frozen=True)
class _PeerLine:
    """A template line with peer fields, filled in per rank."""

    name: str
    parts: tuple[str | Relation, ...]

    def __call__(self, rank: int, ranks: int) -> str:
        words = [self.name]
        words += [p if isinstance(p, str) else str(p.peer(rank, ranks)) for p in self.parts]
        return " ".join(words)


def _role_lines(
    role: str,
    template: _Template,
    relations: dict[tuple[int, int], Relation],
    counts: dict[tuple[str, int, int], int],
) -> list[str | _PeerLine]:
    """The role's action lines without the rank prefix and compute: text where no peer
    needs filling in."""
    lines: list[str | _PeerLine] = []
    for index, action in enumerate(template.actions):
        parts: list[str | Relation] = []
        for position, (kind, value) in enumerate(
            zip(SCHEMAS[action.name], action.fields, strict=True)
        ):
            if kind == PEER:
                parts.append(relations[(index, position)])
            elif kind == AMOUNT:
                parts.append(str(counts[(role, index, position)]))
            else:
                parts.append(str(value))
        if any(isinstance(part, Relation) for part in parts):
            lines.append(_PeerLine(action.name, tuple(parts)))
        else:
            lines.append(" ".join([action.name, *(str(part) for part in parts)]))
    return lines
