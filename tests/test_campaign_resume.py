"""A campaign whose perfcast process is SIGKILLed mid-way resumes, and in the end every
run is in the store exactly once."""

import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from campaign_helpers import build_program, live_processes_of, write_spec

from perfcast.measure.store import CampaignStore

pytestmark = pytest.mark.skipif(shutil.which("mpicc") is None, reason="needs Open MPI")

RUNS = 8


def stored_ok(store: Path) -> int:
    if not store.exists():
        return 0
    try:
        with sqlite3.connect(store) as db:
            return db.execute("SELECT COUNT(*) FROM runs WHERE status = 'ok'").fetchone()[0]
    except sqlite3.OperationalError:  # tables not created yet
        return 0


@pytest.mark.slow
def test_sigkilled_campaign_resumes_with_every_run_once(tmp_path):
    build_program(tmp_path)
    # runs of about 1 s, so one is in flight when perfcast dies
    path = write_spec(
        tmp_path,
        f"""
        [app]
        name = "resume"
        [run]
        command = "{tmp_path}/prog {{n}}"
        repetitions = 2
        [parameters]
        p = [1, 2]
        n = [60, 70]
        """,
    )
    store = tmp_path / "resume.sqlite"
    command = [sys.executable, "-m", "perfcast", "measure", str(path)]
    first = subprocess.Popen(command, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while stored_ok(store) < 3 and time.monotonic() < deadline:
        assert first.poll() is None, "the campaign ended before it could be killed"
        time.sleep(0.05)
    time.sleep(0.3)  # the next run has started
    first.send_signal(signal.SIGKILL)
    first.wait()
    done_before = stored_ok(store)
    assert 3 <= done_before < RUNS
    with CampaignStore.open(store) as opened:
        inflight = opened.inflight()
    assert len(inflight) == 1  # the run perfcast was waiting for
    orphan_session = inflight[0].handle["session"]
    assert any(pid == orphan_session for pid in live_processes_of(tmp_path)), (
        "the in-flight mpirun outlives the killed perfcast (that is what resume must stop)"
    )

    resumed = subprocess.run([*command, "--resume"], capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{RUNS} runs ok, 0 failed" in resumed.stdout
    assert f"{done_before} already stored" in resumed.stdout

    with CampaignStore.open(store) as opened:
        runs = opened.runs()
        assert opened.inflight() == []
    counts = Counter(run.key for run in runs)
    assert len(counts) == RUNS and set(counts.values()) == {1}
    assert {run.status for run in runs} == {"ok"}
    assert not live_processes_of(tmp_path)
