"""Synthesised traces against direct simulation: does the trace of p ranks that
``perfcast simulate --synthesize`` derives from small traced runs replay as long as SimGrid
SMPI simulating the real program at p ranks?

Two programs (``--program``), both weak scaling with a periodic ring of MPI_Sendrecv and
one MPI_Allreduce per step, so that a step lasts as long as the slowest rank's burst:

* ``stencil`` (``src/perfcast/examples/stencil``, 128 x 128 a rank, 50 steps): sweeps of
  about 22 us over 266 KiB a rank, the hard case. Microsecond bursts vary by this host's
  jitter, and the slowest of p grows with p (1.8x the mean at p = 64 in SMPI's own run),
  which ``--noise mean`` leaves out and ``resample``/``correlated`` draw from the inputs'
  spread; and SMPI's bursts step up at large p, because one process runs every rank's
  sweep in turn and their data no longer fit its caches (+80 % at p = 256), which a
  cluster would not show and no synthesis should imitate (the report says how much of the
  direct time that accounts for).
* ``ring`` (``benchmarks/synthesis_ring``, 20 steps): bursts of about 1.1 ms over 2 KiB a
  rank, which stay in the cache at every p: compute-bound without SMPI's cache step, so the
  comparison measures the synthesis (structure, peers, counts, compute models, noise).

Each program is

1. traced at p = 3, 4, 5, 6, 8 and 16 (``--inputs``): ``real``, built with
   ``perfcast build --trace -- mpicc`` and run by ``mpirun --oversubscribe`` with the CPU
   clock (this machine has 2 cores), or ``virtual``, built with ``perfcast build --smpi
   --trace`` and run by smpirun on the compared cluster, so that inputs and direct runs
   charge compute the same way;
2. synthesised from the p = 3..8 traces at each target p with every ``--noise``
   (``mean``, the default: compute at its modeled mean; ``resample``: the inputs' spread
   drawn per rank; ``correlated``: split into what all ranks share at a step and what is a
   rank's own) and replayed on a described cluster of p single-core nodes (``PlatformSpec``
   defaults: 1 Gflop/s cores, 1.25 GB/s and 1 us links);
3. simulated directly: built with smpicc's own command line (``smpicc -show``) with
   clang-16, the traced build's compiler, in place of its ``/usr/bin/cc``, without
   instrumentation, and run by ``smpirun -np p`` on the same platform file with the same
   SMPI factors and ``--cfg=smpi/host-speed:1Gf`` (a second of compute here is a second
   there): SMPI's simulated time, the least of ``DIRECT_RUNS`` runs (SMPI times every
   compute burst of every rank as it runs here, so a burst slowed by the other load of this
   shared 2-core machine lengthens the simulated run; the spread is reported); at p = 16
   also the replay of the trace recorded at 16 ranks.

Error = synthesised / direct - 1. Why not ``perfcast build --smpi`` for the direct run: SMPI
charges the time between two MPI calls as compute, and there that includes perfcast's MPI
wrappers, about 4 us per call here; the report gives that build's direct time at p = 64 as
well. The bursts before each MPI_Allreduce that each replay or simulation computes are
reported beside (``sweep_bursts``). NAS IS (``../shared/apps``) is traced at p = 4, 8, 16
(it runs at powers of two) and handed to the synthesis, which says whether its traces can be
synthesised. ``--latency 5e-5`` makes the stencil communication-bound, where the
synthesised pattern of messages is what is tested.

    python3 benchmarks/synthesis_vs_simulated.py --quick
    python3 benchmarks/synthesis_vs_simulated.py \\
        --output benchmarks/results/synthesis_vs_simulated.txt
    python3 benchmarks/synthesis_vs_simulated.py --latency 5e-5 \\
        --output benchmarks/results/synthesis_vs_simulated_latency50us.txt
    python3 benchmarks/synthesis_vs_simulated.py --program ring \\
        --output benchmarks/results/synthesis_vs_simulated_ring.txt
    python3 benchmarks/synthesis_vs_simulated.py --program ring --inputs virtual \\
        --output benchmarks/results/synthesis_vs_simulated_ring_virtual.txt
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from perfcast.errors import PerfcastError
from perfcast.simulate.platform import PlatformSpec, read_platform
from perfcast.simulate.replay import replay
from perfcast.simulate.synthesis import NOISE, synthesize
from perfcast.simulate.trace import read_trace

REPO = Path(__file__).resolve().parents[1]
NPB = Path(os.environ.get("PERFCAST_NPB", REPO.parent / "shared" / "apps" / "npb" / "NPB3.4-MPI"))
PERFCAST = f"{sys.executable} -m perfcast"
MPIRUN = ("mpirun", "--allow-run-as-root", "--oversubscribe")
INPUTS = (3, 4, 5, 6, 8)
RECORDED = 16
TARGETS = (16, 64, 256, 1024)


@dataclass(frozen=True)
class Program:
    """What is traced, synthesised and simulated: a source directory built by its Makefile
    with ``make CC=...``, run as ``./executable *arguments``."""

    name: str
    sources: Path
    executable: str
    arguments: tuple[str, ...]
    steps: int
    """Synchronising steps of one run (one MPI_Allreduce each)."""
    description: str


PROGRAMS = {
    "stencil": Program(
        "stencil",
        REPO / "src" / "perfcast" / "examples" / "stencil",
        "jacobi",
        ("128", "50"),
        50,
        "the stencil, SIZE=128 ITERATIONS=50 (a sweep of about 22 us, 266 KiB a rank)",
    ),
    "ring": Program(
        "ring",
        REPO / "benchmarks" / "synthesis_ring",
        "ring",
        ("30000", "20"),
        20,
        "benchmarks/synthesis_ring, PASSES=30000 STEPS=20 (a burst of about 1.1 ms over "
        "2 KiB a rank)",
    ),
}
TIMEOUT_S = 900
DIRECT_RUNS = 3
BURSTS_AT = 64
OWN_BURSTS_UP_TO = 256
"""SMPI's own bursts are recorded (``-trace-ti``) up to here: at 1024 ranks that run takes
minutes."""
SIMULATED_TIME = re.compile(r"Simulated time: ([0-9.eE+-]+) seconds")


@dataclass(frozen=True)
class Row:
    ranks: int
    mean: float
    resample: float
    correlated: float
    direct: float
    direct_spread: float
    """(largest - least) / least of the direct runs."""
    recorded: float | None
    synthesis_s: float
    replay_s: float
    direct_s: float


def run(command: list[str], cwd: Path, environment: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=TIMEOUT_S
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {(done.stdout + done.stderr)[-2000:]}")
    return done.stdout + done.stderr


def build(work: Path, program: Program, name: str, compiler: str) -> Path:
    source = work / name
    shutil.copytree(program.sources, source)
    run(["make", f"CC={compiler}"], source)
    return source


def clang_smpicc(work: Path) -> Path:
    """A compiler command that runs smpicc's command line with clang-16 for its cc."""
    script = work / "clang-smpicc"
    script.write_text('#!/bin/sh\nexec $(smpicc -show "$@" | sed "s#^/usr/bin/cc #clang-16 #")\n')
    script.chmod(0o755)
    return script


