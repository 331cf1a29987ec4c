"""Shared pieces of the campaign tests: a small MPI program with chosen failures."""

import shutil
import subprocess
import textwrap
from pathlib import Path

PROGRAM = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* usage: prog N [CRASH] [HANG]: sleeps N * 10 ms (rank 0 prints N); N == CRASH aborts on
 * rank 0, N == HANG sleeps for 100 s. */
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int n = atoi(argv[1]), rank;
    int crash = argc > 2 ? atoi(argv[2]) : -1, hang = argc > 3 ? atoi(argv[3]) : -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (n == crash && rank == 0)
        abort();
    usleep(n == hang ? 100000000 : n * 10000);
    if (rank == 0)
        printf("n=%d\n", n);
    MPI_Finalize();
    return 0;
}
"""


def build_program(directory: Path) -> Path:
    source = directory / "prog.c"
    source.write_text(PROGRAM)
    subprocess.run(["mpicc", str(source), "-o", str(directory / "prog")], check=True)
    return directory / "prog"


def write_spec(directory: Path, body: str) -> Path:
    path = directory / "perfcast.toml"
    path.write_text(textwrap.dedent(body))
    return path


def live_processes_of(directory: Path) -> list[int]:
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if text[text.rfind(")") + 2] != "Z" and str(directory).encode() in cmdline:
            pids.append(int(stat.parent.name))
    return pids


STENCIL = Path(__file__).parents[1] / "examples" / "stencil"

STENCIL_WITH_COUNTERS = """\
[app]
name = "stencil"
[build]
command = "make -s CC='{{perfcast_build}} mpicc'"
counters = true
[run]
command = "./jacobi {{size}} 20"
repetitions = {repetitions}
timeout = 60
[parameters]
p = [1, 2, 3]
size = [64, 128, 192, 256]
[metrics]
collect = ["time", "basic_blocks", "mpi_bytes_sent", "mpi_bytes_received"]
"""


def copy_stencil(directory: Path) -> Path:
    """The stencil example copied to ``directory/stencil``, without build products."""
    app = directory / "stencil"
    shutil.copytree(STENCIL, app, ignore=shutil.ignore_patterns("*.o", "jacobi"))
    return app


def stencil_with_counters(directory: Path, repetitions: int = 1) -> Path:
    """The stencil example copied to ``directory/stencil`` (:func:`copy_stencil`) with a
    perfcast.toml that builds it with effort counters: 3 rank counts x 4 sizes; its path."""
    app = copy_stencil(directory)
    return write_spec(app, STENCIL_WITH_COUNTERS.format(repetitions=repetitions))
