"""The counting pass: one ``perfcast measure`` measures time with the light build and the
exact counts with a counting build in a copy of the app directory (a make project)."""

import json
import re
import shutil
import sqlite3
import subprocess

import pytest
from campaign_helpers import copy_stencil, write_spec

from perfcast.appspec import load_spec
from perfcast.cli import main
from perfcast.experiment import read_experiment
from perfcast.measure.copies import COUNTING, MAX_COPY_BYTES, copy_app
from perfcast.measure.counting import counting_directory, counting_spec, skip_reason
from perfcast.modeling.modelset import ModelSet
from perfcast.workflows.model import ModelRequest, model_campaign

SPEC = """\
[app]
name = "stencil"
[build]
command = "{build}"
{extra}
[run]
command = "./jacobi {{size}} 20"
repetitions = 2
timeout = 60
[parameters]
p = [1, 2, 3]
size = [64, 96, 128]
"""

MAKE = "make -s CC='{perfcast_build} mpicc'"

# A build that fails only when it is asked to count: CoMD's Makefile writes $(CC) into a C
# string, which the counting build's longer command breaks in the same way.
FAILS_COUNTING = """\
#!/bin/sh
case "$1" in *--counters*) echo "error: the counting compiler broke the build" >&2; exit 2;; esac
exec make -s CC="$1 mpicc"
"""


def _spec(app, build=MAKE, extra=""):
    return write_spec(app, SPEC.format(build=build, extra=extra))


def _runs(store):
    with sqlite3.connect(store) as db:
        return db.execute(
            "SELECT count(*), max(repetition) FROM runs WHERE status = 'ok'"
        ).fetchone()


def _blocks(store):
    """Rows of basic-block counts in ``store``."""
    table = read_experiment(store).aggregate("median")
    return int((table["metric"] == "basic_blocks").sum())


@pytest.mark.slow
def test_one_measure_gives_time_and_exact_counts_without_touching_the_users_build(tmp_path, capsys):
    app = copy_stencil(tmp_path)
    spec = _spec(app)
    assert main(["measure", str(spec)]) == 0
    out, err = capsys.readouterr()
    store, counts = app / "stencil.sqlite", app / "stencil.counts.sqlite"
    assert _runs(store) == (18, 1)  # 9 points x 2 repetitions (numbered from 0)
    assert _runs(counts) == (9, 0)  # once per point
    assert "counting pass: 9 runs" in out and "one repetition of the timing runs" in out
    assert "then a counting pass" in err
    # the user's tree keeps the light build: no SanitizerCoverage guards in its program
    symbols = subprocess.run(["nm", str(app / "jacobi")], capture_output=True, text=True).stdout
    assert "__start___sancov_guards" not in symbols
    copied = counting_directory(store) / "jacobi"
    counted = subprocess.run(["nm", str(copied)], capture_output=True, text=True).stdout
    assert "__start___sancov_guards" in counted
    assert _blocks(counts) > 0
    assert _blocks(store) == 0
    # the model finds the counts beside the store and says so; perfcast model, perfcast
    # report and the library call give the same models, priors included
    saved = tmp_path / "models.json"
    assert main(["model", str(store), "--metric", "time", "-o", str(saved)]) == 0
    out, err = capsys.readouterr()
    assert "priors: effort" in out + err and "stencil.counts.sqlite" in out + err
    page = tmp_path / "report.html"
    assert main(["report", str(store), "--metric", "time", "-o", str(page)]) == 0
    capsys.readouterr()
    request = ModelRequest(read_experiment(store), store=store, metrics=("time",))
    library = model_campaign(request)
    assert library.counts == counts and "effort" in library.priors
    by_cli = {(m.callpath, m.metric): m.text() for m in ModelSet.load(saved)}
    by_library = {(m.callpath, m.metric): m.text() for m in library.models}
    assert by_cli == by_library
    assert any(m.prior for m in library.models if m.metric == "time")
    embedded = re.search(r'id="perfcast-data">(.*?)</script>', page.read_text())
    assert embedded is not None
    data = json.loads(embedded.group(1))
    names = [metric["name"] for metric in data["metrics"]]
    by_report = {
        (data["nodes"][r["node"]]["path"], names[r["metric"]]): r["formula"] for r in data["models"]
    }
    assert by_report == by_library


