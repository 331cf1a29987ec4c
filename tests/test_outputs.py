"""Output files (perfcast.outputs): written whole or not at all, never over an input, a
campaign store or a file of another kind; write failures are one-line messages.

The disk-full case uses a real full file system (a 64 KiB tmpfs, mounted when the test runs
as root where the sandbox allows it) and, everywhere, a real write limit (RLIMIT_FSIZE in a
child process: the kernel fails the write with EFBIG just as a full disk fails it with
ENOSPC)."""

import errno
import json
import os
import resource
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from perfcast.cli import main
from perfcast.errors import InputError
from perfcast.outputs import OutputKind, json_with, write_output
from perfcast.taint.filter import HEADER, write_filter
from perfcast.taint.profile_model import FORMAT, TaintProfile

EXAMPLE = Path(__file__).parents[1] / "examples" / "data" / "relearn.txt"
TEXT_EXAMPLE = "PARAMETER p\nPOINTS ( 1 ) ( 2 ) ( 4 )\nREGION main\nDATA 1\nDATA 2\nDATA 4\n"
MODELS = OutputKind("a perfcast model file", json_with('"perfcast_models"'))


def leftovers(directory: Path) -> list[str]:
    """Temporary files a write left behind."""
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def make_sqlite(path: Path) -> bytes:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, seconds REAL)")
        db.execute("INSERT INTO runs (seconds) VALUES (1.5)")
    db.close()
    return path.read_bytes()


