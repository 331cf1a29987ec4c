"""Hostile campaign stores, profile directories and filter files: only a PerfcastError
naming the input may escape, nothing hangs, and no run is dropped unsaid.

The seeds are real: one small campaign (the stencil example built with ``perfcast build
--counters``, 2 ranks at 5 sizes, one repetition) is measured once per module; its SQLite store
is the store seed, the per-rank profiles its 2-rank run left are the profile seed, and a
filter of that program's functions is the filter seed.

Stores are mutated at file level (bytes flipped, the file cut short, a page zeroed) and
at row level through sqlite3 on a copy: a column of a random row of ``campaign``,
``runs`` or ``profiles`` replaced by a hostile value (check constraints off, as a file
written by anything else may have), a profile blob edited line by line, rows deleted or
duplicated where the schema allows. Each case runs ``read_experiment``, a small
``PMNFModeler`` fit and the oversubscription note ``perfcast model`` reads from the
store. A store that reads without a warning must give every run that is not marked failed.

Profile directories lose, gain, rename and corrupt ``rank-<r>.pcprof`` files (also as a
named pipe or a link to ``/dev/zero``); filter files get token, line and byte edits.

CI runs a few hundred cases per kind (about 30 s in all); ``-m long`` runs ten times as
many. ``python3 tests/test_fuzz_stores.py N`` runs N cases of each kind and counts
distinct crash sites (innermost perfcast file:line and exception type) instead of failing.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from campaign_helpers import copy_stencil, write_spec
from fuzz_helpers import crash_site, time_limit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import perfcast
from perfcast.cli import main
from perfcast.errors import InputError, PerfcastError
from perfcast.experiment import read_experiment
from perfcast.experiment.experiment import REPETITION
from perfcast.measure.build import read_filter
from perfcast.measure.oversubscription import oversubscription
from perfcast.measure.profiles import read_profiles
from perfcast.measure.reader import LostProfilesWarning
from perfcast.modeling.modeler import PMNFModeler

CASE_SECONDS = 10.0
"""A case slower than this counts as a hang: reading these small inputs takes milliseconds."""
CI_CASES = 250
"""Cases per input kind in CI (about 30 s for the file on one core, the campaign included)."""
LONG_CASES = 10 * CI_CASES
CENSUS_MEMORY_BYTES = 6 * 2**30
"""Address space of a census run: far above what reading these inputs needs."""
MODELER = PMNFModeler(candidates=2, combinations=4, refine_structures=1)
SRC = Path(perfcast.__file__).resolve().parent

needs_toolchain = pytest.mark.skipif(
    shutil.which("mpicc") is None or shutil.which("clang-16") is None,
    reason="needs Open MPI and clang-16",
)

SEED_SPEC = """\
[app]
name = "stencil"
[build]
command = "make -s CC='{perfcast_build} mpicc'"
counters = true
[run]
command = "./jacobi {size} 2"
repetitions = 1
timeout = 60
[parameters]
p = [2]
size = [8, 16, 24, 32, 40]
"""


class Seeds:
    """The seed files (a class of its own: hypothesis would print a dataclass's bytes)."""

    def __init__(self, store: bytes, profiles: dict[str, bytes], filter_text: bytes):
        self.store = store
        self.profiles = profiles
        """The profiles of one 2-rank run, by file name."""
        self.filter_text = filter_text
        """A filter of the program's functions (taint profiles as filters: test_fuzz_config)."""

    def __repr__(self) -> str:
        return f"Seeds(store of {len(self.store)} bytes, {sorted(self.profiles)})"


def measure_seeds(directory: Path) -> Seeds:
    """Measure the seed campaign in ``directory`` (a few seconds) and take its files."""
    app = copy_stencil(directory)
    spec = write_spec(app, SEED_SPEC)
    with contextlib.redirect_stdout(sys.stderr):
        assert main(["measure", str(spec)]) == 0
    store = app / "stencil.sqlite"
    with contextlib.closing(sqlite3.connect(store)) as db:
        (run_id,) = db.execute("SELECT id FROM runs WHERE ranks = 2 ORDER BY id").fetchone()
        profiles = {
            name: bytes(data)
            for name, data in db.execute(
                "SELECT name, data FROM profiles WHERE run_id = ?", (run_id,)
            )
        }
    assert sorted(profiles) == ["rank-0.pcprof", "rank-1.pcprof"]
    functions = subprocess.run(
        ["nm", "--defined-only", str(app / "jacobi")], capture_output=True, text=True, check=True
    ).stdout
    names = sorted({line.split()[-1] for line in functions.splitlines() if " T " in line})[:12]
    filter_text = "# functions of the stencil\n" + "\n".join(names) + "\nexchange_halo(int)\n"
    return Seeds(store=store.read_bytes(), profiles=profiles, filter_text=filter_text.encode())


# -- running one case under a time limit -------------------------------------------------------


def refused_naming(call: Callable[[], Any], named: Path) -> tuple[bool, Any]:
    """(False, result) of ``call()``, or (True, None) if it raised a PerfcastError, which
    must name ``named``."""
    try:
        with time_limit(CASE_SECONDS):
            return False, call()
    except PerfcastError as error:
        assert str(named) in str(error), f"the error does not name {named}: {error}"
        assert "\n" not in str(error), f"an error over several lines: {error!r}"
        return True, None


# -- hostile values ---------------------------------------------------------------------------

HUGE = "9" * 5000
HOSTILE_SQL_VALUES: tuple[Any, ...] = (
    None,
    0,
    -1,
    2**63 - 1,
    -(2**63),
    1.5,
    float("inf"),
    float("-inf"),
    1e308,
    "",
    "text",
    HUGE,
    "null",
    "[]",
    "{}",
    '"p"',
    "[1]",
    '["p"]',
    '["p", "p"]',
    '["p", "size", "q"]',
    "[null]",
    '["time"]',
    '["nonexistent"]',
    '{"p": 1}',
    '{"p": 2, "size": 16}',
    '{"p": true, "size": 16}',
    '{"p": "2", "size": 16}',
    '{"p": [2], "size": 16}',
    '{"p": NaN, "size": 16}',
    '{"p": Infinity, "size": 16}',
    '{"p": 1e999, "size": 16}',
    '{"p": ' + "1" + "0" * 400 + ', "size": 16}',
    '{"p": null, "size": 16}',
    '{"p": -2, "size": 16}',
    '{"p": 2, "size": 16, "extra": 1}',
    "[" * 5000 + "]" * 5000,
    "ok",
    "failed",
    "OK",
    b"",
    b"\xff\xfe\x00garbage",
    b"perfcast-profile 2\n",
)
"""What a column may hold in a store written by something else (SQLite keeps any type in
any column)."""

HOSTILE_TOKENS = (
    "-1",
    "0",
    "18446744073709551615",
    "18446744073709551616",
    HUGE,
    "1e400",
    "nan",
    "1.5",
    "+3",
    "1_000",
    "\u0663",
    "",
    "x",
    "->",
    "node",
    "end",
)
"""Replacements of one field of a profile line."""


@st.composite
def profile_text(draw: st.DrawFn, data: bytes) -> bytes:
    """A profile with 1-3 token, line or byte edits."""
    lines = data.decode(errors="surrogateescape").split("\n")
    for _ in range(draw(st.integers(1, 3))):
        number = draw(st.integers(0, len(lines) - 1))
        edit = draw(st.sampled_from(["token", "token", "token", "delete", "duplicate", "bytes"]))
        if edit == "token":
            tokens = lines[number].split(" ")
            tokens[draw(st.integers(0, len(tokens) - 1))] = draw(
                st.one_of(st.sampled_from(HOSTILE_TOKENS), st.text(max_size=6))
            )
            lines[number] = " ".join(tokens)
        elif edit == "delete":
            del lines[number]
        elif edit == "duplicate":
            lines.insert(number, lines[number])
        else:
            return draw(byte_edits("\n".join(lines).encode(errors="surrogateescape")))
        if not lines:
            break
    return "\n".join(lines).encode(errors="surrogateescape")


@st.composite
def byte_edits(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` cut short, or with up to 8 bytes flipped, inserted or deleted."""
    edited = bytearray(data)
    operation = draw(st.sampled_from(["flip", "insert", "truncate", "delete"]))
    if operation == "truncate":
        return bytes(edited[: draw(st.integers(0, len(edited)))])
    for _ in range(draw(st.integers(1, 8))):
        position = draw(st.integers(0, max(len(edited) - 1, 0)))
        if operation == "flip" and edited:
            edited[position] = draw(st.integers(0, 255))
        elif operation == "insert":
            edited[position:position] = draw(st.binary(min_size=1, max_size=8))
        elif edited:
            del edited[position : position + draw(st.integers(1, 16))]
    return bytes(edited)


# -- stores -----------------------------------------------------------------------------------

STORE_COLUMNS = {
    "campaign": ("schema_version", "name", "spec_text", "parameters", "metrics", "created"),
    "runs": ("key", "point", "repetition", "status", "seconds", "attempts", "ranks", "cores"),
    "profiles": ("run_id", "name", "data"),
}
"""Columns a row-level edit replaces, per table (the ones perfcast reads)."""


EDIT_PROFILE = "edit the profile"
"""A statement that is none: the n-th profile blob is replaced by an edited one."""
COUNT = "max(1, (SELECT COUNT(*) FROM {}))"
"""Rows of a table, for picking the n-th row modulo the count."""


@dataclass(frozen=True)
class StoreEdit:
    """What to do to a copy of the seed store: ``apply`` it with sqlite3, or replace the
    file's bytes."""

    description: str
    statements: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    file_edit: Callable[[bytes], bytes] | None = None


@st.composite
def store_edits(draw: st.DrawFn, seed: bytes) -> StoreEdit:
    kind = draw(st.sampled_from(["file", "column", "column", "profile", "delete", "duplicate"]))
    if kind == "file":
        operation = draw(st.sampled_from(["flip", "truncate", "zero-page"]))
        page_size = int.from_bytes(seed[16:18], "big") or 65536
        pages = len(seed) // page_size
        if operation == "zero-page":
            page = draw(st.integers(0, pages - 1))
            start = page * page_size
            zeroed = seed[:start] + bytes(page_size) + seed[start + page_size :]
            return StoreEdit(f"page {page} zeroed", file_edit=lambda _: zeroed)
        edited = draw(byte_edits(seed)) if operation == "flip" else None
        if operation == "truncate":
            cut = draw(
                st.one_of(
                    st.integers(0, len(seed)), st.integers(0, pages).map(lambda p: p * page_size)
                )
            )
            edited = seed[:cut]
        assert edited is not None
        result = edited
        return StoreEdit(f"file {operation}", file_edit=lambda _: result)
    table = draw(st.sampled_from(sorted(STORE_COLUMNS)))
    row = draw(st.integers(1, 12))
    if kind == "column":
        column = draw(st.sampled_from(STORE_COLUMNS[table]))
        value = draw(st.sampled_from(HOSTILE_SQL_VALUES))
        statement = (
            f"UPDATE {table} SET {column} = ? "
            f"WHERE rowid = (SELECT rowid FROM {table} LIMIT 1 OFFSET ? % {COUNT.format(table)})"
        )
        return StoreEdit(
            f"{table}.{column} of row {row} = {value!r:.60}", ((statement, (value, row)),)
        )
    if kind == "profile":
        profile = draw(st.integers(0, 11))
        return StoreEdit(
            f"profile {profile} edited",
            ((EDIT_PROFILE, (profile,)),),
        )
    if kind == "delete":
        statement = (
            f"DELETE FROM {table} WHERE rowid = "
            f"(SELECT rowid FROM {table} LIMIT 1 OFFSET ? % {COUNT.format(table)})"
        )
        return StoreEdit(f"{table} row {row} deleted", ((statement, (row,)),))
    # duplicates where the schema allows: a run under another key, a profile under another name
    if table == "runs":
        statement = (
            "INSERT INTO runs (key, point, repetition, command, status, seconds, attempts, ranks,"
            " cores) SELECT key || ?, point, repetition, command, status, seconds, attempts,"
            " ranks, cores FROM runs LIMIT 1 OFFSET ? % (SELECT COUNT(*) FROM runs)"
        )
        suffix = draw(st.sampled_from(["#copy", " ", ""]))
    else:
        statement = (
            "INSERT INTO profiles SELECT run_id, name || ?, data FROM profiles "
            "LIMIT 1 OFFSET ? % (SELECT COUNT(*) FROM profiles)"
        )
        suffix = draw(st.sampled_from([".copy", "x", ""]))
    return StoreEdit(f"{table} row {row} duplicated", ((statement, (suffix, row)),))


def apply_store_edit(
    path: Path, seed: bytes, edit: StoreEdit, profile_edit: Callable[[bytes], bytes]
) -> None:
    path.write_bytes(seed)
    if edit.file_edit is not None:
        path.write_bytes(edit.file_edit(seed))
        return
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.execute("PRAGMA ignore_check_constraints=ON")
        for statement, arguments in edit.statements:
            try:
                if statement == EDIT_PROFILE:
                    rows = db.execute("SELECT rowid, data FROM profiles").fetchall()
                    rowid, data = rows[arguments[0] % len(rows)]
                    db.execute(
                        "UPDATE profiles SET data = ? WHERE rowid = ?",
                        (profile_edit(bytes(data)), rowid),
                    )
                else:
                    db.execute(statement, arguments)
            except sqlite3.IntegrityError:  # NOT NULL, UNIQUE: the schema refuses this edit
                pass
        db.execute("PRAGMA journal_mode=DELETE")


def runs_not_failed(path: Path) -> int | None:
    """Runs of a store that are not marked failed (None: the file does not read)."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            return db.execute("SELECT COUNT(*) FROM runs WHERE status IS NOT 'failed'").fetchone()[
                0
            ]
    except (sqlite3.DatabaseError, UnicodeDecodeError):  # SQLite's message quotes the damage
        return None


def runs_read(experiment: Any) -> int:
    """Runs an experiment holds: per point, the most repetitions any measurement has."""
    data = experiment.data
    if not len(data):
        return 0
    if not experiment.parameters:
        return int(data[REPETITION].max()) + 1
    return int((data.groupby(experiment.parameters)[REPETITION].max() + 1).sum())


def store_case(
    directory: Path, seed: bytes, edit: StoreEdit, profile_edit: Callable[[bytes], bytes]
) -> str:
    path = directory / "campaign.sqlite"
    for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        leftover.unlink(missing_ok=True)
    apply_store_edit(path, seed, edit, profile_edit)
    expected = runs_not_failed(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        refused, experiment = refused_naming(lambda: read_experiment(path), path)
        if refused:
            return "refused"
        refused_naming(lambda: oversubscription(path), path)
    silent = not [w for w in caught if str(path) in str(w.message)]
    if expected is not None and silent:
        assert runs_read(experiment) == expected, (
            f"{expected} runs are not marked failed, but {runs_read(experiment)} were read "
            "and no warning named the store"
        )
    try:
        with time_limit(CASE_SECONDS):
            MODELER.fit(experiment)
    except PerfcastError:
        return "read, fit refused"
    return "read and fitted"


# -- profile directories ----------------------------------------------------------------------


@st.composite
def profile_directories(draw: st.DrawFn, seeds: dict[str, bytes]) -> dict[str, bytes | str]:
    """File name -> contents, or ``"fifo"``/``"zero"``/``"dir"`` for a named pipe, a link to
    /dev/zero or a directory under that name."""
    files: dict[str, bytes | str] = dict(seeds)
    for _ in range(draw(st.integers(1, 2))):
        name = draw(st.sampled_from(sorted(files)))
        edit = draw(
            st.sampled_from(["content"] * 4 + ["delete", "rename", "copy", "special", "partial"])
        )
        content = files[name]
        if edit == "content" and isinstance(content, bytes):
            files[name] = draw(profile_text(content))
        elif edit == "delete" and len(files) > 1:
            del files[name]
        elif edit in ("rename", "copy"):
            target = draw(
                st.sampled_from(
                    [
                        "rank-2.pcprof",
                        "rank-01.pcprof",
                        "rank--1.pcprof",
                        "rank-99999999999999999999.pcprof",
                        "rank-1.pcprof.bak",
                    ]
                )
            )
            files[target] = files.pop(name) if edit == "rename" else content
        elif edit == "special":
            files[name] = draw(st.sampled_from(["fifo", "zero", "dir"]))
        elif edit == "partial":
            files[f".{name}.123.tmp"] = content
    return files


def profile_case(directory: Path, files: dict[str, bytes | str]) -> str:
    run = directory / "run"
    if run.exists():
        shutil.rmtree(run)
    run.mkdir()
    for name, content in files.items():
        path = run / name
        if content == "fifo":
            os.mkfifo(path)
        elif content == "zero":
            path.symlink_to("/dev/zero")
        elif content == "dir":
            path.mkdir()
        else:
            assert isinstance(content, bytes)
            path.write_bytes(content)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        refused, _ = refused_naming(lambda: read_profiles(run, {"p": 2}), run)
    return "refused" if refused else "read"


# -- filter files -----------------------------------------------------------------------------


@st.composite
def filter_files(draw: st.DrawFn, text: bytes) -> bytes:
    if draw(st.booleans()):
        return draw(byte_edits(text))
    lines = text.decode().split("\n")
    for _ in range(draw(st.integers(1, 3))):
        number = draw(st.integers(0, len(lines) - 1))
        lines[number] = draw(
            st.one_of(
                st.text(max_size=12),
                st.sampled_from(
                    [
                        "#",
                        " # x",
                        "{",
                        "a;b",
                        "f\x00",
                        "ns::f<int>(int const*) const",
                        "x" * 10_000,
                        "\\",
                        '"',
                        "\u2028",
                    ]
                ),
            )
        )
    return "\n".join(lines).encode(errors="surrogatepass")


def filter_case(directory: Path, data: bytes) -> str:
    path = directory / "filter.txt"
    path.write_bytes(data)
    refused, _ = refused_naming(lambda: read_filter(path), path)
    return "refused" if refused else "read"


# -- the properties ---------------------------------------------------------------------------

FUZZ = settings(
    max_examples=CI_CASES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
LONG = settings(FUZZ, max_examples=LONG_CASES, derandomize=False)

SEEDS_DIRECTORY = tempfile.TemporaryDirectory(prefix="perfcast-fuzz-stores-")


@pytest.fixture(scope="module")
def seeds() -> Seeds:
    if shutil.which("mpicc") is None or shutil.which("clang-16") is None:
        pytest.skip("needs Open MPI and clang-16 for the seed campaign")
    return measure_seeds(Path(SEEDS_DIRECTORY.name))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-stores")


def fuzz_stores(seeds: Seeds, scratch: Path, data: st.DataObject) -> None:
    edit = data.draw(store_edits(seeds.store))
    store_case(scratch, seeds.store, edit, lambda blob: data.draw(profile_text(blob)))


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_hostile_stores_give_errors_naming_the_store(seeds, scratch, data):
    fuzz_stores(seeds, scratch, data)


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_hostile_profile_directories_give_errors_naming_them(seeds, scratch, data):
    profile_case(scratch, data.draw(profile_directories(seeds.profiles)))


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_hostile_filter_files_give_errors_naming_them(seeds, scratch, data):
    filter_case(scratch, data.draw(filter_files(seeds.filter_text)))


@pytest.mark.long
@LONG
@given(data=st.data())
def test_hostile_stores_long(seeds, scratch, data):
    fuzz_stores(seeds, scratch, data)


@pytest.mark.long
@LONG
@given(data=st.data())
def test_hostile_profile_directories_long(seeds, scratch, data):
    profile_case(scratch, data.draw(profile_directories(seeds.profiles)))


@pytest.mark.long
@LONG
@given(data=st.data())
def test_hostile_filter_files_long(seeds, scratch, data):
    filter_case(scratch, data.draw(filter_files(seeds.filter_text)))


@pytest.mark.slow
def test_seeds_read_whole(seeds, scratch):
    """The unmutated seeds read, so the fuzz cases start from inputs that work."""
    assert store_case(scratch, seeds.store, StoreEdit("none"), lambda b: b) == "read and fitted"
    assert profile_case(scratch, dict(seeds.profiles)) == "read"
    assert filter_case(scratch, seeds.filter_text) == "read"


# -- the crash sites the fuzzing found, one regression test each ------------------------------


def edited_store(seeds: Seeds, directory: Path, *statements: str) -> Path:
    """A copy of the seed store after ``statements`` (check constraints off)."""
    path = directory / "edited.sqlite"
    path.write_bytes(seeds.store)
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.execute("PRAGMA ignore_check_constraints=ON")
        for statement in statements:
            db.execute(statement)
    return path


def store_refusal(path: Path, match: str) -> InputError:
    with time_limit(CASE_SECONDS), pytest.raises(InputError, match=match) as error:
        read_experiment(path)
    assert error.value.path is not None and str(path) in str(error.value)
    assert "\n" not in str(error.value)
    return error.value


FIRST_RUN = "(SELECT min(id) FROM runs)"
FIRST_PROFILE = "(SELECT min(rowid) FROM profiles)"


@pytest.mark.slow
def test_a_profile_blob_that_is_not_utf8_names_the_run_profile_and_line(seeds, tmp_path):
    path = edited_store(
        seeds,
        tmp_path,
        # "perfcast-profile 2\nrank \xe90\n"
        "UPDATE profiles SET data = X'70657266636173742d70726f66696c6520320a72616e6b20e9300a'"
        f" WHERE rowid = {FIRST_PROFILE}",
    )
    error = store_refusal(path, r"not a perfcast profile: not UTF-8 text \(byte 0xe9\)")
    assert "[p=2,size=8#0]/rank-0.pcprof" in str(error) and error.line == 2


@pytest.mark.slow
@pytest.mark.parametrize("value", ["'text'", "12", "2.5", "9223372036854775807"])
def test_profiles_stored_as_other_types_are_refused(seeds, tmp_path, value):
    path = edited_store(
        seeds, tmp_path, f"UPDATE profiles SET data = {value} WHERE rowid = {FIRST_PROFILE}"
    )
    store_refusal(
        path, r"the profile 'rank-0.pcprof' of run 'p=2,size=8#0' is .* not the file's bytes"
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("column", "value", "words"),
    [
        (
            "point",
            "'not json'",
            r"the point of run 'p=2,size=8#0' is 'not json', not a JSON object",
        ),
        ("point", '\'{"p": 2, "size": NaN}\'', "not a JSON object of numbers"),
        ("point", '\'{"p": 2, "size": 1' + "0" * 400 + "}'", "a JSON object of numbers"),
        ("seconds", "1" + "0" * 400, "the seconds of run .* not a duration"),
        (
            "point",
            "'{\"p\": 2}'",
            r"run 'p=2,size=8#0' has no value of the campaign's parameter\(s\) size",
        ),
        ("ranks", "'two'", r"the ranks of run 'p=2,size=8#0' is 'two', not a positive count"),
        ("seconds", "'long'", "the seconds of run .* not a duration"),
    ],
)
def test_hostile_run_rows_are_refused_naming_the_run(seeds, tmp_path, column, value, words):
    path = edited_store(
        seeds, tmp_path, f"UPDATE runs SET {column} = {value} WHERE id = {FIRST_RUN}"
    )
    store_refusal(path, words)
    if column != "point":  # the campaign's parameters matter to the experiment only
        with time_limit(CASE_SECONDS), pytest.raises(InputError, match=words):
            oversubscription(path)  # what perfcast model reads beside the experiment


@pytest.mark.slow
@pytest.mark.parametrize(
    ("column", "value", "words"),
    [
        ("parameters", "'p, size'", r"the campaign's parameters is 'p, size', not a JSON list"),
        ("parameters", '\'["p", "p"]\'', "not a JSON list of names"),
        ("name", "x'00ff'", "the campaign's name is 2 bytes of binary data, not text"),
        ("metrics", "7", "the campaign's metrics is '7', not a JSON list of names"),
    ],
)
def test_hostile_campaign_rows_are_refused(seeds, tmp_path, column, value, words):
    store_refusal(edited_store(seeds, tmp_path, f"UPDATE campaign SET {column} = {value}"), words)


@pytest.mark.slow
def test_a_run_whose_profiles_are_gone_is_left_out_with_a_warning_naming_it(seeds, tmp_path):
    path = edited_store(seeds, tmp_path, f"DELETE FROM profiles WHERE run_id = {FIRST_RUN}")
    with (
        time_limit(CASE_SECONDS),
        pytest.warns(LostProfilesWarning, match=r"1 run\(s\) have no profiles .*'p=2,size=8#0'"),
    ):
        experiment = read_experiment(path)
    assert runs_read(experiment) == 4 and "stencil" not in experiment.callpaths


@pytest.mark.slow
def test_a_status_other_than_ok_or_failed_is_damage_not_a_run_left_out(seeds, tmp_path):
    path = edited_store(seeds, tmp_path, f"UPDATE runs SET status = 'OK' WHERE id = {FIRST_RUN}")
    store_refusal(path, r"the store is damaged \(CHECK constraint failed in runs\)")


@pytest.mark.slow
def test_text_that_is_not_utf8_is_a_bad_value_not_a_crash(seeds, tmp_path):
    path = edited_store(
        seeds, tmp_path, f"UPDATE runs SET point = CAST(X'7bff7d' AS TEXT) WHERE id = {FIRST_RUN}"
    )
    store_refusal(path, "the point of run 'p=2,size=8#0' is '{\ufffd}', not a JSON object")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("old", "new"),
    [(b"tablerunsruns", b"table\x80unsruns"), (b"CHECK (status IN", b"CHECK (\x80tatus IN")],
)
def test_damage_sqlite_quotes_in_its_message_is_damage_not_a_decoding_crash(
    seeds, tmp_path, old, new
):
    """SQLite's message quotes the damaged schema's bytes; Python decodes it strictly and
    raises UnicodeDecodeError in place of SQLite's error."""
    path = tmp_path / "schema.sqlite"
    path.write_bytes(seeds.store.replace(old, new, 1))
    store_refusal(path, "the store is damaged .*malformed database schema")


@pytest.mark.slow
def test_damage_sqlite_reports_over_several_lines_is_one_line(seeds, tmp_path):
    page_size = int.from_bytes(seeds.store[16:18], "big")
    messages = []
    for page in range(1, len(seeds.store) // page_size):
        path = tmp_path / f"zeroed-{page}.sqlite"
        start = page * page_size
        path.write_bytes(seeds.store[:start] + bytes(page_size) + seeds.store[start + page_size :])
        with time_limit(CASE_SECONDS), pytest.raises(PerfcastError) as error:
            read_experiment(path)
        assert str(path) in str(error.value)
        messages.append(str(error.value))
    assert any("*** in database main *** Page" in m for m in messages)
    assert not [m for m in messages if "\n" in m]


def profile_directory(directory: Path, files: dict[str, bytes]) -> Path:
    run = directory / "run"
    run.mkdir()
    for name, content in files.items():
        (run / name).write_bytes(content)
    return run


def profile_refusal(run: Path, match: str) -> InputError:
    with time_limit(CASE_SECONDS), pytest.raises(InputError, match=match) as error:
        read_profiles(run)
    assert str(run) in str(error.value)
    return error.value


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fifo", "zero", "dir"])
def test_profiles_that_are_not_regular_files_are_refused_without_blocking(seeds, tmp_path, kind):
    run = profile_directory(tmp_path, {"rank-0.pcprof": seeds.profiles["rank-0.pcprof"]})
    special = run / "rank-1.pcprof"
    {"fifo": os.mkfifo, "zero": lambda p: p.symlink_to("/dev/zero"), "dir": os.mkdir}[kind](special)
    error = profile_refusal(run, "is not a regular file")
    assert error.path == special


@pytest.mark.slow
@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        ("\nthreads 1\n", "\nthreads -1\n", r"expected counts \(integers >= 0\), got '-1'"),
        ("\nthreads 1\n", "\nthreads \u0661\n", "expected counts"),
        (
            "\noutside 0\n",
            "\noutside 1" + "0" * 400 + "\n",
            "larger than the runtime's 64-bit counters",
        ),
    ],
)
def test_counts_the_runtime_cannot_write_are_refused_with_the_line(
    seeds, tmp_path, old, new, words
):
    text = seeds.profiles["rank-0.pcprof"].decode()
    if old not in text:
        pytest.skip(f"the seed profile has no {old.strip()!r} line")
    edited = text.replace(old, new, 1)
    line = text[: text.index(old)].count("\n") + 2
    run = profile_directory(tmp_path, {**seeds.profiles, "rank-0.pcprof": edited.encode()})
    error = profile_refusal(run, words)
    assert error.line == line and error.path == run / "rank-0.pcprof"


@pytest.mark.slow
def test_a_copied_rank_profile_is_refused_not_counted_twice(seeds, tmp_path):
    run = profile_directory(
        tmp_path, {**seeds.profiles, "rank-2.pcprof": seeds.profiles["rank-1.pcprof"]}
    )
    profile_refusal(run, "rank-1.pcprof and rank-2.pcprof are both rank 1")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("ranks", "words"),
    [
        (
            "1000000000000000000",
            r"rank\(s\) 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 \.\.\. of 1000000000000000000 wrote no",
        ),
        ("1", "rank-1.pcprof is rank 1 of a run of 1 rank"),
        ("0", "of a run of 0 rank"),
    ],
)
def test_rank_counts_are_checked_without_listing_every_rank(seeds, tmp_path, ranks, words):
    edited = {
        name: data.replace(b"\nranks 2\n", f"\nranks {ranks}\n".encode())
        for name, data in seeds.profiles.items()
    }
    profile_refusal(profile_directory(tmp_path, edited), words)


def test_a_filter_that_is_a_named_pipe_is_refused_without_blocking(tmp_path):
    pipe = tmp_path / "filter.txt"
    os.mkfifo(pipe)
    with (
        time_limit(CASE_SECONDS),
        pytest.raises(InputError, match=r"is not a regular file .*, so not a filter file") as error,
    ):
        read_filter(pipe)
    assert error.value.path == pipe


def test_a_filter_that_is_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "filter.txt"
    path.write_bytes(b"# kernels\nsolve\nna\xefve\n")
    with pytest.raises(InputError, match=r"not UTF-8 text \(byte 0xef\)") as error:
        read_filter(path)
    assert (error.value.path, error.value.line) == (path, 3)


# -- census: count crash sites instead of failing ----------------------------------------------


first_messages: dict[str, str] = {}
"""The first error seen at each crash site (the census prints it)."""


def census(examples: int) -> tuple[Counter[str], Counter[str]]:
    """Run ``examples`` cases of each kind; count outcomes, and cases per distinct crash site."""
    outcomes: Counter[str] = Counter()
    sites: Counter[str] = Counter()
    root = Path(SEEDS_DIRECTORY.name)
    seeds = measure_seeds(root)
    scratch = root / "scratch"
    scratch.mkdir()
    kinds: dict[str, Callable[[st.DataObject], str]] = {
        "store": lambda data: store_case(
            scratch,
            seeds.store,
            data.draw(store_edits(seeds.store)),
            lambda blob: data.draw(profile_text(blob)),
        ),
        "profiles": lambda data: profile_case(
            scratch, data.draw(profile_directories(seeds.profiles))
        ),
        "filter": lambda data: filter_case(scratch, data.draw(filter_files(seeds.filter_text))),
    }

    def probe_of(kind: str, run: Callable[[st.DataObject], str]) -> Callable[[], None]:
        @settings(FUZZ, max_examples=examples)
        @given(data=st.data())
        def probe(data: st.DataObject) -> None:
            try:
                outcomes[f"{kind}: {run(data)}"] += 1
            except Exception as error:  # counting, not judging: every kind is a site
                outcomes[f"{kind}: crashed"] += 1
                sites[crash_site(error)] += 1
                first_messages.setdefault(crash_site(error), f"{kind}: {error!s:.300}")

        return probe

    for kind, run in kinds.items():
        probe_of(kind, run)()
    return outcomes, sites


if __name__ == "__main__":
    # a case that reads without end raises MemoryError here (a crash site) instead of
    # waking the kernel's OOM killer
    resource.setrlimit(resource.RLIMIT_AS, (CENSUS_MEMORY_BYTES, CENSUS_MEMORY_BYTES))
    seen, found = census(int(sys.argv[1]) if len(sys.argv) > 1 else CI_CASES)
    print(f"{seen.total()} cases: " + ", ".join(f"{n} {o}" for o, n in sorted(seen.items())))
    print(f"{sum(found.values())} crashes at {len(found)} distinct sites")
    for site, count in found.most_common():
        print(f"{count:6d}  {site}\n        {first_messages[site]!r}")
