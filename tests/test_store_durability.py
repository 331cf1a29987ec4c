"""The campaign store under the faults a long campaign meets: a second perfcast refused by
the lock, a file that is not a store, a perfcast killed between starting a run and recording
it, damaged files, a full disk, and runs that lack a metric the campaign collects."""

import hashlib
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from campaign_helpers import build_program, write_spec

from perfcast.appspec import load_spec
from perfcast.cli import main
from perfcast.errors import InputError, PerfcastError
from perfcast.experiment import read_experiment
from perfcast.measure.campaign import CPU_TIME_OVERHEAD, cpu_time_overhead_warning, measure
from perfcast.measure.design import describe_plan, plan_from_spec
from perfcast.measure.local import LocalBackend, processes_with_token
from perfcast.measure.reader import MissingMetricWarning
from perfcast.measure.runner import MISSING_CPU_TIME
from perfcast.measure.store import (
    CampaignStore,
    DamagedStoreError,
    DiskFullError,
    InflightRun,
    RunRecord,
    integrity_problems,
)

needs_mpi = pytest.mark.skipif(shutil.which("mpicc") is None, reason="needs Open MPI")

PARAMETERS = ["p", "n"]


def digest(*paths: Path) -> list[str | None]:
    """The contents of each file (None: absent), to tell that nothing was written."""
    return [hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else None for p in paths]


def with_journals(store: Path) -> list[Path]:
    """The file and its write-ahead log (not the ``-shm`` index: readers touch that)."""
    return [store, store.with_name(store.name + "-wal")]


def record(store: CampaignStore, n: int, *, seconds: float = 0.5, padding: int = 0, **kw):
    point = {"p": 1.0, "n": float(n)}
    store.record(
        RunRecord(
            key=f"p=1,n={n}#0",
            point=point,
            repetition=0,
            command=f"mpirun -np 1 ./prog {n}",
            exit_code=0,
            reason=None,
            started=1000.0,
            finished=1000.0 + seconds,
            stderr_tail=f"run n={n}#0 " + "x" * padding,
            ranks=1,
            **kw,
        )
    )


def small_spec(directory: Path, command: str, extra: str = "") -> Path:
    return write_spec(
        directory,
        f"""
        [app]
        name = "prog"
        [run]
        command = "{command}"
        repetitions = 1
        timeout = 60
        [parameters]
        p = [1, 2]
        n = [1, 2, 3]
        {extra}
        """,
    )


# -- 1. nothing is written before the lock and the file are checked ---------------------------


@needs_mpi
def test_measure_refused_by_the_lock_leaves_the_store_as_it_was(tmp_path):
    build_program(tmp_path)
    spec = load_spec(
        small_spec(tmp_path, "./prog {n}", '[metrics]\ncollect = ["time", "run_time"]')
    )
    store_path = tmp_path / "prog.sqlite"
    with CampaignStore.create_or_open(store_path, name="prog", parameters=PARAMETERS) as holder:
        record(holder, 1)
        before = digest(*with_journals(store_path))
        with pytest.raises(PerfcastError, match="another perfcast process"):
            measure(spec, LocalBackend(), resume=True)
        assert digest(*with_journals(store_path)) == before
    with CampaignStore.open(store_path) as opened:
        assert opened.info().metrics == []  # the refused spec's two metrics were not written


@needs_mpi
def test_resume_refuses_an_unrelated_sqlite_file_and_leaves_it_alone(tmp_path):
    build_program(tmp_path)
    spec = load_spec(small_spec(tmp_path, "./prog {n}"))
    other = tmp_path / "inventory.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE parts (name TEXT, count INTEGER)")
        db.execute("INSERT INTO parts VALUES ('bolt', 12)")
    db.close()
    before = digest(*with_journals(other))
    for resume in (True, False):
        with pytest.raises(
            InputError, match=r"not a perfcast campaign store \(its tables: parts\)"
        ):
            measure(spec, LocalBackend(), store_path=other, resume=resume)
    assert digest(*with_journals(other)) == before
    with sqlite3.connect(other) as db:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    db.close()
    assert tables == {"parts"}


# -- 2. a run is in flight before it starts ---------------------------------------------------


