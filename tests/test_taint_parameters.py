"""How parameters reach the taint analysis (issue 25): one parameter passed in several
places of the run command, values read with sscanf/strtol/strtod/atoi, and parameters whose
label is lost on the way, which the summary and ``perfcast design`` must not take for
parameters that cost nothing. Every test compiles and runs a real program with
DataFlowSanitizer."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from perfcast import cli
from perfcast.appspec import load_spec
from perfcast.measure.design import plan_from_spec
from perfcast.taint import ArgvParameter, taint_program
from perfcast.taint.campaign import bindings_from_command

pytestmark = pytest.mark.slow

HPCG_LIKE = r"""
#include <mpi.h>
#include <stdio.h>
#include <string.h>
/* HPCG's reading: --nx=16 --ny=16 --nz=16, each value taken with sscanf. */
static const char *flags[3] = {"--nx=", "--ny=", "--nz="};
static volatile double sink;
static void sweep_y(int ny) { for (int j = 0; j < ny; j++) sink += j; }
static void sweep_z(int nz) { for (int k = 0; k < nz; k++) sink -= k; }
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int n[3] = {0, 0, 0};
  for (int i = 1; i < argc; i++)
    for (int f = 0; f < 3; f++)
      if (strncmp(argv[i], flags[f], strlen(flags[f])) == 0)
        if (sscanf(argv[i] + strlen(flags[f]), "%d", &n[f]) != 1) n[f] = 0;
  int nx = n[0], ny = n[1], nz = n[2];
  for (int i = 0; i < nx; i++) sink += i;
  sweep_y(ny);
  sweep_z(nz);
  MPI_Finalize();
  return 0;
}
"""

RUN = "./grid --nx={n} --ny={n} --nz={n}"
SPEC = f"""\
[app]
name = "grid"

[build]
sources = ["grid.c"]
compiler = "mpicc"
output = "grid"

[run]
command = "{RUN}"
repetitions = 1
timeout = 60

