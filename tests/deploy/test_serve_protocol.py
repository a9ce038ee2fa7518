"""`henn serve` in a real process on 127.0.0.1 with real clients (henn.connect), on the plain backend
(the protocol, not the cryptography: test_serve_lattigo.py runs real keys): predictions equal the
in-process run, a restart keeps the sessions, several clients at once, and hostile requests get a
4xx with a clear message while the server keeps serving the others."""

from __future__ import annotations

import json
import socket
import struct
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
from deploy_support import ServerProcess, compile_file, digits

import henn
from henn.ckks import open_backend, presets, serialization
from henn.deploy.local import Client
from henn.deploy.wire import CONTENT_TYPE

OCTETS = {"Content-Type": CONTENT_TYPE}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return compile_file(tmp_path_factory.mktemp("model") / "plain.henn")


@pytest.fixture(scope="module")
def server(model, tmp_path_factory):
    with ServerProcess(model[1], tmp_path_factory.mktemp("store") / "sessions") as srv:
        yield srv


def expected(model, x):
    return model[0].run(x, encrypted=False)


def test_predictions_equal_the_in_process_run(model, server):
    x, labels = digits(4)
    with henn.connect(server.url, progress=False) as remote:
        got = remote.predict(x)
        assert remote.stats["requests"] == 4 and remote.stats["key_bytes"] > 0
    np.testing.assert_allclose(got, expected(model, x), atol=1e-6)
    assert (got.argmax(1) == labels).all()


def test_a_restart_keeps_the_session(model, server):
    x, _ = digits(2)
    remote = henn.connect(server.url, progress=False)
    try:
        first = remote.predict(x[:1])
        server.restart()
        second = remote.predict(x[1:])  # the same session id, now served from the store
        assert httpx.get(server.url + "/health").json()["sessions"] >= 1
    finally:
        remote.close()
    np.testing.assert_allclose(np.concatenate([first, second]), expected(model, x), atol=1e-6)


def test_several_clients_at_once(model, server):
    x, _ = digits(8)

    def one(i):
        with henn.connect(server.url, progress=False) as remote:
            return remote.predict(x[2 * i : 2 * i + 2])

    with ThreadPoolExecutor(4) as pool:
        got = np.concatenate(list(pool.map(one, range(4))))
    np.testing.assert_allclose(got, expected(model, x), atol=1e-6)


# ---- hostile requests ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def material(model):
    """Serialized keys and ciphertexts of a genuine client, and of foreign ones."""
    _, path = model
    client = Client.load(path, seed=0)
    client.generate_keys()
    keys = client.key_blobs()
    x, _ = digits(1)
    cts = client.encrypt(x)
    program = client.program
    other = Client.load(path, seed=1)  # another key set
    other.generate_keys()
    foreign = open_backend("plain", presets.get("insecure_short_d4"))
    _, fkeys = foreign.generate_keys(rotations=[1, 2], relin=True)
    be = client.backend
    sk, few = be.generate_keys(rotations=program.rotation_steps[:2], relin=True)  # keys of another model
    assert client.runtime.keys is not None
    return {
        "keys": keys,
        "cts": cts,
        "other_cts": other.encrypt(x),
        "foreign_keys": [foreign.serialize(fkeys.relin), foreign.serialize(fkeys.galois)],
        "few_keys": [be.serialize(few.relin), be.serialize(few.galois)],
        "public_key": be.serialize(client.runtime.keys.public),
    }


def _session(server, keys) -> str:
    r = httpx.post(server.url + "/v1/sessions", content=b"".join(keys), headers=OCTETS)
    assert r.status_code == 201, r.text
    return r.json()["session"]


def _huge_header(blob: bytes) -> bytes:
    """A genuine header whose length field announces 1 TiB of payload (the crc, which would
    catch it once everything arrived, is never reached), followed by a little data."""
    head = bytearray(blob[: serialization.HEADER_SIZE])
    struct.pack_into("<Q", head, 10, 1 << 40)  # magic 4s, version B, kind B, meta length I, payload length Q
    return bytes(head) + blob[serialization.HEADER_SIZE :] + b"\0" * 4096


def _too_many_steps(blob: bytes) -> bytes:
    """Galois keys for 4000 rotations announcing 1 GiB (within what 4000 keys may take, beyond this model's
    keys): refused on the header, before the gigabyte is sent."""
    kind, meta, payload = serialization.unpack(blob)
    meta["steps"] = list(range(1, 4001))
    head = bytearray(serialization.pack(kind, meta, b""))
    struct.pack_into("<Q", head, 10, 1 << 30)
    return bytes(head) + b"\0" * 4096


KEY_CASES = {  # body -> (status, words of the message)
    "random bytes": (lambda m: np.random.default_rng(3).bytes(5000), 400, "bad magic"),
    "truncated": (lambda m: b"".join(m["keys"])[:-100], 400, "truncated"),
    "empty": (lambda m: b"", 400, "no henn objects"),
    "oversized announced": (lambda m: _huge_header(m["keys"][-1]), 400, "exceeds"),
    "oversized for this model": (lambda m: _too_many_steps(m["keys"][-1]), 413, "would exceed"),
    "foreign parameters": (lambda m: b"".join(m["foreign_keys"]), 400, "other encryption parameters"),
    "keys of another model": (lambda m: b"".join(m["few_keys"]), 400, "lack rotation steps"),
    "a public key": (lambda m: m["public_key"] + b"".join(m["keys"]), 400, "public_key"),
    "no relinearization key": (lambda m: m["keys"][-1], 400, "no relinearization key"),
    "keys twice": (lambda m: b"".join(m["keys"] + m["keys"][:1]), 400, "more than 2 objects"),
}


