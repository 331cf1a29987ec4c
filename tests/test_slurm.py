"""A campaign through a real single-node Slurm: munged, slurmctld and slurmd started as
root with a private slurm.conf (loopback addresses, free ports, state in a temporary
directory), then stopped. Skipped, with the reason, only where Slurm cannot start."""

import contextlib
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from campaign_helpers import build_program, write_spec

from perfcast.appspec import load_spec
from perfcast.cli import main
from perfcast.errors import InputError
from perfcast.experiment import read_experiment
from perfcast.measure.campaign import measure
from perfcast.measure.slurm import SlurmBackend
from perfcast.measure.store import CampaignStore

pytestmark = pytest.mark.slow  # every test starts a private Slurm cluster

DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol")
START_TIMEOUT = 30.0

SLURM_CONF = """\
ClusterName=perfcasttest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/munge.sock
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
NodeName={host} NodeAddr=127.0.0.1 CPUs=5 State=UNKNOWN
PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run(command, **kwargs):
    return subprocess.run(command, capture_output=True, text=True, timeout=30, **kwargs)


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """Environment variables that point Slurm clients at a private one-node cluster."""
    missing = [tool for tool in DAEMONS if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"Slurm cannot start: {', '.join(missing)} not installed (slurm-wlm munge)")
    if os.geteuid() != 0:
        pytest.skip("Slurm cannot start: its daemons need root here")
    root = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "spool", "munge"):
        (root / sub).mkdir()
    (root / "munge").chmod(0o700)
    key = root / "munge" / "munge.key"
    run(["mungekey", "--create", f"--keyfile={key}"]).check_returncode()
    key.chmod(0o400)
    munge = run(
        [
            "munged",
            "--force",
            f"--key-file={key}",
            f"--socket={root}/munge/munge.sock",
            f"--pid-file={root}/munge/munged.pid",
            f"--log-file={root}/munge/munged.log",
            f"--seed-file={root}/munge/seed",
        ]
    )
    if munge.returncode != 0:
        pytest.skip(f"Slurm cannot start: munged failed: {munge.stderr.strip()}")
    host = socket.gethostname().split(".")[0]
    conf = root / "slurm.conf"
    conf.write_text(
        SLURM_CONF.format(host=host, root=root, ctld_port=free_port(), slurmd_port=free_port())
    )
    env = dict(os.environ, SLURM_CONF=str(conf))
    try:
        for daemon in ("slurmctld", "slurmd"):
            started = run([daemon, "-f", str(conf)], env=env)
            if started.returncode != 0:
                pytest.skip(f"Slurm cannot start: {daemon} failed: {started.stderr.strip()}")
        deadline = time.monotonic() + START_TIMEOUT
        state = ""
        while time.monotonic() < deadline:
            state = run(["sinfo", "--noheader", "--format=%t"], env=env).stdout.strip()
            if state.startswith(("idle", "mix", "alloc")):
                break
            time.sleep(0.5)
        else:
            log = (root / "slurmctld.log").read_text()[-2000:]
            pytest.skip(f"Slurm cannot start: the node stays '{state}'; slurmctld log:\n{log}")
        yield env
    finally:
        run(["scontrol", "shutdown"], env=env)
        run(["munged", "--stop", f"--socket={root}/munge/munge.sock"])
        # The daemons stay as zombies: this sandbox's PID 1 does not reap them.


@pytest.mark.parametrize("mode", ["array", "allocation"])
def test_campaign_through_slurm(slurm, tmp_path, monkeypatch, capsys, mode):
    for name, value in slurm.items():
        monkeypatch.setenv(name, value)
    build_program(tmp_path)
    path = write_spec(
        tmp_path,
        f"""
        [app]
        name = "onslurm"
        [run]
        command = "./prog {{n}} 3"
        repetitions = 1
        retries = 1
        timeout = 30
        [parameters]
        p = [1, 2, 4]
        n = [1, 2, 3]
        [slurm]
        mode = "{mode}"
        """,
    )
    assert main(["measure", str(path), "--backend", "slurm"]) == 1  # n=3 crashes
    out, err = capsys.readouterr()
    assert "6 runs ok, 3 failed" in out
    assert "more ranks than" not in err  # p=4 on this machine, but a core per task in Slurm
    store = tmp_path / "onslurm.sqlite"
    with CampaignStore.open(store) as opened:
        runs = {run.key: run for run in opened.runs()}
        jobs = {run.key: run for run in opened.runs("ok")}
        assert opened.inflight() == []
        assert len(opened.attempts()) == 3  # every crash got its retry
    assert len(runs) == 9
    assert "signal 6 (Aborted)" in (runs["p=4,n=3#0"].reason or "")
    assert runs["p=4,n=3#0"].attempts == 2
    assert set(jobs) == {f"p={p},n={n}#0" for p in (1, 2, 4) for n in (1, 2)}
    assert all(run.ranks == run.cores == run.point["p"] for run in jobs.values())
    experiment = read_experiment(store)
    assert experiment.parameters == ["p", "n"]
    assert len(experiment.data) == 6
    # the runs really went through Slurm: their job ids are stored
    with sqlite3.connect(store) as db:
        ids = [job for (job,) in db.execute("SELECT job FROM runs")]
    assert all(ids) and (mode == "allocation") == all("_" not in i for i in ids)
    # scratch files: gone for stored successes, kept for failures
    scratch = tmp_path / "onslurm.sqlite.runs"
    assert not (scratch / "p=1_n=1_0").exists()
    assert (scratch / "p=4_n=3_0" / "stderr").is_file()


def test_killed_campaign_reattaches_to_its_slurm_jobs(slurm, tmp_path):
    """Runs keep going on the cluster after perfcast dies; --resume collects them by job id
    instead of submitting them again, and every run ends in the store once."""
    build_program(tmp_path)
    path = write_spec(
        tmp_path,
        """
        [app]
        name = "killed"
        [run]
        command = "./prog {n}"
        repetitions = 1
        timeout = 60
        [parameters]
        p = [1]
        n = [80, 90, 100, 110]
        [slurm]
        max_parallel = 1
        """,
    )
    store = tmp_path / "killed.sqlite"
    command = [sys.executable, "-m", "perfcast", "measure", str(path), "--backend", "slurm"]
    env = dict(os.environ, **slurm)
    first = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + START_TIMEOUT
    inflight: list = []
    while time.monotonic() < deadline:
        assert first.poll() is None, "the campaign ended before it could be killed"
        if store.exists():
            # the store may exist before its tables do (being created): look again later
            with (
                contextlib.suppress(sqlite3.OperationalError, InputError),
                CampaignStore.open(store) as s,
            ):
                if len(s.runs("ok")) >= 1 and len(inflight := s.inflight()) >= 2:
                    break
        time.sleep(0.1)
    first.send_signal(signal.SIGKILL)
    first.wait()
    with CampaignStore.open(store) as opened:
        inflight = opened.inflight()
        done_before = len(opened.runs("ok"))
    assert inflight and done_before < 4
    submitted = {entry.key: entry.handle["job"] for entry in inflight}

    resumed = subprocess.run(
        [*command, "--resume"], env=env, capture_output=True, text=True, timeout=120
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "4 runs ok, 0 failed" in resumed.stdout
    with CampaignStore.open(store) as opened:
        runs = opened.runs()
        assert opened.inflight() == []
    assert sorted(run.key for run in runs) == sorted(f"p=1,n={n}#0" for n in (80, 90, 100, 110))
    with sqlite3.connect(store) as db:
        jobs = dict(db.execute("SELECT key, job FROM runs"))
    assert {key: jobs[key] for key in submitted} == submitted  # reattached, not resubmitted


def test_noise_study_measures_through_slurm(slurm, tmp_path):
    """The noise study's cluster mode, run as its README says: every generated campaign
    carries the [slurm] table, its runs go through sbatch, and the study analyses what the
    cluster measured."""
    if shutil.which("mpicxx") is None or shutil.which("clang-16") is None:
        pytest.skip("needs Open MPI and clang-16")
    cluster = tmp_path / "cluster.toml"
    cluster.write_text('[slurm]\npartition = "test"\n')
    cache = tmp_path / "cache"
    benchmark = Path(__file__).resolve().parents[1] / "benchmarks" / "noise_study.py"
    # ranks 2..4: the test point's 5 ranks still fit the node's 5 CPUs
    study = "--programs 1 --kernels 2 --ranks 2,3,4 --sizes 500,1000,1500 --repetitions 1"
    study += f" --injections 1 --seed 5 --backend slurm --slurm {cluster} --cache {cache}"
    done = subprocess.run(
        [sys.executable, str(benchmark), *study.split()],
        env=slurm,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "targets:" in done.stdout  # the report of what the cluster measured
    (directory,) = cache.iterdir()
    assert '[slurm]\npartition = "test"' in (directory / "train.toml").read_text()
    with sqlite3.connect(directory / "train.sqlite") as db:
        jobs = [job for (job,) in db.execute("SELECT job FROM runs WHERE status = 'ok'")]
    assert len(jobs) == 9 and all(jobs)  # every run has its Slurm job id
    with sqlite3.connect(directory / "train-light.sqlite") as db:  # the timing campaign too
        assert db.execute("SELECT COUNT(*) FROM runs WHERE job IS NOT NULL").fetchone()[0] == 9


def test_a_job_slurm_can_never_start_fails_with_the_reason(slurm, tmp_path, monkeypatch):
    """8 ranks on a partition of one 5-CPU node: Slurm keeps the job pending (reason
    PartitionConfig) forever; perfcast cancels it and records why, the 2-rank runs succeed."""
    for name, value in slurm.items():
        monkeypatch.setenv(name, value)
    build_program(tmp_path)
    path = write_spec(
        tmp_path,
        """
        [app]
        name = "toolarge"
        [run]
        command = "./prog {n}"
        repetitions = 1
        timeout = 30
        [parameters]
        p = [2, 8]
        n = [1, 2]
        """,
    )
    spec = load_spec(path)
    backend = SlurmBackend(spec.slurm, tmp_path / "batches", unschedulable_grace=1.0)
    result = measure(spec, backend, build=False)
    assert sorted(run.key for run in result.failed) == ["p=8,n=1#0", "p=8,n=2#0"]
    reason = result.failed[0].reason or ""
    assert "Slurm cannot start it: pending with reason Partition" in reason
    assert "8 tasks on the default partition" in reason
    assert run(["squeue", "--noheader", "--me"], env=slurm).stdout.strip() == ""  # cancelled
    with CampaignStore.open(tmp_path / "toolarge.sqlite") as opened:
        assert len(opened.runs("ok")) == 2


@pytest.mark.slow
def test_until_runs_its_rounds_through_slurm(slurm, tmp_path, monkeypatch, capsys):
    """``measure --until`` on the Slurm backend: each round's suggested runs are Slurm jobs,
    stored with their job ids beside the design's, and the wall-time budget ends the rounds."""
    for name, value in slurm.items():
        monkeypatch.setenv(name, value)
    build_program(tmp_path)
    path = write_spec(
        tmp_path,
        """
        [app]
        name = "until"
        [run]
        command = "./prog {n}"
        repetitions = 2
        timeout = 30
        [parameters]
        p = [1, 2, 3]
        n = [1, 2, 3]
        """,
    )
    argv = ["measure", str(path), "--backend", "slurm", "--until", "width=0.0001"]
    argv += ["--per-round", "2", "--budget", "core-hours=1,wall=45s", "--at", "p=8,n=16"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "round 1: " in captured.err
    assert "stopped: " in captured.out
    with sqlite3.connect(tmp_path / "until.sqlite") as db:
        runs = db.execute("SELECT key, status, backend, job FROM runs").fetchall()
    assert len(runs) > 18  # the design's 18 runs, then the rounds'
    assert all(status == "ok" and backend == "slurm" and job for _, status, backend, job in runs)
