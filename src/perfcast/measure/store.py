"""The campaign store: one SQLite file that holds every run of a measurement campaign.

Why SQLite: a campaign may run for days and die at any moment (a killed login shell, a
node failure, SIGKILL). Each run is written in one transaction the moment it finishes —
its command, parameters, repetition, exit status, the reason it failed, the tails of its
output, timing and the raw per-rank profile files — so a killed campaign loses at most the
runs that were in flight. The file is in WAL mode, so ``perfcast model campaign.sqlite``
can read it while the campaign is still writing.

Identity: a run is its point and repetition (``key``, e.g. ``p=4,size=128#2``), unique in
the ``runs`` table, so resuming can never store a run twice. Failed attempts that were
retried are kept in ``attempts``, so nothing that happened is silently dropped. Runs that
were started but not finished are listed in ``inflight`` with what the backend needs to
find them again (the local backend records a run there before it starts it: a token in
the run's environment and the host, then its session; a Slurm job), so a resumed campaign
can clean up or collect them.

Faults: a writer checks, before it writes anything, that the file is a perfcast store (an
unrelated SQLite file is refused) and takes the lock, so a refused ``perfcast measure``
changes nothing. Opening runs SQLite's ``quick_check``: a damaged file (truncated, a page
overwritten) is reported as such (:class:`DamagedStoreError`); a resumed campaign copies
every run that can be read whole into a fresh store and keeps the damaged file beside it
(:func:`recover_store`). A full disk rolls the transaction back and stops with the file
system named (:class:`DiskFullError`); ``--resume`` continues once there is space.

Tables::

    campaign  (one row)  name, spec path and text, parameters and metrics to collect
              (JSON lists; no metrics: all), created
    runs      key, point (JSON), repetition, command, status ('ok' | 'failed'), exit_code,
              reason, stderr_tail, stdout_tail, started, finished, seconds, attempts,
              backend, job, ranks, cores (NULL: unknown; schema 1 stores did not keep them)
    profiles  run_id -> runs.id, name (e.g. rank-0.pcprof), data (BLOB)
    attempts  failed attempts that were retried: run key, attempt, exit_code, reason,
              stderr_tail, seconds, finished
    inflight  key, attempt, backend, handle (JSON), started
    builds    each build of the program the campaign ran: program, the compiler that built
              it (``measured``), the compiler the user's build command names
              (``user_compiler``), recorded; both as their ``--version`` line (issue 25:
              perfcast measures a clang build, the user may run a gcc one)

Schema versions: 2 added ``runs.ranks`` and ``runs.cores`` (the cores the run's ranks had:
fewer cores than ranks means ranks waited for a core, see
:mod:`~perfcast.measure.oversubscription`). Opening an older store to write to it
(:meth:`CampaignStore.create_or_open`: a resumed campaign) adds the missing columns
(:data:`MIGRATIONS`); its earlier runs keep NULL there, read as unknown. Opening one to read
(:meth:`CampaignStore.open`: ``perfcast model``) leaves the file as it is and reads the
missing columns as unknown, so reading a store never writes it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sqlite3
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfcast.errors import InputError, PerfcastError

SCHEMA_VERSION = 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS campaign (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    schema_version INTEGER NOT NULL,
    name TEXT NOT NULL,
    spec_path TEXT,
    spec_text TEXT,
    parameters TEXT NOT NULL,
    metrics TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    point TEXT NOT NULL,
    repetition INTEGER NOT NULL,
    command TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    exit_code INTEGER,
    reason TEXT,
    stderr_tail TEXT,
    stdout_tail TEXT,
    started REAL,
    finished REAL,
    seconds REAL,
    attempts INTEGER NOT NULL,
    backend TEXT,
    job TEXT,
    ranks INTEGER,
    cores INTEGER
);
CREATE TABLE IF NOT EXISTS profiles (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (run_id, name)
);
CREATE TABLE IF NOT EXISTS attempts (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    command TEXT NOT NULL,
    exit_code INTEGER,
    reason TEXT,
    stderr_tail TEXT,
    seconds REAL,
    finished REAL
);
CREATE TABLE IF NOT EXISTS builds (
    id INTEGER PRIMARY KEY,
    program TEXT NOT NULL,
    measured TEXT NOT NULL,
    user_compiler TEXT NOT NULL,
    recorded REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS inflight (
    key TEXT PRIMARY KEY,
    attempt INTEGER NOT NULL,
    backend TEXT NOT NULL,
    handle TEXT NOT NULL,
    started REAL NOT NULL
);
"""

MIGRATIONS: dict[int, tuple[str, ...]] = {
    2: ("ALTER TABLE runs ADD COLUMN ranks INTEGER", "ALTER TABLE runs ADD COLUMN cores INTEGER"),
}
"""What brings a store of the previous schema version to each version. Only nullable
columns are ever added, so older perfcast versions still read and write a migrated store."""

