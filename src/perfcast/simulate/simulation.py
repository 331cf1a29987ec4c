"""Predicted run time of a traced run on other platforms: one trace, many replays.

For each platform the trace is replayed in SimGrid (:func:`~perfcast.simulate.replay.replay`)
and the prediction is split the way a performance engineer asks about it:

- ``time``: SimGrid's simulated seconds from MPI_Init to MPI_Finalize, i.e. when the last
  rank finished.
- ``slowest_rank``: the busiest rank, the one with the most compute on its host (rank
  order breaks a tie). In a program whose ranks meet in collectives and exchanges the
  others wait for it, step after step; that it finishes last is not required, and is not
  a good test, because ranks leave a final collective microseconds apart in an order set
  by the collective's algorithm. Each rank's finish time and compute are in ``ranks``
  (SimGrid's replay log gives them, see :mod:`.replay`): a spread in compute between
  ranks is load imbalance.
- ``compute``: that rank's compute blocks on the host it was placed on, its ``compute``
  flops over the host's speed. This is exact, not estimated: SimGrid runs a block of ``f``
  flops on a core of speed ``s`` in ``f / s`` seconds, and every rank has a core of its own.
- ``communication``: ``time - compute``: everything else on that rank's path, which is
  message transfers and latencies, and also the time it waited for other ranks (a late
  sender, a collective that starts when the slowest member arrives) and the reduction work
  SimGrid simulates inside collectives. A rank that waits a lot shows a large
  communication share even on a fast network: that is load imbalance, read it as such.

The trace's own numbers come from :func:`~perfcast.simulate.trace.read_trace`: the traced
run's time (its slowest rank, MPI_Init to MPI_Finalize) and its compute blocks keyed by the
call paths that open and close them.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from perfcast.errors import InputError
from perfcast.modeling.provenance import Compilers
from perfcast.simulate.platform import PlatformFile
from perfcast.simulate.replay import Replay, replay
from perfcast.simulate.trace import Block, Trace

MIN_NATIVE_SECONDS = 1e-6
"""The shortest native run time a slowdown is taken over: ``--native 5e-324`` made it
infinite, and ``perfcast simulate --json`` printed ``Infinity``, which is not JSON."""


@dataclass(frozen=True)
class PlatformPrediction:
    """The prediction for one platform; seconds are simulated seconds on that platform,
    except ``simulation_seconds``, the replay's own wall time on this machine."""

    name: str
    file: Path
    ranks: int
    time: float
    compute: float
    communication: float
    slowest_rank: int
    simulation_seconds: float
    ranks_finish: tuple[float, ...]
    """Each rank's simulated finish time (seconds from MPI_Init)."""
    ranks_compute: tuple[float, ...]
    """Each rank's compute seconds on its host."""


@dataclass(frozen=True)
class Simulation:
    """One trace predicted on several platforms.

    Attributes:
        trace: the trace directory.
        ranks: the traced run's ranks.
        trace_seconds: the traced run's own time (its slowest rank, MPI_Init to
            MPI_Finalize), what tracing cost.
        platforms: one prediction per platform, in the order given.
        blocks: the trace's compute blocks summed over ranks by (opening, closing) call
            path, longest first (seconds on the traced machine).
        compilers: the compiler that built the traced program and the user's own, where
            the trace recorded them.
    """

    trace: Path
    ranks: int
    trace_seconds: float
    platforms: tuple[PlatformPrediction, ...]
    blocks: tuple[Block, ...]
    compilers: Compilers | None = None

    @property
    def compiler_note(self) -> str | None:
        """Which compiler built the traced program, where it is not the user's own: the
        prediction is of that build (None: the user's compiler, or not recorded)."""
        if self.compilers is None or not self.compilers.differ:
            return None
        return (
            f"{self.compilers.describe('the traced program')}. To predict the program you "
            "run, trace it with perfcast build --trace --user-compiler"
        )

    @property
    def simulation_seconds(self) -> float:
        """Wall seconds of all replays together."""
        return sum(platform.simulation_seconds for platform in self.platforms)

    def slowdown(self, native: float) -> float:
        """The paper's slowdown of prediction: what the predictions cost (the traced run
        plus every replay) over the program's native run time ``native``. With one
        platform it is the paper's ``(t_trace + t_simulate) / t_native``; further
        platforms reuse the trace and add only their replay."""
        if not native >= MIN_NATIVE_SECONDS:
            raise InputError(
                f"--native {native!r}: a native run time must be at least "
                f"{MIN_NATIVE_SECONDS:g} s (a run shorter than MPI_Init cannot be measured, "
                "and the slowdown over it is no number); give the program's measured seconds"
            )
        return (self.trace_seconds + self.simulation_seconds) / native


def simulate(
    trace: Trace, platforms: Sequence[PlatformFile], *, timeout: float = 600
) -> Simulation:
    """Replay ``trace`` on each of ``platforms`` (each replay stops after ``timeout``
    seconds) and split each prediction into compute and communication."""
    if not platforms:
        raise InputError("no platform to simulate on: name one with --platform FILE.xml")
    with tempfile.TemporaryDirectory(prefix="perfcast-simulate-") as work:
        index = Path(work) / "index.txt"
        trace.write_index(index)
        predictions = tuple(
            _predict(
                replay(index, platform, trace.ranks, timeout=timeout, trace=trace.directory),
                platform,
            )
            for platform in platforms
        )
    return Simulation(
        trace=trace.directory,
        ranks=trace.ranks,
        trace_seconds=max(trace.elapsed),
        platforms=predictions,
        blocks=_blocks(trace),
        compilers=trace.compilers,
    )


def _predict(result: Replay, platform: PlatformFile) -> PlatformPrediction:
    compute = [
        rank.flops / platform.speeds[host]
        for rank, host in zip(result.ranks, result.hosts, strict=True)
    ]
    busiest = max(range(len(compute)), key=lambda rank: (compute[rank], -rank))
    return PlatformPrediction(
        name=platform.name,
        file=platform.path,
        ranks=len(result.ranks),
        time=result.time,
        compute=compute[busiest],
        communication=max(result.time - compute[busiest], 0.0),
        slowest_rank=busiest,
        simulation_seconds=result.wall,
        ranks_finish=tuple(rank.finish for rank in result.ranks),
        ranks_compute=tuple(compute),
    )


def _blocks(trace: Trace) -> tuple[Block, ...]:
    """The trace's compute blocks summed over ranks by (opening, closing) call path."""
    totals: dict[tuple[str, str], tuple[int, float]] = {}
    for rows in trace.blocks:
        for row in rows:
            count, seconds = totals.get((row.opening, row.closing), (0, 0.0))
            totals[(row.opening, row.closing)] = (count + row.count, seconds + row.seconds)
    blocks = [Block(*key, count, seconds) for key, (count, seconds) in totals.items()]
    return tuple(sorted(blocks, key=lambda block: (-block.seconds, block.opening, block.closing)))
