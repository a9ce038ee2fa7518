"""Soak of a real `henn serve` process on 127.0.0.1: 8 legitimate clients against hostile connections.

The server (a subprocess, `-vv` so that every request leaves an access line) serves the MNIST zoo CNN
compiled for the plain backend (the protocol and the server's limits, not the cryptography: a
prediction takes milliseconds, so the soak sends many). For --seconds (default 600):
  - 8 legitimate clients (henn.connect, each its own session) predict one image at a time and compare
    each answer with the in-process run (atol 1e-6); every --rekey predictions each deletes its session
    and makes a new one (key uploads under contention; henn.connect retries a 429 after Retry-After);
  - hostile connections, each kind in a loop, all to 127.0.0.1 only:
      stalled_upload (2)   a key upload's head and 24 bytes, then silence           -> 408 at the deadline
      stalled_infer (6)    the same for inference bodies, all on one hostile session -> 408 (its share caps it)
      slow_head (2)        a request head at 1 byte/s                                -> 408 (head deadline)
      idle (2)             a connection that sends nothing                           -> closed
      huge_header (1)      a header value streamed until refused (at most 64 MiB)    -> 431, not buffered
      oversized_body (1)   an object announcing 1 TiB / a body beyond the model's    -> 400 / 413
      malformed_id (1)     DELETE / infer with a NUL byte, 300 chars, ".." in the id  -> 404
      delete_in_flight (1) DELETE of its own session while its inference is half sent -> the inference 200
Reported: legitimate predictions and failures (must be 0), every status the server sent (its access
log and its refusals of connections: 5xx must be 0), tracebacks and full session ids in its log (0),
its RSS every second (flat: median of the first and last tenth), and how long SIGTERM took.

    .venv/bin/python benchmarks/soak_server.py                       # 10 minutes
    .venv/bin/python benchmarks/soak_server.py --seconds 60 --out /tmp/soak.json
"""

from __future__ import annotations

import argparse
import re
import select
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "deploy"))
from _common import write_json
from deploy_support import ServerProcess, compile_file, digits

import henn
from henn.ckks import serialization
from henn.deploy.local import Client
from henn.deploy.wire import CONTENT_TYPE

OCTETS = {"Content-Type": CONTENT_TYPE}
READ_TIMEOUT = 10
SERVER_ARGS = ("--workers", "1", "--max-queue", "16", "--max-uploads", "4", "--read-timeout", str(READ_TIMEOUT))