def test_missing_directory_is_a_message_and_writes_nothing(tmp_path, capsys):
    target = tmp_path / "no" / "such" / "models.json"
    assert main(["model", str(EXAMPLE), "-o", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"{target}: cannot write: directory {target.parent} does not exist" in err
    assert f"mkdir -p {target.parent}" in err
    assert not (tmp_path / "no").exists()


def test_model_never_overwrites_its_input_or_a_store(tmp_path, capsys):
    data = tmp_path / "data.txt"
    data.write_text(EXAMPLE.read_text())
    assert main(["model", str(data), "-o", str(data)]) == 2
    assert "data.txt: is an input of this command" in capsys.readouterr().err
    assert data.read_text() == EXAMPLE.read_text()

    store = tmp_path / "campaign.sqlite"
    before = make_sqlite(store)
    alias = tmp_path / "alias.sqlite"
    os.link(store, alias)  # the same file under another name is still the input
    assert main(["model", str(store), "-o", str(alias)]) == 2
    assert "alias.sqlite: is an input of this command" in capsys.readouterr().err
    assert main(["model", str(data), "-o", str(store)]) == 2
    err = capsys.readouterr().err
    assert "campaign.sqlite: is a SQLite database" in err and "another file" in err
    assert store.read_bytes() == before
    assert leftovers(tmp_path) == []


def test_only_an_earlier_file_of_the_same_kind_is_replaced(tmp_path, capsys):
    notes = tmp_path / "notes.json"
    notes.write_text('{"my": "notes"}\n')
    assert main(["model", str(EXAMPLE), "-o", str(notes)]) == 2
    assert "notes.json: exists and is not a perfcast model file" in capsys.readouterr().err
    assert notes.read_text() == '{"my": "notes"}\n'

    models = tmp_path / "models.json"
    models.write_text("")  # empty: nothing to lose
    models.chmod(0o640)
    assert main(["model", str(EXAMPLE), "-o", str(models), "--callpath", "Initialization"]) == 0
    first = json.loads(models.read_text())
    assert [m["callpath"] for m in first["models"]] == ["Initialization"]
    assert stat.S_IMODE(models.stat().st_mode) == 0o640  # an earlier file keeps its mode
    assert main(["model", str(EXAMPLE), "-o", str(models), "--callpath", "main()"]) == 0
    assert [m["callpath"] for m in json.loads(models.read_text())["models"]] == ["main()"]
    assert main(["model", str(EXAMPLE), "-o", os.devnull, "--callpath", "main()"]) == 0
    assert main(["model", str(EXAMPLE), "-o", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert leftovers(tmp_path) == []


def test_export_refuses_its_input_and_other_kinds(tmp_path, capsys):
    data = tmp_path / "data.txt"
    data.write_text(TEXT_EXAMPLE)
    assert main(["export", str(data), "-o", str(data)]) == 2
    assert "data.txt: is an input of this command" in capsys.readouterr().err
    models = tmp_path / "models.json"
    models.write_text('{\n  "perfcast_models": 1,\n  "parameters": ["p"],\n  "models": []\n}\n')
    assert main(["export", str(data), "-o", str(models)]) == 2
    assert "models.json: exists and is not an Extra-P JSON file" in capsys.readouterr().err
    exported = tmp_path / "exported.json"
    for _ in range(2):  # the second run replaces the first one's file
        assert main(["export", str(data), "-o", str(exported)]) == 0
    assert json.loads(exported.read_text())["parameters"] == ["p"]
    again = tmp_path / "again.txt"
    again.write_text("my own notes\n")
    assert main(["export", str(data), "-o", str(again)]) == 2
    assert "again.txt: exists and is not an Extra-P text file" in capsys.readouterr().err


def test_init_force_never_replaces_a_store(tmp_path, capsys):
    store = tmp_path / "perfcast.toml"
    before = make_sqlite(store)
    assert main(["init", str(store), "--force"]) == 2
    assert "is a SQLite database" in capsys.readouterr().err
    assert store.read_bytes() == before
    spec = tmp_path / "other.toml"
    spec.write_text("# my old spec\n")
    assert main(["init", str(spec), "--force"]) == 0
    assert "[parameters]" in spec.read_text()


def test_taint_refuses_a_bad_output_before_running_anything(tmp_path, capsys):
    store = tmp_path / "profile.json"
    make_sqlite(store)
    source = tmp_path / "never_built.c"  # the taint run would fail on it: it must not start
    command = ["taint", "-o", str(store), "--run", "./prog", "--", "clang", str(source)]
    assert main(command) == 2
    assert "profile.json: is a SQLite database" in capsys.readouterr().err


def _limit_file_size():
    resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead


@pytest.mark.slow
def test_write_beyond_the_file_size_limit_leaves_the_old_file(tmp_path):
    models = tmp_path / "models.json"
    old = '{"perfcast_models": 1, "parameters": ["p", "n"], "models": []}\n'
    models.write_text(old)
    done = subprocess.run(
        [sys.executable, "-m", "perfcast", "model", str(EXAMPLE), "-o", str(models)],
        capture_output=True,
        text=True,
        preexec_fn=_limit_file_size,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert f"{models}: cannot write: the file is larger than" in done.stderr
    assert "the existing models.json is unchanged" in done.stderr
    assert models.read_text() == old
    assert leftovers(tmp_path) == []


@pytest.fixture
def tiny_file_system(tmp_path):
    """A real 64 KiB file system, mounted for the test (needs root and a sandbox that lets
    it mount tmpfs)."""
    directory = tmp_path / "tiny"
    directory.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(directory)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", str(directory)], check=True)


def test_full_disk_is_a_message_and_leaves_the_old_file(tiny_file_system, capsys):
    models = tiny_file_system / "models.json"
    old = '{"perfcast_models": 1, "parameters": ["p", "n"], "models": []}\n'
    models.write_text(old)
    filler = tiny_file_system / "filler"
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:  # fill the file system up to its last bytes
        while True:
            os.write(descriptor, b"x" * 512)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(descriptor)
    assert main(["model", str(EXAMPLE), "-o", str(models)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"{models}: cannot write: no space left on its file system" in err
    assert "the existing models.json is unchanged" in err
    assert models.read_text() == old
    assert leftovers(tiny_file_system) == []
    filler.unlink()  # with space again, the same command succeeds
    assert main(["model", str(EXAMPLE), "-o", str(models)]) == 0
    assert len(json.loads(models.read_text())["models"]) == 14


def test_write_output_streams_into_a_pipe_and_follows_links(tmp_path):
    reader, writer = os.pipe()
    fifo = Path(f"/proc/self/fd/{writer}")
    write_output(fifo, '{"perfcast_models": 1}\n', MODELS)
    os.close(writer)
    with os.fdopen(reader) as stream:
        assert stream.read() == '{"perfcast_models": 1}\n'
    real = tmp_path / "real.json"
    real.write_text('{"perfcast_models": 0}\n')
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_output(link, '{"perfcast_models": 1}\n', MODELS)
    assert link.is_symlink() and real.read_text() == '{"perfcast_models": 1}\n'
    with pytest.raises(InputError, match="is an input"):
        write_output(link, "{}", MODELS, inputs=[real])


KERNEL = """\
double tri(int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            s += i * j;
    return s;
}
int main(int argc, char **argv) { return (int)tri(argc * 100); }
"""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("clang-16") is None, reason="needs clang-16")
def test_static_never_replaces_its_source(tmp_path, capsys):
    source = tmp_path / "kernel.c"
    source.write_text(KERNEL)
    binary = tmp_path / "kernel"
    subprocess.run(["clang-16", "-g", "-O2", str(source), "-o", str(binary)], check=True)
    command = ["static", str(source), "--binary", str(binary)]
    assert main([*command, "-o", str(source)]) == 2
    err = capsys.readouterr().err
    assert "kernel.c: exists and is not a model generated by perfcast static" in err
    assert source.read_text() == KERNEL
    notes = tmp_path / "model.json"  # where the summary of -o model.py would go
    notes.write_text('{"mine": 1}\n')
    assert main([*command, "-o", str(tmp_path / "model.py")]) == 2
    assert "model.json: exists and is not a perfcast static summary" in capsys.readouterr().err
    assert not (tmp_path / "model.py").exists()
    notes.unlink()
    for _ in range(2):  # the second run replaces the first one's files
        assert main([*command, "-o", str(tmp_path / "model.py")]) == 0
    assert "tri" in json.loads(notes.read_text())["functions"][0]["name"]


def test_a_filter_file_replaces_only_an_earlier_filter_file(tmp_path):
    """`perfcast taint --filter F` writes through the same guard: a source file named by
    mistake stays as it was, an earlier filter file is replaced."""
    profile = TaintProfile.from_json({"format": FORMAT, "relevant": ["kernel"], "functions": {}})
    source = tmp_path / "app.c"
    source.write_text("int main(void) { return 0; }\n")
    with pytest.raises(InputError, match=r"app\.c"):
        write_filter(profile, source)
    assert source.read_text() == "int main(void) { return 0; }\n"
    filter_file = tmp_path / "functions.txt"
    filter_file.write_text(HEADER + "old\n")
    write_filter(profile, filter_file)
    assert filter_file.read_text().startswith(HEADER) and "old" not in filter_file.read_text()
