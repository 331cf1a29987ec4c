"""``perfcast init [FILE]``: write a commented starter ``perfcast.toml``."""

from __future__ import annotations

import argparse
from pathlib import Path

from perfcast.appspec import SPEC_NAME
from perfcast.errors import PerfcastError
from perfcast.outputs import OutputKind, check_target, text_file, write_output

SPEC_FILE = OutputKind("a text file such as a perfcast.toml", text_file)
"""With --force any text file is the user's to replace; a campaign store or another
binary file never is."""

STARTER = """\
# perfcast.toml: how to build, run and vary one program for a measurement campaign.
# `perfcast design` prints the runs this file asks for, `perfcast measure` runs them.

[app]
name = "myapp"
directory = "."               # where the build and the runs happen, relative to this file
# store = "myapp.sqlite"      # the campaign store (default: <name>.sqlite next to this file)

[build]                       # compiled through `perfcast build`, which adds the measurement
sources = ["myapp.c"]
compiler = "mpicc"            # mpicc, mpicxx, clang, ...
flags = ["-O2"]
output = "myapp"
# or a build command; {perfcast_build} becomes the `perfcast build ... --` prefix. It runs
# in a shell: this file is code, to be trusted like a Makefile.
# command = "make CC='{perfcast_build} mpicc'"
# counters = true             # also count basic blocks and MPI bytes (effort metrics)
# filter = "functions.txt"    # measure only these functions (e.g. from `perfcast taint`)
# keep_inlined = true         # measure the filter's functions even where -O2 inlines them

[run]
command = "./myapp {size} {iterations}"   # {name} is a parameter; p is the rank count
repetitions = 3
timeout = 120                 # seconds one run may take before it is killed
retries = 1                   # extra attempts for a failed run
# expected_seconds = 2.0      # your guess of one run's duration, for the cost estimate
# mpirun_args = ["--bind-to", "none"]

[parameters]
p = [1, 2, 4]                                  # a list of values
size = { start = 100, stop = 400, step = 100 } # a range: 100 200 300 400
# size = { start = 64, stop = 512, factor = 2 }  # or geometric: 64 128 256 512
iterations = 10                                # one value: fixed, not modeled

[design]
kind = "full"                 # full | lines | cross | sparse
# base = { p = 2, size = 200 }  # lines: the point every line goes through
# extra_points = 1            # sparse: points off the cross

[metrics]
collect = ["time", "visits"]  # metrics to model; [] or none: all that were measured

# [slurm]                     # for --backend slurm
# mode = "array"              # a job array per rank count, or "allocation": one job
# partition = "batch"
# max_parallel = 8
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "init",
        description="Write a commented starter app spec to edit for your program.",
    )
    parser.add_argument("path", nargs="?", type=Path, default=Path(SPEC_NAME))
    parser.add_argument("--force", action="store_true", help="overwrite an existing file")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    path: Path = args.path
    check_target(path, SPEC_FILE)  # a name the file system refuses, a directory, a store
    if path.exists() and not args.force:
        raise PerfcastError(f"{path} exists; pass --force to overwrite it")
    write_output(path, STARTER, SPEC_FILE)
    print(f"wrote {path}; edit it, then run `perfcast design {path}`")
    return 0
