"""The model file's client part: no weight byte in it (unless the server opts in to sharing the input
checks), a client that has only it runs end to end, `GET /v1/model/file` hands it out, and the input
check mode (error / warn / off) and compile options travel with it."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import onnx
import pytest
from deploy_support import ZOO, compile_file, digits
from onnx import numpy_helper
from test_serve_limits import run

from henn.deploy import Artefact, Client, Server
from henn.deploy.checks import InputChecks
from henn.deploy.client_model import FORMAT, ClientModel
from henn.deploy.serve import build
from henn.deploy.service import Limits
from henn.errors import InputError, SerializationError
from henn.program import step_archive, weight_count, weight_vector

WINDOW = 16


@pytest.fixture(scope="module", params=["single", "batch"])
def model(request, tmp_path_factory):
    return compile_file(tmp_path_factory.mktemp("model") / f"{request.param}.henn", mode=request.param)


def weight_arrays(cm) -> list[np.ndarray]:
    """Every weight the server holds: the ONNX initializers, the program's step arrays and decoded diagonals
    (the vectors the server encodes as plaintexts, as float64 and complex128), and the weights of the
    graphs the input checks are cut from."""
    arrays = [numpy_helper.to_array(t) for t in onnx.load(str(ZOO)).graph.initializer]
    for step in cm.program.steps:
        arrays += list(step_archive(step)[1].values())
        if step.kind in ("taps", "bsgs"):
            rows = [weight_vector(step, r) for r in range(weight_count(step))]
            arrays += rows + [r.astype(np.complex128) for r in rows]
    for graph in (cm.compiled.checked, cm.compiled.final):
        arrays += [np.asarray(a) for n in graph.nodes for a in n.params.values()]
    return [a for a in arrays if a.dtype.kind == "f" or a.dtype.kind == "c"]


def leaked_windows(blob: bytes, arrays: list[np.ndarray]) -> int:
    """16-byte windows of the arrays (at every element boundary) found anywhere in blob, skipping windows that
    hold a zero element (zeros are everywhere: padding, empty slots)."""
    present = {blob[i : i + WINDOW] for i in range(len(blob) - WINDOW + 1)}
    found = 0
    for a in arrays:
        flat = np.ascontiguousarray(a).reshape(-1)
        raw, step = flat.tobytes(), flat.dtype.itemsize
        zero = flat == 0
        for k in range(0, len(raw) - WINDOW + 1, step):
            first = k // step
            if zero[first : first + WINDOW // step + (WINDOW % step > 0)].any():
                continue
            found += raw[k : k + WINDOW] in present
    return found


def test_the_client_part_holds_no_weight_bytes(model):
    cm, path = model
    art = Artefact.load(path)
    arrays = weight_arrays(cm)
    assert sum(a.size for a in arrays) > 10_000  # the model's weights are really there to look for
    part = art.client_part().to_bytes()
    assert leaked_windows(part, arrays) == 0
    shared = art.client_part(share_checks=True).to_bytes()  # the opt-in: the first layers' weights go along
    assert leaked_windows(shared, arrays) > 100


def test_a_client_with_only_the_client_part_runs_end_to_end(model, tmp_path):
    cm, path = model
    part_path = tmp_path / "m.client.henn"
    Artefact.load(path).client_part().save(part_path)
    part = ClientModel.load(part_path)
    assert part.checks.graph is None and part.checks.bootstraps is None and part.checks.mode == "error"
    assert part.model_sha256 == Artefact.load(path).digest
    with pytest.raises(SerializationError, match="client part .* whole model file"):
        Server.load(part_path)
    client, server = Client.load(part_path), Server.load(path)
    x, labels = digits(3)
    client.generate_keys()
    session = server.open_session(server.read_keys(client.key_blobs()))
    client.release_keys()
    with pytest.raises(InputError, match="released"):
        client.key_blobs()
    per = client.program.images_per_set
    got = np.concatenate(
        [
            client.decrypt(server.evaluate(session, client.encrypt(x[i : i + per])), len(x[i : i + per]))
            for i in range(0, 3, per)
        ]
    )
    np.testing.assert_allclose(got, cm.run(x, encrypted=False), atol=1e-6)
    assert (got.argmax(1) == labels).all()
    d = part.describe()
    assert d["rotation_steps"] == list(cm.rotation_steps)
    assert d["max_bytes"] == Artefact.load(path).describe()["max_bytes"]


def test_the_server_hands_out_the_client_part_and_shares_checks_only_when_asked(model, tmp_path):
    _, path = model
    for share in (False, True):
        app, service = build(path, tmp_path / f"store-{share}", Limits(), share_input_checks=share)
        try:
            (answer,) = run(app, [("GET", "/v1/model/file", None)])
        finally:
            service.close()
        part = ClientModel.from_bytes(answer.content)
        assert part.model_sha256 == service.model_id
        assert (part.checks.graph is not None) == share and part.options["shared_input_checks"] == share


def test_a_forged_client_part_is_refused(model):
    _, path = model
    data = Artefact.load(path).client_part().to_bytes()
    with pytest.raises(SerializationError):
        ClientModel.from_bytes(data[: len(data) // 2])
    with pytest.raises(SerializationError, match="CRC"):  # a changed byte
        ClientModel.from_bytes(data.replace(FORMAT.encode(), b"henn-client-model/9"))


def test_input_check_modes_and_calibration_bounds(tmp_path, caplog):
    """error refuses the batch naming the image; warn logs each image and evaluates the others unchanged; off
    checks nothing; the calibration range is a weight-free check that the client part keeps."""
    cm, path = compile_file(tmp_path / "m.henn")
    x, _ = digits(4)
    art = Artefact.load(path)
    bounds = InputChecks.bounds_of(x)
    assert bounds[0] < 0 and bounds[1] > 1
    checks = dataclasses.replace(art.checks, input_bounds=bounds)
    options = {"input_check": "error"}
    art = dataclasses.replace(art, checks=checks, options=options)
    bad = x.copy()
    bad[2] *= 50
    client = Client(art.client_part())  # weight-free: the calibration bounds only
    assert client.model.checks.graph is None and client.model.checks.input_bounds == bounds
    with pytest.raises(InputError, match="image 2: values from"):
        client.check(bad)
    warn = Client(dataclasses.replace(art.client_part(), checks=client.model.checks.with_mode("warn")))
    with caplog.at_level(logging.WARNING, logger="henn.deploy.checks"):
        warn.check(bad)
    assert [r.getMessage()[:7] for r in caplog.records] == ["image 2"]
    Client(dataclasses.replace(art.client_part(), checks=client.model.checks.with_mode("off"))).check(bad)
    shared = Client(art.client_part(share_checks=True))  # the activation check as well
    with pytest.raises(InputError, match="image 2"):
        shared.check(bad)
    d = art.describe()
    assert d["input_check"] == "error" and d["input_bounds"] == list(bounds) and d["options"] == options
