"""Traces synthesised for rank counts nobody ran (``perfcast.simulate.synthesis``).

Two kinds of evidence. Traces written here from a known program (a generator of each rank's
actions at any p) must synthesise to exactly what the generator writes at the target: the
peers follow the right relations, a rank's role picks its template, a constant stays
constant and a log2(p) amount is extrapolated as one; programs whose structure changes
between ranks or with p are refused with the place that differs. And the stencil example,
traced at p = 3..8 with the CPU clock, synthesises the trace of p = 16: the same messages as
the trace recorded at 16 ranks, and a replay on the same platform within 10 % of it.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from perfcast.cli import main
from perfcast.errors import InputError, PerfcastError
from perfcast.simulate import grid
from perfcast.simulate.platform import PlatformSpec
from perfcast.simulate.replay import replay
from perfcast.simulate.synthesis import synthesize
from perfcast.simulate.trace import read_trace

EXAMPLE = Path(__file__).resolve().parents[1] / "src" / "perfcast" / "examples" / "stencil"
MPIRUN = ("mpirun", "--allow-run-as-root", "--oversubscribe")
SIZE, ITERATIONS = 128, 200
"""The stencil's block edge and steps: a sweep of ~25 us per step, long against the
microsecond blocks around it, and 270 KB per rank, so that the page faults of the first
touch (kernel time in the CPU clock, slow and erratic on a loaded machine) stay small."""
INPUTS = (3, 4, 5, 6, 8)

needs_mpi = pytest.mark.skipif(
    shutil.which("mpicc") is None, reason="Open MPI's mpicc is not installed"
)
needs_simgrid = pytest.mark.skipif(
    shutil.which("smpirun") is None, reason="SimGrid's smpirun is not installed"
)

Program = Callable[[int, int], list[str]]
"""A known program: the actions of rank r of p (without the rank prefix)."""


def write_trace(directory: Path, ranks: int, program: Program) -> Path:
    """A complete trace directory as a traced run leaves it, each rank running ``program``."""
    directory.mkdir(parents=True)
    for rank in range(ranks):
        lines = ["init", *program(rank, ranks), "finalize"]
        (directory / f"rank-{rank}.trace").write_text("".join(f"{rank} {x}\n" for x in lines))
        (directory / f"rank-{rank}.blocks.tsv").write_text(
            f"# perfcast-trace-blocks/1 run=known rank={rank}\n"
        )
    summary = {
        "format": "perfcast-trace/1",
        "run_id": "known",
        "ranks": ranks,
        "reference_speed": 1e9,
        "clock": "cpu",
        "program": "known",
        "elapsed": [1.0] * ranks,
        "credited": [0.0] * ranks,
        "files": [f"rank-{rank}.trace" for rank in range(ranks)],
        "blocks": [f"rank-{rank}.blocks.tsv" for rank in range(ranks)],
    }
    (directory / "trace.json").write_text(json.dumps(summary))
    return directory


def traces_of(tmp_path: Path, program: Program, counts: tuple[int, ...] = INPUTS) -> list:
    return [read_trace(write_trace(tmp_path / f"p{p}", p, program)) for p in counts]


def lines_of(directory: Path, rank: int) -> list[str]:
    return (directory / f"rank-{rank}.trace").read_text().splitlines()


def chain(rank: int, ranks: int) -> list[str]:
    """A non-periodic chain: halos to the neighbours that exist, a constant 5000-flop
    block, a 1000 log2(p) flop block, a reduce to rank 0 and a broadcast from the last."""
    halo = 100 * ranks  # a message that grows with p
    actions = ["compute 5000"]
    if rank > 0:
        actions += [f"send {rank - 1} 0 {halo} 0", f"recv {rank - 1} 1 64 0"]
    if rank < ranks - 1:
        actions += [f"recv {rank + 1} 0 {halo} 0", f"send {rank + 1} 1 64 0"]
    actions += [f"compute {1000 * math.log2(ranks):.0f}", "reduce 8 0 0 0"]
    return [*actions, f"bcast 1 {ranks - 1} 1", "compute 700"]


def test_a_known_program_is_synthesised_exactly(tmp_path: Path) -> None:
    made = synthesize(traces_of(tmp_path, chain), 1000, tmp_path / "p1000")
    # every rank, of every role, runs exactly what the program runs at 1000 ranks
    for rank in (0, 1, 2, 500, 998, 999):
        expected = [f"{rank} {x}" for x in ["init", *chain(rank, 1000), "finalize"]]
        assert lines_of(made.directory, rank) == expected
    assert read_trace(made.directory).ranks == 1000
    models = {q.name: q for q in made.quantities}
    # constant in p: the modeler's constant model, not one that drifts away at 1000 ranks
    constant = models["init -> send r-1 0 n 0 (interior, last ranks)"]
    assert constant.model.is_constant() and constant.value == 5000
    growing = models["send r+1 1 n 0 -> reduce n 0 0 0 (first, interior ranks)"]
    assert growing.model.leading_exponents() == {"p": (0, 1)} and growing.value == 9966


def test_the_command_line_synthesises_and_says_what_it_modeled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = [str(trace.directory) for trace in traces_of(tmp_path, chain)]
    output = tmp_path / "p64"
    assert main(["simulate", *inputs, "--synthesize", "64", "-o", str(output)]) == 0
    shown = capsys.readouterr().out
    assert f"synthesised 64 ranks from traces at p = 3, 4, 5, 6, 8 into {output}" in shown
    assert "log2(p)" in shown
    assert main(["simulate", *inputs, "--synthesize", "64", "-o", str(output)]) == 2
    assert "is not an empty directory" in capsys.readouterr().err


def steep(rank: int, ranks: int) -> list[str]:
    """A block of 50 p^2 flops: growth no weak- or strong-scaling rank shows, but what
    ranks sharing a core's caches can put into a few small traced runs."""
    return [f"compute {50 * ranks * ranks}", "allreduce 8 0 0", "compute 700"]


