"""Where a campaign's files go when the spec, the store and the user's directory differ:
runs start in the app's directory, so every path they are given must not depend on where
``perfcast measure`` was started."""

from __future__ import annotations

import shutil

import pytest
from campaign_helpers import copy_stencil, write_spec

from perfcast.cli import main
from perfcast.experiment import read_experiment

pytestmark = pytest.mark.skipif(shutil.which("mpicc") is None, reason="needs Open MPI")

SPEC = """\
[app]
name = "stencil"
[build]
command = "make -s CC='{perfcast_build} mpicc'"
[run]
command = "./jacobi {size} 5"
repetitions = 1
timeout = 60
[parameters]
p = [1, 2]
size = 32
"""


def test_a_relative_store_from_another_directory_keeps_every_profile(tmp_path, monkeypatch, capsys):
    """A relative ``--store`` is the user's directory's, not the app's: the runs' profile
    directories, derived from the store's path, were once handed to programs running in the
    app directory as relative paths, and every run failed with no profile written."""
    app = copy_stencil(tmp_path)
    write_spec(app, SPEC)
    monkeypatch.chdir(tmp_path)
    assert main(["measure", "stencil/perfcast.toml", "--store", "relative.sqlite"]) == 0
    assert "2 runs ok, 0 failed" in capsys.readouterr().out
    assert not (app / "relative.sqlite").exists()
    experiment = read_experiment(tmp_path / "relative.sqlite")
    assert "main->sweep" in experiment.callpaths
    assert sorted(map(tuple, experiment.coordinates().tolist())) == [(1.0,), (2.0,)]
