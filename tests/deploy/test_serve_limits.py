"""The server's limits, in process (the ASGI app through httpx, no sockets) so that they are
deterministic: a full queue answers 429, a full memory budget 503, both with a JSON body and a
Retry-After; idle sessions are evicted to disk and come back; sessions expire."""

from __future__ import annotations

import asyncio
import time

import httpx
import numpy as np
import pytest
from deploy_support import SQUARE_ZOO, compile_file, digits

from henn.deploy.local import Client
from henn.deploy.serve import build
from henn.deploy.service import Limits
from henn.deploy.wire import CONTENT_TYPE
from henn.errors import CapacityError, InputError

OCTETS = {"Content-Type": CONTENT_TYPE}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return compile_file(tmp_path_factory.mktemp("model") / "plain.henn")


def client_material(path, n=1, seed=0):
    client = Client.load(path, seed=seed)
    client.generate_keys()
    x, _ = digits(n)
    return client, b"".join(client.key_blobs()), x


def run(app, requests):
    """Send requests [(method, path, body)] in order; the answers."""

    async def go():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://henn") as http:
            return [await http.request(m, p, content=b, headers=OCTETS) for m, p, b in requests]

    return asyncio.run(go())


def session(app, keys) -> str:
    (r,) = run(app, [("POST", "/v1/sessions", keys)])
    assert r.status_code == 201, r.text
    return r.json()["session"]


def test_a_full_queue_answers_429_and_recovers(model, tmp_path):
    app, service = build(model[1], tmp_path / "store", Limits(workers=1, max_queue=0))
    client, keys, x = client_material(model[1])
    sid = session(app, keys)
    body = b"".join(client.encrypt(x))
    service.pending = 1  # one request running, none may wait
    (r,) = run(app, [("POST", f"/v1/sessions/{sid}/infer", body)])
    assert r.status_code == 429 and r.headers["Retry-After"] == "1"
    assert r.json()["error"] == "BusyError" and "queue is full" in r.json()["detail"]
    service.pending = 0
    (r,) = run(app, [("POST", f"/v1/sessions/{sid}/infer", body)])
    assert r.status_code == 200
    assert "henn_rejected_busy 1\n" in run(app, [("GET", "/metrics", None)])[0].text
    service.close()


def test_the_memory_budget_evicts_idle_sessions_and_refuses_busy_ones(model, tmp_path):
    _, probe = build(model[1], tmp_path / "probe", Limits())  # the budget of exactly one session
    one = probe.session_cost + (probe.limits.memory_budget - probe.session_budget)
    probe.close()
    app, service = build(model[1], tmp_path / "store", Limits(memory_budget=one))
    a, keys_a, x = client_material(model[1], seed=1)
    b, keys_b, _ = client_material(model[1], seed=2)
    sid_a = session(app, keys_a)
    sid_b = session(app, keys_b)  # evicts a (idle): its keys stay on disk
    assert list(service._live) == [sid_b]
    (r,) = run(app, [("POST", f"/v1/sessions/{sid_a}/infer", b"".join(a.encrypt(x)))])  # a comes back, b goes
    assert r.status_code == 200 and list(service._live) == [sid_a]
    np.testing.assert_allclose(a.decrypt(_split(r.content, a), 1), model[0].run(x, encrypted=False), atol=1e-6)
    service._live[sid_a].users = 1  # a is in use: b cannot come back now
    (r,) = run(app, [("POST", f"/v1/sessions/{sid_b}/infer", b"".join(b.encrypt(x)))])
    assert r.status_code == 503 and r.json()["error"] == "CapacityError" and "memory budget" in r.json()["detail"]
    service._live[sid_a].users = 0
    (r,) = run(app, [("POST", f"/v1/sessions/{sid_b}/infer", b"".join(b.encrypt(x)))])
    assert r.status_code == 200
    service.close()


def _split(body, client):
    from henn.deploy.wire import split

    return split(body, client.backend, kinds=("ciphertext",), max_objects=client.program.output_cts)


def test_a_budget_below_one_session_is_refused_at_start(model, tmp_path):
    with pytest.raises(CapacityError, match="memory budget"):
        build(model[1], tmp_path / "store", Limits(memory_budget=1 << 20))


def test_sessions_expire(model, tmp_path):
    app, service = build(model[1], tmp_path / "store", Limits(session_ttl=0.5))
    client, keys, x = client_material(model[1])
    sid = session(app, keys)
    time.sleep(0.6)
    (r,) = run(app, [("POST", f"/v1/sessions/{sid}/infer", b"".join(client.encrypt(x)))])
    assert r.status_code == 404 and "expired" in r.json()["detail"]
    assert service.store.count() == 0 and not list((tmp_path / "store" / "keys").iterdir())
    service.close()


@pytest.mark.parametrize("bad", [{"workers": 0}, {"max_queue": -1}, {"session_ttl": 0.0}, {"memory_budget": True}])
def test_limits_are_checked(bad):
    with pytest.raises(InputError):
        Limits(**bad)


def test_a_session_belongs_to_its_model(model, tmp_path):
    """Another model served from the same store does not see the sessions of the first."""
    app, service = build(model[1], tmp_path / "store", Limits())
    client, keys, x = client_material(model[1])
    sid = session(app, keys)
    service.close()
    _, other = compile_file(tmp_path / "other.henn", model=SQUARE_ZOO)
    app, service = build(other, tmp_path / "store", Limits())
    (r,) = run(app, [("POST", f"/v1/sessions/{sid}/infer", b"".join(client.encrypt(x)))])
    assert r.status_code == 404 and "unknown session" in r.json()["detail"]
    service.close()
