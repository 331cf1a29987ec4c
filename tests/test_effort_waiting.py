"""Busy waiting: effort counts that vary between repetitions of one point."""

from __future__ import annotations

import itertools
import shutil

import pytest
from campaign_helpers import write_spec
from effort_helpers import fit_effort

from perfcast.cli import main
from perfcast.effort import (
    REPETITION_TOLERANCE,
    WAITING_WARNING,
    EffortModeler,
    repetition_ranges,
    varying_counts,
)
from perfcast.effort.priors import DISAGREEMENT_WARNING
from perfcast.errors import InputError
from perfcast.experiment import read_experiment
from perfcast.experiment.experiment import Experiment, Metric
from perfcast.modeling.modelset import ModelSet

COUNTERS = ("basic_blocks", "mpi_bytes_sent", "mpi_bytes_received")
P = (2, 4, 8, 16, 32)
N = (1000, 2000, 3000, 4000, 5000)
COMPUTE = "main->compute"
POLL = "main->poll"
SEND = "main->poll->MPI_Send"


def _blocks(p: float, n: float) -> float:
    return 10 + 5 * n * p


def _campaign(poll_blocks=None, send_bytes=None, repetitions: int = 3) -> Experiment:
    """Exact counts and matching time for a kernel, a polling function and its send;
    ``poll_blocks(p, n, repetition)`` and ``send_bytes(p, n, repetition)`` replace the
    polling function's blocks and the send's bytes."""
    poll_blocks = poll_blocks or (lambda p, n, r: _blocks(p, n))
    send_bytes = send_bytes or (lambda p, n, r: 8 * n)
    rows = []
    for p, n in itertools.product(P, N):
        for r in range(repetitions):
            rows += [
                (COMPUTE, "basic_blocks", (p, n), _blocks(p, n)),
                (COMPUTE, "time", (p, n), 2e-9 * _blocks(p, n)),
                (POLL, "basic_blocks", (p, n), poll_blocks(p, n, r)),
                (POLL, "time", (p, n), 2e-9 * poll_blocks(p, n, r)),
                (SEND, "mpi_bytes_sent", (p, n), send_bytes(p, n, r)),
                (SEND, "mpi_bytes_received", (p, n), 0.0),
                (SEND, "time", (p, n), 1e-6 + 1e-9 * send_bytes(p, n, r)),
            ]
    metrics = [Metric("time", "s"), Metric("basic_blocks"), Metric("mpi_bytes_sent", "bytes")]
    return Experiment.from_rows(("p", "n"), rows, metrics)


def _spinning_at(p0: float, n0: float, extra: tuple[float, ...]):
    """Blocks of the polling function with ``extra`` blocks per repetition at (p0, n0)."""
    return lambda p, n, r: _blocks(p, n) + (extra[r] if (p, n) == (p0, n0) else 0.0)


def _messages(models: ModelSet, key: tuple[str, str]) -> list[str]:
    """What the stages after the fit said about one model."""
    return [f.message for f in models.findings if f.concerns(*key)]


def test_deterministic_counts_flag_nothing():
    campaign = _campaign()
    ranges = repetition_ranges(campaign, COUNTERS)
    assert len(ranges) == 4 and (ranges["relative_range"] == 0).all()
    assert varying_counts(campaign, COUNTERS) == {}
    result, derived = fit_effort(campaign)
    assert derived.waiting == {}
    assert not any(WAITING_WARNING in f.message for f in result.models.findings)
    assert "vary between repetitions" not in derived.report(result.models, result.free)


