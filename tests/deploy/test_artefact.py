"""The model file: what `henn compile --out` writes, Server.load / Client.load read back (without
the compiler), verified on loading and refused when damaged or forged."""

from __future__ import annotations

import dataclasses
import io
import json
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from deploy_support import REPO, compile_file, digits

import henn
from henn.deploy import Artefact, Client, Server
from henn.errors import InputError, SerializationError
from henn.program import step_archive


@pytest.fixture(scope="module")
def plain_model(tmp_path_factory):
    return compile_file(tmp_path_factory.mktemp("model") / "m.henn")


def test_round_trip_keeps_program_and_checks(plain_model):
    cm, path = plain_model
    art = Artefact.load(path)
    assert art.program.summary() == cm.program.summary() and art.program.rotation_steps == cm.rotation_steps
    for got, want in zip(art.program.steps, cm.program.steps):
        (got_entry, got_arrays), (want_entry, want_arrays) = step_archive(got), step_archive(want)
        assert got_entry == want_entry and all(np.array_equal(got_arrays[k], a) for k, a in want_arrays.items())
    assert len(art.digest) == 64
    assert art.backend == "plain" and art.model == "mnist-cnn_swish-rg7-deg4"
    assert art.checks.intervals == cm.activation_intervals() and art.checks.mode == "error"
    d = art.describe()
    assert d["rotation_steps"] == list(cm.rotation_steps) and d["input_ciphertexts"] == cm.program.input_cts
    assert d["max_bytes"]["keys"] > 0 and d["max_bytes"]["request"] > 0


def test_client_and_server_from_the_file_match_the_in_process_run(plain_model):
    cm, path = plain_model
    x, _ = digits(3)
    client, server = Client.load(path), Server.load(path)
    client.generate_keys()
    session = server.open_session(server.read_keys(client.key_blobs()))
    got = np.concatenate([client.decrypt(server.evaluate(session, client.encrypt(x[i : i + 1])), 1) for i in range(3)])
    np.testing.assert_allclose(got, cm.run(x, encrypted=False), atol=1e-6)


@pytest.mark.parametrize("encode", [True, False])
def test_sessions_share_the_weights_encoded_once(plain_model, encode):
    """The weights do not depend on the keys: the server encodes them once (at load by default, so the first
    request pays nothing; else at the first session) and every session reads the same plaintexts."""
    cm, path = plain_model
    x, _ = digits(2)
    server = Server.load(path, encode=encode)
    assert server.weights[0].prepared is encode and (server.seconds["encode"] > 0) is encode
    clients, sessions = [], []
    for _ in range(2):
        client = Client.load(path)
        client.generate_keys()
        clients.append(client)
        sessions.append(server.open_session(server.read_keys(client.key_blobs())))
    assert all(s.executor.weights is server.weights[0] for s in sessions)
    assert sessions[1].seconds["prepare"] == 0.0  # nothing left to encode
    for k, (client, session) in enumerate(zip(clients, sessions)):
        got = client.decrypt(server.evaluate(session, client.encrypt(x[k : k + 1])), 1)
        np.testing.assert_allclose(got, cm.run(x[k : k + 1], encrypted=False), atol=1e-6)
    server.close()
    assert not server.weights[0].plain  # the plaintexts went before the backend


def test_an_executor_refuses_weights_encoded_for_another_program(plain_model):
    from henn.runtime import Client as RuntimeClient
    from henn.runtime import Server as RuntimeServer
    from henn.runtime.encoded import EncodedWeights

    cm, path = plain_model
    server = Server.load(path)
    other = Artefact.load(path).program  # equal, but not the program these weights were encoded for
    keys = RuntimeClient(other, server.backend).generate_keys()
    with pytest.raises(InputError, match="encoded weights serve the program and backend"):
        RuntimeServer(other, server.backend, keys, weights=server.weights[0])
    RuntimeServer(other, server.backend, keys, weights=EncodedWeights(other, server.backend)).close()
    server.close()


def test_the_file_carries_the_activation_range_check(plain_model):
    cm, path = plain_model
    x, _ = digits(1)
    with pytest.raises(InputError, match="pre-activations") as in_process:
        cm.check_input(x * 50)
    with pytest.raises(InputError, match="pre-activations") as from_file:
        Client.load(path).check(x * 50)
    assert str(from_file.value) == str(in_process.value)
    Client.load(path).check(x)  # in range: accepted


