"""Shared pieces of the campaign tests: a small MPI program with chosen failures."""

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
