"""The network client: `henn.connect(url)` -> RemoteModel.

    model = henn.connect("http://127.0.0.1:8000")      # fetch the model file, make keys, upload them
    logits = model.predict(images)                      # check, encrypt, send, receive, decrypt

Keys are generated here; only the evaluation keys (relinearization, Galois) are uploaded, then
released from memory; the secret key never leaves this object, except encrypted under a passphrase
(`model.client.save(path, passphrase=...)`, and `henn.connect(url, client=Client.open(path, ...))` to
use it again). The server hands out the client part of its model file only (no weights). Large
uploads show a progress bar (tqdm)."""

from __future__ import annotations

import logging
import time

import numpy as np
from tqdm import tqdm

from henn.deploy.local import Client
from henn.deploy.model_file import read_client_model
from henn.deploy.wire import CONTENT_TYPE, chunks, split
from henn.errors import BackendError, HennError, InputError, SessionError
from henn.runtime.segments import through_segments

log = logging.getLogger(__name__)
PROGRESS_BYTES = 16 << 20  # uploads from this size show a progress bar


class RemoteError(HennError):
    """The server refused a request (the message is its answer) or could not be reached."""

    def __init__(self, message: str, status: int = 0):
        super().__init__(message)
        self.status = status


class RemoteModel:
    """A model served by `henn serve`, used from the client side (`henn.connect(url)`).

    On opening it reads the server's client model file (no weights unless the owner opted in), makes the keys
    here, uploads the evaluation keys only and opens a session. `predict(images)` encrypts each ciphertext
    set, sends it, and decrypts the answer; the secret key never leaves this process. `close()` ends the
    session on the server.
    """

    def __init__(
        self,
        url: str,
        *,
        flood_bits: int | None = None,
        progress: bool = True,
        timeout: float = 600.0,
        threads: int | None = None,
        seed: int | None = None,
        retries: int = 5,
        client: Client | None = None,
    ):
        try:
            import httpx
        except ImportError:
            raise BackendError("henn.connect needs the serve extra: pip install 'henn[serve]'") from None
        self.url, self.progress, self.retries = url.rstrip("/"), progress, retries
        self.http = httpx.Client(base_url=self.url, timeout=timeout)
        self.info = self._json("GET", "/v1/model")
        if client is None:
            model = read_client_model(self._call("GET", "/v1/model/file").content)
            if model.model_sha256 != self.info["model_sha256"]:
                raise RemoteError("the model file the server sent does not match its description")
            client = Client(model, threads=threads, flood_bits=flood_bits, seed=seed)
        elif client.model.model_sha256 != self.info["model_sha256"]:
            self.http.close()
            raise InputError(
                "this client was made for another model than the server's (their model ids differ): make its "
                "keys with the server's model file (`henn keygen --model`)"
            )
        self.client = client
        self.stats = {
            "key_bytes": 0,
            "keygen_s": 0.0,
            "upload_s": 0.0,
            "requests": 0,
            "request_bytes": 0,
            "response_bytes": 0,
            "encrypt_s": 0.0,
            "roundtrip_s": 0.0,
            "decrypt_s": 0.0,
            "server_evaluate_s": 0.0,
        }
        self.session = self._open_session()

    def _open_session(self) -> str:
        t0 = time.perf_counter()
        if self.client.key_id is None:
            self.client.generate_keys()
        elif self.client.runtime.keys is None or self.client.runtime.keys.galois is None:
            self.client.regenerate_keys()  # a client opened from its key file
        blobs = self.client.key_blobs()
        t1 = time.perf_counter()
        size = sum(len(b) for b in blobs)
        bar = tqdm(
            total=size, unit="B", unit_scale=True, desc="keys", disable=not self.progress or size < PROGRESS_BYTES
        )

        def body():
            bar.reset()
            for chunk in chunks(blobs):
                yield chunk
                bar.update(len(chunk))

        try:
            answer = self._json(
                "POST", "/v1/sessions", body=body, headers={"Content-Type": CONTENT_TYPE, "Content-Length": str(size)}
            )
        finally:
            bar.close()
        self.client.release_keys()  # the server holds them now
        self.stats.update(key_bytes=size, keygen_s=t1 - t0, upload_s=time.perf_counter() - t1)
        log.info("session %s: %.1f MiB of evaluation keys uploaded", answer["session"][:6], size / 2**20)
        return answer["session"]

    def predict(self, images) -> np.ndarray:
        """Logits (B, *output_shape) of images (B, *input_shape), one request per ciphertext set."""
        x = self.client.check(images)
        outs = []
        for r in self.client.batches(len(x)):
            outs.append(self.predict_set(x[r.start : r.stop], checked=True))
        return np.concatenate(outs)

    def predict_set(self, x: np.ndarray, *, checked: bool = False) -> np.ndarray:
        """Logits of one ciphertext set's images (at most the set size; `checked`: already validated)."""
        if self.client.segments > 1:
            return self._segments(x if checked else self.client.check(x))
        t0 = time.perf_counter()
        blobs = self.client.encrypt(x, checked=checked)
        size = sum(len(b) for b in blobs)
        t1 = time.perf_counter()
        answer = self.send(blobs)
        t2 = time.perf_counter()
        backend = self.client.backend
        out = split(answer, backend, kinds=("ciphertext",), max_objects=self.client.program.output_cts)
        logits = self.client.decrypt(out, len(x))
        s = self.stats
        s["requests"] += 1
        s["request_bytes"] += size
        s["response_bytes"] += len(answer)
        s["encrypt_s"] += t1 - t0
        s["roundtrip_s"] += t2 - t1
        s["decrypt_s"] += time.perf_counter() - t2
        return logits

    def _segments(self, x: np.ndarray) -> np.ndarray:
        """A client-aided model (henn.segments): each segment a round trip, the client's stages in between."""
        client, s = self.client, self.stats
        backend = client.backend

        def encrypt(k: int, xs: np.ndarray) -> list[bytes]:
            t0 = time.perf_counter()
            blobs = client.encrypt_segment(xs, k)
            s["encrypt_s"] += time.perf_counter() - t0
            s["request_bytes"] += sum(len(b) for b in blobs)
            return blobs

        def evaluate(k: int, blobs: list[bytes]) -> bytes:
            t0 = time.perf_counter()
            answer = self.send(blobs, segment=k)
            s["roundtrip_s"] += time.perf_counter() - t0
            s["requests"] += 1
            s["response_bytes"] += len(answer)
            return answer

        def decrypt(k: int, answer: bytes, n: int) -> np.ndarray:
            t0 = time.perf_counter()
            out = split(answer, backend, kinds=("ciphertext",), max_objects=client.model.programs[k].output_cts)
            y = client.decrypt_segment(out, k, n)
            s["decrypt_s"] += time.perf_counter() - t0
            return y

        return through_segments(x, client.model.stages, encrypt, evaluate, decrypt)

    def send(self, blobs: list[bytes], segment: int | None = None) -> bytes:
        """The response body to one inference request of serialized ciphertexts (streamed, not copied); segment:
        a client-aided model's segment (POST .../segments/{k})."""
        headers = {"Content-Type": CONTENT_TYPE, "Content-Length": str(sum(len(b) for b in blobs))}
        route = "infer" if segment is None else f"segments/{segment}"
        r = self._call("POST", f"/v1/sessions/{self.session}/{route}", body=lambda: chunks(blobs), headers=headers)
        try:
            self.stats["server_evaluate_s"] += float(r.headers.get("X-Henn-Evaluate-Seconds", "0"))
        except ValueError:
            pass
        return r.content

    def save(self, path, *, passphrase: str | bytes) -> None:
        """Keep this client's secret key in a key file (Client.save); henn.connect(url, client=Client.open(...))
        uses it again."""
        self.client.save(path, passphrase=passphrase)

    def close(self, *, delete: bool = True) -> None:
        """End the session (with `delete`, the server drops its keys at once) and release the client."""
        if delete:
            try:
                self._call("DELETE", f"/v1/sessions/{self.session}")
            except (RemoteError, SessionError):
                pass
        self.http.close()
        self.client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- HTTP --------------------------------------------------------------------------------
    def _json(self, method: str, path: str, **kw) -> dict:
        try:
            return self._call(method, path, **kw).json()
        except ValueError:
            raise RemoteError(f"{method} {path}: the server's answer is not JSON") from None

    def _call(self, method: str, path: str, *, body=None, headers=None):
        """The answer to a request; a 429/503 (server full) is retried after its Retry-After, up to
        `retries` times. body: a function returning the bytes or an iterator of chunks (called per try)."""
        import httpx

        for attempt in range(self.retries + 1):
            try:
                r = self.http.request(method, path, content=None if body is None else body(), headers=headers)
            except httpx.HTTPError as exc:
                raise RemoteError(f"cannot reach the henn server at {self.url}: {type(exc).__name__}: {exc}") from None
            if r.status_code not in (429, 503) or attempt == self.retries:
                break
            time.sleep(min(float(r.headers.get("Retry-After", "1") or 1), 30.0) * (1 + attempt))
        if r.status_code < 400:
            return r
        try:
            detail = r.json().get("detail", r.text)
        except ValueError:
            detail = r.text[:200]
        where = f"{method} {path.split('/sessions/')[0]}"  # the session id is the client's secret: not in messages
        if r.status_code == 404 and path.startswith("/v1/sessions/"):
            raise SessionError(f"the server answered {r.status_code} to {where}: {detail}")
        raise RemoteError(f"the server answered {r.status_code} to {where}: {detail}", r.status_code)


def connect(url: str, **options) -> RemoteModel:
    """A session with the henn server at `url` (keys made here, evaluation keys uploaded)."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise InputError(f"server URL {url!r}: give http://HOST:PORT")
    return RemoteModel(url, **options)