OK, FAILED = "ok", "failed"

SQLITE_ERRORS = (sqlite3.DatabaseError, UnicodeDecodeError)
"""What reading a damaged file raises: SQLite's errors, and the UnicodeDecodeError Python
raises in their place when SQLite's message quotes the file's bytes (``malformed database
schema (\x80...)``, a ``quick_check`` report of a damaged page)."""


@dataclass
class RunRecord:
    """One finished attempt of a run, as the backends report it and the store keeps it."""

    key: str
    point: Mapping[str, float]
    repetition: int
    command: str
    exit_code: int | None
    reason: str | None
    """Why the run failed (None: it succeeded)."""
    started: float
    finished: float
    attempt: int = 1
    stderr_tail: str = ""
    stdout_tail: str = ""
    backend: str = "local"
    job: str | None = None
    profiles: dict[str, bytes] = field(default_factory=dict)
    ranks: int | None = None
    """MPI ranks the run started."""
    cores: int | None = None
    """Cores the run's ranks had to themselves (None: unknown); see
    :meth:`perfcast.measure.runner.Backend.cores_for`."""

    @property
    def ok(self) -> bool:
        return self.reason is None

    @property
    def seconds(self) -> float:
        return self.finished - self.started


@dataclass(frozen=True)
class StoredRun:
    id: int
    key: str
    point: dict[str, float]
    repetition: int
    command: str
    status: str
    exit_code: int | None
    reason: str | None
    stderr_tail: str
    seconds: float | None
    attempts: int
    ranks: int | None = None
    cores: int | None = None
    """Cores the run's ranks had (None: unknown, e.g. a run stored by schema version 1)."""
    backend: str | None = None
    """The backend that ran it (``local``, ``slurm``, ``smpi``: a virtual cluster)."""
    job: str | None = None
    """The backend's name for it (for ``smpi``: ``platform <name>``)."""


@dataclass(frozen=True)
class InflightRun:
    key: str
    attempt: int
    backend: str
    handle: dict[str, Any]
    started: float


@dataclass(frozen=True)
class BuildRecord:
    """One program a campaign's build wrote, and which compilers were involved."""

    program: str
    measured: str
    """The compiler that built what the runs measured (``--version``'s first line)."""
    user: str
    """The compiler the user's build command runs without perfcast."""


@dataclass(frozen=True)
class CampaignInfo:
    name: str
    parameters: list[str]
    metrics: list[str]
    spec_path: str | None
    spec_text: str | None
    created: float


