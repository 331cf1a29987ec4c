"""Issue 25, item 3: perfcast measures a clang-16 build; the user's own build may run gcc.
``perfcast build`` says so at the link, the campaign store records both compilers, and
``perfcast model`` and ``perfcast predict`` name the compiler their numbers describe."""

from __future__ import annotations

import json
import sqlite3
import stat

import pytest
from campaign_helpers import copy_stencil, write_spec

from perfcast.cli import main
from perfcast.errors import InputError
from perfcast.measure import toolchain
from perfcast.measure.build import BUILD_RECORD_VARIABLE, compiler_note
from perfcast.measure.store import BuildRecord, CampaignStore
from perfcast.modeling.modelset import ModelSet
from perfcast.modeling.pmnf import Model
from perfcast.modeling.provenance import Compilers, Provenance

GCC = toolchain.identify("gcc")
CLANG = toolchain.find_xray_clang().version


@pytest.fixture(autouse=True)
def _fresh_lookups(monkeypatch):
    """Each test sees its own environment, not an earlier test's cached answer."""
    for variable in ("OMPI_CC", "OMPI_CXX", "MPICH_CC", "MPICH_CXX"):
        monkeypatch.delenv(variable, raising=False)
    toolchain.user_compiler.cache_clear()
    yield
    toolchain.user_compiler.cache_clear()


def test_the_compiler_behind_an_mpi_wrapper_is_found(monkeypatch, tmp_path):
    assert toolchain.user_compiler("mpicc", "c") == GCC  # Open MPI: --showme:command
    assert toolchain.user_compiler("gcc", "c") == GCC
    # an MPICH-style wrapper that knows only -show
    wrapper = tmp_path / "mpicc"
    wrapper.write_text('#!/bin/sh\n[ "$1" = -show ] && echo "g++ -I/opt/mpich/include"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    assert toolchain.user_compiler(str(wrapper), "c").command == "g++"
    # the user's OMPI_CC wins over the wrapper's default, and clang is recognised
    monkeypatch.setenv("OMPI_CC", "clang-16")
    toolchain.user_compiler.cache_clear()
    found = toolchain.user_compiler("mpicc", "c")
    assert found.command == "clang-16" and found.is_clang


def test_a_gcc_user_hears_at_build_time_that_the_measured_binary_is_clangs(
    tmp_path, monkeypatch, capsys
):
    (tmp_path / "a.c").write_text("int main(void) { return 0; }\n")
    records = tmp_path / "builds.jsonl"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(BUILD_RECORD_VARIABLE, str(records))
    assert main(["build", "--", "gcc", "-O2", "a.c", "-o", "app"]) == 0
    err = capsys.readouterr().err
    assert f"note: app was built by {CLANG}, not by the compiler the user's own build" in err
    assert GCC.version in err and "OMPI_CC=clang-16" in err
    assert [json.loads(line) for line in records.read_text().splitlines()] == [
        {"program": "app", "measured": CLANG, "user": GCC.version}
    ]
    # a compile step says nothing and records nothing; a clang user hears nothing
    assert main(["build", "--", "gcc", "-O2", "-c", "a.c", "-o", "a.o"]) == 0
    assert main(["build", "--", "clang-16", "a.o", "-o", "app2"]) == 0
    assert "note" not in capsys.readouterr().err
    assert len(records.read_text().splitlines()) == 2


def test_an_unwritable_build_record_is_named(tmp_path, monkeypatch, capsys):
    (tmp_path / "a.c").write_text("int main(void) { return 0; }\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(BUILD_RECORD_VARIABLE, str(tmp_path / "missing" / "builds.jsonl"))
    assert main(["build", "--", "clang-16", "a.c", "-o", "app"]) != 0
    assert f"({BUILD_RECORD_VARIABLE})" in capsys.readouterr().err


def test_no_note_where_the_user_builds_with_clang_too():
    assert compiler_note(BuildRecord("app", CLANG, "Ubuntu clang version 16.0.0")) is None
    assert "OMPI_CC" in str(compiler_note(BuildRecord("app", CLANG, GCC.version)))


def test_the_store_keeps_builds_and_an_older_store_reads_as_none(tmp_path):
    path = tmp_path / "app.sqlite"
    with CampaignStore.create_or_open(path, name="app", parameters=["p"]) as store:
        assert store.builds() == []
        store.record_builds([BuildRecord("app", CLANG, GCC.version)])
    with CampaignStore.open(path) as store:
        assert store.builds() == [BuildRecord("app", CLANG, GCC.version)]
    with sqlite3.connect(path) as db:  # a store from before perfcast kept builds
        db.execute("DROP TABLE builds")
    with CampaignStore.open(path) as store:
        assert store.builds() == []


def test_provenance_keeps_the_compilers_and_refuses_a_malformed_entry(tmp_path):
    compilers = Compilers(CLANG, GCC.version)
    provenance = Provenance({"p": (1.0, 8.0)}, compilers=compilers)
    path = tmp_path / "models.json"
    ModelSet(["p"], [Model("main", "time", 1.0, ())], provenance).save(path)
    assert ModelSet.load(path).provenance == provenance
    data = json.loads(path.read_text())
    data["provenance"]["compilers"] = {"measured": CLANG}
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="'compilers' needs a string 'measured'"):
        ModelSet.load(path)


def test_every_prediction_names_the_compiler_it_describes(tmp_path, capsys):
    path = tmp_path / "models.json"
    provenance = Provenance({"p": (1.0, 8.0)}, compilers=Compilers(CLANG, GCC.version))
    ModelSet(["p"], [Model("main", "time", 1.0, ())], provenance).save(path)
    assert main(["predict", str(path), "p=4"]) == 0
    err = capsys.readouterr().err
    assert f"the program the models rest on was built by {CLANG}, not by" in err
    assert "describes the clang build" in err


SPEC = """\
[app]
name = "stencil"
[build]
command = "make -s CC='{perfcast_build} mpicc'"
counting_pass = false
[run]
command = "./jacobi {size} 10"
repetitions = 1
timeout = 60
[parameters]
p = [1, 2, 3]
size = [32, 48, 64, 80, 96]
"""


@pytest.mark.slow
def test_a_campaign_records_its_compilers_and_the_models_carry_them(tmp_path, capsys):
    app = copy_stencil(tmp_path)
    spec = write_spec(app, SPEC)
    assert main(["measure", str(spec)]) == 0
    err = capsys.readouterr().err
    assert f"build: note: jacobi was built by {CLANG}" in err
    store = app / "stencil.sqlite"
    with CampaignStore.open(store) as opened:
        assert opened.builds() == [BuildRecord("jacobi", CLANG, GCC.version)]
    models = tmp_path / "models.json"
    assert main(["model", str(store), "--metric", "time", "-o", str(models)]) == 0
    assert f"stencil.sqlite: jacobi was built by {CLANG}" in capsys.readouterr().err
    saved = ModelSet.load(models).provenance
    assert saved is not None and saved.compilers == Compilers(CLANG, GCC.version)
