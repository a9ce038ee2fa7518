"""Session ids, session lifetime, fair slots and body deadlines, in process (the ASGI app through
httpx, no sockets) so that the timing is the test's: an id not of the server's format never reaches
the store; a DELETE or an expiry while the session's inference is in flight lets it finish; one
session cannot take every slot; a stalled or crawling body gets 408 and frees its slot; a stop
answers bodies still arriving with 503; /v1/model's params_fingerprint is the wire headers'."""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import quote

import httpx
import numpy as np
import pytest
from deploy_support import compile_file
from test_serve_limits import client_material, run, session

from henn.ckks import open_backend, serialization
from henn.deploy.guard import RedactFilter, redact
from henn.deploy.local import Client
from henn.deploy.serve import build
from henn.deploy.service import Limits
from henn.deploy.store import UNKNOWN, SessionStore, check_id
from henn.deploy.wire import CONTENT_TYPE, split
from henn.errors import InputError, SessionError

OCTETS = {"Content-Type": CONTENT_TYPE}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return compile_file(tmp_path_factory.mktemp("model") / "plain.henn")


def logits(client, response):
    out = split(response.content, client.backend, kinds=("ciphertext",), max_objects=client.program.output_cts)
    return client.decrypt(out, 1)


class Held:
    """A request body sent in two halves, the second when release() is called (a client mid-upload)."""

    def __init__(self, body: bytes):
        self.body, self.half, self.gate = body, len(body) // 2, asyncio.Event()
        self.sent_half = asyncio.Event()

    async def __aiter__(self):
        yield self.body[: self.half]
        self.sent_half.set()
        await self.gate.wait()
        yield self.body[self.half :]

    def release(self):
        self.gate.set()


async def _stall(first: bytes, forever: float = 3600.0, every: float | None = None, piece: bytes = b""):
    yield first
    if every is None:
        await asyncio.sleep(forever)
        return
    while True:
        await asyncio.sleep(every)
        yield piece


# ---- session ids ---------------------------------------------------------------------------------
BAD_IDS = ["\0" + "A" * 31, "A" * 300, "A" * 31, "A" * 33, "A" * 31 + ".", ".." + "A" * 30, "A" * 31 + "\n", "é" * 32]


def test_new_ids_have_the_format_every_id_is_checked_against(tmp_path):
    store = SessionStore(tmp_path)
    for _ in range(500):
        assert check_id(store.new_id()) and len(store.new_id()) == 32
    for bad in BAD_IDS + [None, 7, b"A" * 32]:
        with pytest.raises(SessionError, match="unknown session"):
            check_id(bad)
        with pytest.raises(SessionError):
            store.key_path(bad)  # type: ignore[arg-type]
    with pytest.raises(SessionError):
        store.get("\0" * 32, "model")
    store.close()


def test_malformed_ids_get_the_answer_of_unknown_ones_on_every_route(model, tmp_path):
    app, service = build(model[1], tmp_path / "store", Limits())
    client, keys, x = client_material(model[1])
    sid = session(app, keys)
    body = b"".join(client.encrypt(x))
    requests = []
    for bad in BAD_IDS + ["B" * 32]:  # the last: well formed, unknown
        bad = quote(bad, safe="")
        requests += [("DELETE", f"/v1/sessions/{bad}", None), ("POST", f"/v1/sessions/{bad}/infer", body)]
    answers = run(app, requests)
    for (method, path, _), r in zip(requests, answers):
        assert r.status_code == 404 and r.json() == {"error": "SessionError", "detail": UNKNOWN}, (method, path)
    slash = quote("../../" + sid, safe="")  # no route takes a "/" in an id: the router's 404
    assert [r.status_code for r in run(app, [("DELETE", f"/v1/sessions/{slash}", None)])] == [404]
    assert service.store.count() == 1
    assert sorted(p.name for p in (tmp_path / "store" / "keys").iterdir()) == [sid + ".keys"]
    (r,) = run(app, [("POST", f"/v1/sessions/{sid}/infer", body)])
    assert r.status_code == 200
    service.close()


# ---- session lifetime ----------------------------------------------------------------------------
def _in_flight(app, service, sid, body, during, *, evict=False):
    """An inference on `sid` whose body stops half way; `during(http)` runs then; the answers."""

    async def go():
        held = Held(body)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://henn") as http:
            infer = asyncio.create_task(http.post(f"/v1/sessions/{sid}/infer", content=held, headers=OCTETS))
            await held.sent_half.wait()
            await asyncio.sleep(0.05)
            if evict:  # as the memory budget would: the keys must come back from the file
                with service._lock:
                    service._reserved -= service._live.pop(sid).cost
            other = await during(http)
            held.release()
            return await infer, other

    return asyncio.run(go())


