"""Campaigns with the local backend: runs stored with their reasons, retries, the SQLite
reader, `perfcast model` and `perfcast export` on the store."""

import json
import shutil
import sqlite3

import pytest
from campaign_helpers import build_program, live_processes_of, write_spec

from perfcast.appspec import load_spec
from perfcast.cli import main
from perfcast.errors import PerfcastError
from perfcast.experiment import read_experiment
from perfcast.measure.campaign import measure
from perfcast.measure.local import LocalBackend
from perfcast.measure.store import CampaignStore

pytestmark = pytest.mark.skipif(shutil.which("mpicc") is None, reason="needs Open MPI")


@pytest.fixture(scope="module")
def failing_campaign(tmp_path_factory):
    """n=3 crashes, n=4 hangs past the 4 s timeout; one retry each."""
    directory = tmp_path_factory.mktemp("failing")
    build_program(directory)
    spec = load_spec(
        write_spec(
            directory,
            """
            [app]
            name = "prog"
            [run]
            command = "./prog {n} 3 4"
            repetitions = 1
            timeout = 4
            retries = 1
            [parameters]
            p = [1, 2]
            n = [1, 3, 4]
            """,
        )
    )
    result = measure(spec, LocalBackend(kill_grace=1.0))
    return spec, result


@pytest.mark.slow
def test_failures_are_stored_with_their_reason_and_retried(failing_campaign):
    spec, result = failing_campaign
    assert result.planned == 6
    assert result.stored_ok == 2
    assert sorted(run.key for run in result.failed) == [
        "p=1,n=3#0",
        "p=1,n=4#0",
        "p=2,n=3#0",
        "p=2,n=4#0",
    ]
    by_key = {run.key: run for run in result.failed}
    crash = by_key["p=2,n=3#0"]
    assert crash.attempts == 2
    assert crash.exit_code != 0
    assert "signal 6 (Aborted)" in crash.reason
    assert "Aborted" in crash.stderr_tail
    hang = by_key["p=1,n=4#0"]
    assert hang.reason.startswith("timed out after 4 s")
    assert hang.attempts == 2
    assert len(result.report.retried) == 4  # each failure had its one extra attempt
    summary = result.summary()
    assert "2 runs ok, 4 failed" in summary and "p=1,n=4#0: timed out" in summary
    with CampaignStore.open(spec.store) as store:
        assert sorted(key for key, attempt, _ in store.attempts() if attempt == 1) == sorted(by_key)
        assert store.inflight() == []
        ok = store.runs("ok")
        assert {run.command for run in ok} == {
            "mpirun -np 1 ./prog 1 3 4",
            "mpirun -np 2 ./prog 1 3 4",
        }
        assert all(run.seconds and run.seconds > 0 for run in ok)


@pytest.mark.slow
def test_hung_runs_leave_no_process_behind(failing_campaign):
    spec, _ = failing_campaign
    assert not live_processes_of(spec.directory)


@pytest.mark.slow
def test_store_has_wal_mode_and_unique_runs(failing_campaign):
    spec, _ = failing_campaign
    db = sqlite3.connect(spec.store)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    keys = [key for (key,) in db.execute("SELECT key FROM runs")]
    assert len(keys) == len(set(keys)) == 6
    (point,) = db.execute("SELECT point FROM runs WHERE key = 'p=2,n=3#0'").fetchone()
    assert json.loads(point) == {"p": 2, "n": 3}


@pytest.mark.slow
def test_a_second_measure_needs_resume(failing_campaign):
    spec, _ = failing_campaign
    with pytest.raises(PerfcastError, match="--resume"):
        measure(spec, LocalBackend())
    again = measure(spec, LocalBackend(), resume=True)
    assert again.already_stored == 6 and again.report.succeeded == 0


@pytest.mark.slow
def test_cli_campaign_then_model_and_export_on_the_store(tmp_path, capsys):
    build_program(tmp_path)
    path = write_spec(
        tmp_path,
        """
        [app]
        name = "prog"
        [run]
        command = "./prog {n}"
        repetitions = 1
        [parameters]
        p = [1, 2, 3]
        n = [1, 2, 30]
        """,
    )
    assert main(["measure", str(path)]) == 0
    assert "9 runs ok, 0 failed" in capsys.readouterr().out
    store = tmp_path / "prog.sqlite"
    experiment = read_experiment(store)
    # an uninstrumented program: one run-time measurement per successful run
    assert experiment.parameters == ["p", "n"]
    assert experiment.callpaths == ["prog"]
    assert len(experiment.data) == 9
    slow = experiment.data[experiment.data["n"] == 30]["value"]
    assert (slow > 0.3).all()  # the program sleeps 30 * 10 ms
    assert main(["model", str(store)]) == 0
    assert "prog" in capsys.readouterr().out
    for name in ("out.txt", "out.json"):
        assert main(["export", str(store), "-o", str(tmp_path / name)]) == 0
        back = read_experiment(tmp_path / name)
        assert back.parameters == ["p", "n"]
        assert sorted(back.data["value"]) == pytest.approx(sorted(experiment.data["value"]))


@pytest.mark.slow
def test_cli_measure_reports_failures_with_exit_status_1(tmp_path, capsys):
    build_program(tmp_path)
    path = write_spec(
        tmp_path,
        """
        [run]
        command = "./prog {n} 2"
        repetitions = 1
        retries = 0
        [parameters]
        n = [1, 2]
        """,
    )
    assert main(["measure", str(path)]) == 1
    captured = capsys.readouterr()
    assert "1 runs ok, 1 failed" in captured.out
    assert "n=2#0: exit status" in captured.out
    assert "measure: 2/2 runs, 1 failed" in captured.err


def test_missing_program_is_reported_before_running(tmp_path):
    path = write_spec(
        tmp_path,
        """
        [run]
        command = "./nothing {n}"
        [parameters]
        n = [1, 2]
        """,
    )
    assert main(["measure", str(path)]) == 2


@pytest.mark.slow
def test_parallel_runs_overlap_and_each_is_stored_once(tmp_path, capsys):
    # Each run marks itself as running, waits, and records how many runs it saw at once.
    probe = tmp_path / "probe.sh"
    probe.write_text(
        "#!/bin/sh\ntouch running.$$\nsleep 0.5\nls running.* | wc -l > seen.$$\nrm running.$$\n"
    )
    probe.chmod(0o755)
    path = write_spec(
        tmp_path,
        """
        [run]
        command = "./probe.sh {n}"
        repetitions = 2
        [parameters]
        p = [1]
        n = [1, 2]
        """,
    )
    assert main(["measure", str(path), "--parallel", "2"]) == 0
    assert "4 runs ok, 0 failed" in capsys.readouterr().out
    seen = [int(f.read_text()) for f in tmp_path.glob("seen.*")]
    assert len(seen) == 4 and max(seen) == 2
    with CampaignStore.open(load_spec(path).store) as store:
        runs = store.runs("ok")
        assert sorted(run.key for run in runs) == [
            "p=1,n=1#0",
            "p=1,n=1#1",
            "p=1,n=2#0",
            "p=1,n=2#1",
        ]
        assert store.inflight() == []