def mixed(rank: int, ranks: int) -> list[str]:
    """The 50 p^2 block of :func:`steep`; a block like the stencil's after its allreduce
    (400 flops and a little growth between small p, fitted as p^4); a block of 300 p flops,
    genuinely linear; and a message of p^2 elements, a count that grows faster than p."""
    cached = 400 + 0.05 * ranks**3 * math.log2(ranks) ** 2
    return [
        f"compute {50 * ranks * ranks}",
        "allreduce 8 0 0",
        f"compute {cached:.0f}",
        "barrier",
        f"compute {300 * ranks}",
        f"allreduce {ranks * ranks} 0 0",
    ]


SQUARE, CACHED, LINEAR = (
    "init -> allreduce n 0 0",
    "allreduce n 0 0 -> barrier",
    "barrier -> allreduce n 0 0",
)
"""The compute blocks of :func:`mixed`."""


def test_steep_blocks_are_bounded_to_linear_growth_by_default(tmp_path: Path) -> None:
    made = synthesize(traces_of(tmp_path, mixed), 1024, tmp_path / "p1024")
    assert made.steep == "bound"
    models = {q.name: q for q in made.quantities}
    # 50 p^2 fitted exactly, 52 million flops at p = 1024; refitted at most linearly, whose
    # best line under-runs the convex data at p = 3 (a negative constant) and so still
    # grows faster than p: held at linear growth from the 3,200 flops of p = 8
    square = models[SQUARE]
    assert square.bound is not None and square.bound.held
    assert square.bound.fitted.leading_exponents() == {"p": (2, 0)}
    assert square.bound.fitted_value == 52_428_800
    assert square.value == 3200 * 1024 // 8 and square.model.leading_exponents() == {"p": (1, 0)}
    assert lines_of(made.directory, 5)[1] == f"5 compute {3200 * 1024 // 8}"
    # 403 to 630 flops from p = 3 to 8, fitted as p^4: the refit's own model, sub-linear
    # or linear with a positive constant, below linear growth from 630 flops
    cached = models[CACHED]
    assert cached.bound is not None and not cached.bound.held
    assert cached.bound.fitted_value > 10**9
    (exponent, logs) = cached.model.leading_exponents()["p"]
    assert exponent <= 1 and logs == 0 and cached.model.constant > 0
    assert 630 < cached.value <= 630 * 1024 / 8
    # genuinely linear growth is not steep: untouched
    linear = models[LINEAR]
    assert linear.bound is None and linear.model.leading_exponents() == {"p": (1, 0)}
    assert linear.value == 300 * 1024
    # a message count is the program's structure: p^2 elements stay p^2 elements
    squares = [q for q in made.quantities if q.kind == "count" and "field 1" in q.name]
    assert {(q.value, q.bound) for q in squares if q.value != 8} == {(1024 * 1024, None)}
    assert json.loads((made.directory / "trace.json").read_text())["steep"] == "bound"


