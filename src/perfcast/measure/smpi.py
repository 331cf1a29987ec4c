"""The SMPI backend: every run on a virtual cluster, simulated by SimGrid's ``smpirun``.

On a machine with a few cores every run above that many ranks measures ranks waiting for a
core; SimGrid SMPI runs all ranks of a program in one process on a simulated platform, each
rank on a core of its own (docs/smpi-backend.md). The campaign builds the program with
``perfcast build --smpi`` and SimGrid's wrapper (``mpicc`` in ``[build]`` becomes
``smpicc``, see :func:`~perfcast.measure.campaign.build_program`) in ``app.smpi/``, a copy
of the app directory (:mod:`~perfcast.measure.copies`: the user's program stays as it is),
and this backend runs each point as::

    smpirun -np P -platform cluster.xml -hostfile <the platform's first P cores>
        --cfg=smpi/host-speed:1Gf <the platform's SMPI factors> ./app ARGS

so every rank writes its profile, on the simulated clock, where a real run's ranks would
(:data:`~perfcast.measure.runner.PROFILE_DIR_VARIABLE`), and the store keeps the run
exactly as it keeps a real one. ``smpi/host-speed`` is ``1Gf``: a platform from
``perfcast platform calibrate`` describes this machine as 1 Gflop/s hosts, so a burst
measured here is charged at its measured length on such a host (and at half on a ``2Gf``
host). Of ``[run] mpirun_args`` (options for ``mpirun``), SimGrid's own ``--cfg=KEY:VALUE``
and ``--log=...`` are passed to ``smpirun`` after perfcast's, so they win (SimGrid keeps the
last value of a key: ``--cfg=smpi/host-speed:2Gf`` halves every burst's speed). Any other
option is refused before anything runs, naming the key: smpirun takes the first word it
does not know for the program (``--bind-to none`` would run a program named ``--bind-to``),
and Open MPI's binding, mapping or ``-x`` mean nothing to one simulator process that
inherits perfcast's environment.

``parallel`` simulations run at once (``--parallel``), at most one per core perfcast may
use. Each is one single-threaded smpirun process, and a rank's compute burst is charged its
thread's CPU time (by SMPI, and by perfcast's clock: docs/smpi-backend.md, section 3), not
the time the process waited for a core, so a simulation beside another is charged what it
computed. A neighbour still shares the caches and memory bandwidth, which CPU time does
count; measured on the stencil (p = 4-64, three sizes, 15 runs per point each way), two at
once stored no call path at any point that differed from one at a time beyond the runs' own
noise (sweep +0.6 %, Allreduce +1.3 % at the median point, against 7 % and 6 % between
campaigns run one at a time; docs/smpi-backend.md, "Simulations side by side"). More
simulations than cores would only take turns on them, gaining nothing, so that is refused.
Whatever ``parallel`` is, a run is stored with a simulated core per rank
(:meth:`SmpiBackend.cores_for`), not with a share of this machine's.

What a stored run ran on: ``backend`` is ``smpi`` (a virtual run), ``job`` names the
platform (``platform <name>``; the store has no column of its own for it), and the stored
command is the ``smpirun`` line with the platform file's path.

The processes are started, timed out, stopped and found again after a crash as the local
backend does (:class:`~perfcast.measure.local.LocalBackend`, which this extends): one
``smpirun`` process (and the program it starts) in a session of its own, marked with a
run token.
"""

from __future__ import annotations

import dataclasses
import shlex
import shutil
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfcast.errors import PerfcastError
from perfcast.measure.local import LocalBackend, available_cores
from perfcast.measure.runner import Job
from perfcast.measure.store import RunRecord
from perfcast.measure.virtual import BACKEND, PLATFORM_JOB

HOST_SPEED = "1Gf"
"""``smpi/host-speed``: this machine's compute speed in the units of a calibrated platform."""
HOSTFILE = "hosts"
"""The host file of a run, in its scratch directory: rank i on the platform's core i."""
SMPIRUN_OPTIONS = ("--cfg=", "--log=")
"""The ``[run] mpirun_args`` passed to smpirun: SimGrid's configuration and logging."""


@dataclass(frozen=True)
class VirtualCluster:
    """The platform a virtual campaign runs on, as plain data (read by the CLI from the
    SimGrid XML, since reading platforms belongs to a layer above measurement)."""

    path: Path
    """The platform file (absolute: runs start in the app's directory)."""
    name: str
    hosts: tuple[str, ...]
    """One host per core, in the order ranks are placed."""
    smpi_options: tuple[str, ...] = ()
    """``--cfg`` options the runs add (the neutral SMPI factors the file does not set)."""


