"""Replaying a time-independent trace on a SimGrid platform with Debian's ``smpirun``.

A trace is SimGrid's time-independent format: an index file listing one action file per
rank (``0 send 1 0 1000000 6``, ``0 compute 2.5e6``, ...), which ``smpirun -replay``
simulates on a platform. SimGrid itself prints only the simulated time of the whole run;
to say when each rank finished and how much of its time was computing, the replay turns
on SimGrid's own verbose log of the replay engine (``smpi_replay``), which writes every
action it completes with the simulated clock at that moment, and reads it back:
the last action of a rank is when that rank finished, and its ``compute`` actions are the
flops it ran. The log
line's layout is set on the command line (``%.12r`` is the clock with 12 decimals; the
default layout has 6, too coarse for microsecond messages). The log has a price, measured
here: a trace of 300,000 actions replays in 1.0 s without it and in 1.5 s with it, reading
included; a replay's start (about 0.1 s) dominates traces of a few thousand actions.

The platform's SMPI options (:attr:`PlatformFile.smpi_options`) are passed through:
without them SMPI applies bandwidth and latency factors fitted to some other network.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from perfcast.errors import InputError, PerfcastError
from perfcast.simulate.platform import PlatformFile, PlatformSpec, read_platform

SMPIRUN = "smpirun"

ACTION_MARK = "perfcast-action"
"""The first word of every log line the replay asks SimGrid for; other lines (SimGrid's
warnings, the application's own output) are left alone."""

LOG_OPTIONS: tuple[str, ...] = (
    "--log=smpi_replay.thres:verbose",
    # %e is SimGrid's space (smpirun splits its arguments on spaces), %r the simulated clock
    f"--log=smpi_replay.fmt:{ACTION_MARK}%e%.12r%e%m%n",
    "--log=xbt_cfg.thres:warning",
    "--log=smpi_config.thres:warning",
)

_SIMGRID_PREFIX = re.compile(r"^\[[^\]]*\]\s*(?:\S+:\d+: )?")

FAILURE_LINES = 3
"""Lines of SimGrid's output an error message quotes: its CRITICAL lines (the reason:
an unknown action, a deadlock), or else the last ones."""


@dataclass(frozen=True)
class RankReplay:
    """How one rank went in a replay (simulated clock, seconds).

    Attributes:
        finish: when its last action completed.
        flops: the flops of all its ``compute`` actions.
    """

    finish: float
    flops: float


@dataclass(frozen=True)
class Replay:
    """What one replay of a trace on one platform gave.

    Attributes:
        time: simulated seconds of the whole run (when the last rank finished).
        ranks: per rank, how it went.
        hosts: per rank, the host it was placed on.
        wall: seconds the replay itself took on this machine.
    """

    time: float
    ranks: tuple[RankReplay, ...]
    hosts: tuple[str, ...]
    wall: float


def find_smpirun() -> str:
    """The ``smpirun`` of Debian's SimGrid, or an error saying how to install it."""
    found = shutil.which(SMPIRUN)
    if found is None:
        raise PerfcastError(
            "smpirun not found: install SimGrid (apt-get install libsimgrid-dev; "
            "bash scripts/setup.sh does)"
        )
    return found


def replay(
    index: Path,
    platform: PlatformFile | PlatformSpec,
    ranks: int,
    *,
    timeout: float = 600,
    trace: Path | None = None,
) -> Replay:
    """Replay the trace ``index`` (one action file per rank) on ``platform``, rank i on
    the platform's i-th core (document order, core by core, node by node).

    A described platform (:class:`PlatformSpec`) is written out and read back, so both
    kinds go through the same reading of hosts and speeds. Errors about the trace name
    ``trace`` (default ``index``): the index is often a temporary file.
    """
    if not index.is_file():
        raise InputError("no such trace index; write one with a traced run", path=index)
    where = index if trace is None else trace
    if isinstance(platform, PlatformSpec):
        _check_cores(ranks, len(platform.hosts()), platform.name, where)
        with tempfile.TemporaryDirectory(prefix="perfcast-platform-") as work:
            xml = Path(work) / "platform.xml"  # a zone id may be no file name
            xml.write_text(platform.to_xml())
            return _replay_file(index, read_platform(xml), ranks, timeout, where)
    _check_cores(ranks, len(platform.hosts), platform.name, platform.path)
    return _replay_file(index, platform, ranks, timeout, where)


def _check_cores(ranks: int, cores: int, name: str, where: Path) -> None:
    if ranks > cores:
        raise InputError(
            f"the trace has {ranks} ranks, more than the {cores} cores of platform {name!r}: "
            "describe a larger platform (perfcast platform describe --nodes/--cores)",
            path=where,
        )


def _replay_file(
    index: Path, platform: PlatformFile, ranks: int, timeout: float, where: Path
) -> Replay:
    smpirun = find_smpirun()
    hosts = platform.hosts[:ranks]
    with tempfile.TemporaryDirectory(prefix="perfcast-replay-") as work:
        hostfile, log = Path(work) / "hosts", Path(work) / "smpirun.log"
        hostfile.write_text("\n".join(hosts) + "\n")
        command = [smpirun, "-np", str(ranks), "-platform", str(platform.path.resolve())]
        command += ["-hostfile", str(hostfile), "-replay", str(index.resolve())]
        command += [*platform.smpi_options, *LOG_OPTIONS]
        started = time.perf_counter()
        with log.open("w") as output:
            status = _run(command, index.resolve().parent, output, timeout)
        wall = time.perf_counter() - started
        if status is None:
            raise PerfcastError(
                f"{where}: the replay on platform {platform.name!r} ran past {timeout:g} s: "
                "give it longer (--timeout) or replay a shorter trace"
            )
        return _read_log(log, status, ranks, hosts, wall, where, platform.name)


def _run(command: list[str], cwd: Path, output: IO[str], timeout: float) -> int | None:
    """Exit status of ``command`` (None if it ran past ``timeout`` seconds), its output
    into ``output``. ``smpirun`` is a shell script that starts the simulator as a child in
    its own session: on a timeout, Ctrl-C or SIGTERM the whole process group is killed, or
    the simulator would run on (one reached 1.8 GB in a minute after Ctrl-C)."""
    process = subprocess.Popen(
        command, cwd=cwd, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return None
    except BaseException:  # Ctrl-C, SIGTERM (perfcast.cli.Terminated): not one left behind
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise


def _read_log(
    log: Path, status: int, ranks: int, hosts: tuple[str, ...], wall: float, where: Path, name: str
) -> Replay:
    """The replay's result from SimGrid's action log, or an error quoting SimGrid."""
    finish, flops = [0.0] * ranks, [0.0] * ranks
    end: float | None = None
    critical: list[str] = []
    last: deque[str] = deque(maxlen=FAILURE_LINES)
    with log.open(errors="replace") as lines:
        for line in lines:
            # ACTION_MARK, clock, then "RANK ACTION ARGUMENTS... DURATION" or the
            # "Simulation time T" the last rank prints when it ends
            fields = line.split(None, 5)
            if len(fields) < 4 or fields[0] != ACTION_MARK:
                if "CRITICAL" in line:
                    critical.append(line.strip())
                if line.strip():
                    last.append(line.strip())
                continue
            if fields[2] == "Simulation":
                end = float(fields[1])
            elif fields[2].isdigit() and int(fields[2]) < ranks:
                rank = int(fields[2])
                finish[rank] = float(fields[1])
                if fields[3] == "compute":
                    flops[rank] += float(fields[4])
    if status != 0 or end is None:
        quoted = critical[:FAILURE_LINES] or list(last)
        reason = " | ".join(_SIMGRID_PREFIX.sub("", line) for line in quoted) or "no output"
        raise InputError(
            f"SimGrid could not replay the trace on platform {name!r} (exit {status}): {reason}",
            path=where,
        )
    return Replay(
        time=max([end, *finish]),
        ranks=tuple(map(RankReplay, finish, flops)),
        hosts=hosts,
        wall=wall,
    )
