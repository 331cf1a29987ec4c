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
find them again (a process id, a Slurm job), so a resumed campaign can clean up or
collect them.

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


@dataclass(frozen=True)
class InflightRun:
    key: str
    attempt: int
    backend: str
    handle: dict[str, Any]
    started: float


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
        self._run_columns: set[str] = set()
        """Columns of ``runs`` (an old store opened for reading lacks the newer ones; they
        read as NULL)."""

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path) -> CampaignStore:
        """Open an existing store (reading, or resuming)."""
        path = Path(path)
        if not path.is_file():
            raise InputError("no such campaign store", path=path)
        store = cls(path, _connect(path))
        try:
            store.info()
            store._read_columns()
        except sqlite3.DatabaseError as exc:
            store.close()
            raise InputError(f"not a perfcast campaign store ({exc})", path=path) from None
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
    ) -> CampaignStore:
        """Open the store, creating it for a campaign over ``parameters`` if it is new.

        An existing store must be over the same parameters: measurements over different
        parameters cannot be combined into one experiment.
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        store = cls(path, _connect(path))
        try:
            with store._db:
                store._db.executescript(_SCHEMA)
                row = store._db.execute("SELECT parameters FROM campaign").fetchone()
                if row is None:
                    store._db.execute(
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
                        path=path,
                    )
                else:
                    store._db.execute(
                        "UPDATE campaign SET spec_path = ?, spec_text = ?, metrics = ?",
                        (spec_path, spec_text, json.dumps(metrics or [])),
                    )
            store._migrate()
        except sqlite3.DatabaseError as exc:
            store.close()
            raise InputError(f"not a perfcast campaign store ({exc})", path=path) from None
        except BaseException:
            store.close()
            raise
        return store

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
        """
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

    def record(self, record: RunRecord) -> None:
        """Store a finished run (success or final failure) with its profiles, atomically.

        A run recorded before (a failure being retried by ``--retry-failed``) is replaced:
        the key stays unique.
        """
        with self._db:
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
        with self._db:
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
        with self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO inflight VALUES (?, ?, ?, ?, ?)",
                (key, attempt, backend, json.dumps(handle), time.time()),
            )

    def forget_inflight(self, key: str) -> None:
        with self._db:
            self._db.execute("DELETE FROM inflight WHERE key = ?", (key,))

    # -- reading ---------------------------------------------------------------------------

    def info(self) -> CampaignInfo:
        row = self._db.execute(
            "SELECT name, parameters, metrics, spec_path, spec_text, created FROM campaign"
        ).fetchone()
        if row is None:
            raise sqlite3.DatabaseError("the campaign table is empty")
        return CampaignInfo(row[0], json.loads(row[1]), json.loads(row[2]), *row[3:])

    def finished_keys(self, status: str | None = None) -> set[str]:
        """Keys of the runs stored (with ``status``, if given)."""
        if status is None:
            rows = self._db.execute("SELECT key FROM runs")
        else:
            rows = self._db.execute("SELECT key FROM runs WHERE status = ?", (status,))
        return {key for (key,) in rows}

    def runs(self, status: str | None = None) -> list[StoredRun]:
        newer = ", ".join(
            name if name in self._run_columns else "NULL" for name in ("ranks", "cores")
        )
        query = (
            "SELECT id, key, point, repetition, command, status, exit_code, reason, "
            f"stderr_tail, seconds, attempts, {newer} FROM runs"
        )
        rows = (
            self._db.execute(query + " WHERE status = ? ORDER BY id", (status,))
            if status
            else self._db.execute(query + " ORDER BY id")
        )
        return [
            StoredRun(
                id=r[0],
                key=r[1],
                point=json.loads(r[2]),
                repetition=r[3],
                command=r[4],
                status=r[5],
                exit_code=r[6],
                reason=r[7],
                stderr_tail=r[8] or "",
                seconds=r[9],
                attempts=r[10],
                ranks=r[11],
                cores=r[12],
            )
            for r in rows
        ]

    def profiles(self, run_id: int) -> dict[str, bytes]:
        rows = self._db.execute("SELECT name, data FROM profiles WHERE run_id = ?", (run_id,))
        return {name: bytes(data) for name, data in rows}

    def attempts(self) -> list[tuple[str, int, str | None]]:
        """Failed attempts that were retried: (key, attempt, reason)."""
        rows = self._db.execute("SELECT key, attempt, reason FROM attempts ORDER BY id")
        return [(k, a, r) for k, a, r in rows]

    def inflight(self) -> list[InflightRun]:
        rows = self._db.execute("SELECT key, attempt, backend, handle, started FROM inflight")
        return [InflightRun(k, a, b, json.loads(h), s) for k, a, b, h, s in rows]

    def counts(self) -> dict[str, int]:
        rows = self._db.execute("SELECT status, COUNT(*) FROM runs GROUP BY status")
        counts = {OK: 0, FAILED: 0}
        counts.update(dict(rows.fetchall()))
        return counts


def _connect(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(path, timeout=30, isolation_level="DEFERRED")
    with contextlib.suppress(sqlite3.DatabaseError):
        # A store on a read-only medium still reads; it just stays in its journal mode.
        connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    connection.execute("PRAGMA foreign_keys=ON")
    return connection


@contextlib.contextmanager
def open_store(path: str | Path) -> Iterator[CampaignStore]:
    store = CampaignStore.open(path)
    try:
        yield store
    finally:
        store.close()
