"""The client's key file: a secret key encrypted at rest under a passphrase.

    magic "HENNKEY\\0" | version u16 | header length u32 | header (JSON, at most 64 KiB) | sealed body

    header  {"kdf": {"name": "argon2id", "memory_kib", "iterations", "lanes", "salt"} (or "scrypt" with
            "log_n", "r", "p", "salt"), "aead": "aes-256-gcm", "nonce", and what the body is for:
            "backend", "params" (fingerprint), "key_id", "model_sha256"}
    body    AES-256-GCM(key = KDF(passphrase, salt), nonce, associated data = everything before the body)
            of: secret key length u64 | the backend's secret key bytes | the client part of the model file

The key comes from a memory-hard KDF (Argon2id; scrypt where the installed `cryptography` lacks it),
so a stolen file costs an attacker 64 MiB and a few passes of memory per passphrase guess. The header
is authenticated with the body: a changed KDF parameter, salt, nonce, key id or byte of the body, and
a wrong passphrase, all fail the one GCM tag check (KeyFileError), before anything is parsed. Sizes and
KDF parameters are checked before they are used (a forged header cannot make the reader allocate
gigabytes or run for hours). Files are created with mode 0600 and never overwritten."""

from __future__ import annotations

import json
import os
import secrets
import struct
from pathlib import Path

from henn.errors import InputError, KeyFileError

MAGIC = b"HENNKEY\0"
VERSION = 1
_HEAD = struct.Struct("<8sHI")
MAX_HEADER = 64 << 10
MAX_FILE = 1 << 30
MIN_PASSPHRASE = 8
# RFC 9106's second recommended option (64 MiB, 3 passes, 4 lanes); scrypt: N = 2^17, r = 8 (128 MiB)
ARGON2 = {"name": "argon2id", "memory_kib": 64 << 10, "iterations": 3, "lanes": 4}
SCRYPT = {"name": "scrypt", "log_n": 17, "r": 8, "p": 1}
_LIMITS = {
    "memory_kib": (8 << 10, 4 << 20),
    "iterations": (1, 64),
    "lanes": (1, 64),
    "log_n": (14, 22),
    "r": (8, 32),
    "p": (1, 16),
}


def lock(secret: bytes, model: bytes, facts: dict, passphrase: str | bytes) -> bytes:
    """The key file's bytes: `secret` and `model` sealed under `passphrase`; `facts` (backend, params,
    key_id, model_sha256) go in the header, authenticated but readable without the passphrase."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    kdf = dict(_default_kdf(), salt=secrets.token_hex(16))
    header = dict(facts, kdf=kdf, aead="aes-256-gcm", nonce=secrets.token_hex(12))
    head = _header_bytes(header)
    body = struct.pack("<Q", len(secret)) + secret + model
    key = _derive(kdf, _passphrase(passphrase))
    return head + AESGCM(key).encrypt(bytes.fromhex(header["nonce"]), body, head)


def unlock(data: bytes, passphrase: str | bytes, where: str = "the key file") -> tuple[dict, bytes, bytes]:
    """(header, secret key bytes, client model bytes) of a key file; KeyFileError for anything wrong:
    not a key file, a forged header, a wrong passphrase, a changed byte."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    header, head_len = read_header(data, where)
    key = _derive(header["kdf"], _passphrase(passphrase))
    try:
        body = AESGCM(key).decrypt(bytes.fromhex(header["nonce"]), data[head_len:], data[:head_len])
    except InvalidTag:
        raise KeyFileError(
            f"cannot open {where}: wrong passphrase, or the file was changed or damaged (its authentication "
            "failed); give the passphrase it was saved with, or make a new key with `henn keygen`"
        ) from None
    (n,) = struct.unpack_from("<Q", body)
    if n > len(body) - 8:
        raise KeyFileError(f"cannot open {where}: its body announces a {n}-byte secret key it does not hold")
    return header, body[8 : 8 + n], body[8 + n :]