def trace(program: Path, ranks: int, directory: Path, arguments: list[str]) -> Path:
    environment = ["-x", f"PERFCAST_TRACE_DIR={directory}", "-x", "PERFCAST_TRACE_CLOCK=cpu"]
    environment += ["-x", f"PERFCAST_PROFILE_DIR={directory}-profile"]
    run([*MPIRUN, "-np", str(ranks), *environment, *arguments], program)
    return directory


def smpirun(platform: Path, ranks: int, work: Path) -> list[str]:
    """The smpirun command line that runs ``ranks`` ranks on the first hosts of
    ``platform``, a second of compute here a second there."""
    hosts = work / f"hosts-{ranks}"
    hosts.write_text("".join(f"{h}\n" for h in read_platform(platform).hosts[:ranks]))
    command = ["smpirun", "-np", str(ranks), "-platform", str(platform), "-hostfile", str(hosts)]
    return [*command, *read_platform(platform).smpi_options, "--cfg=smpi/host-speed:1Gf"]


def virtual_trace(
    program: Program, built: Path, ranks: int, directory: Path, work: Path, latency: float
) -> Path:
    """A trace of a virtual run: the program built with ``perfcast build --smpi --trace``,
    run by smpirun on the cluster the comparison replays on, so that the inputs' compute
    is charged as the direct simulation charges it (docs/smpi-backend.md, section 5)."""
    platform = work / f"cluster-{ranks}.xml"
    platform.write_text(PlatformSpec("cluster", nodes=ranks, latency=latency).to_xml())
    command = [*smpirun(platform, ranks, work), f"./{program.executable}", *program.arguments]
    environment = {**os.environ, "PERFCAST_TRACE_DIR": str(directory)}
    environment["PERFCAST_PROFILE_DIR"] = f"{directory}-profile"
    run(command, built, environment)
    return directory


