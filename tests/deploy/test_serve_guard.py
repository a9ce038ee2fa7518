"""A real `henn serve` process on 127.0.0.1 against hostile connections, over raw sockets: request
heads beyond the bound get 431 without the server buffering them, heads and bodies that stall get
408 at their deadline and free their slots, one session's stalled bodies leave room for others,
SIGTERM stops the server with a stalled upload open, and no log line (access lines included) holds
a full session id."""

from __future__ import annotations

import select
import signal
import socket
import time

import httpx
import numpy as np
import psutil
import pytest
from deploy_support import ServerProcess, compile_file
from test_serve_limits import client_material

from henn.deploy.store import UNKNOWN
from henn.deploy.wire import CONTENT_TYPE, split

OCTETS = {"Content-Type": CONTENT_TYPE}
READ_TIMEOUT, MIN_RATE = 2, 1000
SIDS: list[str] = []  # every session id this module makes: none may reach the log in full


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return compile_file(tmp_path_factory.mktemp("model") / "plain.henn")


@pytest.fixture(scope="module")
def server(model, tmp_path_factory):
    limits = ("--read-timeout", str(READ_TIMEOUT), "--min-rate", str(MIN_RATE), "--max-uploads", "2")
    with ServerProcess(model[1], tmp_path_factory.mktemp("store") / "sessions", *limits, verbose=2) as srv:
        yield srv


def connect(server, data: bytes = b"") -> socket.socket:
    s = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    if data:
        s.sendall(data)
    return s


def answer(s: socket.socket, timeout: float = 15.0) -> bytes:
    """What the server sends until it closes the connection (or `timeout`)."""
    s.settimeout(timeout)
    out = b""
    try:
        while chunk := s.recv(65536):
            out += chunk
    except (ConnectionResetError, TimeoutError):
        pass
    s.close()
    return out


def post_head(path: str, length: int) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def flood(s: socket.socket, piece: bytes, most: int) -> tuple[int, bytes]:
    """Send `piece` again and again (up to `most` bytes) until the server answers or closes; (sent, answer)."""
    sent = 0
    try:
        while sent < most:
            if select.select([s], [], [], 0)[0]:
                break
            s.sendall(piece)
            sent += len(piece)
    except OSError:
        pass
    return sent, answer(s)


def new_session(server, keys: bytes) -> str:
    r = httpx.post(server.url + "/v1/sessions", content=keys, headers=OCTETS)
    assert r.status_code == 201, r.text
    SIDS.append(r.json()["session"])
    return SIDS[-1]