[parameters]
p = [1, 2]
n = [8, 16, 24]
"""


def test_one_parameter_in_several_flags_labels_every_one(tmp_path: Path) -> None:
    """HPCG's run command passes n three times and the program reads them with sscanf: all
    three copies carry n (only --nx did), so the loops over ny and nz depend on n too."""
    found = bindings_from_command(RUN, ["n", "p"])
    assert [b.describe() for b in found.parameters] == ["flag:--nx", "flag:--ny", "flag:--nz"]
    (tmp_path / "grid.c").write_text(textwrap.dedent(HPCG_LIKE))
    (tmp_path / "perfcast.toml").write_text(SPEC)
    assert cli.main(["taint", str(tmp_path / "perfcast.toml")]) == 0
    profile = json.loads((tmp_path / "grid.taint.json").read_text())
    assert profile["parameters"]["n"]["source"] == "flag:--nx, flag:--ny, flag:--nz"
    assert {f: profile["functions"][f]["dependency"] for f in ("sweep_y", "sweep_z")} == {
        "sweep_y": "n",
        "sweep_z": "n",
    }
    assert profile["functions"]["main"]["exclusive_dependency"] == "n"
    assert profile["unused_parameters"] == []


READERS = r"""
#include <stdio.h>
#include <stdlib.h>
static volatile double sink;
static void by_atoi(int n) { for (int i = 0; i < n; i++) sink += i; }
static void by_strtol(long n) { for (long i = 0; i < n; i++) sink += i; }
static void by_strtod(double n) { for (double x = 0; x < n; x += 1) sink += x; }
static void by_sscanf(int n) { for (int i = 0; i < n; i++) sink += i; }
static void by_sscanf_double(double n) { for (double x = 0; x < n; x += 1) sink += x; }
static void by_sscanf_long(long n) { for (long i = 0; i < n; i++) sink += i; }
static void after_scanset(int n) { for (int i = 0; i < n; i++) sink += i; }
int main(int argc, char **argv) {
  double e = 0;
  long f = 0;
  int d = 0, g = 0;
  by_atoi(atoi(argv[1]));
  by_strtol(strtol(argv[2], NULL, 10));
  by_strtod(strtod(argv[3], NULL));
  if (sscanf(argv[4], "%d", &d) == 1) by_sscanf(d);
  if (sscanf(argv[5], "x=%lf,%ld", &e, &f) == 2) {
    by_sscanf_double(e);
    by_sscanf_long(f);
  }
  if (sscanf(argv[6], "%*[a-z]:%d", &g) == 1) after_scanset(g);
  return 0;
}
"""


def test_labels_survive_each_way_of_reading_a_number(tmp_path: Path) -> None:
    """atoi (perfcast's wrapper), strtol/strtod (DataFlowSanitizer's), and sscanf (perfcast's
    wrapper: each conversion gets the labels of the bytes it consumed, so the two values of
    one call keep theirs apart, and suppressed conversions and scansets are skipped)."""
    (tmp_path / "readers.c").write_text(READERS)
    names = ["a", "b", "c", "d", "e", "g"]
    profile = taint_program(
        ["cc", "readers.c", "-o", "readers"],
        "./readers 3 4 5 6 x=7,8 mesh:9",
        [ArgvParameter.parse(f"{name}=argv:{i}") for i, name in enumerate(names, 1)],
        cwd=tmp_path,
    ).to_json()
    assert {
        name: profile["functions"][name]["dependency"]
        for name in (
            "by_atoi",
            "by_strtol",
            "by_strtod",
            "by_sscanf",
            "by_sscanf_double",
            "by_sscanf_long",
            "after_scanset",
        )
    } == {
        "by_atoi": "a",
        "by_strtol": "b",
        "by_strtod": "c",
        "by_sscanf": "d",
        "by_sscanf_double": "e",
        "by_sscanf_long": "e",
        "after_scanset": "g",
    }
    assert profile["unused_parameters"] == []


LOST = r"""
#include <mpi.h>
#include <charconv>
#include <cstdlib>
#include <cstring>
static volatile double sink;
static void work(int n, int m) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++) sink += i * j;
}
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  double x = 0; /* libstdc++.so parses it: DataFlowSanitizer cannot follow */
  std::from_chars(argv[1], argv[1] + std::strlen(argv[1]), x);
  int n = (int)x;
  int m = std::atoi(argv[2]);
  work(n, m);
  double local = sink, total = 0;
  MPI_Allreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
"""

LOST_SPEC = """\
[app]
name = "lost"

[build]
sources = ["lost.cc"]
compiler = "mpicxx"
output = "lost"

[run]
command = "./lost {n} {m}"
repetitions = 1
timeout = 60

[parameters]
p = [1, 2]
n = [8, 16]
m = [4, 8]
"""


def test_a_parameter_whose_label_is_lost_is_kept_by_the_design(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """n is parsed by std::from_chars, inside libstdc++, so its label reaches nothing.
    That is no evidence that n costs nothing: the summary says the label was probably lost
    and where it was last seen (no more "leave it out of the model"), and the design keeps
    every value of n, joined to every product, instead of holding it at the base value."""
    (tmp_path / "lost.cc").write_text(LOST)
    (tmp_path / "perfcast.toml").write_text(LOST_SPEC)
    assert cli.main(["taint", str(tmp_path / "perfcast.toml")]) == 0
    profile = json.loads((tmp_path / "lost.taint.json").read_text())
    assert profile["unused_parameters"] == ["n"]
    (warning,) = [w for w in profile["warnings"] if w.startswith("parameter n ")]
    assert "its label was probably lost, last seen on the command line (argv:1)" in warning
    assert "perfcast design keeps n at all its values" in warning
    assert "leave it out" not in capsys.readouterr().out

    plan = plan_from_spec(load_spec(tmp_path / "perfcast.toml"))
    assert {plan.point(i)["n"] for i in range(len(plan.points))} == {8, 16}
    assert len(plan.points) == 6  # of 8: the (p, m) plane is the one a model cannot need
    (note,) = plan.notes
    assert "kept at all their values and joined to every product: n reached no loop" in note
    assert cli.main(["design", str(tmp_path / "perfcast.toml")]) == 0
    assert "n reached no loop, branch or MPI call in the taint run" in capsys.readouterr().out