class CampaignStore:
    """An open campaign store. Use :meth:`create_or_open` to write, :meth:`open` to read."""

    def __init__(self, path: str | Path, connection: sqlite3.Connection):
        self.path = Path(path)
        self._db = connection
        self._lock_file: Any = None
        self.recovery: Recovery | None = None
        """What was recovered from a damaged store when it was opened (None: it was sound)."""
        self._run_columns: set[str] = set()
        """Columns of ``runs`` (an old store opened for reading lacks the newer ones; they
        read as NULL)."""

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path) -> CampaignStore:
        """Open an existing store to read it (never writes the file).

        A damaged file raises :class:`DamagedStoreError` (what is damaged, and that
        ``perfcast measure --resume`` recovers what can be read) instead of failing later,
        half-way through reading, with SQLite's ``database disk image is malformed``.
        """
        path = Path(path)
        if not path.is_file():
            raise InputError("no such campaign store", path=path)
        store = cls(path, _connect(path))
        with _closed_if_opening_fails(store):
            _check_is_store(store._db, path, allow_empty=False)
            _check_integrity(store._db, path)
            _configure(store._db)
            store.info()
            store._read_columns()
        return store

    @classmethod
    def create_or_open(
        cls,
        path: str | Path,
        *,
        name: str,
        parameters: list[str],
        metrics: list[str] | None = None,
        spec_path: str | None = None,
        spec_text: str | None = None,
        recover: bool = False,
    ) -> CampaignStore:
        """Open the store to write it, creating it for a campaign over ``parameters`` if it
        is new; the store is locked (:meth:`lock`) for this process.

        Nothing is written before the lock is held and the file is known to be a sound
        perfcast store (or a new, empty file): a measure refused by the lock, an unrelated
        SQLite file and a damaged store all stay byte for byte as they were. An existing
        store must be over the same parameters: measurements over different parameters
        cannot be combined into one experiment.

        A damaged store raises :class:`DamagedStoreError`, or with ``recover`` is first
        replaced by a fresh one holding every run that can be read (:func:`recover_store`;
        :attr:`recovery` says what was saved).
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        store = cls(path, _connect(path))
        with _closed_if_opening_fails(store):
            try:
                _check_is_store(store._db, path, allow_empty=True)
                damaged: list[str] | None = None
            except DamagedStoreError as exc:  # not even the schema reads
                damaged = exc.problems
            store.lock()
            problems = damaged if damaged is not None else integrity_problems(store._db)
            if problems and not recover:
                raise DamagedStoreError(path, problems)
            if problems:
                store._db.close()
                store.recovery = recover_store(path, problems)
                store._db = _connect(path)
            _configure(store._db)
            with _disk_full_is_an_error(path, "no run was started"):
                store._db.execute("PRAGMA journal_mode=WAL")
                store._initialise(name, parameters, metrics, spec_path, spec_text)
                store._migrate()
        return store

    def _initialise(
        self,
        name: str,
        parameters: list[str],
        metrics: list[str] | None,
        spec_path: str | None,
        spec_text: str | None,
    ) -> None:
        """Create the tables and the campaign row of a new store, or update an existing
        store's spec and metrics (after checking it is over the same parameters)."""
        with self._db:
            self._db.executescript(_SCHEMA)
            row = self._db.execute("SELECT parameters FROM campaign").fetchone()
            if row is None:
                self._db.execute(
                    "INSERT INTO campaign VALUES (1, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        SCHEMA_VERSION,
                        name,
                        spec_path,
                        spec_text,
                        json.dumps(parameters),
                        json.dumps(metrics or []),
                        time.time(),
                    ),
                )
            elif json.loads(row[0]) != parameters:
                raise InputError(
                    f"this store holds a campaign over the parameters {json.loads(row[0])}, "
                    f"but the spec now has {parameters}; measure into a new store "
                    "(app.store or --store)",
                    path=self.path,
                )
            else:
                self._db.execute(
                    "UPDATE campaign SET spec_path = ?, spec_text = ?, metrics = ?",
                    (spec_path, spec_text, json.dumps(metrics or [])),
                )

    def _migrate(self) -> None:
        """Bring a store of an older schema version up to :data:`SCHEMA_VERSION`.

        Only writers migrate (:meth:`create_or_open`); reading a store never writes it. In
        one write transaction that re-reads the version, so two processes opening the same
        old store cannot both add a column.
        """
        if self._schema_version() < SCHEMA_VERSION:
            with self._db:
                self._db.execute("BEGIN IMMEDIATE")
                for version in range(self._schema_version() + 1, SCHEMA_VERSION + 1):
                    for statement in MIGRATIONS.get(version, ()):
                        self._db.execute(statement)
                self._db.execute(
                    "UPDATE campaign SET schema_version = max(schema_version, ?)",
                    (SCHEMA_VERSION,),
                )
        self._read_columns()

    def _read_columns(self) -> None:
        self._run_columns = {row[1] for row in self._db.execute("PRAGMA table_info(runs)")}

    def _schema_version(self) -> int:
        row = self._db.execute("SELECT schema_version FROM campaign").fetchone()
        return int(row[0]) if row else SCHEMA_VERSION

    def lock(self) -> None:
        """Make this process the store's only writer until it exits or closes the store.

        An advisory ``flock`` on ``<store>.lock``: the kernel drops it when the process
        dies, even by SIGKILL, so a killed campaign never leaves a stale lock behind.
        :meth:`create_or_open` takes it before it writes anything; taking it again is a no-op.
        """
        if self._lock_file is not None:
            return
        lock_path = self.path.with_name(self.path.name + ".lock")
        handle = open(lock_path, "a+")  # noqa: SIM115 - held open for the store's lifetime
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            owner = handle.read().strip() or "?"
            handle.close()
            raise PerfcastError(
                f"{self.path}: another perfcast process (pid {owner}) is measuring into this "
                "store; wait for it or stop it first"
            ) from None
        handle.truncate(0)
        handle.write(str(os.getpid()))
        handle.flush()
        self._lock_file = handle

    def close(self) -> None:
        self._db.close()
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    def __enter__(self) -> CampaignStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """One write transaction; a full disk rolls it back and raises :class:`DiskFullError`."""
        with _disk_full_is_an_error(self.path), self._db:
            yield

    def record(self, record: RunRecord) -> None:
        """Store a finished run (success or final failure) with its profiles, atomically.

        A run recorded before (a failure being retried by ``--retry-failed``) is replaced:
        the key stays unique.
        """
        with self._writing():
            old = self._db.execute("SELECT id FROM runs WHERE key = ?", (record.key,)).fetchone()
            if old is not None:
                self._db.execute("DELETE FROM profiles WHERE run_id = ?", (old[0],))
                self._db.execute("DELETE FROM runs WHERE id = ?", (old[0],))
            cursor = self._db.execute(
                "INSERT INTO runs (key, point, repetition, command, status, exit_code, reason, "
                "stderr_tail, stdout_tail, started, finished, seconds, attempts, backend, job, "
                "ranks, cores) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.key,
                    json.dumps(dict(record.point)),
                    record.repetition,
                    record.command,
                    OK if record.ok else FAILED,
                    record.exit_code,
                    record.reason,
                    record.stderr_tail,
                    record.stdout_tail,
                    record.started,
                    record.finished,
                    record.seconds,
                    record.attempt,
                    record.backend,
                    record.job,
                    record.ranks,
                    record.cores,
                ),
            )
            self._db.executemany(
                "INSERT INTO profiles (run_id, name, data) VALUES (?, ?, ?)",
                [(cursor.lastrowid, name, data) for name, data in sorted(record.profiles.items())],
            )
            self._db.execute("DELETE FROM inflight WHERE key = ?", (record.key,))

    def record_attempt(self, record: RunRecord) -> None:
        """Keep a failed attempt that will be retried (and forget it is in flight)."""
        with self._writing():
            self._db.execute(
                "INSERT INTO attempts (key, attempt, command, exit_code, reason, stderr_tail, "
                "seconds, finished) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.key,
                    record.attempt,
                    record.command,
                    record.exit_code,
                    record.reason,
                    record.stderr_tail,
                    record.seconds,
                    record.finished,
                ),
            )
            self._db.execute("DELETE FROM inflight WHERE key = ?", (record.key,))

    def mark_inflight(self, key: str, attempt: int, backend: str, handle: dict[str, Any]) -> None:
        with self._writing():
            self._db.execute(
                "INSERT OR REPLACE INTO inflight VALUES (?, ?, ?, ?, ?)",
                (key, attempt, backend, json.dumps(handle), time.time()),
            )

    def forget_inflight(self, key: str) -> None:
        with self._writing():
            self._db.execute("DELETE FROM inflight WHERE key = ?", (key,))

    # -- reading ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """SQLite's errors while reading (a page ``quick_check`` passed but a query cannot
        decode) as a :class:`DamagedStoreError` naming the store."""
        try:
            yield
        except SQLITE_ERRORS as exc:
            raise DamagedStoreError(self.path, [sqlite_message(exc)]) from None

    def info(self) -> CampaignInfo:
        """The campaign row, checked: every value in it is later used as what it claims to be."""
        with self._reading():
            row = self._db.execute(
                "SELECT name, parameters, metrics, spec_path, spec_text, created FROM campaign"
            ).fetchone()
        if row is None:
            raise sqlite3.DatabaseError("the campaign table is empty")
        name, parameters, metrics, spec_path, spec_text, created = row
        if not isinstance(name, str):
            raise self._bad_value("the campaign's name", name, "text")
        return CampaignInfo(
            name,
            self._names(parameters, "parameters", allow_empty=False),
            self._names(metrics, "metrics", allow_empty=True),
            spec_path if isinstance(spec_path, str) else None,
            spec_text if isinstance(spec_text, str) else None,
            created if isinstance(created, int | float) else float("nan"),
        )

    def _names(self, stored: object, column: str, *, allow_empty: bool) -> list[str]:
        """The campaign's ``parameters`` or ``metrics`` column: a JSON list of distinct names."""
        names = _json_value(stored)
        if not (
            isinstance(names, list)
            and all(isinstance(n, str) and n for n in names)
            and len(set(names)) == len(names)
            and (names or allow_empty)
        ):
            raise self._bad_value(f"the campaign's {column}", stored, "a JSON list of names")
        return names

    def _bad_value(self, what: str, value: object, expected: str) -> InputError:
        return InputError(
            f"{what} is {_shown(value)}, not {expected}: the store was changed by something "
            "other than perfcast; measure the campaign into a fresh store",
            path=self.path,
        )

    def finished_keys(self, status: str | None = None) -> set[str]:
        """Keys of the runs stored (with ``status``, if given)."""
        with self._reading():
            if status is None:
                rows = self._db.execute("SELECT key FROM runs").fetchall()
            else:
                rows = self._db.execute(
                    "SELECT key FROM runs WHERE status = ?", (status,)
                ).fetchall()
        return {key for (key,) in rows}

    def runs(self, status: str | None = None) -> list[StoredRun]:
        newer = ", ".join(
            name if name in self._run_columns else "NULL"
            for name in ("ranks", "cores", "backend", "job")
        )
        query = (
            "SELECT id, key, point, repetition, command, status, exit_code, reason, "
            f"stderr_tail, seconds, attempts, {newer} FROM runs"
        )
        with self._reading():
            rows = self._db.execute(query + " ORDER BY id").fetchall()
        runs = [self._run(r) for r in rows]
        return [run for run in runs if run.status == status] if status else runs

    def _run(self, row: tuple[Any, ...]) -> StoredRun:
        """One row of ``runs``, every value checked to be of the kind perfcast wrote (the
        status is checked by the schema, which ``quick_check`` enforces when it is opened)."""
        key = row[1]
        if not isinstance(key, str):
            raise self._bad_value(f"the key of run number {row[0]}", key, "text")
        run = f"run {key!r}"
        point = _json_value(row[2])
        if not (
            isinstance(point, dict)
            and point
            and all(
                isinstance(v, int | float)
                and not isinstance(v, bool)
                and abs(v) < 1e300  # NaN and infinity too; no float() of a 400-digit int
                for v in point.values()
            )
        ):
            raise self._bad_value(f"the point of {run}", row[2], "a JSON object of numbers")
        for column, value in (("repetition", row[3]), ("attempts", row[10])):
            if not isinstance(value, int) or value < 0:
                raise self._bad_value(f"the {column} of {run}", value, "a count")
        for column, value in (("ranks", row[11]), ("cores", row[12])):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise self._bad_value(f"the {column} of {run}", value, "a positive count")
        seconds = row[9]
        if seconds is not None and (
            not isinstance(seconds, int | float) or not 0 <= seconds < 1e300
        ):
            raise self._bad_value(f"the seconds of {run}", seconds, "a duration")
        return StoredRun(
            id=row[0],
            key=key,
            point={name: float(value) for name, value in point.items()},
            repetition=row[3],
            command=row[4] if isinstance(row[4], str) else str(row[4]),
            status=row[5],
            exit_code=row[6] if isinstance(row[6], int) else None,
            reason=row[7] if isinstance(row[7], str) or row[7] is None else str(row[7]),
            stderr_tail=row[8] if isinstance(row[8], str) else "",
            seconds=seconds,
            attempts=row[10],
            ranks=row[11],
            cores=row[12],
            backend=row[13] if isinstance(row[13], str) else None,
            job=row[14] if isinstance(row[14], str) else None,
        )

    def profiles(self, run_id: int) -> dict[str, bytes]:
        """The per-rank profile files of the run with id ``run_id``, by name."""
        with self._reading():
            rows = self._db.execute(
                "SELECT name, data FROM profiles WHERE run_id = ?", (run_id,)
            ).fetchall()
            for name, data in rows:
                if not isinstance(name, str) or not isinstance(data, bytes):
                    key = self._db.execute("SELECT key FROM runs WHERE id = ?", (run_id,))
                    run = _shown((key.fetchone() or (run_id,))[0])
                    raise self._bad_value(
                        f"the profile {_shown(name)} of run {run}", data, "the file's bytes"
                    )
        return dict(rows)

    def attempts(self) -> list[tuple[str, int, str | None]]:
        """Failed attempts that were retried: (key, attempt, reason)."""
        rows = self._db.execute("SELECT key, attempt, reason FROM attempts ORDER BY id")
        return [(k, a, r) for k, a, r in rows]

    def inflight(self) -> list[InflightRun]:
        rows = self._db.execute("SELECT key, attempt, backend, handle, started FROM inflight")
        return [InflightRun(k, a, b, json.loads(h), s) for k, a, b, h, s in rows]

    def record_builds(self, records: list[BuildRecord]) -> None:
        """Keep what a build of the campaign's program reported (:class:`BuildRecord`)."""
        with self._writing():
            self._db.executemany(
                "INSERT INTO builds (program, measured, user_compiler, recorded) "
                "VALUES (?, ?, ?, ?)",
                [(r.program, r.measured, r.user, time.time()) for r in records],
            )

    def builds(self) -> list[BuildRecord]:
        """Every build recorded, oldest first (none in a store written before perfcast
        kept them, whose file has no ``builds`` table: it is read, never written)."""
        with self._reading():
            found = self._db.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'builds'"
            ).fetchone()
            if found is None:
                return []
            rows = self._db.execute(
                "SELECT program, measured, user_compiler FROM builds ORDER BY id"
            ).fetchall()
        return [
            BuildRecord(program, measured, user)
            for program, measured, user in rows
            if all(isinstance(value, str) for value in (program, measured, user))
        ]

    def counts(self) -> dict[str, int]:
        with self._reading():
            rows = self._db.execute("SELECT status, COUNT(*) FROM runs GROUP BY status").fetchall()
        counts = {OK: 0, FAILED: 0}
        counts.update(dict(rows))
        return counts