# ---- request heads -------------------------------------------------------------------------------
HEADS = {
    "a header value that never ends": (b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ", b"a" * 65536),
    "a request line that never ends": (b"GET /health?", b"a" * 65536),
    "headers without end": (b"GET /health HTTP/1.1\r\nHost: x\r\n", b"X-Many: yes\r\n" * 5000),
}


@pytest.mark.parametrize("case", sorted(HEADS))
def test_a_head_beyond_the_bound_gets_431_and_is_not_buffered(server, case):
    first, piece = HEADS[case]
    rss = psutil.Process(server.proc.pid).memory_info().rss
    sent, got = flood(connect(server, first), piece, 64 << 20)
    assert got.startswith(b"HTTP/1.1 431 "), (sent, got[:200])
    assert b'"HeaderTooLarge"' in got and sent < 16 << 20  # refused after the first 64 KiB, not 64 MiB
    assert psutil.Process(server.proc.pid).memory_info().rss - rss < 16 << 20
    assert httpx.get(server.url + "/health").status_code == 200


def test_a_whole_request_in_one_read_is_no_long_head(server):
    """Regression: a request whose head and body (beyond the head bound) arrived in one read was counted as
    head bytes and refused with 431 while it was being answered (small compact ciphertext bodies do)."""
    body = b"x" * 100_000
    head = (
        f"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    got = answer(connect(server, head + body))
    assert got.startswith(b"HTTP/1.1 200 "), got[:200]


def test_a_head_within_the_bound_is_served_and_the_limits_are_described(server):
    r = httpx.get(server.url + "/v1/model", headers={f"X-Pad-{i}": "p" * 1000 for i in range(40)})
    assert r.status_code == 200
    limits = r.json()["limits"]
    assert limits["read_timeout_s"] == READ_TIMEOUT and limits["min_rate"] == MIN_RATE
    assert limits["max_uploads"] == 2 and limits["max_header_bytes"] == 65536 and limits["max_per_session"] == 5


def test_a_head_that_stalls_gets_408_and_a_silent_connection_is_closed(server):
    t0 = time.monotonic()
    got = answer(connect(server, b"GET /health HTTP/1.1\r\nHost: x\r\n"))
    took = time.monotonic() - t0
    assert got.startswith(b"HTTP/1.1 408 ") and b'"HeaderTimeout"' in got and took < READ_TIMEOUT + 3
    t0 = time.monotonic()
    assert answer(connect(server)) == b"" and time.monotonic() - t0 < READ_TIMEOUT + 3


# ---- bodies --------------------------------------------------------------------------------------
def test_stalled_uploads_get_408_at_their_deadline_and_free_their_slots(server, model):
    _, keys, _ = client_material(model[1])
    t0 = time.monotonic()
    stalled = [connect(server, post_head("/v1/sessions", len(keys)) + keys[:24]) for _ in range(2)]
    time.sleep(0.3)
    r = httpx.post(server.url + "/v1/sessions", content=keys, headers=OCTETS)
    assert r.status_code == 429 and "key uploads" in r.json()["detail"]  # both slots are held ...
    got = [answer(s) for s in stalled]
    took = time.monotonic() - t0
    assert all(g.startswith(b"HTTP/1.1 408 ") and b'"BodyTimeout"' in g for g in got), got
    assert took < READ_TIMEOUT + 24 / MIN_RATE + 3  # ... until the deadline, not longer
    new_session(server, keys)


def test_one_sessions_stalled_bodies_leave_room_for_other_sessions(server, model):
    a, keys_a, x = client_material(model[1], seed=1)
    b, keys_b, _ = client_material(model[1], seed=2)
    sid_a, sid_b = new_session(server, keys_a), new_session(server, keys_b)
    body_a, body_b = b"".join(a.encrypt(x)), b"".join(b.encrypt(x))
    stalled = [connect(server, post_head(f"/v1/sessions/{sid_a}/infer", len(body_a)) + body_a[:24]) for _ in range(10)]
    time.sleep(0.3)
    r = httpx.post(f"{server.url}/v1/sessions/{sid_b}/infer", content=body_b, headers=OCTETS)
    assert r.status_code == 200, r.text  # while ten of session a's bodies are stalled
    assert all(answer(s).startswith(b"HTTP/1.1 408 ") for s in stalled)
    r = httpx.post(f"{server.url}/v1/sessions/{sid_a}/infer", content=body_a, headers=OCTETS)
    assert r.status_code == 200
    out = split(r.content, a.backend, kinds=("ciphertext",), max_objects=a.program.output_cts)
    np.testing.assert_allclose(a.decrypt(out, 1), model[0].run(x, encrypted=False), atol=1e-6)


def test_a_delete_during_an_inference_lets_it_finish(server, model):
    client, keys, x = client_material(model[1], seed=3)
    sid = new_session(server, keys)
    body = b"".join(client.encrypt(x))
    s = connect(server, post_head(f"/v1/sessions/{sid}/infer", len(body)) + body[: len(body) // 2])
    time.sleep(0.2)
    assert httpx.delete(f"{server.url}/v1/sessions/{sid}").status_code == 204
    s.sendall(body[len(body) // 2 :])
    got = answer(s, timeout=5)
    assert got.startswith(b"HTTP/1.1 200 "), got[:300]
    assert not (server.store / "keys" / f"{sid}.keys").exists()
    assert httpx.delete(f"{server.url}/v1/sessions/{sid}").status_code == 404


@pytest.mark.parametrize("bad", ["%00" + "A" * 31, "A" * 300, "A" * 31 + "%0A", "%2E%2E" + "A" * 30])
def test_malformed_ids_are_unknown_sessions(server, bad):
    for method, path in (("DELETE", f"/v1/sessions/{bad}"), ("POST", f"/v1/sessions/{bad}/infer")):
        r = httpx.request(method, server.url + path, content=b"\0" * 64, headers=OCTETS)
        assert r.status_code == 404 and r.json()["detail"] == UNKNOWN, (method, bad, r.text)


def test_the_log_holds_no_full_session_id_nor_traceback(server):
    """Last of the module: every request above has been logged (-vv: access lines and debug)."""
    log = server.log.read_text()
    assert SIDS and all(sid not in log for sid in SIDS)
    assert "/v1/sessions/" in log and SIDS[-1][:6] + "..." in log  # access lines, ids cut short
    assert "Traceback" not in log and "internal error" not in log and " 500 " not in log
    assert any(f"POST /v1/sessions/{sid[:6]}.../infer -> 408 BodyTimeout" in log for sid in SIDS)
    assert "id> id>" not in log


# ---- shutdown ------------------------------------------------------------------------------------
def test_sigterm_stops_the_server_with_a_stalled_upload_open(model, tmp_path):
    _, keys, _ = client_material(model[1])
    srv = ServerProcess(model[1], tmp_path / "store", "--read-timeout", "300", "--shutdown-timeout", "5").start()
    try:
        upload = connect(srv, post_head("/v1/sessions", len(keys)) + keys[:24])
        head = connect(srv, b"GET /health HTTP/1.1\r\n")
        time.sleep(0.3)
        t0 = time.monotonic()
        assert srv.proc is not None
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(30) in (0, -signal.SIGTERM)  # uvicorn raises the signal again once stopped
        assert time.monotonic() - t0 < 8
        got = answer(upload, timeout=5)
        assert got.startswith(b"HTTP/1.1 503 ") and b'"ShuttingDown"' in got, got
        assert answer(head, timeout=5) == b""
    finally:
        srv.stop()
