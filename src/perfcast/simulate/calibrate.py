"""This machine as a SimGrid platform: ``perfcast platform calibrate``.

A trace recorded here is predicted for other machines, and the first check of a prediction
is that it reproduces this machine: so this machine, too, must be a platform whose
messages take as long in SimGrid as they do here. Three steps:

1. **Measure** (``pingpong.c``, built with ``mpicc``, run with ``mpirun -np 2`` on two
   cores): the median one-way time (round trip / 2) of MPI messages from 1 B to 16 MiB, and
   the compute reference.
2. **Fit** one line ``t = latency + (size + 16) / bandwidth`` (the 16 bytes: see below;
   least squares on relative errors, so 1 B counts as much as 16 MiB). Between two
   processes of one machine it does not fit within :data:`LINE_TOLERANCE` (the MPI library
   switches from copying through a shared buffer to a rendezvous, caches stop holding the
   message), so SMPI's piecewise factors are derived from the measured curve: between
   consecutive measured sizes the simulated time follows the straight line through their
   two medians.
3. **Write** the platform: one SimGrid host per core (rank i on host i), links whose route
   has the fitted latency and bandwidth, host speed :data:`REFERENCE_SPEED`, the factors in
   the file's ``<config>``, and the compute reference as a zone property.

How SMPI 3.32 times a message of ``size`` bytes between two hosts of a ``<cluster>``
(read in its source, ``network_cm02.cpp``, ``network_smpi.cpp``, ``smpi_request.cpp``, and
checked with ``smpirun``):

- the network sees ``payload = size + 16`` bytes (:data:`ENVELOPE_BYTES`, MPI's envelope);
- the route is the source's private link up, the backbone, the destination's link down:
  route latency ``L`` is the sum of their latencies (``2 x lat``, the backbone has none),
  route bandwidth ``B`` the smallest (``bw``; the backbone has 10x);
- the transfer takes ``L x lat_factor(payload) + payload / (min(B, gamma / 2L) x
  bw_factor(payload))``, gamma being ``network/TCP-gamma`` (:data:`TCP_GAMMA`);
- a factor string ``"b0:f0;b1:f1;..."`` gives ``payload`` the factor of the largest
  ``b_k`` strictly below it (``payload <= b_k`` still gets the segment before), 1 below all.

So the segment of measured sizes ``s_k <= size < s_k+1`` has the breakpoint ``s_k + 15``.

Not measured: messages sent at the same time by several pairs of cores. Each core's link is
its own and the backbone all share has ten times its bandwidth (:class:`PlatformSpec`'s
default), so concurrent messages slow each other only once ten are under way.
"""

from __future__ import annotations

import itertools
import os
import shutil
import statistics
import subprocess
import tempfile
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from perfcast.errors import InputError, PerfcastError
from perfcast.measure.local import available_cores
from perfcast.measure.toolchain import MPI_HINT, find_mpicc
from perfcast.simulate.platform import (
    REFERENCE_SPEED,
    PlatformFile,
    PlatformSpec,
    read_platform,
)
from perfcast.simulate.replay import replay

PINGPONG_SOURCE = Path(__file__).with_name("pingpong.c")
PINGPONG_CFLAGS = ("-O2", "-std=gnu11")

DEFAULT_SIZES: tuple[int, ...] = tuple(2**i for i in range(25))
"""1 B to 16 MiB, every power of two: the eager/rendezvous switch and the cache sizes
fall between neighbours, not inside a wide segment."""
DEFAULT_REPETITIONS = 50
MAX_REPETITIONS = 10_000
"""Round trips per message size: the median of 50 settles within a few percent here; ten
thousand at 16 MiB already take minutes, a billion would never end."""
MAX_SIZE = 2**30
"""SimGrid reads factor breakpoints as C ``int``s; 1 GiB keeps ``size + 15`` inside."""
MAX_SIZES = 64
"""Message sizes one calibration measures: the 25 powers of two up to 16 MiB fit SMPI's
piecewise factors; more than 64 only lengthen the run."""

COMPUTE_STEPS = 200_000_000
"""Steps of the compute reference: about half a second on a 2020s core."""