class Soak:
    def __init__(self, server: ServerProcess, cm, images: np.ndarray, seconds: float, rekey: int):
        self.server, self.cm, self.images, self.rekey = server, cm, images, rekey
        self.expected = cm.run(images, encrypted=False)
        self.end = time.monotonic() + seconds
        self.lock = threading.Lock()
        self.hostile: dict[str, Counter] = {}
        self.legit: dict[str, Any] = {"predictions": 0, "failed": 0, "sessions": 0, "errors": [], "latency_s": []}
        self.sids: list[str] = []
        self.rss: list[tuple[float, int]] = []
        self.most_sent = 0
        client = Client.load(server.model, seed=99)
        client.generate_keys()
        self.keys = b"".join(client.key_blobs())
        self.body = b"".join(client.encrypt(images[:1]))
        self.client = client

    def running(self) -> bool:
        return time.monotonic() < self.end

    def note(self, kind: str, outcome: str) -> None:
        with self.lock:
            self.hostile.setdefault(kind, Counter())[outcome] += 1

    # ---- legitimate clients ------------------------------------------------------------------
    def legitimate(self, i: int) -> None:
        rng = np.random.default_rng(i)
        while self.running():
            try:
                remote = henn.connect(self.server.url, progress=False, seed=1000 + i)
            except Exception as exc:  # noqa: BLE001 - a failure to report, not to stop on
                self._failed(f"connect: {type(exc).__name__}: {exc}")
                continue
            with self.lock:
                self.legit["sessions"] += 1
                self.sids.append(remote.session)
            try:
                for _ in range(self.rekey):
                    if not self.running():
                        break
                    j = int(rng.integers(len(self.images)))
                    t0 = time.perf_counter()
                    try:
                        got = remote.predict(self.images[j : j + 1])
                    except Exception as exc:  # noqa: BLE001
                        self._failed(f"predict: {type(exc).__name__}: {exc}")
                        continue
                    ok = np.allclose(got, self.expected[j : j + 1], atol=1e-6)
                    with self.lock:
                        self.legit["predictions"] += 1
                        self.legit["latency_s"].append(time.perf_counter() - t0)
                    if not ok:
                        self._failed(f"image {j}: logits differ from the in-process run")
            finally:
                remote.close()

    def _failed(self, why: str) -> None:
        with self.lock:
            self.legit["failed"] += 1
            if len(self.legit["errors"]) < 20:
                self.legit["errors"].append(why)

    # ---- hostile connections -----------------------------------------------------------------
    def connect(self, data: bytes = b"") -> socket.socket:
        s = socket.create_connection(("127.0.0.1", self.server.port), timeout=READ_TIMEOUT * 4 + 30)
        if data:
            s.sendall(data)
        return s

    @staticmethod
    def answer(s: socket.socket) -> str:
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
                if b"\r\n\r\n" in out and b"connection: close" not in out.lower():
                    break  # a kept-alive answer's head is enough
        except (ConnectionResetError, TimeoutError):
            pass
        finally:
            s.close()
        m = re.match(rb"HTTP/1\.1 (\d{3})", out)
        return m.group(1).decode() if m else ("closed" if not out else "garbled")

    @staticmethod
    def post_head(path: str, length: int) -> bytes:
        return (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {CONTENT_TYPE}\r\n"
            f"Content-Length: {length}\r\n\r\n"
        ).encode()

    def stalled_upload(self) -> None:
        while self.running():
            self.note(
                "stalled_upload",
                self.answer(self.connect(self.post_head("/v1/sessions", len(self.keys)) + self.keys[:24])),
            )

    def stalled_infer(self, sid: str) -> None:
        while self.running():
            head = self.post_head(f"/v1/sessions/{sid}/infer", len(self.body))
            self.note("stalled_infer", self.answer(self.connect(head + self.body[:24])))

    def slow_head(self) -> None:
        while self.running():
            s = self.connect(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            try:
                while not select.select([s], [], [], 1.0)[0]:
                    s.sendall(b"a")
            except OSError:
                pass
            self.note("slow_head", self.answer(s))

    def idle(self) -> None:
        while self.running():
            t0 = time.monotonic()
            outcome = self.answer(self.connect())
            self.note(
                "idle",
                f"{outcome} after {'<' if time.monotonic() - t0 < READ_TIMEOUT + 2 else '>='}{READ_TIMEOUT + 2} s",
            )

    def huge_header(self) -> None:
        piece = b"a" * 65536
        while self.running():
            s, sent = self.connect(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: "), 0
            try:
                while sent < 64 << 20 and not select.select([s], [], [], 0)[0]:
                    s.sendall(piece)
                    sent += len(piece)
            except OSError:
                pass
            self.note("huge_header", self.answer(s))
            with self.lock:  # what left this process before the answer: the server's reads, and the sockets' buffers
                self.most_sent = max(self.most_sent, sent)
            time.sleep(0.5)

    def oversized_body(self, sid: str) -> None:
        head = bytearray(self.body[: serialization.HEADER_SIZE])
        struct.pack_into("<Q", head, 10, 1 << 40)  # a genuine ciphertext header announcing 1 TiB
        huge = bytes(head) + self.body[serialization.HEADER_SIZE :]
        while self.running():
            for body in (huge, self.body * 2):  # announced too large; more than the model's request takes
                r = httpx.post(f"{self.server.url}/v1/sessions/{sid}/infer", content=body, headers=OCTETS, timeout=60)
                self.note("oversized_body", str(r.status_code))
            time.sleep(0.5)

    def malformed_id(self) -> None:
        bad = ["%00" + "A" * 31, "A" * 300, "%2E%2E" + "A" * 30, "A" * 31 + "%0A"]
        while self.running():
            for sid in bad:
                for method, path in (("DELETE", f"/v1/sessions/{sid}"), ("POST", f"/v1/sessions/{sid}/infer")):
                    r = httpx.request(method, self.server.url + path, content=self.body, headers=OCTETS)
                    self.note("malformed_id", str(r.status_code))
            time.sleep(0.5)

    def delete_in_flight(self) -> None:
        half = len(self.body) // 2
        while self.running():
            r = httpx.post(self.server.url + "/v1/sessions", content=self.keys, headers=OCTETS)
            if r.status_code != 201:
                self.note("delete_in_flight", f"upload {r.status_code}")
                time.sleep(1.0)
                continue
            sid = r.json()["session"]
            with self.lock:
                self.sids.append(sid)
            s = self.connect(self.post_head(f"/v1/sessions/{sid}/infer", len(self.body)) + self.body[:half])
            time.sleep(0.1)
            self.note("delete_in_flight", f"delete {httpx.delete(f'{self.server.url}/v1/sessions/{sid}').status_code}")
            s.sendall(self.body[half:])
            self.note("delete_in_flight", f"inference {self.answer(s)}")
            time.sleep(0.5)

    # ---- the server's memory -----------------------------------------------------------------
    def sample_rss(self) -> None:
        assert self.server.proc is not None  # started
        proc, t0 = psutil.Process(self.server.proc.pid), time.monotonic()
        while self.running():
            self.rss.append((time.monotonic() - t0, proc.memory_info().rss))
            time.sleep(1.0)


def statuses_in_log(text: str) -> Counter:
    """Every status the server answered: access lines, its refusals of connections, uvicorn's own 400s."""
    out: Counter = Counter()
    for m in re.finditer(r'"(?:GET|POST|DELETE|PUT|HEAD|PATCH|OPTIONS) \S+ HTTP/1\.[01]" (\d{3})', text):
        out[m.group(1)] += 1
    for m in re.finditer(r"connection refused: HTTP (\d{3})", text):
        out[m.group(1)] += 1
    out["400"] += text.count("Invalid HTTP request received.")
    return out


def rss_summary(samples: list[tuple[float, int]]) -> dict:
    mib = [r / 2**20 for _, r in samples]
    tenth, step = max(1, len(mib) // 10), max(1, len(mib) // 60)
    tenths = [float(np.median(mib[i * tenth : (i + 1) * tenth])) for i in range(min(10, len(mib)))]
    return {
        "every_s": 1.0,
        "t_s": [round(t, 1) for t, _ in samples[::step]],
        "rss_mib": [round(m, 1) for m in mib[::step]],
        "start_mib": round(mib[0], 1),
        "end_mib": round(mib[-1], 1),
        "first_tenth_median_mib": float(np.median(mib[:tenth])),
        "last_tenth_median_mib": float(np.median(mib[-tenth:])),
        "peak_mib": round(max(mib), 1),
        "tenth_medians_mib": [round(m, 1) for m in tenths],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=600.0)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--rekey", type=int, default=200, help="predictions per session of a legitimate client")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "soak_server.json"))
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="henn-soak-"))
    cm, model = compile_file(work / "plain.henn")
    images, _ = digits(100)
    server = ServerProcess(model, work / "store", *SERVER_ARGS, verbose=2).start()
    try:
        soak = Soak(server, cm, images, args.seconds, args.rekey)
        hostile_sid = httpx.post(server.url + "/v1/sessions", content=soak.keys, headers=OCTETS).json()["session"]
        soak.sids.append(hostile_sid)
        jobs: list[tuple[Callable[..., None], tuple]] = [(soak.legitimate, (i,)) for i in range(args.clients)]
        jobs += [(soak.stalled_upload, ())] * 2 + [(soak.stalled_infer, (hostile_sid,))] * 6
        jobs += [(soak.slow_head, ())] * 2 + [(soak.idle, ())] * 2 + [(soak.huge_header, ())]
        jobs += [(soak.oversized_body, (hostile_sid,)), (soak.malformed_id, ()), (soak.delete_in_flight, ())]
        jobs += [(soak.sample_rss, ())]
        threads = [threading.Thread(target=fn, args=a, daemon=True) for fn, a in jobs]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=max(1.0, soak.end - time.monotonic()) + READ_TIMEOUT * 4 + 60)
        duration = time.monotonic() - t0
        metrics = dict(line.split() for line in httpx.get(server.url + "/metrics").text.splitlines())
        t1 = time.monotonic()
        assert server.proc is not None  # started
        server.proc.send_signal(signal.SIGTERM)
        code = server.proc.wait(120)
        shutdown_s = time.monotonic() - t1
    finally:
        server.stop()
    log = server.log.read_text()
    statuses = statuses_in_log(log)
    fives = sum(n for s, n in statuses.items() if s.startswith("5"))
    leaked = sum(sid in log for sid in soak.sids)
    tracebacks = log.count("Traceback") + log.count("Exception in ASGI application")
    lat = np.asarray(soak.legit.pop("latency_s") or [0.0])
    latency = {f"p{q}": float(np.percentile(lat, q)) for q in (50, 90, 99)}
    legit = dict(soak.legit, clients=args.clients, latency_s=latency)
    verdict = {
        "failed_predictions_zero": legit["failed"] == 0 and legit["predictions"] > 0,
        "server_5xx_zero": fives == 0,
        "no_tracebacks": tracebacks == 0,
        "no_full_session_ids_in_log": leaked == 0,
    }
    payload = {
        "benchmark": "soak_server",
        "seconds": args.seconds,
        "duration_s": round(duration, 1),
        "model": "mnist-cnn_swish-rg7-deg4 (plain backend)",
        "server_args": list(SERVER_ARGS),
        "legit": legit,
        "hostile": {k: dict(v) for k, v in sorted(soak.hostile.items())},
        "huge_header_most_sent_mib": round(soak.most_sent / 2**20, 2),
        "server": {
            "statuses": dict(sorted(statuses.items())),
            "5xx": fives,
            "tracebacks_in_log": tracebacks,
            "full_session_ids_in_log": leaked,
            "session_ids_checked": len(soak.sids),
            "log_bytes": len(log),
            "rss": rss_summary(soak.rss),
            "metrics": metrics,
            "sigterm": {"exit": code, "seconds": round(shutdown_s, 2)},
        },
        "verdict": verdict,
        "pass": all(verdict.values()),
    }
    path = write_json(args.out, payload)
    rss = payload["server"]["rss"]
    print(
        f"wrote {path}: {legit['predictions']} predictions, {legit['failed']} failed, {fives} 5xx, RSS "
        f"{rss['start_mib']} -> {rss['end_mib']} MiB, pass={payload['pass']}"
    )
    return 0 if payload["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
