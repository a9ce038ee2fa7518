"""Request and response files, for the steps of a deployment run as separate processes
(`henn encrypt --out request.bin`, `henn evaluate ... --out response.bin`, `henn decrypt response.bin`):
the ciphertexts of one or more sets of images, and what the other end needs to read them.

    magic "HENNMSG\\0" | version u16 | kind u8 (1 request, 2 response) | header length u32 | header | objects
    header   JSON {"model_sha256", "key_id", "sets": [images in each set], "objects": objects per set}
    objects  henn objects back to back (wire.py: each with its own checked header), set after set

Each set is one inference request's body (what `POST /v1/sessions/{id}/infer` takes and answers), so a
request file can also be sent to a server set by set. The header is checked (magic, version, kind,
lengths, counts against the model) before any object is read; the objects as wire.py checks a body."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

from henn.deploy.files import write_atomic
from henn.deploy.wire import split
from henn.errors import SerializationError

MAGIC = b"HENNMSG\0"
VERSION = 1
KINDS = {"request": 1, "response": 2}
_HEAD = struct.Struct("<8sHBI")
MAX_HEADER = 1 << 20
MAX_SETS = 1 << 16


@dataclass(frozen=True)
class Message:
    kind: str  # "request" | "response"
    model_sha256: str
    key_id: str
    sets: list[int]  # images in each set
    blobs: list[list[bytes]]  # each set's serialized ciphertexts

    def to_bytes(self) -> bytes:
        per = {len(b) for b in self.blobs}
        if len(per) != 1 or len(self.blobs) != len(self.sets):
            raise SerializationError("every set of a message holds the same number of ciphertexts")
        header = {"model_sha256": self.model_sha256, "key_id": self.key_id, "sets": self.sets, "objects": per.pop()}
        text = json.dumps(header).encode()
        head = _HEAD.pack(MAGIC, VERSION, KINDS[self.kind], len(text)) + text
        return head + b"".join(b for blobs in self.blobs for b in blobs)

    def save(self, path: str | Path) -> int:
        return write_atomic(path, self.to_bytes())

    @classmethod
    def read(cls, data: bytes, backend, *, kind: str, objects: int, max_images: int, where: str) -> Message:
        """A message of `kind` for a model whose sets hold `objects` ciphertexts and at most `max_images`
        images, its objects checked against `backend` (SerializationError naming what is wrong)."""
        if len(data) < _HEAD.size or data[:8] != MAGIC:
            raise SerializationError(f"{where} is not a henn request or response file (no HENNMSG header)")
        _, version, code, n = _HEAD.unpack_from(data)
        if version != VERSION:
            raise SerializationError(f"{where} is a version {version} message; this henn reads version {VERSION}")
        if code != KINDS[kind]:
            got = {v: k for k, v in KINDS.items()}.get(code, f"kind {code}")
            raise SerializationError(f"{where} is a {got}, not a {kind}")
        if n > MAX_HEADER or _HEAD.size + n > len(data):
            raise SerializationError(f"{where} announces a {n}-byte header in {len(data)} bytes: it is damaged")
        try:
            h = json.loads(data[_HEAD.size : _HEAD.size + n].decode())
            sets, per, model, key_id = h["sets"], h["objects"], h["model_sha256"], h["key_id"]
            if not isinstance(model, str) or not isinstance(key_id, str):
                raise TypeError("model_sha256 and key_id must be strings")
            if not isinstance(sets, list) or not 1 <= len(sets) <= MAX_SETS:
                raise ValueError(f"sets must list 1 to {MAX_SETS} set sizes")
            if any(not isinstance(s, int) or isinstance(s, bool) or not 1 <= s <= max_images for s in sets):
                raise ValueError(f"a set holds 1 to {max_images} images")
        except (ValueError, TypeError, KeyError, UnicodeDecodeError) as exc:
            raise SerializationError(f"{where} has a malformed header ({exc}): it is damaged") from None
        if per != objects:
            raise SerializationError(
                f"{where} holds {per} ciphertexts per set, the model {objects}: it was made for another model"
            )
        body = data[_HEAD.size + n :]
        flat = split(body, backend, kinds=("ciphertext",), max_objects=objects * len(sets))
        if len(flat) != objects * len(sets):
            raise SerializationError(f"{where} holds {len(flat)} ciphertexts, its header {objects * len(sets)}")
        blobs = [flat[i * objects : (i + 1) * objects] for i in range(len(sets))]
        return cls(kind, model, key_id, sets, blobs)