REFERENCE_RATE_PROPERTY = "perfcast:reference-rate"
"""Zone property holding the compute reference rate: dependent double-precision
multiply-add steps per second of one core (``pingpong.c``). SimGrid ignores it. It is there
for a later comparison of machines: a platform's host speed says "as fast as the machine
the trace was recorded on", so a trace recorded on machine A replayed on the platform
calibrated on machine B predicts B only if B's cores are as fast as A's; B's rate over A's
is the ``perfcast platform describe --speed-factor`` of B for A's traces."""

ENVELOPE_BYTES = 16
"""Bytes SMPI adds to every message (``smpi_request.cpp``: tag, source, communicator)."""
TCP_GAMMA = 4194304.0
"""SimGrid's default ``network/TCP-gamma``: a flow's rate is capped at gamma / (2 x route
latency), the TCP window over the round trip."""

LINE_TOLERANCE = 0.05
"""Largest relative error of the single line at any measured size for the platform to go
without factors."""

SMALLEST_SLOPE = 1e-3
"""The slope of a segment whose next size was measured no slower, as a fraction of the
segment's own time per byte (see :func:`_segment`)."""

SIMULATED_ROUND_TRIPS = 4


@dataclass(frozen=True)
class Measurement:
    """What ``pingpong.c`` measured: median one-way seconds per message size, and the
    compute reference rate (steps per second)."""

    one_way: Mapping[int, float]
    reference_rate: float


@dataclass(frozen=True)
class Fit:
    """The platform's network numbers.

    Attributes:
        latency: seconds of the route between two cores (each core's link has half).
        bandwidth: bytes/s of each core's link (and so of the route).
        line_error: largest relative error of ``latency + (size + 16) / bandwidth``
            at a measured size.
        bw_factor, lat_factor: SMPI's factor strings; ``"0:1"`` where the line fits.
    """

    latency: float
    bandwidth: float
    line_error: float
    bw_factor: str
    lat_factor: str


@dataclass(frozen=True)
class Calibration:
    """A calibration: what was measured, what was fitted, the platform made of it, and
    the one-way seconds SimGrid gives on that platform per measured size (the check
    that the platform reproduces this machine)."""

    measurement: Measurement
    fit: Fit
    platform: PlatformSpec
    simulated: Mapping[int, float]


def check_sizes(sizes: Sequence[int]) -> tuple[int, ...]:
    """Distinct sizes in increasing order, or an error saying what is allowed."""
    chosen = tuple(sorted(set(sizes)))
    if len(chosen) < 2:
        raise InputError("give at least two different message sizes to fit a line through")
    if chosen[0] < 1 or chosen[-1] > MAX_SIZE:
        raise InputError(f"message sizes must lie between 1 and {MAX_SIZE} bytes (1 GiB)")
    if len(chosen) > MAX_SIZES:
        raise InputError(
            f"{len(chosen):,} message sizes: give at most {MAX_SIZES} (each is measured "
            "--repetitions times; the default, every power of two to 16 MiB, is 25)"
        )
    return chosen