@needs_mpi
@pytest.mark.slow
def test_perfcast_killed_right_after_starting_a_run_leaves_no_orphan_on_resume(tmp_path):
    build_program(tmp_path)
    # the first run's processes outlive perfcast for 100 s unless --resume stops them
    wrapper = tmp_path / "run.sh"
    wrapper.write_text(
        '#!/bin/sh\nif [ -n "$PERFCAST_TEST_KILL_AFTER_SPAWN" ]; then sleep 100; fi\n'
        f'exec {tmp_path}/prog "$1"\n'
    )
    wrapper.chmod(0o755)
    path = small_spec(tmp_path, f"{wrapper} {{n}}")
    store = tmp_path / "prog.sqlite"
    command = [sys.executable, "-m", "perfcast", "measure", str(path)]
    killed = subprocess.run(
        command,
        env=dict(os.environ, PERFCAST_TEST_KILL_AFTER_SPAWN="1"),
        capture_output=True,
        timeout=60,
    )
    assert killed.returncode == -signal.SIGKILL
    with CampaignStore.open(store) as opened:
        (inflight,) = opened.inflight()
        assert opened.counts() == {"ok": 0, "failed": 0}
    assert "session" not in inflight.handle  # killed before it learned mpirun's id
    token = inflight.handle["token"]
    deadline = time.monotonic() + 10
    while not processes_with_token(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_with_token(token), "the orphan run should still be running"

    resumed = subprocess.run([*command, "--resume"], capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert "6 runs ok, 0 failed" in resumed.stdout
    assert processes_with_token(token) == []
    with CampaignStore.open(store) as opened:
        runs = opened.runs()
        assert opened.inflight() == []
    assert set(Counter(run.key for run in runs).values()) == {1} and len(runs) == 6
    assert max(run.seconds or 0 for run in runs) < 30  # none waited for the 100 s orphan


@needs_mpi
def test_runs_in_flight_on_another_host_are_not_rerun_here(tmp_path):
    elsewhere = InflightRun("p=1,n=1#0", 1, "local", {"host": "node-17", "token": "0" * 32}, 0.0)
    with pytest.raises(
        PerfcastError, match="in flight on host node-17 when perfcast stopped; resume there"
    ):
        LocalBackend().recover([elsewhere], {})


# -- 3. damaged stores ----------------------------------------------------------------------

RUNS = 40


def padded_store(path: Path) -> Path:
    """A store of :data:`RUNS` runs of about one page each, checkpointed into the file."""
    with CampaignStore.create_or_open(path, name="prog", parameters=PARAMETERS) as store:
        for n in range(1, RUNS + 1):
            record(store, n, seconds=0.01 * n, padding=3000)
    assert not with_journals(path)[1].exists()  # the last close checkpointed the WAL
    return path


def zero_page_holding(path: Path, text: bytes) -> None:
    data = bytearray(path.read_bytes())
    page_size = 4096
    index = data.index(text) // page_size
    data[index * page_size : (index + 1) * page_size] = bytes(page_size)
    path.write_bytes(bytes(data))


def test_model_on_a_truncated_store_says_it_is_damaged(tmp_path, capsys):
    store = padded_store(tmp_path / "prog.sqlite")
    with open(store, "r+b") as file:
        file.truncate(store.stat().st_size // 2)
    with pytest.raises(DamagedStoreError):
        read_experiment(store)
    assert main(["model", str(store)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "the store is damaged" in err and "perfcast measure --resume" in err
    assert "the runs table cannot be read" in err  # what is damaged


def test_a_zeroed_page_is_found_and_every_readable_run_recovered(tmp_path):
    store = padded_store(tmp_path / "prog.sqlite")
    zero_page_holding(store, b"run n=17#0")
    damaged = store.read_bytes()
    with pytest.raises(DamagedStoreError, match="the runs table cannot be read"):
        CampaignStore.open(store)
    with pytest.raises(DamagedStoreError):  # writing needs recover=True (measure --resume)
        CampaignStore.create_or_open(store, name="prog", parameters=PARAMETERS)
    assert store.read_bytes() == damaged

    with CampaignStore.create_or_open(
        store, name="prog", parameters=PARAMETERS, recover=True
    ) as opened:
        recovery = opened.recovery
        assert recovery is not None
        keys = opened.finished_keys()
        assert integrity_problems(opened._db) == []
    assert recovery.lost == 1 and "p=1,n=17#0" not in keys
    assert recovery.runs == RUNS - 1 == len(keys)
    assert recovery.damaged.read_bytes() == damaged  # kept aside, never deleted
    experiment = read_experiment(store)
    assert len(experiment.data) == recovery.runs


def test_a_run_with_a_profile_on_a_zeroed_page_is_not_recovered_half(tmp_path):
    path = tmp_path / "prog.sqlite"
    with CampaignStore.create_or_open(path, name="prog", parameters=PARAMETERS) as store:
        for n in range(1, RUNS + 1):
            profiles = {
                f"rank-{rank}.pcprof": f"profile n={n} rank {rank} ".encode() + bytes(1500)
                for rank in range(2)
            }
            record(store, n, profiles=profiles)
    zero_page_holding(path, b"profile n=17 rank 1 ")
    with CampaignStore.create_or_open(
        path, name="prog", parameters=PARAMETERS, recover=True
    ) as store:
        assert store.recovery is not None and store.recovery.lost is not None
        assert 1 <= store.recovery.lost <= 3
        runs = store.runs()
        assert "p=1,n=17#0" not in {run.key for run in runs}
        assert len(runs) == RUNS - store.recovery.lost
        for run in runs:  # every run kept has both of its profiles
            n = int(run.point["n"])
            assert store.profiles(run.id) == {
                f"rank-{rank}.pcprof": f"profile n={n} rank {rank} ".encode() + bytes(1500)
                for rank in range(2)
            }


@needs_mpi
@pytest.mark.slow
def test_measure_resume_on_a_zeroed_store_recovers_and_measures_the_lost_runs(tmp_path):
    build_program(tmp_path)
    path = small_spec(tmp_path, "./prog {n}")
    store = tmp_path / "prog.sqlite"
    assert main(["measure", str(path)]) == 0
    zero_page_holding(store, b'{"p": 2, "n": 3}')  # a page of the runs table
    assert main(["model", str(store)]) == 2
    result = measure(load_spec(path), LocalBackend(), resume=True)
    assert result.stored_ok == 6 and result.report.succeeded >= 1
    assert len(read_experiment(store).data) == 6
    (aside,) = tmp_path.glob("prog.sqlite.damaged-*")
    assert aside.stat().st_size > 0


# -- 4. a full disk -------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs (needs root and a sandbox that allows mounts)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(directory: Path, leave: int) -> Path:
    """A file that leaves about ``leave`` bytes free on ``directory``'s file system."""
    filler = directory / "filler"
    stat = os.statvfs(directory)
    with open(filler, "wb") as file:
        file.write(bytes(max(0, stat.f_bavail * stat.f_frsize - leave)))
    return filler


def test_a_full_disk_under_the_store_stops_cleanly_and_resumes(small_disk):
    path = small_disk / "prog.sqlite"
    with CampaignStore.create_or_open(path, name="prog", parameters=PARAMETERS) as store:
        record(store, 1)
        filler = fill(small_disk, leave=64 * 1024)
        with pytest.raises(DiskFullError, match=f"file system at {small_disk} \\(tmpfs"):
            record(store, 2, profiles={"rank-0.pcprof": os.urandom(512 * 1024)})
        assert store.finished_keys() == {"p=1,n=1#0"}  # nothing half-written
        filler.unlink()
        record(store, 2, profiles={"rank-0.pcprof": os.urandom(512 * 1024)})
    with CampaignStore.open(path) as store:
        assert store.finished_keys() == {"p=1,n=1#0", "p=1,n=2#0"}
        assert len(store.profiles(store.runs()[1].id)["rank-0.pcprof"]) == 512 * 1024


FILLING_PROGRAM = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* usage: fill N DIR: while DIR/arm exists, the first run fills DIR's file system (another
 * process filling the disk half-way through a campaign). */
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char arm[4096], filler[4096];
    snprintf(arm, sizeof arm, "%s/arm", argv[2]);
    snprintf(filler, sizeof filler, "%s/filler", argv[2]);
    if (rank == 0 && unlink(arm) == 0) {
        FILE *file = fopen(filler, "wb");
        static char block[65536];
        while (file && fwrite(block, 1, sizeof block, file) == sizeof block)
            ;
        if (file)
            fclose(file);
    }
    usleep(atoi(argv[1]) * 1000);
    MPI_Finalize();
    return 0;
}
"""


def instrumented_spec(
    directory: Path,
    command: str,
    extra: str = "",
    store: str = "",
    parameters: str = "p = [1, 2]\nn = [1, 2, 3]",
) -> Path:
    (directory / "fill.c").write_text(FILLING_PROGRAM)
    return write_spec(
        directory,
        f"""
        [app]
        name = "fill"
        {store}
        [build]
        sources = ["fill.c"]
        compiler = "mpicc"
        output = "fill"
        [run]
        command = "{command}"
        repetitions = 1
        timeout = 60
        [parameters]
        {parameters}
        {extra}
        """,
    )


@needs_mpi
@pytest.mark.slow
def test_a_disk_filled_during_the_campaign_stops_it_and_resume_finishes(tmp_path, small_disk):
    path = instrumented_spec(
        tmp_path, f"./fill {{n}} {small_disk}", store=f'store = "{small_disk}/fill.sqlite"'
    )
    (small_disk / "arm").touch()
    first = subprocess.run(
        [sys.executable, "-m", "perfcast", "measure", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert first.returncode == 2, first.stderr
    assert f"no space left on the file system at {small_disk} (tmpfs" in first.stderr
    assert "Traceback" not in first.stderr
    with CampaignStore.open(small_disk / "fill.sqlite") as store:
        assert store.counts()["failed"] == 0  # the run is not blamed for the disk
    (small_disk / "filler").unlink()
    again = subprocess.run(
        [sys.executable, "-m", "perfcast", "measure", str(path), "--resume", "--no-build"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr
    assert "6 runs ok, 0 failed" in again.stdout


# -- 5. a collected metric the runs do not have ----------------------------------------------


@needs_mpi
@pytest.mark.slow
def test_cpu_time_collected_but_not_measured_stops_after_the_first_run(tmp_path, monkeypatch):
    monkeypatch.delenv("PERFCAST_CPU_TIME", raising=False)
    path = instrumented_spec(
        tmp_path, f"./fill {{n}} {tmp_path}", '[metrics]\ncollect = ["time", "cpu_time"]'
    )
    spec = load_spec(path)
    result = measure(spec, LocalBackend())
    assert result.report.stopped == MISSING_CPU_TIME
    assert len(result.failed) == 1 and result.report.not_started == 5
    assert "PERFCAST_CPU_TIME=1" in result.summary()

    monkeypatch.setenv("PERFCAST_CPU_TIME", "1")
    again = measure(spec, LocalBackend(), resume=True, retry_failed=True, build=False)
    assert again.stored_ok == 6 and not again.failed
    assert {"time", "cpu_time"} <= set(read_experiment(spec.store).metrics)


@needs_mpi
@pytest.mark.slow
def test_a_store_declaring_a_metric_its_runs_lack_still_reads(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("PERFCAST_CPU_TIME", raising=False)
    path = instrumented_spec(
        tmp_path,
        f"./fill {{n}} {tmp_path}",
        '[metrics]\ncollect = ["time"]',
        parameters="p = 1\nn = [1, 2, 3, 4]",
    )
    spec = load_spec(path)
    assert measure(spec, LocalBackend()).stored_ok == 4
    # what an older perfcast stored: the campaign declares cpu_time, no run has it
    with CampaignStore.create_or_open(
        spec.store, name="fill", parameters=PARAMETERS, metrics=["time", "cpu_time"]
    ):
        pass
    with pytest.warns(MissingMetricWarning, match="collects cpu_time, but its runs do not"):
        experiment = read_experiment(spec.store)
    assert set(experiment.metrics) == {"time", "time:max"}
    with pytest.warns(MissingMetricWarning):
        assert main(["model", str(spec.store), "--metric", "time"]) == 0
    assert "main" in capsys.readouterr().out  # the instrumented program's root call path


# -- 6. what a campaign costs, and what CPU time costs ----------------------------------------


def test_design_estimates_wall_time_from_the_stored_runs(tmp_path):
    spec = load_spec(
        write_spec(
            tmp_path,
            """
            [app]
            name = "prog"
            [run]
            command = "./prog {n}"
            repetitions = 1
            timeout = 3600
            [parameters]
            p = [1]
            n = [1, 2, 4, 8]
            """,
        )
    )
    # runs take n seconds: a power law the points not yet measured follow exactly
    with CampaignStore.create_or_open(spec.store, name="prog", parameters=PARAMETERS) as store:
        for n in (1, 2):
            record(store, n, seconds=float(n))
    text = describe_plan(spec, plan_from_spec(spec))
    assert (
        "time: about 15 s wall time one run at a time (from 2 runs stored in prog.sqlite)" in text
    )
    assert "2 runs left: about 12 s" in text


def test_cpu_time_with_unfiltered_instrumentation_is_warned_about(tmp_path, monkeypatch):
    path = instrumented_spec(tmp_path, "./fill {n} .")
    spec = load_spec(path)
    monkeypatch.setenv("PERFCAST_CPU_TIME", "1")
    monkeypatch.delenv("PERFCAST_FILTER", raising=False)
    assert cpu_time_overhead_warning(spec) == CPU_TIME_OVERHEAD
    assert "taint filter" in CPU_TIME_OVERHEAD and "4x" in CPU_TIME_OVERHEAD
    monkeypatch.setenv("PERFCAST_FILTER", "profile.json")
    assert cpu_time_overhead_warning(spec) is None
    monkeypatch.delenv("PERFCAST_FILTER")
    monkeypatch.setenv("PERFCAST_CPU_TIME", "0")
    assert cpu_time_overhead_warning(spec) is None
