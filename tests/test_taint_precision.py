"""Taint analysis as precise as the code (issue 18): each class of imprecision found against
perf-taint's expected results, reproduced by a small program with its expected
per-function parameter sets. Every test compiles and runs a real program with
DataFlowSanitizer."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from perfcast.taint import ArgvParameter, taint_program

pytestmark = pytest.mark.slow

MPIRUN = "mpirun --allow-run-as-root --oversubscribe"


def loop_parameters(profile: dict, function: str) -> list[tuple[int, list[str]]]:
    return [(loop["line"], loop["params"]) for loop in profile["functions"][function]["loops"]]


REGISTERED = """\
#include <mpi.h>
#include <stdlib.h>
#include "perfcast.h"
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int ranks;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  int n = atoi(argv[1]);
  int cells = n * 2;
  perfcast_register(&ranks, "ranks");
  perfcast_register(&cells, "cells");
  long s = 0;
  for (int i = 0; i < ranks; i++) s += i;
  for (int i = 0; i < cells; i++) s += i;
  for (int i = 0; i < n; i++) s += i;
  MPI_Finalize();
  return s < 0;
}
"""


def test_registering_a_variable_makes_it_that_parameter_instead_of_adding_one(
    tmp_path: Path,
) -> None:
    """Class 2: ``ranks`` comes from MPI_Comm_size (label p) and ``cells`` from the size
    argument; registered, each is its own parameter and nothing else."""
    (tmp_path / "registered.c").write_text(textwrap.dedent(REGISTERED))
    profile = taint_program(
        ["mpicc", "registered.c", "-o", "registered"],
        f"{MPIRUN} -np 2 ./registered 5",
        [ArgvParameter.parse("size=argv:1")],
        cwd=tmp_path,
    ).to_json()
    assert loop_parameters(profile, "main") == [(13, ["ranks"]), (14, ["cells"]), (15, ["size"])]
    assert profile["functions"]["main"]["dependency"] == "cells + ranks + size"
