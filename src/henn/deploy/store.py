"""The server's sessions on disk, so that a restart loses none: SQLite for their metadata, one file
per session for its evaluation keys (as uploaded: serialized objects back to back, see wire.py).

A session id is 192 random bits (URL-safe): whoever holds it may run inferences with its keys, so
it is a bearer secret of the client (it never reaches the logs in full). Sessions expire; expired
ones are removed, files included, whenever sessions are created or listed."""

from __future__ import annotations

import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from henn.deploy.wire import Frame
from henn.errors import SessionError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY, model TEXT NOT NULL, key_id TEXT NOT NULL, created REAL NOT NULL,
    expires REAL NOT NULL, key_bytes INTEGER NOT NULL, frames TEXT NOT NULL
)"""


@dataclass(frozen=True)
class SessionRecord:
    id: str
    model: str  # the program's SHA-256: keys are only good for the model they were made for
    key_id: str
    created: float
    expires: float
    key_bytes: int
    frames: tuple[Frame, ...]

    @property
    def short(self) -> str:
        return self.id[:6]


class SessionStore:
    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        (self.folder / "keys").mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.folder / "sessions.sqlite3", check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(_SCHEMA)
        for path in (self.folder / "keys").glob("*.part"):  # uploads a previous process did not finish
            path.unlink(missing_ok=True)

    @staticmethod
    def new_id() -> str:
        return secrets.token_urlsafe(24)

    def key_path(self, session_id: str, *, partial: bool = False) -> Path:
        return self.folder / "keys" / (session_id + (".part" if partial else ".keys"))

    def add(self, record: SessionRecord) -> None:
        """Keep a session whose keys were written to key_path(id, partial=True) and checked."""
        frames = ";".join(f"{f.kind},{f.offset},{f.size}" for f in record.frames)
        with self._lock:  # with expire()'s scan: a key file is never seen without its session
            self.key_path(record.id, partial=True).replace(self.key_path(record.id))
            self._db.execute(
                "INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?, ?)",
                (record.id, record.model, record.key_id, record.created, record.expires, record.key_bytes, frames),
            )

    def get(self, session_id: str, model: str) -> SessionRecord:
        with self._lock:
            row = self._db.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None or row[1] != model:
            raise SessionError("unknown session: create one by uploading the evaluation keys (POST /v1/sessions)")
        record = _record(row)
        if record.expires <= time.time():
            self.remove(session_id)
            raise SessionError("the session has expired: create a new one by uploading the evaluation keys again")
        return record

    def remove(self, session_id: str) -> bool:
        with self._lock:
            gone = self._db.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount > 0
        for partial in (False, True):
            self.key_path(session_id, partial=partial).unlink(missing_ok=True)
        return gone

    def expire(self) -> list[str]:
        """Remove expired sessions (and key files no session owns, left by an interrupted upload)."""
        with self._lock:
            gone = [r[0] for r in self._db.execute("SELECT id FROM sessions WHERE expires <= ?", (time.time(),))]
            live = {r[0] for r in self._db.execute("SELECT id FROM sessions")} - set(gone)
            for path in (self.folder / "keys").glob("*.keys"):
                if path.name.split(".")[0] not in live:
                    path.unlink(missing_ok=True)
        for sid in gone:
            self.remove(sid)
        return gone

    def count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM sessions").fetchone()[0])

    def close(self) -> None:
        self._db.close()


def _record(row) -> SessionRecord:
    frames = tuple(Frame(k, int(o), int(s)) for k, o, s in (f.split(",") for f in row[6].split(";")))
    return SessionRecord(row[0], row[1], row[2], float(row[3]), float(row[4]), int(row[5]), frames)
