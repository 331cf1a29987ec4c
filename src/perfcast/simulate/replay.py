"""Replaying a time-independent trace on a SimGrid platform with Debian's ``smpirun``.

A trace is SimGrid's time-independent format: an index file listing one action file per
rank (``0 send 1 0 1000000 6``, ``0 compute 2.5e6``, ...), which ``smpirun -replay``
simulates on a platform and ends with the simulated time of the whole run. SMPI's default
bandwidth and latency factors (a piecewise correction fitted to some real network) are set
to 1, so the platform's numbers mean what they say; a calibrated platform carries its own.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from perfcast.errors import InputError, PerfcastError
from perfcast.simulate.platform import NEUTRAL_FACTORS, PlatformSpec

SMPIRUN = "smpirun"
SIMULATED_TIME = re.compile(r"Simulation time ([0-9.eE+-]+)")


def find_smpirun() -> str:
    """The ``smpirun`` of Debian's SimGrid, or an error saying how to install it."""
    found = shutil.which(SMPIRUN)
    if found is None:
        raise PerfcastError(
            "smpirun not found: install SimGrid (apt-get install libsimgrid-dev; "
            "bash scripts/setup.sh does)"
        )
    return found


def replay(index: Path, platform: PlatformSpec, ranks: int, *, timeout: float = 600) -> float:
    """Simulated seconds of the trace ``index`` (one action file per rank) on
    ``platform``, ranks placed core by core, node by node."""
    if not index.is_file():
        raise InputError("no such trace index; write one with a traced run", path=index)
    hosts = platform.hosts()
    if ranks > len(hosts):
        raise InputError(
            f"the trace has {ranks} ranks, more than the {len(hosts)} cores of platform "
            f"{platform.name!r} ({platform.nodes} node(s) x {platform.cores} core(s)): "
            "describe a larger platform",
            path=index,
        )
    smpirun = find_smpirun()
    with tempfile.TemporaryDirectory(prefix="perfcast-replay-") as work:
        xml, hostfile = Path(work) / "platform.xml", Path(work) / "hosts"
        xml.write_text(platform.to_xml())
        hostfile.write_text("\n".join(hosts[:ranks]) + "\n")
        command = [smpirun, "-np", str(ranks), "-platform", str(xml), "-hostfile", str(hostfile)]
        command += ["-replay", str(index.resolve()), *NEUTRAL_FACTORS]
        try:
            done = subprocess.run(
                command,
                cwd=index.resolve().parent,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            raise PerfcastError(f"the replay of {index} ran past {timeout:g} s") from None
    found = SIMULATED_TIME.findall(done.stdout + done.stderr)
    if done.returncode != 0 or not found:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise InputError(
            f"SimGrid could not replay the trace (exit {done.returncode}): " + " | ".join(tail),
            path=index,
        )
    return float(found[-1])
