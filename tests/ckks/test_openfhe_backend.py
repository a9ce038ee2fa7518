"""The OpenFHE backend's own behaviour: its worker process and what the conformance suite cannot see (special
primes as OpenFHE makes them, pipe overhead, a dead, hung or failing worker, foreign objects)."""

from __future__ import annotations

import os
import re
import signal
import time

import numpy as np
import pytest

from henn.ckks import presets, serialization
from henn.ckks.primes import ntt_primes
from henn.ckks.values import EvaluationKeys
from henn.ckks.backends import usable_class
from henn.ckks.backends.openfhe import mapping
from henn.errors import BackendError, InputError, ParameterError, SerializationError


@pytest.fixture(scope="module")
def cls():
    try:
        return usable_class("openfhe")
    except BackendError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture()
def short(cls):
    be = cls(presets.get("insecure_short_d4"))
    yield be
    be.close()


def test_special_primes_are_openfhes(cls, short):
    """The special primes recomputed here are the ones in a serialized relinearization key."""
    sk = short.generate_secret_key()
    rk = short.generate_relin_key(sk)
    _, (data,) = short._conn.request("serialize", h=rk.raw.id, what="rk")
    # the binary key holds each of its moduli as a little-endian u64: ours, and no further special prime
    assert all(p.to_bytes(8, "little") in data for p in short.p_primes)
    more = mapping.special_primes(list(short.q_primes), 1, short.params.n)  # one digit: more special primes
    assert len(more) > len(short.p_primes) and more[len(short.p_primes)].to_bytes(8, "little") not in data


@pytest.mark.parametrize("primes,special,dnum", [(6, 1, 6), (6, 2, 3), (5, 2, 3), (5, 4, 2), (14, 14, 1), (1, 1, 1)])
def test_digit_count_is_one_openfhe_accepts(primes, special, dnum):
    assert mapping.digits(primes, special) == dnum


def test_fixed_mode_runs_on_the_shared_primes(cls):
    """henn's fixed primes written into OpenFHE's context: its chain is theirs, its special primes are the ones
    in a key, and a second worker (the server) makes the same context: it evaluates the first one's ciphertexts
    with its keys, and the first decrypts the result."""
    from henn.ckks.selection import select_parameters

    params = select_parameters(3, backend="openfhe", mode="fixed")
    assert params.p is not None
    with cls(params) as client, cls(params) as server:
        assert client.q_primes == params.q == server.q_primes and client.p_primes[0] == params.p[0]
        sk, keys = client.generate_keys(rotations=[1])
        _, (data,) = client._conn.request("serialize", h=keys.relin.raw.id, what="rk")
        assert all(p.to_bytes(8, "little") in data for p in client.p_primes)
        x = np.linspace(-1, 1, client.slots)
        ct = server.deserialize(client.serialize(client.encrypt(x, keys.public)))
        ev = server.evaluator(
            EvaluationKeys(
                relin=server.deserialize(client.serialize(keys.relin)),
                galois=server.deserialize(client.serialize(keys.galois)),
            )
        )
        out = client.deserialize(server.serialize(ev.rotate(ev.rescale(ev.multiply(ct, ct)), 1)))
        assert np.max(np.abs(client.decrypt_decode(out, sk) - np.roll(x * x, -1))) < 1e-5


def test_fixed_mode_with_bootstrapping_is_refused(cls):
    boot = presets.get("insecure_boot_n12_openfhe")
    q = ntt_primes(boot.log_q, boot.log_n)
    pinned = boot.with_primes(tuple(q), tuple(ntt_primes(boot.log_p, boot.log_n, exclude=q)))
    with pytest.raises(ParameterError, match="bootstrapping"):
        cls(pinned)


def test_recommendation_opens(cls):
    from henn.ckks.selection import select_parameters

    params = select_parameters(3, backend="openfhe", mode="library", slots=1024)
    with cls(params) as be:
        assert len(be.q_primes) == 4 and be.p_primes
        sk, keys = be.generate_keys()
        x = np.linspace(-1, 1, be.slots)
        assert np.max(np.abs(be.decrypt_decode(be.encrypt(x, keys.public), sk) - x)) < 1e-6


def test_pipe_overhead_is_small(short):
    """A request that does almost nothing costs well under a millisecond (the pipe, JSON and Python on both
    sides): OpenFHE's own work dominates every real operation."""
    conn = short._conn
    conn.request("hello")
    t0 = time.perf_counter()
    for _ in range(200):
        conn.request("hello")
    per_call = (time.perf_counter() - t0) / 200
    assert per_call < 2e-3, f"{per_call * 1e3:.2f} ms per round trip"


def test_killed_worker_becomes_backend_error(cls):
    be = cls(presets.get("insecure_short_d2"))
    sk, keys = be.generate_keys()
    ct = be.encrypt([0.5], keys.public)
    os.kill(be._conn.proc.pid, signal.SIGKILL)
    with pytest.raises(BackendError, match="signal 9"):
        be.evaluator(keys).add(ct, ct)
    with pytest.raises(BackendError, match="stopped"):
        be.encrypt([0.5], keys.public)
    be.close()


def test_hung_worker_times_out(cls):
    be = cls(presets.get("insecure_short_d2"), timeout=1.0)
    os.kill(be._conn.proc.pid, signal.SIGSTOP)
    t0 = time.monotonic()
    with pytest.raises(BackendError, match="did not answer"):
        be.generate_secret_key()
    assert time.monotonic() - t0 < 15
    be.close()


