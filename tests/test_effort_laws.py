"""Table I laws against the runtime's byte rules, per MPI operation: the law's message
size ``B`` is the recorded rank-mean bytes times ``p^k`` (laws.RECORDED_BYTES_RANKS_POWER),
checked on bytes a real MPI program records and on the prior structures they give."""

from __future__ import annotations

import itertools
import os
import subprocess
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from effort_helpers import fit_effort

from perfcast.cli import main
from perfcast.effort import CommunicationLaw, EffortModeler
from perfcast.effort.laws import OPERATION_LAWS, RECORDED_BYTES_RANKS_POWER
from perfcast.experiment.experiment import Experiment, Metric
from perfcast.measure.profiles import read_rank_profile
from perfcast.modeling import Factor

P = (2, 4, 8, 16, 32)
N = (1000, 2000, 3000, 4000, 5000)
LOG_P = (Factor("p", Fraction(0), 1),)
LINEAR_N = (Factor("n", Fraction(1)),)
N_TIMES_P = (Factor("n", Fraction(1)), Factor("p", Fraction(1)))


def recorded_mean(operation: str, p: int, size: float) -> float:
    """Rank mean of the bytes perfcast_mpi.c records as sent, for a buffer of ``size``
    bytes per rank (its rules, written out per rank and averaged)."""
    per_rank = {
        "bcast": [p * size] + [0.0] * (p - 1),  # the root sends a copy to every rank
        "reduce": [size] * p,
        "allreduce": [p * size] * p,
        "gather": [size] * p,
        "scatter": [p * size] + [0.0] * (p - 1),
        "allgather": [p * size] * p,
        "barrier": [0.0] * p,
    }.get(operation, [size] * p)
    return sum(per_rank) / p


EXPECTED = {  # operation: (structure for |buf| = 8n bytes, structure for |buf| = 8 bytes)
    "send": ((LINEAR_N,), ()),
    "recv": ((LINEAR_N,), ()),
    "sendrecv": ((LINEAR_N,), ()),
    "bcast": ((LOG_P, LINEAR_N), (LOG_P,)),
    "reduce": ((LOG_P, LINEAR_N), (LOG_P,)),
    "allreduce": ((LOG_P, LINEAR_N), (LOG_P,)),
    "gather": ((LOG_P, N_TIMES_P), (LOG_P, (Factor("p", Fraction(1)),))),
    "scatter": ((LOG_P, N_TIMES_P), (LOG_P, (Factor("p", Fraction(1)),))),
    "allgather": ((LOG_P, N_TIMES_P), (LOG_P, (Factor("p", Fraction(1)),))),
    "barrier": ((LOG_P,), (LOG_P,)),
}


def bytes_experiment(operation: str, size_of_n) -> Experiment:
    callpath = f"main->MPI_{operation.capitalize()}"
    metric = "mpi_bytes_received" if operation == "recv" else "mpi_bytes_sent"
    rows = [
        (callpath, metric, (p, n), recorded_mean(operation, p, size_of_n(n)))
        for p, n in itertools.product(P, N)
    ]
    return Experiment.from_rows(("p", "n"), rows, [Metric(metric, "bytes")])


@pytest.mark.parametrize("operation", sorted(EXPECTED))
def test_each_law_turns_recorded_bytes_into_its_message_size(operation):
    law = CommunicationLaw.for_callpath(f"main->MPI_{operation.capitalize()}")
    assert law is not None
    for size_of_n, expected in zip(
        (lambda n: 8.0 * n, lambda n: 8.0), EXPECTED[operation], strict=True
    ):
        experiment = bytes_experiment(operation, size_of_n)
        (bytes_model,) = list(EffortModeler().counter_modeler().fit(experiment))
        structure = law.structure(bytes_model, ["p", "n"])
        assert {tuple(sorted(s)) for s in structure} == {tuple(sorted(s)) for s in expected}