@pytest.mark.parametrize("evict", [False, True], ids=["loaded", "evicted"])
def test_a_delete_while_the_session_is_in_use_lets_the_inference_finish(model, tmp_path, evict):
    app, service = build(model[1], tmp_path / "store", Limits())
    client, keys, x = client_material(model[1])
    sid = session(app, keys)
    body = b"".join(client.encrypt(x))
    key_file = tmp_path / "store" / "keys" / f"{sid}.keys"

    async def delete(http):
        r = await http.delete(f"/v1/sessions/{sid}")
        assert key_file.exists()  # the request in flight still holds it
        assert (await http.post(f"/v1/sessions/{sid}/infer", content=body, headers=OCTETS)).status_code == 404
        return r

    infer, deleted = _in_flight(app, service, sid, body, delete, evict=evict)
    assert deleted.status_code == 204
    assert infer.status_code == 200, infer.text
    np.testing.assert_allclose(logits(client, infer), model[0].run(x, encrypted=False), atol=1e-6)
    assert not key_file.exists() and sid not in service._live and not service._leases and not service._doomed
    assert service._reserved == 0 and service.store.count() == 0
    (r,) = run(app, [("DELETE", f"/v1/sessions/{sid}", None)])
    assert r.status_code == 404
    service.close()


def test_an_expiry_while_the_session_is_in_use_lets_the_inference_finish(model, tmp_path):
    app, service = build(model[1], tmp_path / "store", Limits())
    client, keys, x = client_material(model[1])
    _, other_keys, _ = client_material(model[1], seed=5)
    sid = session(app, keys)
    body = b"".join(client.encrypt(x))

    async def expire(http):
        service.store._db.execute("UPDATE sessions SET expires = 0 WHERE id = ?", (sid,))
        r = await http.post("/v1/sessions", content=other_keys, headers=OCTETS)  # creating one expires the rest
        assert (tmp_path / "store" / "keys" / f"{sid}.keys").exists() and sid in service._doomed
        return r

    infer, created = _in_flight(app, service, sid, body, expire)
    assert created.status_code == 201 and infer.status_code == 200
    assert not (tmp_path / "store" / "keys" / f"{sid}.keys").exists() and sid not in service._live
    assert service.store.count() == 1 and not service._leases
    service.close()


# ---- fair slots and body deadlines ---------------------------------------------------------------
def test_one_session_cannot_take_every_slot(model, tmp_path):
    app, service = build(model[1], tmp_path / "store", Limits(workers=1, max_queue=3, max_per_session=2))
    a, keys_a, x = client_material(model[1], seed=1)
    b, keys_b, _ = client_material(model[1], seed=2)
    sid_a, sid_b = session(app, keys_a), session(app, keys_b)
    body_a, body_b = b"".join(a.encrypt(x)), b"".join(b.encrypt(x))

    async def go():
        holds = [Held(body_a) for _ in range(3)]
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://henn") as http:
            url_a = f"/v1/sessions/{sid_a}/infer"
            first = [asyncio.create_task(http.post(url_a, content=h, headers=OCTETS)) for h in holds[:2]]
            await asyncio.gather(*(h.sent_half.wait() for h in holds[:2]))
            third = asyncio.create_task(http.post(url_a, content=holds[2], headers=OCTETS))
            await holds[2].sent_half.wait()
            holds[2].release()
            refused = await third
            other = await http.post(f"/v1/sessions/{sid_b}/infer", content=body_b, headers=OCTETS)
            for h in holds[:2]:
                h.release()
            return refused, other, await asyncio.gather(*first)

    refused, other, first = asyncio.run(go())
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "1"
    assert "its share" in refused.json()["detail"]
    assert other.status_code == 200 and [r.status_code for r in first] == [200, 200]
    assert service.limits.per_session == 2 and Limits(workers=1, max_queue=8).per_session == 5
    assert service.pending == 0 and not service._leases
    service.close()


@pytest.mark.parametrize("route", ["upload", "infer"])
@pytest.mark.parametrize("how", ["stalls", "crawls"])
def test_a_slow_body_gets_408_and_frees_its_slot(model, tmp_path, route, how):
    limits = Limits(read_timeout=0.4, min_rate=200, max_uploads=1, workers=1, max_queue=0)
    app, service = build(model[1], tmp_path / "store", limits)
    client, keys, x = client_material(model[1])
    sid = session(app, keys)
    infer = (f"/v1/sessions/{sid}/infer", b"".join(client.encrypt(x)))
    path, body = ("/v1/sessions", keys) if route == "upload" else infer

    async def go():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://henn") as http:
            slow = _stall(body[:24]) if how == "stalls" else _stall(body[:24], every=0.3, piece=body[24:34])
            t0 = asyncio.get_running_loop().time()
            r = await http.post(path, content=slow, headers=OCTETS)
            took = asyncio.get_running_loop().time() - t0
            return r, took, await http.post(path, content=body, headers=OCTETS)

    slow, took, after = asyncio.run(go())
    assert slow.status_code == 408 and slow.json()["error"] == "BodyTimeout", slow.text
    assert slow.headers["connection"] == "close"
    assert ("no byte" if how == "stalls" else "slower than 200 bytes/s") in slow.json()["detail"]
    assert took < 3.0
    assert after.status_code == (201 if route == "upload" else 200)  # the slot is free again
    assert service.pending == 0 and service.uploads == 0 and service.metrics["rejected_slow"] == 1
    assert not list((tmp_path / "store" / "keys").glob("*.part"))
    service.close()