def sqlite_message(error: BaseException) -> str:
    """SQLite's message of one of :data:`SQLITE_ERRORS`, the damaged bytes it quotes shown
    as replacement characters."""
    if isinstance(error, UnicodeDecodeError):
        return bytes(error.object).decode("utf-8", errors="replace")
    return str(error)


def _json_value(stored: object) -> object:
    """A JSON column's value; None if it is not JSON text (or nested beyond reason)."""
    if not isinstance(stored, str):
        return None
    try:
        return json.loads(stored)
    except (ValueError, RecursionError):
        return None


def _shown(value: object) -> str:
    """A stored value as a message shows it: its type, and its start if it is text."""
    if isinstance(value, bytes):
        return f"{len(value)} bytes of binary data"
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else f"{value[:40]!r}... ({len(value)} characters)"
    return "NULL" if value is None else f"the {type(value).__name__} {value!r}"[:80]


def _connect(path: Path) -> sqlite3.Connection:
    """A connection that has neither read nor written anything yet: the file is checked
    (:func:`_check_is_store`, :func:`integrity_problems`) before :func:`_configure`, and WAL
    mode is switched on by :meth:`CampaignStore.create_or_open` only once the file is known
    to be a sound perfcast store (a store perfcast wrote is in WAL mode already)."""
    connection = sqlite3.connect(path, timeout=30, isolation_level="DEFERRED")
    # text that is not UTF-8 (a damaged page; SQLite's own reports quote such bytes) reads
    # with replacement characters, to be refused as a bad value rather than crash the query
    connection.text_factory = _text
    return connection


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _configure(connection: sqlite3.Connection) -> None:
    connection.execute("PRAGMA synchronous=FULL")
    connection.execute("PRAGMA foreign_keys=ON")