def test_openfhe_exception_becomes_backend_error(short):
    low = short.encrypt([1.0], short.generate_keys()[1].public, level=0)
    with pytest.raises(BackendError, match="OpenFHE failed in rescale"):  # below level 0: henn refuses it first
        short._conn.request("rescale", a=low.raw.id)
    assert short.decode(short.encode([0.25]))[0] == pytest.approx(0.25)  # the worker lives on


def test_unknown_handles_and_other_backends_are_refused(cls, short):
    sk, keys = short.generate_keys()
    ct = short.encrypt([0.5], keys.public)
    with pytest.raises(InputError, match="unknown handle"):
        short._conn.request("negate", a=10**9)
    with pytest.raises(InputError, match="is a ct, not a pt"):
        short._conn.request("decode", pt=ct.raw.id, scale=1.0)
    with cls(presets.get("insecure_short_d4")) as other:
        with pytest.raises(InputError, match="between backends"):
            other._negate(ct.raw)
        assert other._raw_kinds(ct.raw) == frozenset()


def test_foreign_payload_behind_a_valid_header_is_a_serialization_error(short):
    sk, keys = short.generate_keys()
    data = short.serialize(short.encrypt(np.ones(8), keys.public))
    kind, meta, payload = serialization.unpack(data)
    assert isinstance(payload, bytes)  # a copy: unpack gives a view only when asked
    for bad in (payload[: len(payload) // 2], b"\0" * 64, payload[:100] + bytes(len(payload) - 100)):
        with pytest.raises(SerializationError):
            short.deserialize(serialization.pack(kind, meta, bad))
    assert short.deserialize(data).level == short.max_level  # still working


def test_threads_option_reaches_the_worker(cls):
    with cls(presets.get("insecure_short_d2"), threads=1) as be:
        env = open(f"/proc/{be._conn.proc.pid}/environ", "rb").read().split(b"\0")
        assert b"OMP_NUM_THREADS=1" in env and b"OMP_WAIT_POLICY=passive" in env


def test_scaling_techniques(cls):
    x = np.linspace(-1, 1, 1024)
    for tech in ("FIXEDAUTO", "FLEXIBLEAUTO", "FLEXIBLEAUTOEXT"):
        with cls(presets.get("insecure_short_d4"), scaling_technique=tech) as be:
            sk, keys = be.generate_keys()
            ev = be.evaluator(keys)
            ct = be.encrypt(x, keys.public)
            assert ct.level == be.max_level
            r = ev.rescale(ev.multiply(ev.rescale(ev.multiply(ct, ct)), 0.5))
            assert r.level == be.max_level - 2
            assert np.max(np.abs(be.decrypt_decode(r, sk) - 0.5 * x * x)) < 1e-4
            low = be.encrypt(x, sk, level=be.max_level - 1)  # below the top: no extended encryption
            back = be.deserialize(be.serialize(ev.add(low, ev.drop_level(ct, 1))))
            assert np.max(np.abs(be.decrypt_decode(back, sk) - 2 * x)) < 1e-6


def test_flexibleautoext_counts_its_extra_prime(cls):
    """FLEXIBLEAUTOEXT's extra prime sits above henn's chain: the levels and primes henn sees are those of the
    same parameters without it, and the worker's chain (what the security check sums) holds one more."""
    params = presets.get("insecure_short_d4")
    with cls(params, scaling_technique="FLEXIBLEAUTO") as flex, cls(params, scaling_technique="FLEXIBLEAUTOEXT") as ext:
        assert ext.q_primes == flex.q_primes and ext.max_level == flex.max_level
        assert ext.context_primes[:-1] == flex.context_primes and ext.context_primes[-1].bit_length() < 31
    with pytest.raises(ParameterError, match="scaling technique"):
        cls(presets.get("insecure_short_d2"), scaling_technique="COMPOSITESCALINGAUTO")


def test_version_names_openfhe(cls):
    assert re.match(r"openfhe 1\.6\.1", cls.version())


def test_a_ciphertext_of_other_openfhe_parameters_is_refused(short):
    """Another OpenFHE context's ciphertext (other ring and primes) under this backend's own header: OpenFHE
    would load it; the worker refuses it as data of other parameters."""
    sk, keys = short.generate_keys()
    mine = short.serialize(short.encrypt(np.ones(8), keys.public))
    kind, meta, _ = serialization.unpack(mine)
    with type(short)(presets.get("insecure_short_d2")) as other:
        _, okeys = other.generate_keys()
        ct = other.encrypt(np.ones(8), okeys.public, level=min(other.max_level, meta["level"]))
        _, _, theirs = serialization.unpack(other.serialize(ct))
        assert isinstance(theirs, bytes)  # a copy: unpack gives a view only when asked
    with pytest.raises(SerializationError, match="other parameters|primes|corrupted"):
        short.deserialize(serialization.pack(kind, meta, theirs))


def test_pipes_carry_a_mebibyte_per_write(short):
    """Both pipes are widened from 64 KiB (a CIFAR-10 image moves ~0.5 GB of weights through them when the
    plaintext cache is capped): fewer switches between the two processes."""
    import fcntl
    from pathlib import Path

    want = min(1 << 20, int(Path("/proc/sys/fs/pipe-max-size").read_text()))
    assert fcntl.fcntl(short._conn._req, fcntl.F_GETPIPE_SZ) == want
    assert fcntl.fcntl(short._conn._rep, fcntl.F_GETPIPE_SZ) == want