def test_a_stop_answers_bodies_still_arriving_with_503(model, tmp_path):
    app, service = build(model[1], tmp_path / "store", Limits(read_timeout=60.0))
    _, keys, _ = client_material(model[1])

    async def go():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://henn") as http:
            upload = asyncio.create_task(http.post("/v1/sessions", content=_stall(keys[:24]), headers=OCTETS))
            await asyncio.sleep(0.2)
            app.state.gate.stop()
            return await asyncio.wait_for(upload, 5)

    r = asyncio.run(go())
    assert r.status_code == 503 and r.json()["error"] == "ShuttingDown" and r.headers["connection"] == "close"
    assert service.uploads == 0
    service.close()


@pytest.mark.parametrize(
    "bad",
    [
        {"read_timeout": 0},
        {"min_rate": 0},
        {"max_header_bytes": 100},
        {"max_per_session": -1},
        {"shutdown_timeout": float("inf")},
        {"max_uploads": 0},
    ],
)
def test_new_limits_are_checked(bad):
    with pytest.raises(InputError):
        Limits(**bad)


# ---- failures and logs ---------------------------------------------------------------------------
def test_an_unexpected_failure_is_a_json_500_without_traceback_or_session_id(model, tmp_path, caplog):
    app, service = build(model[1], tmp_path / "store", Limits())
    secret = "Q" * 32

    def broken():
        raise FileNotFoundError(f"[Errno 2] No such file: '/store/keys/{secret}.keys'")

    service.health = broken
    with caplog.at_level(logging.INFO):
        (r,) = run(app, [("GET", "/health", None)])
    assert r.status_code == 500 and r.json()["error"] == "InternalError" and secret not in r.text
    assert "internal error on GET /health: FileNotFoundError" in caplog.text
    assert secret not in caplog.text and "Traceback" not in caplog.text
    service.close()


def test_log_lines_never_hold_a_full_session_id():
    sid = "aB3_-x" + "k" * 26
    assert redact(f"POST /v1/sessions/{sid}/infer") == "POST /v1/sessions/aB3_-x.../infer"
    assert redact(f"/v1/sessions/{'A' * 300}") == "/v1/sessions/<malformed id>"
    for once in (f"DELETE /v1/sessions/{sid}", f"/v1/sessions/{'A' * 300}/infer"):
        assert redact(redact(once)) == redact(once)
    assert redact(f"open('/store/keys/{sid}.keys')") == "open('/store/keys/aB3_-x....keys')"
    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, "", 0, '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "DELETE", f"/v1/sessions/{sid}\n", "1.1", 204), None,
    )  # fmt: skip
    RedactFilter().filter(record)
    line = record.getMessage()
    assert sid not in line and "aB3_-x" in line and "\n" not in line
    try:
        raise FileNotFoundError(f"/keys/{sid}.keys")
    except FileNotFoundError:
        import sys

        record = logging.LogRecord("x", logging.ERROR, "", 0, "failed", (), sys.exc_info())
    RedactFilter().filter(record)
    text = logging.Formatter().format(record)  # sets exc_text
    assert record.exc_text is not None
    assert sid not in text and "FileNotFoundError" in record.exc_text


# ---- the parameter fingerprint -------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["plain", "lattigo"])
def test_the_model_description_reports_the_fingerprint_of_the_wire_headers(tmp_path, backend):
    """On Lattigo the program's parameters lack the primes the library picks: their fingerprint is not the
    headers'; /v1/model must give the headers' one, so that a client can check it before uploading keys."""
    _, path = compile_file(tmp_path / f"{backend}.henn", backend=backend)
    app, service = build(path, tmp_path / "store", Limits())
    (r,) = run(app, [("GET", "/v1/model", None)])
    client = Client.load(path)
    be = open_backend(backend, client.program.params)
    sk = be.generate_secret_key()
    ct = be.serialize(be.encrypt(np.zeros(4), sk))
    assert r.json()["params_fingerprint"] == serialization.unpack(ct)[1]["params"]
    be.check_header("ciphertext", serialization.unpack(ct)[1], len(serialization.unpack(ct)[2]))
    client.close()
    be.close()
    service.close()
