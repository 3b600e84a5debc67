"""The durable half of the store: current objects in SQLite (WAL).

The registry keeps every current object in memory and serves reads from there; this module only
makes writes durable and reloads them at start-up. The registry commits everything staged in one
event-loop iteration as one transaction (group commit), on the event loop itself: in WAL mode with
`synchronous=NORMAL` a commit appends to the WAL file without an fsync (tens of microseconds),
and a committed transaction survives the process being killed (not a power cut), which is the
failure the embedded server has to survive. What does touch the disk, the checkpoint that copies
the WAL back into the database (with its fsyncs), runs on a thread of its own, so the event loop
never waits on disk. (Commits used to be handed to a writer thread: each write then paid two
thread hand-offs and fought the loop for the GIL, which showed in tail latency under load.)

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
import sqlite3
import threading
from collections.abc import Iterator, Sequence
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
#: How often the checkpoint thread copies the WAL into the database (when anything was written).
CHECKPOINT_INTERVAL = 1.0
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
    """Load once, then `start()` and `commit()` writes (from one thread); `close()` stops."""

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
        self._db: sqlite3.Connection | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._dirty = threading.Event()
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
        db.execute("PRAGMA busy_timeout=5000")
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
        """Open the writing connection (on the thread that will call `commit`) and start checkpointing."""
        self._db = self._connect()
        self._db.execute("PRAGMA wal_autocheckpoint=0")  # the checkpoint thread's job, not a commit's
        self._thread = threading.Thread(target=self._checkpoints, name="apiserver-checkpoint", daemon=True)
        self._thread.start()

    def commit(self, writes: Sequence[Write]) -> None:
        """Make `writes` durable in one transaction (the last write of a key wins). Raises
        sqlite3.Error when SQLite fails (logged here); then nothing of `writes` is stored."""
        assert self._db is not None, "start() first"
        latest: dict[tuple[str, str], Write] = {}
        top = 0
        for w in writes:
            latest[(w.storage_id, w.key)] = w
            top = max(top, w.rv)
        try:
            with self._db:
                self._db.executemany(
                    "INSERT OR REPLACE INTO objects (resource, key, rv, body) VALUES (?, ?, ?, ?)",
                    [(w.storage_id, w.key, w.rv, w.body) for w in latest.values() if w.body is not None],
                )
                self._db.executemany(
                    "DELETE FROM objects WHERE resource = ? AND key = ?",
                    [(w.storage_id, w.key) for w in latest.values() if w.body is None],
                )
                self._db.execute("INSERT OR REPLACE INTO meta (name, value) VALUES ('rv', ?)", (top,))
        except sqlite3.Error:
            log.exception("Commit failed", extra={"db": str(self.path), "writes": len(latest)})
            raise
        self._dirty.set()
        log.log(V(6), "Committed", extra={"writes": len(latest), "rv": top})

    def close(self) -> None:
        """Stop checkpointing, checkpoint what is left and release the data directory. Idempotent."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._db.close()
            self._db = None
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def _checkpoints(self) -> None:
        """Copy the WAL into the database every CHECKPOINT_INTERVAL while there are writes (PASSIVE:
        never blocks a commit), so the WAL stays small and a restart replays little."""
        db = self._connect()
        try:
            while not self._stop.wait(CHECKPOINT_INTERVAL):
                if not self._dirty.is_set():
                    continue
                self._dirty.clear()
                try:
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)")
                except sqlite3.Error:
                    log.warning("Checkpoint failed; retrying", extra={"db": str(self.path)}, exc_info=True)
        finally:
            db.close()