def test_steep_blocks_are_kept_or_refused_on_request(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, mixed)
    kept = {q.name: q for q in synthesize(traces, 1024, tmp_path / "kept", steep="keep").quantities}
    assert kept[SQUARE].value == 52_428_800 and kept[SQUARE].bound is None
    assert kept[CACHED].model.leading_exponents()["p"][0] > 1
    assert kept[CACHED].value > 10**9 and kept[CACHED].bound is None
    with pytest.raises(PerfcastError) as refused:
        synthesize(traces, 1024, tmp_path / "refused", steep="refuse")
    message = str(refused.value)
    # both steep blocks, each with its model, its means at the traced p and its value at P
    assert f"compute block {SQUARE} is modeled as" in message and "50 * p^(2)" in message
    assert "means 450, 800, 1,250, 1,800, 3,200 flops at p = 3, 4, 5, 6, 8" in message
    assert "52,428,800 at p=1024" in message and f"compute block {CACHED}" in message
    assert LINEAR not in message
    assert "one rank per core" in message and "--steep bound" in message
    assert not (tmp_path / "refused").exists()
    with pytest.raises(PerfcastError, match="steep 'clip': choose one of bound, keep, refuse"):
        synthesize(traces, 1024, tmp_path / "clipped", steep="clip")


def test_the_command_line_prints_both_models_of_a_bounded_block(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = [str(trace.directory) for trace in traces_of(tmp_path, steep)]
    argv = ["simulate", *inputs, "--synthesize", "1024", "-o"]
    assert main([*argv, str(tmp_path / "bound")]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert "(mean compute, --steep bound)" in shown[0]
    assert not any("warning" in line for line in shown)
    (bounded,) = (line for line in shown if line.startswith("bounded: 1 compute block(s)"))
    assert "faster than linearly in p beyond p=8" in bounded and "--steep keep" in bounded
    # the block, its fitted model and value at P, its bounded model and value at P
    (row,) = (line for line in shown if line.startswith("  init -> allreduce n 0 0  "))
    assert re.search(r"50 \* p\^\(2\) +52,428,800 +0 \+ 400 \* p \(held\) +409,600$", row)
    assert main([*argv, str(tmp_path / "json"), "--json"]) == 0
    (block,) = (
        q for q in json.loads(capsys.readouterr().out)["synthesis"]["quantities"] if q["bound"]
    )
    assert block["bound"]["fitted_value"] == 52_428_800 and block["value"] == 409_600
    assert main([*argv, str(tmp_path / "refused"), "--steep", "refuse"]) == 2
    error = capsys.readouterr().err
    assert "compute block init -> allreduce n 0 0 is modeled as" in error
    with pytest.raises(SystemExit) as bad:
        main([*argv, str(tmp_path / "bad"), "--steep", "clip"])
    assert bad.value.code == 2
    assert "argument --steep: invalid choice: 'clip'" in capsys.readouterr().err
    assert main(["simulate", inputs[0], "--platform", "x.xml", "--steep", "keep"]) == 2
    assert "--steep and --grid are for --synthesize P" in capsys.readouterr().err


def test_growth_beyond_linear_in_p_is_named_with_its_model_when_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = [str(trace.directory) for trace in traces_of(tmp_path, steep)]
    output = tmp_path / "p1024"
    argv = ["simulate", *inputs, "--synthesize", "1024", "-o", str(output), "--steep", "keep"]
    assert main(argv) == 0
    warnings = [line for line in capsys.readouterr().out.splitlines() if "warning" in line]
    assert len(warnings) == 1  # the constant 700-flop block is not named
    assert "grows faster than linearly in p beyond the traces: 3,200 flops at p=8" in warnings[0]
    assert "52,428,800 at p=1024" in warnings[0] and "p^(2)" in warnings[0]


@needs_simgrid
def test_synthesised_and_predicted_in_one_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = [str(trace.directory) for trace in traces_of(tmp_path, chain)]
    platform = tmp_path / "cluster.xml"
    platform.write_text(PlatformSpec("cluster", nodes=32).to_xml())
    argv = ["simulate", *inputs, "--synthesize", "32", "-o", str(tmp_path / "p32")]
    assert main([*argv, "--platform", str(platform), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["ranks"] == 32 and shown["synthesis"]["inputs"] == list(INPUTS)
    (cluster,) = shown["platforms"]
    # every rank computes 5000 + 1000 log2(32) + 700 flops at 1 Gflop/s, then waits
    assert cluster["compute"] == pytest.approx(10.7e-6, rel=1e-6)
    assert cluster["time"] > cluster["compute"]
    assert main(["simulate", inputs[0], "--platform", str(platform), "--seed", "1"]) == 2
    assert "are for --synthesize P" in capsys.readouterr().err


def test_resampled_noise_is_reproducible_and_keeps_the_mean(tmp_path: Path) -> None:
    def noisy(rank: int, ranks: int) -> list[str]:
        return [f"compute {1000 + 300 * ((rank * 7 + ranks) % 3)}", "allreduce 1 0 0"]

    traces = traces_of(tmp_path, noisy)
    first = synthesize(traces, 300, tmp_path / "a", noise="resample", seed=3)
    again = synthesize(traces, 300, tmp_path / "b", noise="resample", seed=3)
    flops = [int(lines_of(first.directory, r)[1].split()[2]) for r in range(300)]
    assert flops == [int(lines_of(again.directory, r)[1].split()[2]) for r in range(300)]
    assert len(set(flops)) > 1
    (mean,) = (q.value for q in first.quantities if q.name == "init -> allreduce n 0 0")
    assert sum(flops) / len(flops) == pytest.approx(mean, rel=0.05)


STEPS = 40


def slow_steps(rank: int, ranks: int) -> list[str]:
    """Every fourth step is twice as long on every rank: the machine was slow, no rank was."""
    return [f"{x} 1 0 0" if x == "allreduce" else x for k in range(STEPS)
            for x in (f"compute {2000 if k % 4 == 0 else 1000}", "allreduce")]  # fmt: skip


def one_slow_rank(rank: int, ranks: int) -> list[str]:
    """In every step one rank, a different one each step, takes twice as long."""
    return [f"{x} 1 0 0" if x == "allreduce" else x for k in range(STEPS)
            for x in (f"compute {2000 if k % ranks == rank else 1000}", "allreduce")]  # fmt: skip


def slowest_over_mean(directory: Path, ranks: int) -> float:
    """The synthesised steps' slowest compute over their mean, summed over steps: what the
    wait at each step's allreduce costs."""
    steps = [
        [int(line.split()[2]) for line in lines_of(directory, rank) if " compute " in line]
        for rank in range(ranks)
    ]
    by_step = list(zip(*steps, strict=True))
    return sum(map(max, by_step)) / sum(sum(step) / ranks for step in by_step)


def test_correlated_noise_keeps_slow_steps_shared_and_slow_ranks_apart(tmp_path: Path) -> None:
    shared = traces_of(tmp_path / "shared", slow_steps)
    made = synthesize(shared, 256, tmp_path / "shared-256", noise="correlated", seed=1)
    # a step all ranks were slow in makes every rank slow at once: nobody waits for anyone
    assert slowest_over_mean(made.directory, 256) == pytest.approx(1.0, abs=1e-3)
    # resampled ratios count the same slow steps as if each rank had them alone
    made = synthesize(shared, 256, tmp_path / "shared-256-r", noise="resample", seed=1)
    assert slowest_over_mean(made.directory, 256) > 1.4
    own = traces_of(tmp_path / "own", one_slow_rank)
    made = synthesize(own, 256, tmp_path / "own-256", noise="correlated", seed=1)
    # a rank's own ratios are 2000 over its step's mean, 1.5 at p = 3 up to 2000/1125 at
    # p = 8, drawn for 256 ranks: nearly every step has one at the largest, and no
    # occurrence is shared, so the slowest is 1.78 times the mean as the inputs' worst was
    assert slowest_over_mean(made.directory, 256) == pytest.approx(2000 / 1125, abs=0.02)
    again = synthesize(own, 256, tmp_path / "own-256-again", noise="correlated", seed=1)
    other = synthesize(own, 256, tmp_path / "own-256-other", noise="correlated", seed=2)
    assert lines_of(again.directory, 7) == lines_of(made.directory, 7)
    assert lines_of(other.directory, 7) != lines_of(made.directory, 7)


def test_ranks_that_differ_in_structure_are_refused_with_the_place(tmp_path: Path) -> None:
    def uneven(rank: int, ranks: int) -> list[str]:
        extra = ["barrier"] if ranks == 5 and rank == 2 else []
        return ["compute 10", *extra, "allreduce 1 0 0"]

    with pytest.raises(PerfcastError) as refused:
        synthesize(traces_of(tmp_path, uneven), 64, tmp_path / "out")
    message = str(refused.value)
    assert f"rank 2 of {tmp_path / 'p5'}, action 1 (line 3) is 'barrier'" in message
    assert "'allreduce 1 0 0'" in message and "interior ranks" in message
    assert not (tmp_path / "out").exists()


def test_two_different_programs_are_refused(tmp_path: Path) -> None:
    traces = traces_of(tmp_path / "a", chain, (3, 4))
    traces += traces_of(tmp_path / "b", lambda r, p: ["allreduce 1 0 0"], (5,))
    with pytest.raises(PerfcastError, match=r"rank 0 of .*b/p5, action 1 \(line 2\) is "):
        synthesize(traces, 64, tmp_path / "out")


def test_a_structure_that_grows_with_p_is_refused(tmp_path: Path) -> None:
    def doubling(rank: int, ranks: int) -> list[str]:
        return ["allreduce 1 0 0"] * ranks.bit_length()

    with pytest.raises(PerfcastError, match=r"p4 runs 5 MPI actions, rank 0 of .*p3 4, both first"):
        synthesize(traces_of(tmp_path, doubling), 64, tmp_path / "out")


def test_per_rank_arrays_and_peers_without_relation_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def alltoallv(rank: int, ranks: int) -> list[str]:
        counts = " ".join(["4"] * ranks)
        return [f"alltoallv {4 * ranks} {counts} {4 * ranks} {counts} 0 0"]

    inputs = [str(t.directory) for t in traces_of(tmp_path / "a", alltoallv)]
    assert main(["simulate", *inputs, "--synthesize", "16", "-o", str(tmp_path / "x")]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "rank-0.trace:2: alltoallv carries one count per rank" in error

    def scattered(rank: int, ranks: int) -> list[str]:
        return [f"send {(rank * rank) % ranks} 0 8 0"]

    with pytest.raises(PerfcastError, match="follows no relation to the rank"):
        synthesize(traces_of(tmp_path / "b", scattered), 16, tmp_path / "out")


@pytest.fixture(scope="module")
def stencil_traces(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """The stencil traced with the CPU clock at the input rank counts and at 16."""
    work = tmp_path_factory.mktemp("stencil")
    source = work / "stencil"
    shutil.copytree(EXAMPLE, source)
    subprocess.run(
        ["make", "CC=python3 -m perfcast build --trace -- mpicc"],
        cwd=source, check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    traces = {}
    for ranks in (*INPUTS, 16):
        traces[ranks] = work / f"trace-p{ranks}"
        environment = [
            "-x",
            f"PERFCAST_TRACE_DIR={traces[ranks]}",
            "-x",
            "PERFCAST_TRACE_CLOCK=cpu",
        ]
        environment += ["-x", f"PERFCAST_PROFILE_DIR={work / f'profile-p{ranks}'}"]
        subprocess.run(
            [*MPIRUN, "-np", str(ranks), *environment, "./jacobi", str(SIZE), str(ITERATIONS)],
            cwd=source, check=True, capture_output=True, timeout=300,
        )  # fmt: skip
    return traces


def at_block_means(files: tuple[Path, ...], directory: Path) -> Path:
    """A recorded trace with every compute block at its mean over the ranks, written to
    ``directory``; returns its index. A block is the compute before the n-th occurrence of
    an action in a rank (the same step in every rank of a ring). ``--noise mean`` leaves
    out the ranks' spread by design; the recorded run keeps it, and at p = 16 on two shared
    cores it varies from run to run (the wait for the slowest rank made the recorded replay
    11 % longer than the synthesised one on one CI run, 3 % on others)."""
    ranks: list[list[tuple[tuple[str, int], list[str]]]] = []
    sums: dict[tuple[str, int], list[float]] = {}
    for path in files:
        actions: list[tuple[tuple[str, int], list[str]]] = []
        seen: dict[str, int] = {}
        pending = 0.0
        for line in path.read_text().splitlines():
            words = line.split()
            if words[1] == "compute":
                pending += float(words[2])
                continue
            seen[words[1]] = seen.get(words[1], 0) + 1
            key = (words[1], seen[words[1]])
            sums.setdefault(key, []).append(pending)
            actions.append((key, words))
            pending = 0.0
        ranks.append(actions)
    directory.mkdir()
    index = []
    for rank, actions in enumerate(ranks):
        text = []
        for key, words in actions:
            mean = sum(sums[key]) / len(sums[key])
            if mean > 0:
                text.append(f"{words[0]} compute {mean:.0f}")
            text.append(" ".join(words))
        path = directory / f"rank-{rank}.trace"
        path.write_text("\n".join(text) + "\n")
        index.append(f"{path}\n")
    (directory / "index.txt").write_text("".join(index))
    return directory / "index.txt"


@pytest.mark.slow
@needs_mpi
@needs_simgrid
def test_the_stencil_synthesised_at_16_ranks_replays_like_its_trace(
    stencil_traces: dict[int, Path], tmp_path: Path
) -> None:
    inputs = [read_trace(stencil_traces[p]) for p in INPUTS]
    made = synthesize(inputs, 16, tmp_path / "p16")
    recorded = read_trace(stencil_traces[16])
    # the communication is exactly the recorded run's: peers, tags, sizes, order
    for rank in range(16):
        synthesised = [x for x in lines_of(made.directory, rank) if " compute " not in x]
        traced = [x for x in lines_of(recorded.directory, rank) if " compute " not in x]
        assert synthesised == traced
    # the halo of SIZE doubles is a constant in p, modeled as one
    halos = [q for q in made.quantities if q.kind == "count" and q.value == SIZE]
    assert halos and all(q.model.is_constant() for q in halos)
    # 10 us links: communication is a good part of the time, as on a cluster
    platform = PlatformSpec("cluster", nodes=16, latency=1e-5, bandwidth=1.25e9)
    direct_index = at_block_means(recorded.rank_files, tmp_path / "recorded-at-means")
    direct = replay(direct_index, platform, 16).time
    predicted = replay(made.directory / "index.txt", platform, 16).time
    assert predicted == pytest.approx(direct, rel=0.10)


@pytest.mark.parametrize(
    ("action", "words"),
    [
        ("compute 1.7e308", "malformed compute action"),
        ("compute inf", "malformed compute action"),
        ("compute 0x100", "malformed compute action"),
        (f"send 1 0 {'9' * 400} 0", "malformed send action"),
    ],
)
def test_trace_numbers_beyond_64_bits_are_refused_with_their_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], action: str, words: str
) -> None:
    """A 400-digit count or a flop amount at the edge of the floats (issue 27, class 3)."""

    def program(rank: int, ranks: int) -> list[str]:
        return [action if rank == 0 else "compute 10", "barrier"]

    inputs = [str(write_trace(tmp_path / f"p{p}", p, program)) for p in (3, 4, 5)]
    out = tmp_path / "out"
    assert main(["simulate", *inputs, "--synthesize", "8", "-o", str(out)]) == 2
    error = capsys.readouterr().err
    assert "rank-0.trace:2: " in error and words in error and "2^62" in error
    assert not out.exists()


def test_a_block_name_with_a_nul_is_refused_with_its_line(tmp_path: Path) -> None:
    directory = write_trace(tmp_path / "p2", 2, lambda rank, ranks: ["barrier"])
    blocks = directory / "rank-1.blocks.tsv"
    blocks.write_text(blocks.read_text() + "main\x00x\tmain->MPI_Barrier\t1\t0.5\n")
    with pytest.raises(PerfcastError, match="printable text") as refused:
        read_trace(directory)
    assert "rank-1.blocks.tsv:2" in str(refused.value)


def halo(dimensions: int, corners: bool = False, periodic: bool = False) -> Program:
    """A known grid program: on MPI_Dims_create's grid of ``dimensions`` dimensions, a
    receive from and a send to every neighbour that exists (the faces; with ``corners``
    also the edges and corners, as LULESH), 16 doubles per face dimension, then a reduce
    to rank 0. ``periodic`` wraps the grid around, so that every rank has every neighbour."""

    def program(rank: int, ranks: int) -> list[str]:
        dims = grid.dims_create(ranks, dimensions)
        here = grid.position(rank, dims)
        peers = []
        for move in itertools.product((-1, 0, 1), repeat=dimensions):
            moved = sum(1 for step in move if step)
            there = [c + step for c, step in zip(here, move, strict=True)]
            if periodic:
                there = [c % size for c, size in zip(there, dims, strict=True)]
            inside = all(0 <= c < size for c, size in zip(there, dims, strict=True))
            if moved and inside and (corners or moved == 1):
                peers.append((grid.rank_at(tuple(there), dims), 16 ** (dimensions - moved)))
        actions = ["compute 5000", *(f"irecv {q} 7 {n} 0" for q, n in peers)]
        actions += [f"compute {100 * len(peers)}", *(f"send {q} 7 {n} 0" for q, n in peers)]
        return [*actions, *(f"wait {q} {rank} 7" for q, _ in peers), "reduce 1 0 0 0"]

    return program


@pytest.mark.parametrize(
    ("program", "counts", "target", "dims"),
    [
        (halo(2), (4, 9, 16), 36, (6, 6)),
        (halo(3), (8, 12, 27), 64, (4, 4, 4)),
        (halo(3, corners=True), (8, 12, 27), 48, (4, 4, 3)),
        (halo(2, periodic=True), (9, 12, 16), 30, (6, 5)),
        # CoMD's shape: one dimension 3 in every trace, where the neighbour across the wrap
        # is the same move of two positions in all of them (its synthesis deadlocked)
        (halo(3, periodic=True), (27, 36, 48), 64, (4, 4, 4)),
    ],
    ids=["5-point", "7-point", "27-point", "periodic", "periodic-3-wide"],
)
def test_a_grid_program_is_synthesised_exactly(
    tmp_path: Path, program: Program, counts: tuple[int, ...], target: int, dims: tuple[int, ...]
) -> None:
    """Offsets in rank numbers fit none of these (rank 0's second peer is rank 2 of 4 and
    rank 3 of 9): the grid is found, and every rank of the target, corner, edge, face or
    interior, runs what the program runs there."""
    made = synthesize(traces_of(tmp_path, program, counts), target, tmp_path / "out")
    assert made.grid is not None and made.grid.target == dims
    assert made.grid.rule == "dims_create"
    for rank in range(target):
        expected = [f"{rank} {x}" for x in ["init", *program(rank, target), "finalize"]]
        assert lines_of(made.directory, rank) == expected
    assert read_trace(made.directory).ranks == target
    # the root is rank 0 for every role, not an offset from it
    assert made.relations["0"] == len(made.grid.roles)


def test_a_grid_without_interior_ranks_is_refused_with_the_run_that_has_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """HPCG's case: traces at p = 3, 4, 6, 8 (3x1x1 ... 2x2x2) have no rank between the ends
    along all three dimensions, which 4x4x4 has."""
    inputs = [str(t.directory) for t in traces_of(tmp_path, halo(3), (3, 4, 6, 8))]
    assert main(["simulate", *inputs, "--synthesize", "64", "-o", str(tmp_path / "x")]) == 2
    error = capsys.readouterr().err
    assert "no traced rank has the role (mid,mid,mid) of the 4x4x4 grid at p=64" in error
    assert "the traces' grids are 3x1x1, 2x2x1, 3x2x1, 2x2x2 (dims_create)" in error
    assert "3x3x3 ranks or more" in error and "\n" not in error.strip()
    # a trace whose grid has every role of 4x4x4 is what makes it possible, at three rank
    # counts whose grids have the target's roles
    traces = traces_of(tmp_path / "b", halo(3), (4, 8, 27))
    with pytest.raises(PerfcastError, match=r"p = 8, 27 only; the grids at p = 4 \(2x2x1\)"):
        synthesize(traces, 64, tmp_path / "p64")
    traces = traces_of(tmp_path / "c", halo(3), (8, 12, 27))
    made = synthesize(traces, 64, tmp_path / "p64")
    assert made.grid is not None and made.grid.roles["mid,mid,mid"] == (27,)


def test_the_grid_option_names_the_target_or_the_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = halo(3, corners=True)
    traces = traces_of(tmp_path, program, (8, 27, 64))
    inputs = [str(t.directory) for t in traces]
    # a target grid that MPI_Dims_create would not give: LULESH's 125 is a cube too
    output = tmp_path / "given"
    argv = ["simulate", *inputs, "--synthesize", "80", "-o", str(output), "--grid", "4x5x4"]
    assert main(argv) == 0
    shown = capsys.readouterr().out
    assert "ranks on a Cartesian grid (dims_create, target given): 4x5x4 at p=80 from " in shown
    assert "2x2x2, 3x3x3, 4x4x4" in shown
    assert json.loads((output / "trace.json").read_text())["grid"] == [4, 5, 4]
    assert lines_of(output, 0)[1:4] == ["0 compute 5000", "0 irecv 1 7 256 0", "0 irecv 4 7 256 0"]
    for option, words in [
        ("4x4x4", "--grid 4x4x4: 64 ranks, but --synthesize asks for 80"),
        ("4by20", "give the target's grid as AxB or AxBxC"),
        ("cube", "--grid cube: 80 ranks are not a cube (8, 27, 64, 125, ...)"),
    ]:
        code = main([*argv[:-3], str(tmp_path / option), "--grid", option])
        error = capsys.readouterr().err
        assert code == 2 and words in error, error
    assert main(["simulate", inputs[0], "--platform", "x.xml", "--grid", "cube"]) == 2
    assert "--grid are for --synthesize P" in capsys.readouterr().err


def test_a_structure_that_is_no_grid_either_is_refused_with_both_readings(
    tmp_path: Path,
) -> None:
    def scattered(rank: int, ranks: int) -> list[str]:
        return [f"send {(rank * rank) % ranks} 0 8 0"]

    with pytest.raises(PerfcastError) as refused:
        synthesize(traces_of(tmp_path, scattered, (4, 9, 16)), 36, tmp_path / "out")
    message = str(refused.value)
    assert "nor do the ranks fit a 2-D or 3-D grid" in message and "--grid" in message
    with pytest.raises(PerfcastError, match=r"read as grids 2x2, 3x3, 4x4 \(dims_create\): "):
        synthesize(
            traces_of(tmp_path / "b", scattered, (4, 9, 16)),
            36,
            tmp_path / "o",
            grid_option="dims_create",
        )


HALO = Path(__file__).resolve().parents[1] / "benchmarks" / "synthesis_grid"


@pytest.mark.slow
@needs_mpi
@needs_simgrid
def test_a_traced_2d_halo_exchange_synthesised_at_36_ranks_matches_its_trace(
    tmp_path: Path,
) -> None:
    """``benchmarks/synthesis_grid/halo.c`` (5-point, MPI_Dims_create's grid, not periodic)
    traced at p = 4, 9, 16 on this machine's cores, synthesised at 36 (6x6, whose interior
    ranks 3x3 had one of) and traced at 36: every rank's messages are the traced ones, and
    SimGrid replays the synthesised trace."""
    source = tmp_path / "halo"
    shutil.copytree(HALO, source)
    subprocess.run(
        ["make", "CC=python3 -m perfcast build --trace -- mpicc"],
        cwd=source, check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    traces = {}
    for ranks in (4, 9, 16, 36):
        traces[ranks] = tmp_path / f"trace-p{ranks}"
        environment = [
            "-x",
            f"PERFCAST_TRACE_DIR={traces[ranks]}",
            "-x",
            "PERFCAST_TRACE_CLOCK=cpu",
        ]
        environment += ["-x", f"PERFCAST_PROFILE_DIR={tmp_path / f'profile-p{ranks}'}"]
        subprocess.run(
            [*MPIRUN, "-np", str(ranks), *environment, "./halo", "2", "faces", "32", "5"],
            cwd=source, check=True, capture_output=True, timeout=300,
        )  # fmt: skip
    made = synthesize([read_trace(traces[p]) for p in (4, 9, 16)], 36, tmp_path / "p36")
    assert made.grid is not None and made.grid.target == (6, 6)
    assert made.grid.inputs == ((2, 2), (3, 3), (4, 4))
    for rank in range(36):
        synthesised = [x for x in lines_of(made.directory, rank) if " compute " not in x]
        traced = [x for x in lines_of(traces[36], rank) if " compute " not in x]
        assert synthesised == traced, rank
    platform = PlatformSpec("cluster", nodes=36, latency=1e-5, bandwidth=1.25e9)
    assert replay(made.directory / "index.txt", platform, 36).time > 0


def test_a_steep_block_of_a_role_two_traces_have_is_held_at_linear_growth() -> None:
    """A grid's interior exists at 9 and 16 ranks, not at 4: a steep block there cannot be
    refitted within linear growth (it stopped the synthesis of the traced 2-D halo with
    'p has 2 distinct values' when load made the block steep), so it is held at linear
    growth from its mean at 16 ranks at once."""
    from fractions import Fraction

    from perfcast.modeling.pmnf import Factor, Model, Term
    from perfcast.simulate.synthesis import Quantity, Series, _bounded

    cubic = Model("k", "flops", 0.0, (Term(5.0, (Factor("p", Fraction(3)),)),))
    steep = Quantity("(mid,mid) wait -> reduce", "flops", 1, 1, cubic, 5 * 36**3, 5 * 16**3)
    series: dict[str, Series] = {"k": ((9, (5.0 * 9**3,)), (16, (5.0 * 16**3,) * 4))}
    (bounded,) = _bounded({"k": steep}, series, 36, 16, {}).values()
    assert bounded.value == 5 * 16**3 * 36 // 16
    assert bounded.bound is not None and bounded.bound.held
    assert bounded.model.prior == "synthesis: held at linear growth"


def test_an_empty_or_unfinished_rank_file_is_named(tmp_path: Path) -> None:
    """A 0-byte rank file stopped --synthesize with a StopIteration traceback and SimGrid's
    replay with 'Actor pid=3 is gone'."""
    traces = [write_trace(tmp_path / f"p{p}", p, chain) for p in INPUTS]
    (traces[1] / "rank-2.trace").write_text("")
    with pytest.raises(InputError, match=r"rank 2.s action file rank-2\.trace is empty"):
        read_trace(traces[1])
    (traces[1] / "rank-2.trace").write_text("2 init\n2 compute 5\n2 send 0 1 8 0\n")
    readable = [read_trace(t) for t in traces]
    with pytest.raises(InputError, match=r"rank-2.trace: the rank's trace ends with send"):
        synthesize(readable, 16, tmp_path / "out")


def test_a_repeated_finalize_is_refused_as_a_different_length(tmp_path: Path) -> None:
    """One sequence the other's prefix (a finalize written twice) stopped the comparison of
    two ranks' sequences with a StopIteration traceback (found by tests/test_fuzz_traces.py)."""
    traces = [write_trace(tmp_path / f"p{p}", p, chain) for p in INPUTS]
    rank_file = traces[1] / "rank-1.trace"
    rank_file.write_text(rank_file.read_text() + "1 finalize\n")
    with pytest.raises(PerfcastError, match=r"runs .* MPI actions, rank .* the sequence changes"):
        synthesize([read_trace(t) for t in traces], 16, tmp_path / "out")


def test_a_compute_block_falling_below_zero_is_held_at_its_last_mean(tmp_path: Path) -> None:
    """CPU time of a short block is noisy: one that falls steeply over the traces (here
    1/p^2, exactly) would be extrapolated below zero by a fit with a negative constant;
    it is held at its mean at the largest traced rank count instead of stopping."""

    def falling(rank: int, ranks: int) -> list[str]:
        return [f"compute {int(3e6 / ranks**3) - 2000}", *chain(rank, ranks)[1:]]

    made = synthesize(traces_of(tmp_path, falling), 64, tmp_path / "out")
    first = lines_of(made.directory, 0)[1].split()
    assert first[1] == "compute" and int(first[2]) >= 0