class SmpiBackend(LocalBackend):
    """Runs jobs with ``smpirun`` on a :class:`VirtualCluster`, ``parallel`` at a time."""

    name = BACKEND
    smpi = True

    def __init__(self, cluster: VirtualCluster, *, parallel: int = 1, smpirun: str = "smpirun"):
        if shutil.which(smpirun) is None:
            raise PerfcastError(
                f"{smpirun!r} is not on PATH: --backend smpi runs the campaign under SimGrid "
                "SMPI; install SimGrid (Debian: libsimgrid-dev) or use --backend local"
            )
        cores = available_cores()
        if parallel > cores:
            raise PerfcastError(
                f"--parallel {parallel} with --backend smpi: this machine has {cores} "
                f"core{'s' if cores != 1 else ''} for perfcast, and every simulation runs on "
                "one; more at once would share cores and only take turns (each burst is "
                f"still charged its own CPU time, so nothing is gained): use --parallel {cores} "
                "or less"
            )
        super().__init__(parallel=parallel, mpirun=smpirun)
        self.cluster = cluster
        self._commands: dict[str, str] = {}

    def check_fits(self, ranks: Iterable[int]) -> None:
        """Refuse a plan whose largest rank count exceeds the platform's cores, before any
        run starts: the host file would put two ranks on one simulated core, and the run
        would describe a machine the platform is not."""
        largest = max(ranks, default=0)
        cores = len(self.cluster.hosts)
        if largest > cores:
            raise PerfcastError(
                f"the platform {self.cluster.name} ({self.cluster.path}) has {cores} cores "
                f"but the campaign runs {largest} ranks: describe a larger platform "
                "(perfcast platform describe --nodes ...) or lower [parameters] p"
            )

    def launcher_arguments_problem(self, arguments: Sequence[str]) -> str | None:
        """``[run] mpirun_args`` other than SimGrid's ``--cfg=``/``--log=`` options: smpirun
        would take the first of them for the program."""
        refused = [argument for argument in arguments if not argument.startswith(SMPIRUN_OPTIONS)]
        if not refused:
            return None
        return (
            f"[run] mpirun_args {shlex.join(refused)}: --backend smpi passes only SimGrid's "
            "--cfg=KEY:VALUE and --log=... options to smpirun (smpirun would take the first "
            "other word for the program); Open MPI's options mean nothing in a simulation, "
            "whose ranks share one process and perfcast's environment: remove them for a "
            "virtual campaign"
        )

    def cores_for(self, ranks: int) -> int:
        """Every rank has a simulated core of its own (the host file places rank i on the
        platform's core i)."""
        return ranks

    def submit(self, jobs: Sequence[Job]) -> list[tuple[Job, dict[str, Any]]]:
        """Start the next jobs, after checking that their program (one for all) is one
        smpirun can load."""
        if jobs and jobs[0].argv:
            check_smpi_program(jobs[0].cwd / jobs[0].argv[0])
        return super().submit(jobs)

    def command(self, job: Job) -> list[str]:
        """``smpirun -np P -platform X -hostfile H --cfg=smpi/host-speed:1Gf ... program
        args``, with ``[run] mpirun_args`` (SimGrid's options) after perfcast's own."""
        return [
            self.mpirun, "-np", str(job.ranks), "-platform", str(self.cluster.path),
            "-hostfile", str(job.directory / HOSTFILE), f"--cfg=smpi/host-speed:{HOST_SPEED}",
            *self.cluster.smpi_options, *job.mpirun_args, *job.argv,
        ]  # fmt: skip

    def _prepare(self, job: Job) -> None:
        """The host file: rank i on the platform's core i."""
        hosts = self.cluster.hosts[: job.ranks]
        (job.directory / HOSTFILE).write_text("".join(f"{host}\n" for host in hosts))

    def _start(self, job: Job) -> dict[str, Any]:
        handle = super()._start(job)
        self._commands[job.key] = shlex.join(self.command(job))
        return handle

    def wait(self) -> list[RunRecord]:
        """The finished runs, each with its ``smpirun`` line and its platform."""
        return [
            dataclasses.replace(
                record,
                command=self._commands.pop(record.key, record.command),
                job=f"{PLATFORM_JOB}{self.cluster.name}",
            )
            for record in super().wait()
        ]


PT_INTERP = 3
"""Program header type of the dynamic loader's path: only an executable has one."""
_PROGRAM_HEADERS = struct.Struct("<32xQ14xHH")
"""ELF64 header: where the program headers are, their size and number."""


def check_smpi_program(program: Path) -> None:
    """Refuse an ELF executable before it runs: smpirun loads programs as shared objects,
    and the user's own build for ``mpirun`` (run with ``--no-build``), or one a build in the
    copy left as it was, is an executable that every run would abort on (``dlopen failed``).
    Anything else (a shared object, a script, a missing file) is left to smpirun."""
    try:
        with open(program, "rb") as file:
            header = file.read(64)
            if len(header) < 64 or header[:5] != b"\x7fELF\x02":
                return
            offset, size, count = _PROGRAM_HEADERS.unpack_from(header)
            file.seek(offset)
            table = file.read(size * count)
    except OSError:
        return
    types = [int.from_bytes(table[i : i + 4], "little") for i in range(0, len(table), size)]
    if PT_INTERP in types:
        raise PerfcastError(
            f"{program} is an executable for mpirun, not a program built for SimGrid SMPI "
            "(smpirun loads a shared object built by perfcast build --smpi -- smpicc): leave "
            "out --no-build, so that perfcast builds it for SMPI in a copy of the app "
            "directory; if a build left it, it found the program up to date: remove it there"
        )
