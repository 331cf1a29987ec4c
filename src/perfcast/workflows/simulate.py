"""The simulation job: what ``perfcast simulate`` predicts, as one request and one result.

A traced run (``perfcast build --trace``) is replayed on each platform; or traces of one
program at three or more rank counts give the trace of a rank count nobody ran
(``--synthesize``), which is replayed right away where platforms are named. The result
carries the synthesis, the replays, the slowdown against a native run and what the
threshold rule did per loop as data; the command formats them as text or JSON, and a
library user gets the same numbers from :func:`simulate_traces`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfcast.errors import InputError
from perfcast.simulate.platform import read_platform
from perfcast.simulate.simulation import Simulation, simulate
from perfcast.simulate.trace import LoopStats, read_trace

if TYPE_CHECKING:
    from perfcast.simulate.synthesis import Synthesis

DEFAULT_TIMEOUT = 600.0
"""Seconds one replay may take by default: a replay of thousands of ranks takes minutes;
one that runs longer is usually a deadlocked trace."""


@dataclass(frozen=True)
class SimulateRequest:
    """One simulation.

    Attributes:
        traces: the traced run to replay; with ``synthesize`` the runs (one program at 3 or
            more rank counts) to synthesise from.
        platforms: SimGrid platform files to predict for; needed unless ``synthesize``.
        synthesize: the rank count of the trace to synthesise into ``output``, or ``None``.
        output: with ``synthesize``: a new (or empty) directory for the trace.
        noise, seed, steep, grid: the synthesis's options
            (:func:`perfcast.simulate.synthesis.synthesize`).
        native: the program's native run time, for the slowdown (trace + simulation) /
            native.
        timeout: seconds one replay may take.
    """

    traces: tuple[Path, ...]
    platforms: tuple[Path, ...] = ()
    synthesize: int | None = None
    output: Path | None = None
    noise: str | None = None
    seed: int | None = None
    steep: str | None = None
    grid: str | None = None
    native: float | None = None
    timeout: float = DEFAULT_TIMEOUT

    def __post_init__(self) -> None:
        if not self.traces:
            raise InputError("no trace to simulate: name a perfcast-trace directory")
        if self.synthesize is None:
            synthesis_only = (self.output, self.noise, self.seed, self.steep, self.grid)
            if len(self.traces) > 1 or any(given is not None for given in synthesis_only):
                raise InputError(
                    "several TRACE_DIRs, --output, --noise, --seed, --steep and --grid are for "
                    "--synthesize P: name one trace to simulate, or add --synthesize"
                )
        elif self.output is None:
            raise InputError("--synthesize needs --output DIR, a new directory for the trace")


@dataclass(frozen=True)
class LoopCredit:
    """What the threshold iteration rule did in one loop of the traced run, summed over
    the ranks: the iterations whose body ran, those skipped, and the seconds credited for
    the skipped ones (about what the rule saved)."""

    file: str
    line: int
    rule_on: bool
    iterations_run: int
    iterations_skipped: int
    seconds_credited: float

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "rule": "on" if self.rule_on else "off",
            "iterations_run": self.iterations_run,
            "iterations_skipped": self.iterations_skipped,
            "seconds_credited": self.seconds_credited,
        }


@dataclass(frozen=True)
class SimulateResult:
    """What :func:`simulate_traces` returns.

    Attributes:
        synthesis: how a synthesised trace was made, or ``None``.
        simulation: the replays on every platform, or ``None`` where only a trace was
            synthesised (no platform named).
        slowdown: (traced run + simulation) / native, where ``native`` was given.
        loops: the threshold rule's loops of the replayed trace (empty without the rule).
    """

    synthesis: Synthesis | None
    simulation: Simulation | None
    slowdown: float | None
    loops: tuple[LoopCredit, ...]


def simulate_traces(request: SimulateRequest) -> SimulateResult:
    """Synthesise and/or replay as ``request`` asks."""
    directory = request.traces[0]
    synthesis = None
    if request.synthesize is not None:
        from perfcast.simulate.synthesis import synthesize

        assert request.output is not None  # checked by the request
        synthesis = synthesize(
            [read_trace(path) for path in request.traces],
            request.synthesize,
            request.output,
            noise=request.noise or "mean",
            seed=request.seed or 0,
            steep=request.steep or "bound",
            grid_option=request.grid,
        )
        if not request.platforms:
            return SimulateResult(synthesis, None, None, ())
        directory = synthesis.directory
    trace = read_trace(directory)
    platforms = [read_platform(path) for path in request.platforms]
    simulation = simulate(trace, platforms, timeout=request.timeout)
    slowdown = None if request.native is None else simulation.slowdown(request.native)
    return SimulateResult(synthesis, simulation, slowdown, loop_credits(trace.threshold))


def loop_credits(stats: Sequence[LoopStats]) -> tuple[LoopCredit, ...]:
    """The threshold rule's loops, each summed over the ranks, in the order first seen."""
    credits: dict[tuple[str, int], LoopCredit] = {}
    for record in stats:
        key = (record.file, record.line)
        so_far = credits.get(key) or LoopCredit(record.file, record.line, record.rule_on, 0, 0, 0.0)
        credits[key] = replace(
            so_far,
            iterations_run=so_far.iterations_run + record.iterations_run,
            iterations_skipped=so_far.iterations_skipped + record.iterations_skipped,
            seconds_credited=so_far.seconds_credited + record.seconds_credited,
        )
    return tuple(credits.values())