def direct_smpi(program: Program, built: Path, platform: Path, ranks: int, work: Path) -> float:
    """SMPI's simulated seconds of the real program at ``ranks`` ranks on ``platform``
    (a build of ``perfcast build --smpi --trace`` traces into a scratch directory, as it did
    for the inputs, removed afterwards)."""
    command = smpirun(platform, ranks, work)
    command += ["--cfg=smpi/display-timing:yes", f"./{program.executable}", *program.arguments]
    scratch = Path(tempfile.mkdtemp(prefix=f"direct-p{ranks}-", dir=work))
    environment = {**os.environ, "PERFCAST_PROFILE_DIR": str(scratch / "profile")}
    environment["PERFCAST_TRACE_DIR"] = str(scratch / "trace")
    found = SIMULATED_TIME.search(run(command, built, environment))
    shutil.rmtree(scratch)
    if found is None:
        raise RuntimeError(f"smpirun -np {ranks} printed no simulated time")
    return float(found.group(1))


def compare(
    program: Program, work: Path, traces: dict[int, Path], smpi: Path, ranks: int, latency: float
) -> Row:
    inputs = [read_trace(traces[p]) for p in INPUTS]
    spec = PlatformSpec("cluster", nodes=ranks, latency=latency)
    platform = work / f"cluster-{ranks}.xml"
    platform.write_text(spec.to_xml())
    times: dict[str, float] = {}
    synthesis_s = replay_s = 0.0
    for noise in NOISE:
        directory = work / f"synthesised-{noise}-p{ranks}"
        started = time.perf_counter()
        synthesize(inputs, ranks, directory, noise=noise)
        synthesis_s += time.perf_counter() - started
        result = replay(directory / "index.txt", spec, ranks, timeout=TIMEOUT_S)
        times[noise], replay_s = result.time, replay_s + result.wall
        shutil.rmtree(directory)
    recorded = None
    if ranks in traces:
        index = read_trace(traces[ranks]).write_index(work / f"index-{ranks}.txt")
        recorded = replay(index, spec, ranks, timeout=TIMEOUT_S).time
    started = time.perf_counter()
    runs = DIRECT_RUNS
    direct = [direct_smpi(program, smpi, platform, ranks, work) for _ in range(runs)]
    direct_s = (time.perf_counter() - started) / runs
    return Row(
        ranks, times["mean"], times["resample"], times["correlated"], min(direct),
        max(direct) / min(direct) - 1, recorded, synthesis_s / len(NOISE),
        replay_s / len(NOISE), direct_s,
    )  # fmt: skip


def nas_is(work: Path) -> str:
    """Whether NAS IS traces can be synthesised, in one line."""
    if not NPB.is_dir():
        return f"NAS IS: not run, {NPB} is missing"
    npb = work / "npb"
    shutil.copytree(NPB, npb)
    shutil.copy(npb / "config" / "make.def.template", npb / "config" / "make.def")
    (npb / "bin").mkdir(exist_ok=True)
    run(["make", "is", "CLASS=S", f"MPICC={PERFCAST} build --trace -- mpicc"], npb)
    traces = [trace(npb, p, work / f"is-p{p}", ["bin/is.S.x"]) for p in (4, 8, 16)]
    try:
        synthesize([read_trace(t) for t in traces], 64, work / "is-p64")
    except PerfcastError as refused:
        return f"NAS IS class S traced at p = 4, 8, 16: refused: {refused}"
    return "NAS IS class S traced at p = 4, 8, 16: synthesised (not compared)"


@dataclass(frozen=True)
class Bursts:
    """The compute burst before each MPI_Allreduce (the stencil's sweep, the ring's burst)
    over all ranks'
    action files: its median, and the sum over steps of the slowest rank's burst over the
    sum of the ranks' mean burst (what waiting for the slowest rank at every step costs)."""

    median: float
    """Flops (nanoseconds at 1 Gflop/s)."""
    slowest_over_mean: float

    def text(self) -> str:
        return f"median {self.median / 1e3:.1f} us, slowest/mean {self.slowest_over_mean:.2f}"