def read_header(data: bytes, where: str = "the key file") -> tuple[dict, int]:
    """(header, its end offset): checked for form (magic, version, lengths, fields, KDF bounds), not yet
    authenticated (unlock does that)."""
    if len(data) < _HEAD.size or data[:8] != MAGIC:
        raise KeyFileError(f"{where} is not a henn key file (no HENNKEY header): give the file `henn keygen` wrote")
    _, version, n = _HEAD.unpack_from(data)
    if version != VERSION:
        raise KeyFileError(f"{where} is a version {version} key file; this henn reads version {VERSION}")
    if n > MAX_HEADER or _HEAD.size + n + 16 > len(data) or len(data) > MAX_FILE:
        raise KeyFileError(f"{where} announces a {n}-byte header in {len(data)} bytes: it is damaged")
    try:
        header = json.loads(data[_HEAD.size : _HEAD.size + n].decode())
        _check_header(header)
    except (ValueError, TypeError, KeyError) as exc:
        raise KeyFileError(f"{where} has a malformed header ({exc}): it is damaged") from None
    return header, _HEAD.size + n


def write_private(path: str | Path, data: bytes) -> None:
    """Write a new file readable by its owner only (0600 from its creation); refuse an existing path."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except FileExistsError:
        raise InputError(f"{path} exists: give a new path (a key file is never overwritten) or delete it") from None
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb", closefd=False) as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise
    os.close(fd)


def _default_kdf() -> dict:
    try:
        from cryptography.hazmat.primitives.kdf.argon2 import Argon2id  # noqa: F401 - cryptography >= 44
    except ImportError:
        return dict(SCRYPT)
    return dict(ARGON2)


def _derive(kdf: dict, passphrase: bytes) -> bytes:
    salt = bytes.fromhex(kdf["salt"])
    if kdf["name"] == "argon2id":
        try:
            from cryptography.hazmat.primitives.kdf.argon2 import Argon2id
        except ImportError:
            raise KeyFileError("this key file uses Argon2id: install cryptography >= 44") from None
        return Argon2id(
            salt=salt, length=32, iterations=kdf["iterations"], lanes=kdf["lanes"], memory_cost=kdf["memory_kib"]
        ).derive(passphrase)
    from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

    return Scrypt(salt=salt, length=32, n=1 << kdf["log_n"], r=kdf["r"], p=kdf["p"]).derive(passphrase)


def _check_header(h: dict) -> None:
    if not isinstance(h, dict) or h.get("aead") != "aes-256-gcm":
        raise ValueError("no aes-256-gcm body")
    kdf = h["kdf"]
    names = {"argon2id": ("memory_kib", "iterations", "lanes"), "scrypt": ("log_n", "r", "p")}
    if not isinstance(kdf, dict) or kdf.get("name") not in names:
        raise ValueError(f"unknown KDF {kdf.get('name') if isinstance(kdf, dict) else kdf!r}")
    for k in names[kdf["name"]]:
        lo, hi = _LIMITS[k]
        if not isinstance(kdf[k], int) or isinstance(kdf[k], bool) or not lo <= kdf[k] <= hi:
            raise ValueError(f"KDF parameter {k}={kdf[k]!r} outside {lo}..{hi}")
    if kdf["name"] == "argon2id" and kdf["memory_kib"] < 8 * kdf["lanes"]:
        raise ValueError("Argon2id memory below 8 KiB per lane")
    if len(bytes.fromhex(kdf["salt"])) < 16 or len(bytes.fromhex(h["nonce"])) != 12:
        raise ValueError("salt under 16 bytes or a nonce not of 12")
    for k in ("backend", "params", "key_id", "model_sha256"):
        if not isinstance(h[k], str):
            raise ValueError(f"{k} is not a string")


def _header_bytes(header: dict) -> bytes:
    text = json.dumps(header, sort_keys=True).encode()
    return _HEAD.pack(MAGIC, VERSION, len(text)) + text


def _passphrase(p: str | bytes) -> bytes:
    b = p.encode() if isinstance(p, str) else bytes(p)
    if len(b) < MIN_PASSPHRASE:
        raise InputError(f"the passphrase has {len(b)} bytes: give at least {MIN_PASSPHRASE}")
    return b