def test_loading_never_imports_the_compiler(plain_model):
    _, path = plain_model
    code = (
        "import sys; from henn.deploy import Client, Server; Client.load(sys.argv[1]); Server.load(sys.argv[1]);"
        "bad = [m for m in sys.modules if m.startswith(('henn.compiler', 'henn.passes', 'henn.frontend', 'onnx'))];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO / "src")},
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def _rewrite(data: bytes, change) -> bytes:
    """The model file with its archive members changed by change(dict name -> bytes)."""
    members = {}
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        for name in z.namelist():
            members[name] = z.read(name)
    change(members)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, blob in members.items():
            z.writestr(name, blob)
    return buf.getvalue()


def _manifest(change):
    def edit(members):
        arr = np.load(io.BytesIO(members["__manifest__.npy"]))
        m = json.loads(bytes(arr).decode())
        change(m)
        buf = io.BytesIO()
        np.save(buf, np.frombuffer(json.dumps(m).encode(), np.uint8))
        members["__manifest__.npy"] = buf.getvalue()

    return edit


def _pickled(members):
    buf = io.BytesIO()
    np.save(buf, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    members["program.npy"] = buf.getvalue()


HOSTILE = {
    "random bytes": lambda d: np.random.default_rng(7).bytes(4096),
    "truncated": lambda d: d[: len(d) // 2],
    "empty": lambda d: b"",
    "other format": lambda d: _rewrite(d, _manifest(lambda m: m.update(format="henn-model/0"))),
    "unknown backend": lambda d: _rewrite(d, _manifest(lambda m: m.update(backend="../../evil"))),
    "program swapped": lambda d: _rewrite(d, _manifest(lambda m: m.update(program_sha256="0" * 64))),
    "pickled program": lambda d: _rewrite(d, _pickled),
    "check op not allowed": lambda d: _rewrite(
        d, _manifest(lambda m: m["checks"]["graph"]["nodes"][0].update(op="bootstrap"))
    ),
    "check interval NaN-like": lambda d: _rewrite(
        d, _manifest(lambda m: m["checks"]["intervals"].update({k: [0, -1] for k in m["checks"]["intervals"]}))
    ),
    "check weights missing": lambda d: _rewrite(d, lambda ms: ms.pop(next(k for k in ms if k.startswith("check.")))),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_damaged_or_forged_files_are_refused(plain_model, case):
    _, path = plain_model
    data = HOSTILE[case](path.read_bytes())
    with pytest.raises(SerializationError):
        Artefact.from_bytes(data)


def _bootstrapping_file(tmp_path, backend: str):
    """(CompiledModel, model file) of paper 000's MNIST CNN (depth 7) over 3 levels between bootstraps."""
    from henn.ckks import presets
    from henn.deploy.checks import InputChecks

    x, _ = digits(300)
    cm = henn.compile(
        str(REPO / "src/henn/zoo/mnist-cnn_swish-rg7-deg4.onnx"),
        (1, 28, 28),
        backend=backend,
        params=presets.get("insecure_boot_n12"),
        bootstrap=True,
        calibration=x[:200],
    )
    assert cm.program.bootstraps >= 2
    checks = InputChecks.from_compiled(
        cm.compiled.checked, cm.activation_intervals(), cm.activation_check, cm.compiled.final
    )
    path = tmp_path / f"deep-{backend}.henn"
    Artefact(cm.program, backend, checks, model="deep").save(path)
    return cm, path


@pytest.mark.parametrize("backend", ["plain", "lattigo"])
def test_a_bootstrapping_model_file_runs_with_uploaded_bootstrapping_keys(tmp_path, backend):
    cm, path = _bootstrapping_file(tmp_path, backend)
    x, labels = digits(303)
    x, labels = x[300:303], labels[300:303]  # not among the calibration images
    art = Artefact.load(path)
    assert art.describe()["bootstraps"] == cm.program.bootstraps
    assert art.describe()["max_bytes"]["bootstrap_keys"] > 0
    client, server = Client.load(path), Server.load(path)
    client.generate_keys()
    blobs = client.key_blobs()
    assert len(blobs) == 3  # relinearization, Galois and bootstrapping keys
    with pytest.raises(InputError, match="upload its bootstrapping keys too"):
        server.read_keys(blobs[:2])
    session = server.open_session(server.read_keys(blobs))
    got = np.concatenate([client.decrypt(server.evaluate(session, client.encrypt(x[i : i + 1])), 1) for i in range(3)])
    ref = cm.reference(x)
    assert np.abs(got - ref).max() < 0.05 and (got.argmax(1) == ref.argmax(1)).all()
    with pytest.raises(InputError, match="pre-activations"):  # the activation check comes first
        Client.load(path).check(x * 40.0)
    boot_only = dataclasses.replace(art.checks, graph=None)  # the file's own bootstrap bound check, alone
    boot_only.run(x)
    with pytest.raises(InputError, match="beyond the bound"):
        boot_only.run(x * 40.0)
    boot_only.with_mode("warn").run(x * 40.0)  # logged per image: the batch goes on


def test_a_bootstrapping_program_without_its_bound_checks_is_refused(tmp_path):
    from henn.deploy.checks import InputChecks

    cm, _ = _bootstrapping_file(tmp_path, "plain")
    checks = InputChecks.from_compiled(cm.compiled.checked, cm.activation_intervals(), cm.activation_check)
    with pytest.raises(SerializationError, match="bootstrap steps but the input checks bound 0"):
        Artefact(cm.program, "plain", checks, model="deep").save(tmp_path / "deep.henn")
    assert not (tmp_path / "deep.henn").exists()