def test_counts_that_differ_between_repetitions_are_flagged_with_their_range():
    # At p=8, n=3000 the polling function spun 0, 300 and 1200 extra blocks.
    campaign = _campaign(poll_blocks=_spinning_at(8, 3000, (0.0, 300.0, 1200.0)))
    median = _blocks(8, 3000) + 300
    found = varying_counts(campaign, COUNTERS)
    assert list(found) == [POLL]
    assert found[POLL].metric == "basic_blocks"
    assert found[POLL].relative_range == pytest.approx(1200 / median)
    assert found[POLL].point == {"p": 8.0, "n": 3000.0}
    assert found[POLL].repetitions == 3
    result, derived = fit_effort(campaign)
    assert derived.waiting == found
    # the prior is still derived from the median counts: the exact 10 + 5*n*p elsewhere
    assert POLL in derived.effort_priors
    assert derived.effort_priors[POLL].effort.leading_exponents()["n"][0] == 1
    warnings = _messages(result.models, (POLL, "time"))
    assert any(w.startswith(WAITING_WARNING) and "at p=8, n=3000" in w for w in warnings)
    assert not any(WAITING_WARNING in w for w in _messages(result.models, (COMPUTE, "time")))
    report = derived.report(result.models, result.free)
    percent = f"{100 * 1200 / median:.1f} %"
    assert f"  {POLL}  basic_blocks by up to {percent} across 3 repetitions at p=8, n=3000" in (
        report
    )


def test_bytes_that_differ_are_flagged_and_the_largest_range_wins():
    # a retry loop resends at two points; the larger range is the one reported
    def resent(p, n, r):
        retries = {(2, 1000): (0, 1, 0), (32, 5000): (0, 1, 1)}.get((p, n), (0, 0, 0))
        return 8 * n * (1 + retries[r])

    found = varying_counts(_campaign(send_bytes=resent), COUNTERS)
    assert list(found) == [SEND]
    assert found[SEND].metric == "mpi_bytes_sent"
    assert found[SEND].relative_range == pytest.approx(1.0)  # (16n - 8n) / 8n, not 8n / 16n
    assert found[SEND].point == {"p": 2.0, "n": 1000.0}


def test_a_count_that_is_zero_in_most_repetitions_is_relative_to_its_largest_value():
    # a spin loop entered in one repetition only: median 0, range 100 %
    campaign = _campaign(poll_blocks=lambda p, n, r: 40.0 if (p, n, r) == (4, 2000, 1) else 0.0)
    found = varying_counts(campaign, ["basic_blocks"])
    assert found[POLL].relative_range == pytest.approx(1.0)


def test_the_tolerance_passes_rounding_of_rank_means_and_catches_one_block():
    big = 1e6  # blocks of deterministic work beside the spin loop
    rounding = _campaign(poll_blocks=lambda p, n, r: big * (1 + r * 1e-13))
    assert varying_counts(rounding, COUNTERS) == {}
    # one extra turn of a two-block spin loop on one of 32 ranks: 2/32 blocks in the mean
    one_turn = _campaign(poll_blocks=lambda p, n, r: big + (2 / 32 if r == 2 else 0.0))
    assert POLL in varying_counts(one_turn, COUNTERS)
    assert 2 / 32 / big > REPETITION_TOLERANCE
    # a looser tolerance of the modeler lets it pass
    _, loose = fit_effort(one_turn, EffortModeler(repetition_tolerance=1e-6))
    assert loose.waiting == {}


def test_one_repetition_per_point_says_nothing():
    campaign = _campaign(poll_blocks=lambda p, n, r: _blocks(p, n) * (1 + p / 100), repetitions=1)
    assert repetition_ranges(campaign, COUNTERS).empty
    result, derived = fit_effort(campaign)
    assert derived.waiting == {}
    assert "vary between repetitions" not in derived.report(result.models, result.free)


def test_a_negative_tolerance_is_refused():
    with pytest.raises(InputError, match="repetition_tolerance"):
        EffortModeler(repetition_tolerance=-0.1)