@pytest.mark.parametrize("case", sorted(KEY_CASES))
def test_hostile_key_uploads_are_refused(server, material, case):
    body, status, words = KEY_CASES[case]
    r = httpx.post(server.url + "/v1/sessions", content=body(material), headers=OCTETS, timeout=60)
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json" and words in r.json()["detail"]


def test_hostile_inference_requests_are_refused(server, material, model):
    sid = _session(server, material["keys"])
    url = f"{server.url}/v1/sessions/{sid}/infer"
    good = b"".join(material["cts"])
    cases = [
        (url, good, {"Content-Type": "application/json"}, 415, "Content-Type"),
        (url, good, {}, 415, "Content-Type"),
        (url, good[: len(good) // 2], OCTETS, 400, "truncated"),
        (url, good + good[:200], OCTETS, 400, "more than"),
        (url, _huge_header(material["cts"][0]), OCTETS, 400, "exceeds"),
        (url, b"".join(material["other_cts"]), OCTETS, 400, "key set"),
        (url, b"".join(material["cts"][:-1]), OCTETS, 400, "ciphertexts"),
        (url, b"".join(material["keys"]), OCTETS, 400, "takes ciphertext only"),
        (f"{server.url}/v1/sessions/{'A' * 32}/infer", good, OCTETS, 404, "unknown session"),
    ]
    for target, body, headers, status, words in cases:
        r = httpx.post(target, content=body, headers=headers, timeout=60)
        assert r.status_code == status and words in r.json()["detail"], (words, r.status_code, r.text)
    assert httpx.get(url).status_code == 405
    assert httpx.delete(f"{server.url}/v1/sessions/nope").status_code == 404
    # the server keeps serving: the same session, and a new client
    r = httpx.post(url, content=good, headers=OCTETS)
    assert r.status_code == 200 and int(r.headers["X-Henn-Objects"]) == model[0].program.output_cts
    x, _ = digits(1)
    with henn.connect(server.url, progress=False) as remote:
        np.testing.assert_allclose(remote.predict(x), expected(model, x), atol=1e-6)
    metrics = httpx.get(server.url + "/metrics").text
    assert "henn_rejected_input" in metrics and "henn_rejected_input 0\n" not in metrics


def test_logs_hold_no_keys_ciphertexts_or_session_ids(server, material):
    sid = _session(server, material["keys"])
    httpx.post(f"{server.url}/v1/sessions/{sid}/infer", content=b"".join(material["cts"]), headers=OCTETS)
    log = server.log.read_text()
    assert "session" in log and sid[:6] in log  # it does log, with a short id only
    assert sid not in log
    _, _, payload = serialization.unpack(material["keys"][-1])
    assert isinstance(payload, bytes)  # a copy: unpack gives a view only when asked
    assert payload.decode()[:30] not in log and "key_id" not in log
    meta = serialization.unpack(material["cts"][0])[1]
    assert meta["key_id"] not in log and json.dumps(meta)[:20] not in log


def test_the_model_description_health_and_metrics(model, server, material):
    cm = model[0]
    d = httpx.get(server.url + "/v1/model").json()
    assert d["backend"] == "plain" and d["input_shape"] == [1, 28, 28] and d["output_shape"] == [10]
    assert d["rotation_steps"] == list(cm.rotation_steps)
    for blob in material["keys"] + material["cts"]:  # the value a client compares with its objects' headers
        assert d["params_fingerprint"] == serialization.unpack(blob)[1]["params"]
    assert d["limits"]["max_queue"] == 8 and d["limits"]["workers"] == 1 and d["max_bytes"]["keys"] > 0
    assert httpx.get(server.url + "/health").json()["status"] == "ok"
    metrics = httpx.get(server.url + "/metrics")
    assert metrics.headers["content-type"].startswith("text/plain") and "henn_inferences " in metrics.text


def test_a_client_that_goes_away_mid_upload_leaves_nothing_behind(server, material):
    body = b"".join(material["keys"])
    refusals = server.log.read_text().count("POST /v1/sessions -> 400 SerializationError")
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        head = (
            f"POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {CONTENT_TYPE}\r\n"
            f"Content-Length: {len(body) + 100000}\r\n\r\n"
        )
        s.sendall(head.encode() + body)
    deadline = time.monotonic() + 20
    while server.log.read_text().count("POST /v1/sessions -> 400 SerializationError") == refusals:
        assert time.monotonic() < deadline, "the server never refused the cut upload"
        time.sleep(0.1)
    assert not list((server.store / "keys").glob("*.part"))
    assert httpx.get(server.url + "/health").json()["status"] == "ok"
    assert "internal error" not in server.log.read_text()