def build_pingpong(directory: Path) -> Path:
    """``pingpong.c`` compiled with ``mpicc`` into ``directory``."""
    mpicc = find_mpicc()
    program = directory / "pingpong"
    command = [mpicc, *PINGPONG_CFLAGS, str(PINGPONG_SOURCE), "-o", str(program)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise PerfcastError(
            f"compiling the ping-pong failed ({' '.join(command)}): {_tail(done.stderr)}; "
            f"check the MPI installation ({MPI_HINT})"
        )
    return program


def measure(
    sizes: Sequence[int],
    repetitions: int = DEFAULT_REPETITIONS,
    compute_steps: int = COMPUTE_STEPS,
    *,
    timeout: float = 600,
) -> Measurement:
    """Ping-pong between two ranks on two cores of this machine, then the compute
    reference; medians of ``repetitions`` round trips per size."""
    if repetitions < 1 or compute_steps < 1:
        raise InputError("repetitions and compute steps must be at least 1")
    if available_cores() < 2:
        raise PerfcastError(
            "calibrating needs two cores: two ranks sharing one core time the scheduler, "
            "not the messages"
        )
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise PerfcastError(f"mpirun was not found on PATH: {MPI_HINT}")
    with tempfile.TemporaryDirectory(prefix="perfcast-calibrate-") as work:
        program = build_pingpong(Path(work))
        command = [mpirun]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            command.append("--allow-run-as-root")
        command += ["--bind-to", "core", "-np", "2", str(program)]
        command += [str(repetitions), str(compute_steps), *map(str, check_sizes(sizes))]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise PerfcastError(
                f"the ping-pong ran past {timeout:g} s: give fewer sizes or repetitions"
            ) from None
    if done.returncode != 0:
        raise PerfcastError(
            f"the ping-pong failed (exit {done.returncode}, {' '.join(command)}): "
            f"{_tail(done.stderr or done.stdout)}"
        )
    return _read_output(done.stdout)


def _read_output(text: str) -> Measurement:
    round_trips: dict[int, list[float]] = defaultdict(list)
    rates = []
    for line in text.splitlines():
        fields = line.split()
        if fields[:1] == ["pingpong"] and len(fields) == 3:
            round_trips[int(fields[1])].append(float(fields[2]))
        elif fields[:1] == ["compute"] and len(fields) == 4 and float(fields[2]) > 0:
            rates.append(int(fields[1]) / float(fields[2]))
    # the fastest slice: the core's own rate, least disturbed by other work (pingpong.c)
    rate = max(rates, default=None)
    if rate is None or not round_trips:
        raise PerfcastError(f"the ping-pong printed no measurements: {_tail(text)}")
    one_way = {size: statistics.median(times) / 2 for size, times in round_trips.items()}
    return Measurement(one_way=dict(sorted(one_way.items())), reference_rate=rate)


def fit(one_way: Mapping[int, float]) -> Fit:
    """Latency, bandwidth and SMPI factors that make SimGrid's one-way times those of
    ``one_way`` (seconds per message size, at least two sizes)."""
    sizes = sorted(one_way)
    payloads = [size + ENVELOPE_BYTES for size in sizes]
    latency, bandwidth = _line(payloads, [one_way[size] for size in sizes])
    line_error = max(
        abs(latency + payload / bandwidth - one_way[size]) / one_way[size]
        for size, payload in zip(sizes, payloads, strict=True)
    )
    if line_error <= LINE_TOLERANCE:
        return Fit(latency, bandwidth, line_error, "0:1", "0:1")
    rate = min(bandwidth, TCP_GAMMA / (2 * latency))
    chords = [
        (one_way[right] - one_way[left]) / (right - left)
        for left, right in itertools.pairwise(sizes)
    ]
    bw_segments, lat_segments = [], []
    # one segment from each measured size on; the last one's line keeps the last chord's slope
    for index, (size, chord) in enumerate(zip(sizes, [*chords, chords[-1]], strict=True)):
        intercept, slope = _segment(size + ENVELOPE_BYTES, one_way[size], chord)
        breakpoint = 0 if index == 0 else size + ENVELOPE_BYTES - 1
        bw_segments.append(f"{breakpoint}:{1 / (slope * rate):.9g}")
        lat_segments.append(f"{breakpoint}:{intercept / latency:.9g}")
    return Fit(latency, bandwidth, line_error, ";".join(bw_segments), ";".join(lat_segments))


def _line(sizes: Sequence[int], times: Sequence[float]) -> tuple[float, float]:
    """``(latency, bandwidth)`` of the line through ``(size, time)`` with the smallest
    relative errors: least squares of ``(latency + size x inverse) / time - 1``.

    A noisy curve can give a line through or below the origin; then the smallest
    message's time is the latency and the largest message's rate the bandwidth."""
    a11 = sum(1 / t**2 for t in times)
    a12 = sum(s / t**2 for s, t in zip(sizes, times, strict=True))
    a22 = sum(s**2 / t**2 for s, t in zip(sizes, times, strict=True))
    b1 = sum(1 / t for t in times)
    b2 = sum(s / t for s, t in zip(sizes, times, strict=True))
    determinant = a11 * a22 - a12**2
    latency = (b1 * a22 - b2 * a12) / determinant
    inverse = (a11 * b2 - a12 * b1) / determinant
    if latency <= 0 or inverse <= 0:
        return times[0], sizes[-1] / times[-1]
    return latency, 1 / inverse


def _segment(payload: int, time: float, chord: float) -> tuple[float, float]:
    """``(intercept, slope)``, in seconds and seconds per byte, of the segment that starts
    at a measured size (``payload`` bytes on the network, ``time`` seconds) and has the
    ``chord``'s slope (towards the next measured size): exact at its start always.

    A chord that does not rise (noise among the smallest messages) gets a small positive
    slope, as SimGrid needs a positive bandwidth factor; one so steep that the line would
    pass below the origin (the switch to a rendezvous protocol) is replaced by the line
    through the origin, with no latency."""
    slope = max(chord, SMALLEST_SLOPE * time / payload)
    intercept = time - slope * payload
    if intercept < 0:
        return 0.0, time / payload
    return intercept, slope


def platform_spec(
    fitted: Fit, cores: int, reference_rate: float, name: str = "local"
) -> PlatformSpec:
    """This machine: ``cores`` hosts of one core each, links with half the route latency."""
    return PlatformSpec(
        name,
        nodes=cores,
        cores=1,
        speed=REFERENCE_SPEED,
        bandwidth=fitted.bandwidth,
        latency=fitted.latency / 2,
        config=(("smpi/bw-factor", fitted.bw_factor), ("smpi/lat-factor", fitted.lat_factor)),
        properties=((REFERENCE_RATE_PROPERTY, f"{reference_rate:.6g}"),),
        origin="perfcast platform calibrate",
    )


def simulate_pingpong(
    platform: PlatformFile, sizes: Sequence[int], round_trips: int = SIMULATED_ROUND_TRIPS
) -> dict[int, float]:
    """One-way seconds SimGrid gives a ping-pong of each size between the platform's
    first two cores: ``round_trips`` MPI_BYTE round trips replayed, halved and averaged."""
    simulated = {}
    with tempfile.TemporaryDirectory(prefix="perfcast-pingpong-trace-") as work:
        index = Path(work) / "pingpong.txt"
        index.write_text("rank0.txt\nrank1.txt\n")
        for size in sizes:
            ping, pong = f"send 1 0 {size} 6\n", f"recv 1 0 {size} 6\n"
            (Path(work) / "rank0.txt").write_text(
                "0 init\n" + f"0 {ping}0 {pong}" * round_trips + "0 finalize\n"
            )
            back, forth = f"recv 0 0 {size} 6\n", f"send 0 0 {size} 6\n"
            (Path(work) / "rank1.txt").write_text(
                "1 init\n" + f"1 {back}1 {forth}" * round_trips + "1 finalize\n"
            )
            simulated[size] = replay(index, platform, 2).time / (2 * round_trips)
    return simulated


def calibrate(
    *,
    sizes: Sequence[int] = DEFAULT_SIZES,
    repetitions: int = DEFAULT_REPETITIONS,
    cores: int | None = None,
    name: str = "local",
    compute_steps: int = COMPUTE_STEPS,
) -> Calibration:
    """Measure, fit, and replay the ping-pong on the platform as SimGrid reads it from
    its file (factors in ``<config>``), so the check covers what a replay will see."""
    measured = measure(sizes, repetitions, compute_steps)
    fitted = fit(measured.one_way)
    spec = platform_spec(fitted, cores or available_cores(), measured.reference_rate, name)
    # The ping-pong runs on the first two hosts; the others are alike and take no part, so
    # it is replayed on a platform of two (SimGrid built all 1,048,576 hosts of a
    # --cores 1048576 platform in every one of the 25 replays: minutes after measuring).
    # The file is not named after the platform: a 300-character name is a valid zone id,
    # not a valid file name.
    pair = platform_spec(fitted, 2, measured.reference_rate, name)
    with tempfile.TemporaryDirectory(prefix="perfcast-calibrate-") as work:
        written = Path(work) / "platform.xml"
        written.write_text(pair.to_xml())
        simulated = simulate_pingpong(read_platform(written), list(measured.one_way))
    return Calibration(measured, fitted, spec, simulated)


def _tail(text: str, lines: int = 5) -> str:
    return " | ".join(text.strip().splitlines()[-lines:]) or "no output"
