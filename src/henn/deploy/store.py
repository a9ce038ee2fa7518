"""The server's sessions on disk, so that a restart loses none: SQLite for their metadata, one file
per session for its evaluation keys (as uploaded: serialized objects back to back, see wire.py).

A session id is 192 random bits (URL-safe): whoever holds it may run inferences with its keys, so
it is a bearer secret of the client (it never reaches the logs in full). Every id that comes from a
request is checked against that exact format (check_id) before it reaches SQLite or a path: a
malformed one gets the same answer as an unknown one. Sessions expire; expired ones are removed
whenever sessions are created (their key files stay while a request still uses them: `keep`)."""

from __future__ import annotations

import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from henn.deploy.wire import Frame
from henn.errors import SessionError

ID_BYTES = 24  # secrets.token_urlsafe(24): 32 characters of the URL-safe base64 alphabet
SESSION_ID = re.compile(r"[A-Za-z0-9_-]{32}")
UNKNOWN = "unknown session: create one by uploading the evaluation keys (POST /v1/sessions)"

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


class ExpiredSession(SessionError):
    """A session past its time to live (HTTP 404, as an unknown one)."""


def check_id(session_id: object) -> str:
    """A session id of the format new_id() makes, else SessionError (worded as an unknown session: a
    malformed id tells the client nothing more than a wrong one)."""
    if not isinstance(session_id, str) or not SESSION_ID.fullmatch(session_id):
        raise SessionError(UNKNOWN)
    return session_id


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
        return check_id(secrets.token_urlsafe(ID_BYTES))

    def key_path(self, session_id: str, *, partial: bool = False) -> Path:
        return self.folder / "keys" / (check_id(session_id) + (".part" if partial else ".keys"))

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
        """The session's record; SessionError when unknown, ExpiredSession (its row forgotten, its key
        file left to the caller: a request may still use it) when expired."""
        check_id(session_id)
        with self._lock:
            row = self._db.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None or row[1] != model:
            raise SessionError(UNKNOWN)
        record = _record(row)
        if record.expires <= time.time():
            self.forget(session_id)
            raise ExpiredSession("the session has expired: create a new one by uploading the evaluation keys again")
        return record

    def forget(self, session_id: str) -> bool:
        """Delete the session's row (no new request finds it); its key file stays until remove_files."""
        check_id(session_id)
        with self._lock:
            return self._db.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount > 0

    def remove_files(self, session_id: str) -> None:
        for partial in (False, True):
            self.key_path(session_id, partial=partial).unlink(missing_ok=True)

    def remove(self, session_id: str) -> bool:
        gone = self.forget(session_id)
        self.remove_files(session_id)
        return gone

    def expire(self, keep: Collection[str] = ()) -> list[str]:
        """Forget expired sessions, and remove the key files no session owns (those of expired sessions,
        those left by an interrupted upload) except the files of the sessions in `keep` (in use)."""
        now = time.time()
        with self._lock:
            gone = [r[0] for r in self._db.execute("SELECT id FROM sessions WHERE expires <= ?", (now,))]
            self._db.execute("DELETE FROM sessions WHERE expires <= ?", (now,))
            owned = {r[0] for r in self._db.execute("SELECT id FROM sessions")}.union(keep)
            for path in (self.folder / "keys").glob("*.keys"):
                if path.name.split(".")[0] not in owned:
                    path.unlink(missing_ok=True)
        return gone

    def count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM sessions").fetchone()[0])

    def close(self) -> None:
        self._db.close()


def _record(row) -> SessionRecord:
    frames = tuple(Frame(k, int(o), int(s)) for k, o, s in (f.split(",") for f in row[6].split(";")))
    return SessionRecord(row[0], row[1], row[2], float(row[3]), float(row[4]), int(row[5]), frames)