SPIN_PROGRAM = r"""
#include <mpi.h>
#include <stdlib.h>
#include <unistd.h>

volatile double sink;

/* Deterministic work: n x 64 iterations, the same basic blocks in every run. */
__attribute__((noinline)) void compute(int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < 64; j++)
            s += (double)i * j;
    sink = s;
}

/* Rank 1 sleeps n * 100 us before it sends; rank 0 spins on MPI_Test until the message is
 * there, so its loop turns as often as the scheduler lets it while it waits. */
__attribute__((noinline)) void wait_for_partner(int rank, int n)
{
    int token = n;
    if (rank == 0) {
        MPI_Request request;
        int arrived = 0;
        MPI_Irecv(&token, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, &request);
        while (!arrived)
            MPI_Test(&request, &arrived, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        usleep(n * 100);
        MPI_Send(&token, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n = atoi(argv[1]);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    compute(n);
    wait_for_partner(rank, n);
    MPI_Finalize();
    return 0;
}
"""


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("mpicc") is None or shutil.which("clang-16") is None,
    reason="needs Open MPI and clang-16",
)
def test_a_real_spin_loop_is_flagged_and_deterministic_work_is_not(tmp_path, capsys):
    """The real thing: an MPI program that polls MPI_Test, built with counters, measured
    three times per point, modeled with effort priors."""
    (tmp_path / "spin.c").write_text(SPIN_PROGRAM)
    spec = write_spec(
        tmp_path,
        """
        [app]
        name = "spin"
        [build]
        sources = ["spin.c"]
        flags = ["-O1"]
        output = "spin"
        counters = true
        [run]
        command = "./spin {n}"
        repetitions = 3
        timeout = 30
        [parameters]
        p = [2]
        n = [10, 20, 30, 40, 50]
        [metrics]
        collect = ["time", "basic_blocks", "mpi_bytes_sent", "mpi_bytes_received"]
        """,
    )
    assert main(["measure", str(spec)]) == 0
    store = tmp_path / "spin.sqlite"
    experiment = read_experiment(store)
    ranges = repetition_ranges(experiment, COUNTERS).set_index(["callpath", "metric"])[
        "relative_range"
    ]
    assert ranges[("main->compute", "basic_blocks")] == 0
    assert ranges[("main->wait_for_partner", "basic_blocks")] > REPETITION_TOLERANCE
    # the bytes of the receive and the send are the same in every run
    assert ranges[("main->wait_for_partner->MPI_Irecv", "mpi_bytes_received")] == 0
    assert ranges[("main->wait_for_partner->MPI_Send", "mpi_bytes_sent")] == 0

    result, derived = fit_effort(experiment)
    assert list(derived.waiting) == ["main->wait_for_partner"]
    spin = result.models[("main->wait_for_partner", "time")]
    # how often a rank spins depends on the scheduler, so the counts follow the time on some
    # runs and not on others: where the effort prior fits much worse than the black-box
    # model, the black-box model is kept with both fits in a warning; either way the
    # waiting warning says which model carries the waiting
    messages = _messages(result.models, ("main->wait_for_partner", "time"))
    waiting = [w for w in messages if w.startswith(WAITING_WARNING)]
    conflicts = [w for w in messages if w.startswith(DISAGREEMENT_WARNING)]
    assert len(waiting) == 1
    if spin.prior is None:
        assert waiting[0].endswith("the black-box model is kept")
        assert len(conflicts) == 1 and "effort-prior model:" in conflicts[0]
        assert "black-box model:" in conflicts[0]
    else:
        assert spin.prior.startswith("effort") and not conflicts
        assert waiting[0].endswith("the prior carries that waiting")
    assert not any(
        WAITING_WARNING in w for w in _messages(result.models, ("main->compute", "time"))
    )

    capsys.readouterr()
    metrics = ["time", *COUNTERS]
    argv = ["model", str(store), "--priors", "effort", "-o", str(tmp_path / "models.json")]
    assert main(argv + [arg for m in metrics for arg in ("--metric", m)]) == 0
    out = capsys.readouterr().out
    assert "counts that vary between repetitions" in out
    assert "  main->wait_for_partner  basic_blocks by up to" in out
    assert f"warning: [effort] {WAITING_WARNING}" in out  # the finding names its stage
    assert "main->compute  basic_blocks by up to" not in out
