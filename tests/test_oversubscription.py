"""Runs with more ranks than cores: the plan note before a campaign runs, the ranks and
cores every run is stored with, the note of `perfcast model`, and stores of schema 1 (which
kept neither) opening, migrating and resuming."""

import json
import shutil
import sqlite3
import time

import pytest
from campaign_helpers import build_program, write_spec

from perfcast.appspec import load_spec
from perfcast.cli import main
from perfcast.measure.campaign import measure
from perfcast.measure.local import LocalBackend, available_cores
from perfcast.measure.oversubscription import oversubscription, plan_note
from perfcast.measure.store import SCHEMA_VERSION, CampaignStore, RunRecord

pytestmark = pytest.mark.skipif(shutil.which("mpicc") is None, reason="needs Open MPI")

CORES = available_cores()
CORES_TEXT = f"{CORES} core" if CORES == 1 else f"{CORES} cores"

SCHEMA_1 = """
CREATE TABLE campaign (
    id INTEGER PRIMARY KEY CHECK (id = 1), schema_version INTEGER NOT NULL, name TEXT NOT NULL,
    spec_path TEXT, spec_text TEXT, parameters TEXT NOT NULL, metrics TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, point TEXT NOT NULL,
    repetition INTEGER NOT NULL, command TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')), exit_code INTEGER, reason TEXT,
    stderr_tail TEXT, stdout_tail TEXT, started REAL, finished REAL, seconds REAL,
    attempts INTEGER NOT NULL, backend TEXT, job TEXT
);
CREATE TABLE profiles (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, name TEXT NOT NULL,
    data BLOB NOT NULL, PRIMARY KEY (run_id, name)
);
CREATE TABLE attempts (
    id INTEGER PRIMARY KEY, key TEXT NOT NULL, attempt INTEGER NOT NULL, command TEXT NOT NULL,
    exit_code INTEGER, reason TEXT, stderr_tail TEXT, seconds REAL, finished REAL
);
CREATE TABLE inflight (
    key TEXT PRIMARY KEY, attempt INTEGER NOT NULL, backend TEXT NOT NULL,
    handle TEXT NOT NULL, started REAL NOT NULL
);
"""
"""The store schema as perfcast wrote it before runs kept their ranks and cores."""


def write_schema_1_store(path, parameters, runs):
    """A store as schema 1 wrote it, holding ``runs``: (point, seconds) of successful runs."""
    with sqlite3.connect(path) as db:
        db.executescript(SCHEMA_1)
        db.execute(
            "INSERT INTO campaign VALUES (1, 1, 'prog', NULL, NULL, ?, '[]', ?)",
            (json.dumps(parameters), time.time()),
        )
        for point, seconds in runs:
            key = ",".join(f"{name}={value}" for name, value in point.items()) + "#0"
            db.execute(
                "INSERT INTO runs (key, point, repetition, command, status, exit_code, seconds, "
                "attempts, backend) VALUES (?, ?, 0, 'mpirun', 'ok', 0, ?, 1, 'local')",
                (key, json.dumps(point), seconds),
            )
    db.close()


def schema(path):
    """The store's schema version and the last column of its runs table."""
    with sqlite3.connect(path) as db:
        (version,) = db.execute("SELECT schema_version FROM campaign").fetchone()
        last = [row[1] for row in db.execute("PRAGMA table_info(runs)")][-1]
    db.close()
    return version, last


@pytest.mark.slow
def test_campaign_beyond_the_cores_says_so_when_planned_stored_and_modeled(tmp_path, capsys):
    build_program(tmp_path)
    over, further = CORES + 1, CORES + 2  # a model needs 3 values of p
    path = write_spec(
        tmp_path,
        f"""
        [app]
        name = "shared"
        [run]
        command = "./prog {{n}}"
        repetitions = 1
        [parameters]
        p = [1, {over}, {further}]
        n = [1, 2, 3]
        """,
    )
    assert main(["measure", str(path)]) == 0
    err = capsys.readouterr().err
    note = f"plan: p = {over}, {further}: more ranks than the {CORES_TEXT} a run has here"
    assert note in err
    assert err.index(note) < err.index("measure: ")  # said before anything ran
    assert "includes waiting for a core, MPI time most" in err
    assert "PERFCAST_CPU_TIME=1" in err and "--backend slurm" in err

    store = tmp_path / "shared.sqlite"
    with CampaignStore.open(store) as opened:
        runs = opened.runs("ok")
    stored = sorted((run.point["p"], run.ranks, run.cores) for run in runs)
    assert stored == [(p, p, CORES) for p in (1, over, further) for _ in range(3)]
    shared = oversubscription(store)
    assert shared is not None
    assert (shared.runs, shared.stored, shared.unknown) == (6, 9, 0)
    assert shared.ranks_on == {CORES: (over, further)}

    assert main(["model", str(store)]) == 0
    err = capsys.readouterr().err
    assert (
        f"note: 6 of 9 runs in {store} had more ranks than cores (p = {over}, {further} on "
        f"{CORES_TEXT}): time at those points includes waiting for a core" in err
    )
    assert "--priors effort" not in err
    assert main(["model", str(store), "--priors", "effort"]) == 0
    err = capsys.readouterr().err
    assert "6 of 9 runs" in err
    assert "The MPI laws of --priors effort (Table I) assume one rank per core" in err