@pytest.mark.slow
def test_a_failed_counting_build_keeps_the_timing_campaign_and_resume_finishes_it(tmp_path, capsys):
    app = copy_stencil(tmp_path)
    (app / "build.sh").write_text(FAILS_COUNTING)
    spec = _spec(app, "sh build.sh '{perfcast_build}'")
    assert main(["measure", str(spec)]) == 1
    out, _ = capsys.readouterr()
    assert "the counting pass failed, the timing campaign in" in out
    assert "the counting compiler broke the build" in out and "--resume" in out
    assert _runs(app / "stencil.sqlite") == (18, 1)
    # the user fixes the build; --resume runs only the counting pass
    (app / "build.sh").write_text('#!/bin/sh\nexec make -s CC="$1 mpicc"\n')
    assert main(["measure", str(spec), "--resume"]) == 0
    out, _ = capsys.readouterr()
    assert "18 already stored, 0 run now" in out
    assert _runs(app / "stencil.counts.sqlite") == (9, 0)


def test_no_counting_pass_where_the_build_counts_itself_or_the_spec_turns_it_off(tmp_path):
    app = copy_stencil(tmp_path)
    counting = load_spec(_spec(app, extra="counters = true"))
    assert skip_reason(counting, counting.store, virtual=False) == ""
    off = load_spec(_spec(app, extra="counting_pass = false"))
    assert skip_reason(off, off.store, virtual=False) == ""
    on = load_spec(_spec(app))
    assert skip_reason(on, on.store, virtual=False) is None
    assert "virtual cluster" in str(skip_reason(on, on.store, virtual=True))
    assert skip_reason(on, on.store.with_name("stencil.counts.sqlite"), virtual=False) == ""


def test_an_app_directory_too_large_to_copy_is_measured_without_counts_and_says_how(tmp_path):
    app = copy_stencil(tmp_path)
    with (app / "input.dat").open("wb") as data:
        data.truncate(MAX_COPY_BYTES + 1)  # sparse: no disk is spent
    spec = load_spec(_spec(app))
    reason = str(skip_reason(spec, spec.store, virtual=False))
    assert "more than the 1 GiB the counting build copies" in reason
    assert "[build] counters = true" in reason and "stencil.counts.sqlite" in reason


def test_the_copy_leaves_out_objects_the_program_and_the_campaigns_own_files(tmp_path):
    app = copy_stencil(tmp_path)
    subprocess.run(["make", "-s", "CC=mpicc"], cwd=app, check=True, capture_output=True)
    for name in ("stencil.sqlite", "stencil.sqlite.lock", "stencil.counts.sqlite"):
        (app / name).write_text("")
    (app / "stencil.sqlite.runs").mkdir()
    (app / ".git").mkdir()
    spec = load_spec(_spec(app))
    copy = copy_app(spec, spec.store, COUNTING)
    assert copy == app / "stencil.counting"
    copied = {path.name for path in copy.iterdir()}
    assert {"jacobi.c", "Makefile", "stencil.h", "perfcast.toml"} <= copied
    assert not copied & {"jacobi", "jacobi.o", "grid.o", ".git", "stencil.counting"}
    assert not any(name.startswith("stencil.sqlite") or "counts" in name for name in copied)
    # a second copy starts afresh
    (copy / "stale.o").write_text("")
    assert not (copy_app(spec, spec.store, COUNTING) / "stale.o").exists()
    shutil.rmtree(copy)


def test_a_counting_store_with_runs_is_not_overwritten_by_a_new_campaign(tmp_path, capsys):
    app = copy_stencil(tmp_path)
    spec = _spec(app)
    with sqlite3.connect(app / "stencil.counts.sqlite") as db:
        db.execute("CREATE TABLE runs (id INTEGER)")
    # not a store perfcast wrote: refused with the file named, before anything is built
    assert main(["measure", str(spec)]) != 0
    _, err = capsys.readouterr()
    assert "stencil.counts.sqlite" in err
    assert not (app / "jacobi").exists() and not (app / "stencil.sqlite").exists()


def test_the_counting_pass_collects_counts_whatever_the_timing_runs_keep(tmp_path):
    app = copy_stencil(tmp_path)
    spec = load_spec(_spec(app, extra='[metrics]\ncollect = ["time", "cpu_time"]'))
    counting = counting_spec(spec, spec.store)
    assert {"time", "cpu_time", "basic_blocks", "mpi_bytes_sent", "visits"} <= set(counting.metrics)
    assert counting.build is not None and counting.build.counters
    assert counting.run.repetitions == 1
    assert counting.directory == app / "stencil.counting"
    assert counting.store == app / "stencil.counts.sqlite"
