"""``perfcast measure --backend smpi --parallel N``: N simulations at once, each a single
smpirun process on one of this machine's cores, stored exactly as one at a time stores them
(docs/smpi-backend.md, "Simulations side by side")."""

from __future__ import annotations

import itertools
import shutil
import sqlite3
from pathlib import Path

import pytest
from campaign_helpers import copy_stencil, write_spec

from perfcast.cli import main
from perfcast.measure.local import available_cores
from perfcast.measure.reader import read_sqlite
from perfcast.simulate.platform import PlatformSpec

needs_simgrid = pytest.mark.skipif(
    shutil.which("smpirun") is None or shutil.which("smpicc") is None,
    reason="SimGrid (smpirun, smpicc) is not installed",
)

TINY = """\
[app]
name = "stencil"
[build]
command = "make -s CC='{perfcast_build} mpicc'"
[run]
command = "./jacobi {size} 10"
repetitions = 2
timeout = 60
[parameters]
p = [2, 4, 8]
size = 64
"""
KEYS = [f"p={p},size=64#{r}" for p in (2, 4, 8) for r in range(2)]


def cluster(directory: Path) -> Path:
    path = directory / "cluster.xml"
    path.write_text(PlatformSpec(name="virtual8", nodes=8, latency=1e-5).to_xml())
    return path


def stored(store: Path) -> list[tuple]:
    with sqlite3.connect(store) as db:
        return db.execute(
            "SELECT key, status, backend, job, ranks, cores, started, finished FROM runs "
            "ORDER BY key"
        ).fetchall()


def overlapping(rows: list[tuple]) -> int:
    """Pairs of runs that were running at the same moment."""
    spans = sorted((row[6], row[7]) for row in rows)
    return sum(later[0] < earlier[1] for earlier, later in itertools.pairwise(spans))


@pytest.mark.slow
@needs_simgrid
@pytest.mark.skipif(available_cores() < 2, reason="--parallel 2 needs 2 cores")
def test_two_simulations_at_once_store_what_one_at_a_time_stores(tmp_path, capsys):
    spec = write_spec(copy_stencil(tmp_path), TINY)
    platform = cluster(tmp_path)
    one, two = tmp_path / "one.sqlite", tmp_path / "two.sqlite"
    argv = ["measure", str(spec), "--backend", "smpi", "--platform", str(platform)]
    assert main([*argv, "--store", str(one)]) == 0
    assert main([*argv, "--store", str(two), "--no-build", "--parallel", "2"]) == 0
    capsys.readouterr()

    alone, beside = stored(one), stored(two)
    # every rank still has a simulated core of its own: no run is stored with a share
    expected = sorted(KEYS)
    for rows in (alone, beside):
        assert [row[:4] for row in rows] == [
            (k, "ok", "smpi", "platform virtual8") for k in expected
        ]
        assert all(row[4] == row[5] for row in rows)
    assert overlapping(alone) == 0
    assert overlapping(beside) >= 1

    one_data, two_data = read_sqlite(one).data, read_sqlite(two).data
    assert set(one_data.callpath) == set(two_data.callpath)
    assert {"main->sweep", "main->global_residual->MPI_Allreduce"} <= set(two_data.callpath)
    # what is counted, not timed, is the same run for run
    counted = ["visits", "mpi_bytes_sent", "mpi_bytes_received"]
    columns = ["callpath", "metric", "p", "repetition"]
    counts = [
        d[d.metric.isin(counted)].sort_values(columns).value.tolist() for d in (one_data, two_data)
    ]
    assert counts[0] == counts[1]


@needs_simgrid
def test_more_simulations_than_cores_are_refused_before_anything_runs(tmp_path, capsys):
    spec = write_spec(copy_stencil(tmp_path), TINY)
    cores = available_cores()
    argv = ["measure", str(spec), "--backend", "smpi", "--platform", str(cluster(tmp_path))]
    assert main([*argv, "--parallel", str(cores + 1)]) == 2
    error = capsys.readouterr().err
    assert f"--parallel {cores + 1} with --backend smpi" in error
    assert f"use --parallel {cores} or less" in error
    assert not (spec.parent / "stencil.sqlite").exists()
    assert not (spec.parent / "jacobi").exists()  # not even built
