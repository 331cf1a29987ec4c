"""A campaign on a bundled example: built by `perfcast build` through its Makefile,
measured with the local backend, read back from the store with exact call-path counts."""

import shutil

import numpy as np
import pytest
from campaign_helpers import copy_stencil, write_spec

from perfcast.cli import main
from perfcast.experiment import read_experiment

ITERATIONS = 3

pytestmark = pytest.mark.skipif(
    shutil.which("mpicc") is None or shutil.which("clang-16") is None,
    reason="needs Open MPI and clang-16",
)


@pytest.mark.slow
def test_stencil_campaign_to_models(tmp_path, capsys):
    app = copy_stencil(tmp_path)
    path = write_spec(
        app,
        f"""
        [app]
        name = "stencil"
        [build]
        command = "make -s CC='{{perfcast_build}} mpicc'"
        counters = true
        [run]
        command = "./jacobi {{size}} {ITERATIONS}"
        repetitions = 1
        timeout = 60
        [parameters]
        p = [1, 2, 3]
        size = [16, 32, 48]
        [metrics]
        collect = ["visits", "mpi_bytes_sent", "basic_blocks"]
        """,
    )
    assert main(["measure", str(path)]) == 0
    assert "9 runs ok, 0 failed" in capsys.readouterr().out
    store = app / "stencil.sqlite"
    experiment = read_experiment(store)
    assert experiment.parameters == ["p", "size"]
    assert set(experiment.metrics) == {
        "visits",
        "visits:max",
        "mpi_bytes_sent",
        "mpi_bytes_sent:max",
        "basic_blocks",
        "basic_blocks:max",
    }
    assert {"main->sweep", "main->exchange_halo->MPI_Sendrecv"} <= set(experiment.callpaths)
    visits = experiment.select("main->sweep", "visits")
    assert len(visits) == 9 and (visits["value"] == ITERATIONS).all()
    # two MPI_Sendrecv of one row (size doubles) per iteration on every rank
    sent = experiment.select("main->exchange_halo->MPI_Sendrecv", "mpi_bytes_sent")
    assert np.array_equal(sent["value"], 2 * 8 * sent["size"] * ITERATIONS)
    # basic blocks of the sweep grow with size^2 and do not depend on p
    blocks = experiment.select("main->sweep", "basic_blocks")
    per_size = blocks.groupby("size")["value"].agg(["min", "max"])
    assert (per_size["min"] == per_size["max"]).all()
    assert per_size["min"].is_monotonic_increasing
    argv = ["model", str(store), "--metric", "visits", "--callpath", "main->sweep", "--full"]
    assert main(argv) == 0
    assert "Model: 3" in capsys.readouterr().out
