"""The durable half of the store: current objects in SQLite (WAL), written by one thread.

The registry keeps every current object in memory and serves reads from there; this module only
makes writes durable and reloads them at start-up. A dedicated writer thread drains a queue and
commits everything queued so far in one transaction (group commit), so the event loop never
waits on disk and a burst of N writes costs one commit, not N. With `synchronous=NORMAL` in WAL
mode a committed transaction survives the process being killed (not a power cut), which is the
failure the embedded server has to survive.

The data directory is locked (`flock`) so two servers can never share one database, and kept
private as etcd keeps its own: the directory 0700, the database and its WAL 0600 (every Secret is
in there). A directory or file found wider open is tightened at start with a warning (etcd only
warns; a store inside a user's home is tightened rather than left readable).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from apis.errors import ConfigError
from kube.logs import V

__all__ = ["Row", "Storage", "Write"]

log = logging.getLogger(__name__)

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS objects ("
    " resource TEXT NOT NULL, key TEXT NOT NULL, rv INTEGER NOT NULL, body BLOB NOT NULL,"
    " PRIMARY KEY (resource, key)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
)
_MAX_BATCH = 1024
_DIR_MODE = 0o700
_FILE_MODE = 0o600


def _side_files(db: Path) -> tuple[Path, ...]:
    return (db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm"))


def _tighten(path: Path, mode: int) -> None:
    """Take group and other permissions away from `path` (if it exists), with a warning when
    there were any: who could read the store until now should be told."""
    try:
        current = path.stat().st_mode & 0o777
    except FileNotFoundError:
        return
    if current & ~mode:
        log.warning(
            "Tightening permissions of the API server's storage",
            extra={"path": str(path), "was": f"{current:04o}", "now": f"{mode:04o}"},
        )
        os.chmod(path, mode)


Done = Callable[[BaseException | None], None]


@dataclass(frozen=True, slots=True)
class Write:
    """Store `body` under (storage_id, key) at `rv`; `body=None` deletes the object."""

    storage_id: str
    key: str
    rv: int
    body: bytes | None


@dataclass(frozen=True, slots=True)
class Row:
    storage_id: str
    key: str
    rv: int
    body: bytes


class Storage:
    """Load once, then `start()` the writer and `submit()` writes; `close()` drains and stops."""

    def __init__(self, data_dir: Path) -> None:
        data_dir.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
        _tighten(data_dir, _DIR_MODE)
        self._lock_fd = os.open(data_dir / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._lock_fd)
            raise ConfigError(f"data directory {data_dir} is in use by another API server") from None
        self.path = data_dir / "objects.db"
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, _FILE_MODE))  # SQLite's WAL and shm take its mode
        for path in (self.path, *_side_files(self.path)):
            _tighten(path, _FILE_MODE)
        self._queue: queue.SimpleQueue[tuple[Sequence[Write], Done] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        with contextlib.closing(self._connect()) as db:
            db.execute("PRAGMA journal_mode=WAL")
            for stmt in _SCHEMA:
                db.execute(stmt)
            db.commit()
        for path in _side_files(self.path):
            _tighten(path, _FILE_MODE)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level="DEFERRED", check_same_thread=True)
        db.execute("PRAGMA synchronous=NORMAL")
        return db

    def load(self) -> tuple[int, Iterator[Row]]:
        """The stored resourceVersion counter and every stored object (call before `start`)."""
        db = self._connect()
        (rv,) = db.execute("SELECT COALESCE(MAX(value), 0) FROM meta WHERE name = 'rv'").fetchone()
        (max_rv,) = db.execute("SELECT COALESCE(MAX(rv), 0) FROM objects").fetchone()

        def rows() -> Iterator[Row]:
            with contextlib.closing(db):
                for resource, key, row_rv, body in db.execute("SELECT resource, key, rv, body FROM objects"):
                    yield Row(resource, key, row_rv, bytes(body))

        return max(rv, max_rv), rows()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="apiserver-storage", daemon=True)
        self._thread.start()

    def submit(self, writes: Sequence[Write], done: Done) -> None:
        """Queue writes; `done(error)` is called on the writer thread once they are committed."""
        self._queue.put((writes, done))

    def close(self) -> None:
        """Commit what is queued, stop the writer and release the data directory. Idempotent."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def _run(self) -> None:
        db = self._connect()
        try:
            while True:
                item = self._queue.get()
                if item is None:
                    return
                batch = [item]
                stop = False
                while len(batch) < _MAX_BATCH:
                    try:
                        more = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if more is None:
                        stop = True
                        break
                    batch.append(more)
                self._commit(db, batch)
                if stop:
                    return
        finally:
            db.close()

    def _commit(self, db: sqlite3.Connection, batch: list[tuple[Sequence[Write], Done]]) -> None:
        latest: dict[tuple[str, str], Write] = {}
        top = 0
        for writes, _ in batch:
            for w in writes:
                latest[(w.storage_id, w.key)] = w
                top = max(top, w.rv)
        error: BaseException | None = None
        try:
            with db:
                db.executemany(
                    "INSERT OR REPLACE INTO objects (resource, key, rv, body) VALUES (?, ?, ?, ?)",
                    [(w.storage_id, w.key, w.rv, w.body) for w in latest.values() if w.body is not None],
                )
                db.executemany(
                    "DELETE FROM objects WHERE resource = ? AND key = ?",
                    [(w.storage_id, w.key) for w in latest.values() if w.body is None],
                )
                db.execute("INSERT OR REPLACE INTO meta (name, value) VALUES ('rv', ?)", (top,))
        except sqlite3.Error as e:
            log.exception("Commit failed", extra={"db": str(self.path), "writes": len(latest)})
            error = e
        log.log(V(6), "Committed", extra={"submissions": len(batch), "writes": len(latest), "rv": top})
        for _, done in batch:
            done(error)