def test_an_eight_byte_allreduce_is_log_p_not_linear_in_p():
    """Issue 12.9: the recorded 8*p bytes per rank made the prior linear in p."""
    law = CommunicationLaw.for_callpath("main->solve->MPI_Allreduce")
    assert law is not None
    rows = []
    for p, n in itertools.product(P, N):
        for repetition in range(3):
            time = 3e-6 * np.log2(p) * (1 + 0.01 * repetition) + 1e-6
            rows.append(("main->solve->MPI_Allreduce", "time", (p, n), time))
            rows.append(("main->solve->MPI_Allreduce", "mpi_bytes_sent", (p, n), 8.0 * p))
    metrics = [Metric("time", "s"), Metric("mpi_bytes_sent", "bytes")]
    result, derived = fit_effort(Experiment.from_rows(("p", "n"), rows, metrics))
    model = result.models[("main->solve->MPI_Allreduce", "time")]
    assert [t.shape for t in model.terms] == [LOG_P]
    assert model.leading_exponents()["p"] == (Fraction(0), 1)
    allreduce = derived.effort_priors["main->solve->MPI_Allreduce"]
    assert "B = recorded bytes * p^-1" in allreduce.describe()
    prediction = model.evaluate({"p": np.array([1024.0]), "n": np.array([1000.0])})[0]
    assert prediction == pytest.approx(3e-6 * 10 + 1e-6 + 0.01 * 3e-6 * 10, rel=0.02)


def test_every_law_says_how_its_bytes_convert():
    assert set(RECORDED_BYTES_RANKS_POWER) == set(OPERATION_LAWS)
    assert CommunicationLaw.for_callpath("main->MPI_Wait") is None
    assert CommunicationLaw.for_callpath("main->MPI_Waitall") is None
    # without p as a parameter the conversion is a constant factor: nothing to add
    law = CommunicationLaw.for_callpath("main->MPI_Gather")
    assert law is not None
    experiment = bytes_experiment("gather", lambda n: 8.0 * n)
    (bytes_model,) = list(EffortModeler().counter_modeler().fit(experiment))
    assert law.structure(bytes_model, ["n"]) == (LINEAR_N,)


COLLECTIVES = r"""
#include <mpi.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  int n = atoi(argv[1]), rank, p;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  double *a = calloc((size_t)n * p, sizeof(double)), *b = calloc((size_t)n * p, sizeof(double));
  MPI_Bcast(a, n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  MPI_Reduce(a, b, n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Allreduce(a, b, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Gather(a, n, MPI_DOUBLE, b, n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  MPI_Scatter(a, n, MPI_DOUBLE, b, n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  MPI_Allgather(a, n, MPI_DOUBLE, b, n, MPI_DOUBLE, MPI_COMM_WORLD);
  MPI_Sendrecv(a, n, MPI_DOUBLE, (rank + 1) % p, 0, b, n, MPI_DOUBLE, (rank + p - 1) % p, 0,
               MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
"""

LAW_BYTES = {  # the message size of the law (Table I's B) for n doubles per rank
    "Bcast": lambda p, n: 8 * n,
    "Reduce": lambda p, n: 8 * n,
    "Allreduce": lambda p, n: 8 * n,
    "Gather": lambda p, n: 8 * n * p,
    "Scatter": lambda p, n: 8 * n * p,
    "Allgather": lambda p, n: 8 * n * p,
    "Sendrecv": lambda p, n: 8 * n,
    "Barrier": lambda p, n: 0,
}


@pytest.mark.slow
@pytest.mark.parametrize("ranks", [2, 3])
def test_recorded_bytes_times_p_to_the_k_are_the_laws_message_size(tmp_path, ranks):
    (tmp_path / "collectives.c").write_text(COLLECTIVES)
    old = Path.cwd()
    os.chdir(tmp_path)
    try:
        assert main(["build", "--", "mpicc", "-O1", "collectives.c", "-o", "collectives"]) == 0
    finally:
        os.chdir(old)
    n = 125
    profile = tmp_path / "profile"
    command = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(ranks)]
    environment = {**os.environ, "PERFCAST_PROFILE_DIR": str(profile)}
    done = subprocess.run(
        [*command, str(tmp_path / "collectives"), str(n)],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    sent = dict.fromkeys(LAW_BYTES, 0.0)
    for rank in range(ranks):
        callpaths = read_rank_profile(profile / f"rank-{rank}.pcprof").callpaths
        for operation in LAW_BYTES:
            (record,) = callpaths[f"main->MPI_{operation}"].mpi
            sent[operation] += record.bytes_sent / ranks
    for operation, law_bytes in LAW_BYTES.items():
        power = RECORDED_BYTES_RANKS_POWER[operation.lower()]
        assert sent[operation] * ranks**power == law_bytes(ranks, n), operation