def test_the_plan_note_follows_the_cores_a_run_has():
    local = LocalBackend()
    assert local.cores_for(1) == local.cores_for(CORES + 1) == CORES
    assert plan_note([1, CORES], local.cores_for) is None
    note = plan_note([CORES + 2, 1, CORES + 1, CORES + 2], local.cores_for) or ""
    assert note.startswith(
        f"p = {CORES + 1}, {CORES + 2}: more ranks than the {CORES_TEXT} a run has here, "
        "so ranks take turns on them"
    )
    # runs at once divide the cores among them: on 2 or 3 cores, two runs have one each
    paired = LocalBackend(parallel=2)
    assert paired.cores_for(2) == max(1, CORES // 2)
    paired_note = plan_note([1, 2], paired.cores_for)
    if CORES // 2 < 2:
        assert (paired_note or "").startswith("p = 2: more ranks than the 1 core a run has here")
    else:
        assert paired_note is None
    # a backend that cannot tell says nothing
    assert plan_note([1000], lambda ranks: None) is None


@pytest.mark.slow
def test_a_schema_1_store_opens_migrates_and_resumes(tmp_path, capsys):
    build_program(tmp_path)
    path = write_spec(
        tmp_path,
        f"""
        [app]
        name = "prog"
        [run]
        command = "./prog {{n}}"
        repetitions = 1
        [parameters]
        p = [1, {CORES + 1}]
        n = [1, 2]
        """,
    )
    store = tmp_path / "prog.sqlite"
    old_point = {"p": CORES + 1, "n": 1}
    write_schema_1_store(store, ["p", "n"], [(old_point, 0.5)])

    # reading leaves the file as it is; the old run's ranks and cores are unknown, so it
    # is not counted as shared
    with CampaignStore.open(store) as opened:
        (old,) = opened.runs()
    assert (old.point, old.ranks, old.cores) == (old_point, None, None)
    assert oversubscription(store) is None
    assert schema(store) == (1, "job")

    # resuming migrates: the stored run stays, the rest is measured and stored with ranks
    # and cores
    result = measure(load_spec(path), LocalBackend(), resume=True, stream=None)
    assert (result.already_stored, result.report.succeeded, result.failed) == (1, 3, [])
    assert schema(store) == (SCHEMA_VERSION, "cores") == (2, "cores")
    with CampaignStore.open(store) as opened:
        runs = {run.key: run for run in opened.runs()}
    assert (runs[f"p={CORES + 1},n=1#0"].seconds, runs[f"p={CORES + 1},n=1#0"].cores) == (0.5, None)
    assert (runs[f"p={CORES + 1},n=2#0"].ranks, runs[f"p={CORES + 1},n=2#0"].cores) == (
        CORES + 1,
        CORES,
    )
    shared = oversubscription(store)
    assert shared is not None and (shared.runs, shared.stored, shared.unknown) == (1, 4, 1)
    assert (
        f"1 of 4 runs in prog.sqlite had more ranks than cores (p = {CORES + 1} on {CORES_TEXT}; "
        "1 run, stored before perfcast recorded cores, may too): "
    ) in shared.describe("prog.sqlite")

    # opening a migrated store again changes nothing; a record through the store keeps both
    with CampaignStore.create_or_open(store, name="prog", parameters=["p", "n"]) as opened:
        opened.record(
            RunRecord(
                key="p=9,n=9#0",
                point={"p": 9, "n": 9},
                repetition=0,
                command="mpirun -np 9 ./prog 9",
                exit_code=0,
                reason=None,
                started=1.0,
                finished=2.0,
                ranks=9,
                cores=4,
            )
        )
        (added,) = [run for run in opened.runs() if run.key == "p=9,n=9#0"]
    assert (added.ranks, added.cores) == (9, 4)