def sweep_bursts(files: list[Path]) -> Bursts:
    steps: list[list[float]] = []
    for path in files:
        words = [line.split() for line in path.read_text().splitlines()]
        steps.append(
            [
                float(w[2])
                for w, after in itertools.pairwise(words)
                if w[1] == "compute" and after[1] == "allreduce"
            ]
        )
    bursts = sorted(b for rank in steps for b in rank)
    by_step = list(zip(*steps, strict=True))
    slowest = sum(max(step) for step in by_step)
    mean = sum(statistics.fmean(step) for step in by_step)
    return Bursts(bursts[len(bursts) // 2], slowest / mean)


def burst_lines(
    program: Program, work: Path, traces: dict[int, Path], smpi: Path, rows: list[Row]
) -> list[str]:
    """Where the time differences come from: the bursts of the traced runs, of the
    traces synthesised at ``BURSTS_AT`` and of SMPI's own runs (``-trace-ti``) at every
    compared p up to ``OWN_BURSTS_UP_TO``; then how much of each direct time the growth of
    SMPI's bursts over the inputs' accounts for, which no synthesis should imitate, and the
    errors left once it is taken out."""
    lines = ["bursts (compute before each MPI_Allreduce):"]
    for p, directory in traces.items():
        found = sweep_bursts(list(read_trace(directory).rank_files))
        lines.append(f"  traced p={p}: {found.text()}")
    inputs = [read_trace(traces[p]) for p in INPUTS]
    traced = statistics.median(sweep_bursts(list(t.rank_files)).median for t in inputs)
    for noise in NOISE:
        directory = work / f"bursts-{noise}"
        synthesize(inputs, BURSTS_AT, directory, noise=noise)
        files = list(read_trace(directory).rank_files)
        lines.append(f"  synthesised at p={BURSTS_AT}, {noise}: {sweep_bursts(files).text()}")
        shutil.rmtree(directory)
    growth = []
    for row in (row for row in rows if row.ranks <= OWN_BURSTS_UP_TO):
        p = row.ranks
        recorded = work / f"ti-{p}"
        command = smpirun(work / f"cluster-{p}.xml", p, work)
        command += ["-trace-ti", f"--cfg=tracing/filename:{recorded}"]
        environment = {**os.environ, "PERFCAST_TRACE_DIR": str(work / f"own-trace-{p}")}
        environment["PERFCAST_PROFILE_DIR"] = str(work / f"own-profile-{p}")
        run([*command, f"./{program.executable}", *program.arguments], smpi, environment)
        files = sorted(
            (work / f"ti-{p}_files").glob("*_rank-*.txt"),
            key=lambda path: int(path.stem.rsplit("-", 1)[1]),
        )
        own = sweep_bursts(files)
        lines.append(f"  SMPI's own run at p={p} (-trace-ti): {own.text()}")
        shutil.rmtree(work / f"ti-{p}_files")
        # the wait for the slowest burst, every step, at SMPI's larger median (1 Gf: ns)
        excess = max(own.median - traced, 0.0) * own.slowest_over_mean * program.steps / 1e9
        left = row.direct - excess
        growth.append(
            f"  p={p}: median {percent(own.median, traced)}, {excess * 1e3:.3f} ms = "
            f"{excess / row.direct * 100:.0f}% of the direct time; errors without it: mean "
            f"{percent(row.mean, left)}, resample {percent(row.resample, left)}, correlated "
            f"{percent(row.correlated, left)}"
        )
    return [
        *lines,
        f"SMPI's bursts over the inputs' ({traced / 1e3:.1f} us, the median of their "
        "medians), at SMPI's slowest/mean (an artefact of one process running every rank, "
        "which the synthesis does not and should not imitate):",
        *growth,
    ]


def percent(value: float, reference: float) -> str:
    return f"{(value / reference - 1) * 100:+.1f}%"


def report(
    program: Program,
    inputs: str,
    rows: list[Row],
    notes: list[str],
    nas: str,
    wall: float,
    latency: float,
) -> str:
    traced = {
        "real": "CPU-clock traces of mpirun runs on this 2-core machine",
        "virtual": "traces of smpirun runs (perfcast build --smpi --trace) on the same cluster",
    }[inputs]
    lines = [
        f"Synthesised vs directly simulated: {program.description}, "
        f"synthesised from {traced} at p = {', '.join(map(str, INPUTS))}",
        f"platform: p nodes x 1 core, 1 Gflop/s, 1.25 GB/s links of {latency * 1e6:g} us "
        "latency (PlatformSpec); direct = smpirun of "
        + (
            "the build that traced the inputs"
            if inputs == "virtual"
            else "the program built by smpicc with clang-16"
        )
        + ", host-speed 1Gf",
        "",
        f"{'p':>5} {'mean ms':>9} {'resample ms':>12} {'correlated ms':>14} "
        f"{'direct ms':>10} {'spread':>7} {'err mean':>9} {'err resample':>13} "
        f"{'err correlated':>15} {'recorded ms':>12} {'synth s':>8} {'replay s':>9} "
        f"{'smpirun s':>10}",
    ]
    for row in rows:
        recorded = "" if row.recorded is None else f"{row.recorded * 1e3:.3f}"
        lines.append(
            f"{row.ranks:>5} {row.mean * 1e3:>9.3f} {row.resample * 1e3:>12.3f} "
            f"{row.correlated * 1e3:>14.3f} {row.direct * 1e3:>10.3f} "
            f"{row.direct_spread * 100:>6.0f}% {percent(row.mean, row.direct):>9} "
            f"{percent(row.resample, row.direct):>13} "
            f"{percent(row.correlated, row.direct):>15} {recorded:>12} {row.synthesis_s:>8.2f} "
            f"{row.replay_s:>9.2f} {row.direct_s:>10.2f}"
        )
    for row in rows:
        if row.recorded is not None:
            lines.append(
                f"p={row.ranks}, against the replay of the trace recorded at {row.ranks} ranks: "
                f"mean {percent(row.mean, row.recorded)}, resample "
                f"{percent(row.resample, row.recorded)}, correlated "
                f"{percent(row.correlated, row.recorded)}; the direct SMPI run "
                f"{percent(row.direct, row.recorded)}"
            )
    lines += [
        "",
        *notes,
        "",
        "mean/resample/correlated ms: the synthesised trace replayed with that --noise; direct "
        f"ms: the least of {DIRECT_RUNS} smpirun runs (spread: largest over "
        "least - 1); synth s: one synthesis, replay s: one replay, smpirun s: "
        "one direct run (wall seconds here)",
        "",
        nas,
        "",
        f"benchmark wall time: {wall:.0f} s",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="p up to 64, no NAS IS")
    parser.add_argument(
        "--program",
        choices=sorted(PROGRAMS),
        default="stencil",
        help="stencil: microsecond sweeps whose jitter and cache step dominate at large p; "
        "ring: millisecond bursts in the cache, compute-bound (default: stencil)",
    )
    parser.add_argument(
        "--inputs",
        choices=("real", "virtual"),
        default="real",
        help="real: trace mpirun runs on this machine (default); virtual: trace smpirun runs "
        "of the program built with perfcast build --smpi --trace on the compared cluster",
    )
    parser.add_argument("--output", type=Path, help="also write the report here")
    parser.add_argument(
        "--latency",
        type=float,
        default=PlatformSpec.latency,
        help="link latency in seconds (default: PlatformSpec's 1e-6; 5e-5 makes the run "
        "communication-bound)",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    targets = [p for p in TARGETS if not args.quick or p <= 64]
    with tempfile.TemporaryDirectory(prefix="perfcast-synthesis-") as scratch:
        work = Path(scratch)
        program = PROGRAMS[args.program]
        smpi = build(work, program, "smpi", str(clang_smpicc(work)))
        arguments = [f"./{program.executable}", *program.arguments]
        if args.inputs == "real":
            traced = build(work, program, "traced", f"{PERFCAST} build --trace -- mpicc")
            traces = {
                p: trace(traced, p, work / f"trace-p{p}", arguments) for p in (*INPUTS, RECORDED)
            }
        else:
            traced = build(work, program, "traced", f"{PERFCAST} build --smpi --trace -- smpicc")
            traces = {
                p: virtual_trace(program, traced, p, work / f"trace-p{p}", work, args.latency)
                for p in (*INPUTS, RECORDED)
            }
        # virtual inputs are compared with the very build that traced them, so that only
        # the rank count differs (a perfcast build's bursts differ from smpicc's own by a
        # few per cent: the last note gives that build's time at p = 64)
        direct = traced if args.inputs == "virtual" else smpi
        rows = []
        for ranks in targets:
            rows.append(compare(program, work, traces, direct, ranks, args.latency))
            print(f"p={ranks}: {rows[-1]}", file=sys.stderr, flush=True)
        notes = burst_lines(program, work, traces, direct, rows)
        instrumented = build(work, program, "smpi-perfcast", f"{PERFCAST} build --smpi -- smpicc")
        platform = work / f"cluster-{BURSTS_AT}.xml"
        slower = direct_smpi(program, instrumented, platform, BURSTS_AT, work)
        notes.append(
            f"direct at p={BURSTS_AT} with perfcast build --smpi (its MPI wrappers count as "
            f"compute): {slower * 1e3:.3f} ms"
        )
        if args.quick or program.name != "stencil":
            nas = f"NAS IS: not run ({'--quick' if args.quick else '--program ' + program.name})"
        else:
            nas = nas_is(work)
    text = report(
        program, args.inputs, rows, notes, nas, time.perf_counter() - started, args.latency
    )
    command = shlex.join(["python3", "benchmarks/synthesis_vs_simulated.py", *sys.argv[1:]])
    text = f"$ {command}\n{text}"
    print(text, end="")
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
