"""Every build perfcast makes besides the campaign's own lands in a copy of the app directory
perfcast owns (``measure/copies.py``): a make project whose build always writes ``bin/app``
keeps each build kind's program, and the user's tree keeps its own."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest
from campaign_helpers import write_spec

from perfcast.appspec import load_spec
from perfcast.cli import main
from perfcast.errors import PerfcastError
from perfcast.measure.copies import COUNTING, MARKER, SMPI, copy_app, copy_directory
from perfcast.simulate.platform import PlatformSpec

MAIN = r"""
#include <mpi.h>
#include <stdlib.h>
double work(int n);
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    double local = work(atoi(argv[1])), total;
    MPI_Allreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    return total < 0;
}
"""
WORK = r"""
double work(int n)
{
    double sum = 0;
    for (int i = 0; i < n * 1000; ++i)
        sum += i * 0.5;
    return sum;
}
"""
# like HPCG's: objects in obj/, the program always bin/app, whatever CC builds it
MAKEFILE = """\
CC = mpicc
bin/app: obj/main.o obj/work.o
\tmkdir -p bin
\t$(CC) $^ -o $@
obj/%.o: src/%.c
\tmkdir -p obj
\t$(CC) -O2 -c $< -o $@
"""
SPEC = """\
[app]
name = "fixed"
[build]
command = "make -s CC='{perfcast_build} mpicc'"
[run]
command = "./bin/app {n}"
repetitions = 1
timeout = 60
[parameters]
p = [1, 2]
n = 50
"""


def make_project(directory: Path) -> Path:
    app = directory / "fixed"
    (app / "src").mkdir(parents=True)
    (app / "src" / "main.c").write_text(MAIN)
    (app / "src" / "work.c").write_text(WORK)
    (app / "Makefile").write_text(MAKEFILE)
    write_spec(app, SPEC)
    return app


def digests(directory: Path) -> dict[str, str]:
    """Every file below ``directory`` (not below a copy perfcast made) and its SHA-256."""
    found = {}
    for path in sorted(directory.rglob("*")):
        inside_copy = any((parent / MARKER).is_file() for parent in path.parents)
        if path.is_file() and not inside_copy and not (path.parent / MARKER).is_file():
            found[str(path.relative_to(directory))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def symbols(program: Path) -> str:
    return subprocess.run(["nm", str(program)], capture_output=True, text=True).stdout


def test_a_copy_leaves_out_the_fixed_program_objects_and_other_copies(tmp_path):
    app = make_project(tmp_path)
    subprocess.run(["make", "-s"], cwd=app, check=True, capture_output=True)
    spec = load_spec(app / "perfcast.toml")
    counting = copy_app(spec, spec.store, COUNTING)
    assert (counting / MARKER).is_file()
    assert (counting / "src" / "work.c").is_file() and (counting / "Makefile").is_file()
    assert not (counting / "bin" / "app").exists() and not list(counting.glob("obj/*.o"))
    # the virtual cluster's copy holds no copy of the counting copy
    virtual = copy_app(spec, spec.store, SMPI)
    assert virtual == app / "fixed.smpi" and not (virtual / "fixed.counting").exists()
    # the user's own program is where it was
    assert (app / "bin" / "app").is_file()


def test_a_directory_perfcast_did_not_make_is_never_replaced(tmp_path):
    app = make_project(tmp_path)
    spec = load_spec(app / "perfcast.toml")
    mine = copy_directory(spec.store, COUNTING)
    mine.mkdir()
    (mine / "notes.txt").write_text("the user's")
    with pytest.raises(PerfcastError, match="perfcast did not make it"):
        copy_app(spec, spec.store, COUNTING)
    assert (mine / "notes.txt").read_text() == "the user's"


@pytest.mark.slow
def test_light_and_counting_builds_of_a_fixed_output_make_project_both_remain(tmp_path, capsys):
    app = make_project(tmp_path)
    before = digests(app)
    assert main(["measure", str(app / "perfcast.toml")]) == 0
    capsys.readouterr()
    light, counting = app / "bin" / "app", app / "fixed.counting" / "bin" / "app"
    assert "__start___sancov_guards" not in symbols(light)
    assert "__start___sancov_guards" in symbols(counting)
    assert light.read_bytes() != counting.read_bytes()
    # the user's files are as they were; the light build and the stores are all it added
    after = digests(app)
    assert {name: after[name] for name in before} == before
    added = sorted(set(after) - set(before))
    assert [name for name in added if not name.startswith("fixed.")] == [
        "bin/app",
        "obj/main.o",
        "obj/work.o",
    ]


needs_simgrid = pytest.mark.skipif(
    shutil.which("smpirun") is None or shutil.which("smpicc") is None,
    reason="SimGrid (smpirun, smpicc) is not installed",
)


@pytest.mark.slow
@needs_simgrid
def test_a_virtual_campaign_builds_beside_the_users_program_not_over_it(tmp_path, capsys):
    app = make_project(tmp_path)
    # the user's own build: make would find it up to date in the app directory
    subprocess.run(["make", "-s"], cwd=app, check=True, capture_output=True)
    before = digests(app)
    platform = tmp_path / "cluster.xml"
    platform.write_text(PlatformSpec(name="two", nodes=2).to_xml())
    argv = ["measure", str(app / "perfcast.toml"), "--backend", "smpi", "--platform", str(platform)]
    assert main([*argv, "--store", str(app / "virtual.sqlite")]) == 0
    err = capsys.readouterr().err
    # the copy goes beside the spec's own store, whatever --store names
    copy = copy_directory(load_spec(app / "perfcast.toml").store, SMPI)
    assert f"built and run in {copy}" in err
    assert digests(app) == {**before, **_stores(app, "virtual")}
    # the SMPI build is a shared object smpirun loads, the user's is still the executable
    simulated = copy / "bin" / "app"
    assert (
        "libsimgrid"
        in subprocess.run(["ldd", str(simulated)], capture_output=True, text=True).stdout
    )
    assert simulated.read_bytes() != (app / "bin" / "app").read_bytes()
    # --no-build runs the copy again; the user's executable never goes to smpirun
    assert main([*argv, "--store", str(app / "virtual.sqlite"), "--resume", "--no-build"]) == 0


def _stores(app: Path, name: str) -> dict[str, str]:
    """The digests of the store files a campaign ``name`` left in ``app``."""
    return {key: value for key, value in digests(app).items() if key.startswith(f"{name}.")}