def _check_is_store(db: sqlite3.Connection, path: Path, *, allow_empty: bool) -> None:
    """Refuse an SQLite file that is not a perfcast store, before anything is written to it.

    An empty file (or one SQLite just created) is a new store when ``allow_empty``. A file
    with tables but no ``campaign`` table belongs to something else: adding perfcast's tables
    to it would mix two programs' data in one file.
    """
    try:
        tables = {
            name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
    except SQLITE_ERRORS as exc:
        if "not a database" in sqlite_message(exc):
            raise InputError(
                "not an SQLite file (or one whose first page is damaged), so not a perfcast "
                "campaign store; perfcast leaves it as it is: choose another store (--store "
                "or app.store)",
                path=path,
            ) from None
        raise DamagedStoreError(path, [sqlite_message(exc), *_unreadable_tables(db)]) from None
    if not tables and allow_empty:
        return
    if "campaign" not in tables:
        others = ", ".join(sorted(tables)) or "none"
        raise InputError(
            f"an SQLite file that is not a perfcast campaign store (its tables: {others}); "
            "perfcast leaves it as it is: measure into another store (--store or app.store)",
            path=path,
        )


def integrity_problems(db: sqlite3.Connection) -> list[str]:
    """What SQLite's ``PRAGMA quick_check`` finds wrong with the file (empty: nothing).

    ``quick_check`` reads every page (a few seconds for a store of gigabytes) but skips the
    slow cross-check of indexes against tables; damage to a table or index page, a
    truncated file and a torn write all show up here. When SQLite gives up with no more
    than ``database disk image is malformed``, each table is read to name the damaged ones.
    """
    try:
        rows = [row[0] for row in db.execute("PRAGMA quick_check")]
    except SQLITE_ERRORS as exc:
        return [sqlite_message(exc), *_unreadable_tables(db)]
    return [] if rows == ["ok"] else rows


def _unreadable_tables(db: sqlite3.Connection) -> list[str]:
    """``the runs table cannot be read``, for every table and index a full read fails on."""
    problems = []
    try:
        db.execute("PRAGMA writable_schema=ON")  # a truncated file's schema reads only so
        objects = db.execute("SELECT type, name, tbl_name FROM sqlite_master").fetchall()
        damaged: set[str] = set()
        for kind, name, table in sorted(objects, key=lambda row: row[0] != "table"):
            if kind == "table":
                query, what = f'SELECT * FROM "{name}"', f"the {name} table"
            elif kind == "index" and table not in damaged:
                query = f'SELECT * FROM "{table}" INDEXED BY "{name}"'
                what = f"an index of the {table} table"
            else:
                continue
            try:
                for _ in db.execute(query):
                    pass
            except SQLITE_ERRORS:
                damaged.add(table)
                problems.append(f"{what} cannot be read")
    except SQLITE_ERRORS as exc:
        problems.append(f"the schema cannot be read ({sqlite_message(exc)})")
    finally:
        with contextlib.suppress(*SQLITE_ERRORS):
            db.execute("PRAGMA writable_schema=OFF")
    return problems


class DamagedStoreError(InputError):
    """The store's file is damaged (SQLite's integrity check failed)."""

    def __init__(self, path: Path, problems: list[str]):
        # SQLite's own reports span lines ("*** in database main ***\nPage 6: ..."); the
        # message is one line
        problems = [" ".join(problem.split()) for problem in problems]
        self.problems = problems
        shown = "; ".join(problems[:3]) + (
            f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
        )
        super().__init__(
            f"the store is damaged ({shown}); `perfcast measure --resume` with this campaign's "
            "perfcast.toml copies every run that can still be read into a fresh store, keeps "
            "the damaged file beside it, and measures the lost runs again",
            path=path,
        )


def _check_integrity(db: sqlite3.Connection, path: Path) -> None:
    problems = integrity_problems(db)
    if problems:
        raise DamagedStoreError(path, problems)


class DiskFullError(PerfcastError):
    """The file system under the store or the runs' scratch area is full."""


def file_system_of(path: Path) -> str:
    """``the file system at /mnt (tmpfs, 12 KiB free)``: the mount that holds ``path``."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    mount, kind = "/", "?"
    try:
        with open("/proc/self/mounts", encoding="utf-8") as mounts:
            for line in mounts:
                fields = line.split()
                point = fields[1].replace("\\040", " ")
                inside = path == Path(point) or Path(point) in path.parents
                if inside and len(point) >= len(mount):
                    mount, kind = point, fields[2]
    except OSError:
        pass
    try:
        stat = os.statvfs(path)
        free = f", {_size(stat.f_bavail * stat.f_frsize)} free"
    except OSError:
        free = ""
    return f"the file system at {mount} ({kind}{free})"


def free_bytes(path: Path) -> int | None:
    """Bytes an unprivileged write can still use on ``path``'s file system (None: unknown)."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        stat = os.statvfs(path)
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize


def _size(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024:
            return f"{count:.0f} {unit}"
        count /= 1024
    return f"{count:.0f} TiB"


def disk_full_message(
    path: Path,
    what: str,
    done: str = "nothing was stored half (the run being stored was rolled back and is "
    "measured again)",
) -> str:
    """Why a campaign stopped for want of space: where, and that ``--resume`` continues."""
    return (
        f"no space left on {file_system_of(path)}, which holds {what} {path}; {done}; free "
        "some space and continue with `perfcast measure --resume`"
    )


@contextlib.contextmanager
def _closed_if_opening_fails(store: CampaignStore) -> Iterator[None]:
    """Close ``store`` when opening it fails half-way, so its connection and lock are not
    left to the garbage collector; an SQLite error (the file is no store, or is damaged
    past what the checks name) becomes an InputError naming the file."""
    try:
        yield
    except BaseException as exc:
        store.close()
        if isinstance(exc, SQLITE_ERRORS):
            raise InputError(
                f"not a perfcast campaign store ({sqlite_message(exc)})", path=store.path
            ) from None
        raise


@contextlib.contextmanager
def _disk_full_is_an_error(path: Path, done: str | None = None) -> Iterator[None]:
    """SQLite's ``database or disk is full`` (a transaction it rolled back) as a
    :class:`DiskFullError` naming the file system (``done``: what that left behind)."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if "full" in str(exc) or ("disk I/O error" in str(exc) and free_bytes(path) == 0):
            message = disk_full_message(path, "the campaign store", *([done] if done else []))
            raise DiskFullError(message) from None
        raise


@contextlib.contextmanager
def open_store(path: str | Path) -> Iterator[CampaignStore]:
    store = CampaignStore.open(path)
    try:
        yield store
    finally:
        store.close()


# -- recovering a damaged store -------------------------------------------------------------

MISSING_ROWS_BEFORE_GIVING_UP = 10_000
"""When a table cannot be scanned, rows are looked up one row id after the other; this many
ids in a row that hold nothing end the search (runs are numbered from 1 without gaps,
except where retried failures were replaced)."""


@dataclass(frozen=True)
class Recovery:
    """What :func:`recover_store` saved from a damaged store."""

    damaged: Path
    """Where the damaged file was moved (it is kept: it may hold more than could be read)."""
    runs: int
    """Runs copied into the fresh store, each with all of its profiles."""
    lost: int | None
    """Runs whose row or profiles could not be read in full (a resumed campaign measures
    them again; None: how many is unknown, since not one row of the runs table read)."""
    problems: list[str]

    def summary(self) -> str:
        if self.lost is None:
            lost = "; the other runs could not be read (measured again)"
        else:
            lost = f"; {self.lost} run(s) could not be read (measured again)" if self.lost else ""
        return (
            f"the store was damaged ({'; '.join(self.problems[:2])}): {self.runs} run(s) "
            f"recovered into a fresh store{lost}; the damaged file is kept as {self.damaged}"
        )


def recover_store(path: Path, problems: list[str]) -> Recovery:
    """Copy every run of the damaged store ``path`` that can be read in full (its row and
    all of its profiles) into a fresh store at ``path``; the damaged file is moved aside,
    never deleted. The caller holds the store's lock.

    A run is copied only whole: a run with a profile on a damaged page would otherwise read
    as a run of fewer ranks. Failed attempts and runs in flight are copied as far as they
    can be read (the latter so a resumed campaign still stops their orphans).
    """
    fresh_path = path.with_name(path.name + ".recovering")
    for leftover in _with_journals(fresh_path):
        leftover.unlink(missing_ok=True)
    damaged = sqlite3.connect(path, isolation_level=None)
    # SQLite refuses a schema whose tables start beyond the end of a truncated file; read
    # it anyway (this connection never writes)
    damaged.execute("PRAGMA writable_schema=ON")
    fresh = sqlite3.connect(fresh_path, isolation_level=None)
    try:
        with _disk_full_is_an_error(
            fresh_path, f"the damaged store {path} is left as it was; nothing was recovered yet"
        ):
            fresh.execute("PRAGMA journal_mode=WAL")
            fresh.executescript(_SCHEMA)
            fresh.execute("BEGIN")
            campaign, _ = _readable_rows(damaged, "campaign")
            if campaign:
                _insert(fresh, "campaign", campaign[0])
                # the fresh tables have every column of this perfcast's schema
                fresh.execute("UPDATE campaign SET schema_version = ?", (SCHEMA_VERSION,))
            runs, lost = _copy_runs(damaged, fresh)
            for table in ("attempts", "inflight"):
                for row in _readable_rows(damaged, table)[0]:
                    with contextlib.suppress(sqlite3.DatabaseError):
                        _insert(fresh, table, row)
            fresh.execute("COMMIT")
    except BaseException as exc:
        fresh.close()
        for partial in _with_journals(fresh_path):
            partial.unlink(missing_ok=True)
        if isinstance(exc, sqlite3.DatabaseError):
            raise PerfcastError(
                f"{path}: the store is too damaged to recover any run ({exc}); it is left as "
                "it was: move it aside to measure the campaign into a fresh store"
            ) from None
        raise
    finally:
        damaged.close()
        fresh.close()
    aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
    for source, target in zip(_with_journals(path), _with_journals(aside), strict=True):
        if source.exists():
            source.rename(target)
    fresh_path.rename(path)
    return Recovery(aside, runs, lost, problems)


def _with_journals(path: Path) -> list[Path]:
    return [path, *(path.with_name(path.name + suffix) for suffix in ("-wal", "-shm"))]


def _copy_runs(damaged: sqlite3.Connection, fresh: sqlite3.Connection) -> tuple[int, int | None]:
    """Copy the runs that can be read whole; how many were copied, and how many lost."""
    columns = [row[1] for row in damaged.execute("PRAGMA table_info(runs)")]
    scanned: dict[int, list[tuple[str, bytes]]] | None = None
    rows, lost = _readable_rows(damaged, "runs")
    copied = 0
    for row in rows:
        run = dict(zip(columns, row, strict=True))
        try:
            profiles = [
                (name, bytes(data))
                for name, data in damaged.execute(
                    "SELECT name, data FROM profiles WHERE run_id = ? ORDER BY name", (run["id"],)
                )
            ]
        except sqlite3.DatabaseError:
            # the index is damaged: scan what the table still has, once
            if scanned is None:
                scanned = {}
                for run_id, name, data in _readable_rows(damaged, "profiles")[0]:
                    scanned.setdefault(run_id, []).append((name, bytes(data)))
            profiles = sorted(scanned.get(run["id"], []))
            if not _whole(profiles, run.get("ranks"), uninstrumented=not scanned):
                lost = None if lost is None else lost + 1
                continue
        _insert(fresh, "runs", row, columns)
        fresh.executemany(
            "INSERT INTO profiles (run_id, name, data) VALUES (?, ?, ?)",
            [(run["id"], name, data) for name, data in profiles],
        )
        copied += 1
    return copied, lost


def _whole(profiles: list[tuple[str, bytes]], ranks: int | None, *, uninstrumented: bool) -> bool:
    """Whether a run's profiles found by scanning are all it had: one per rank, or none in
    a store where no run has any (an uninstrumented program)."""
    if not profiles:
        return uninstrumented
    return ranks is not None and len(profiles) == ranks


def _readable_rows(db: sqlite3.Connection, table: str) -> tuple[list[tuple[Any, ...]], int | None]:
    """Every row of ``table`` that can still be read, in row id order, and how many row ids
    below the last readable one could not be read (None: not one row could be read, so how
    many the table held is unknown).

    A scan stops at the first damaged page; looking rows up one by one by row id goes
    around damaged leaves, as long as the pages above them are intact."""
    try:
        return db.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall(), 0
    except sqlite3.DatabaseError:
        pass
    rows = []
    unreadable: list[int] = []
    rowid, missing, last_read = 0, 0, 0
    while missing < MISSING_ROWS_BEFORE_GIVING_UP:
        rowid += 1
        missing += 1
        try:
            row = db.execute(f"SELECT * FROM {table} WHERE rowid = ?", (rowid,)).fetchone()
        except sqlite3.DatabaseError:
            unreadable.append(rowid)
            continue
        if row is not None:
            missing = 0
            rows.append(row)
            last_read = rowid
    if not rows and unreadable:
        return [], None
    return rows, sum(1 for rowid in unreadable if rowid < last_read)


def _insert(
    db: sqlite3.Connection, table: str, row: tuple[Any, ...], columns: list[str] | None = None
) -> None:
    names = f" ({', '.join(columns)})" if columns else ""
    marks = ", ".join("?" * len(row))
    db.execute(f"INSERT OR REPLACE INTO {table}{names} VALUES ({marks})", row)
