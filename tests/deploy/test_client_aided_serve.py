"""Client-aided activations (henn.segments) over a real `henn serve` on 127.0.0.1 with Lattigo keys: a
ReLU + MaxPool CNN's predictions equal torch's, each segment a round trip, the model file's client part
without weights, and the segments refused out of order, of another session or at the wrong level."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import httpx
import numpy as np
import pytest
from deploy_support import ServerProcess, digits
from test_client_part import leaked_windows

import henn
from henn.ckks.values import EvaluationKeys
from henn.deploy import Artefact
from henn.deploy.client_model import ClientModel
from henn.deploy.local import Client
from henn.deploy.wire import CONTENT_TYPE, split
from henn.errors import InputError
from henn.program import WEIGHT_KINDS, step_archive, weight_count, weight_vector

torch = pytest.importorskip("torch")
nn = torch.nn
OCTETS = {"Content-Type": CONTENT_TYPE}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """(torch model, model file): Conv -> ReLU -> MaxPool -> Conv -> ReLU -> MaxPool -> Linear, seeded weights,
    through ONNX and `henn compile --client-aided` (128-bit parameters chosen by henn)."""
    from henn.cli import main
    from henn.training.models import export_onnx

    torch.manual_seed(1)
    m = nn.Sequential(
        nn.Conv2d(1, 4, 5, stride=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(4, 8, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32, 10),
    ).eval()  # fmt: skip
    where = tmp_path_factory.mktemp("model")
    export_onnx(m, "mnist-cnn", where / "cnn.onnx")
    path = where / "cnn.henn"
    argv = ["compile", str(where / "cnn.onnx"), "--input-shape", "1,28,28", "--client-aided", "--out", str(path)]
    assert main(argv) == 0
    return m, path


@pytest.fixture(scope="module")
def server(model, tmp_path_factory):
    with ServerProcess(model[1], tmp_path_factory.mktemp("store") / "sessions") as srv:
        yield srv


def torch_logits(m, x) -> np.ndarray:
    with torch.no_grad():
        return copy.deepcopy(m).double()(torch.tensor(x, dtype=torch.float64)).numpy()


def test_predictions_equal_torch_over_http(model, server):
    x, _ = digits(3)
    with henn.connect(server.url, progress=False) as remote:
        got = remote.predict(x)
        assert remote.stats["requests"] == 3 * 3  # three segments per image
        assert remote.stats["request_bytes"] > 0 and remote.stats["response_bytes"] > 0
        described = remote.info
    want = torch_logits(model[0], x)
    assert len(described["segments"]) == 3 and described["client_stages"] == ["relu -> maxpool 2x2"] * 2
    assert np.abs(got - want).max() < 1e-3  # exact activations: CKKS noise only
    assert (got.argmax(1) == want.argmax(1)).all()


def test_the_client_part_has_the_packing_and_no_weights(model):
    """No 16-byte window of any weight (torch's, every segment's step arrays and decoded diagonals) in the client
    part, which still holds every segment's packing and the stages; the whole file does hold them."""
    whole = Artefact.load(model[1])
    part = whole.client_part()
    assert len(part.programs) == 3 and [s.describe() for s in part.stages] == ["relu -> maxpool 2x2"] * 2
    arrays = [p.detach().numpy() for p in model[0].parameters()]
    for program in whole.programs:
        for step in program.steps:
            arrays += list(step_archive(step)[1].values())
            if step.kind in WEIGHT_KINDS:
                rows = [weight_vector(step, r) for r in range(weight_count(step))]
                arrays += rows + [r.astype(np.complex128) for r in rows]
    arrays = [a for a in arrays if a.dtype.kind in "fc"]
    blob = part.to_bytes()
    assert leaked_windows(blob, arrays) == 0
    # the check sees arrays where they are: the packing maps in this (uncompressed) part, the steps' weights
    maps = [np.asarray(getattr(p.packing, k), np.int64) for p in part.programs for k in p.packing.maps]
    assert np.ascontiguousarray(maps[0]).tobytes()[:64] in blob
    steps = b"".join(
        np.ascontiguousarray(a).tobytes()
        for p in whole.programs
        for st in p.steps
        for a in step_archive(st)[1].values()
    )
    assert leaked_windows(steps, arrays) > 100


def test_the_steps_as_files_refuse_a_client_aided_model(model):
    from henn.deploy.local import Server

    server = Server.load(model[1])
    with pytest.raises(InputError, match="client-aided"):
        server.evaluate(None, [])


@pytest.fixture(scope="module")
def session(model, server):
    """(client, session id) with its keys uploaded."""
    client = Client.load(model[1], seed=0)
    client.generate_keys()
    r = httpx.post(server.url + "/v1/sessions", content=b"".join(client.key_blobs()), headers=OCTETS)
    assert r.status_code == 201, r.text
    return client, r.json()["session"]


def _post(server, sid: str, route: str, blobs: list[bytes]) -> httpx.Response:
    return httpx.post(f"{server.url}/v1/sessions/{sid}/{route}", content=b"".join(blobs), headers=OCTETS, timeout=60)


def test_refusals(model, server, session):
    client, sid = session
    x, _ = digits(1)
    first = client.encrypt_segment(client.check(x), 0)
    # a later segment before the pass began: 409
    r = _post(server, sid, "segments/1", first)
    assert r.status_code == 409 and "out of order" in r.json()["detail"]
    # the whole-model route, a segment the model lacks, a segment that is no number: 400
    assert _post(server, sid, "infer", first).status_code == 400
    assert _post(server, sid, "segments/3", first).status_code == 400
    assert _post(server, sid, "segments/x1", first).status_code == 400
    assert _post(server, sid, "segments/%C2%B2", first).status_code == 400  # a Unicode digit
    # an unknown session: 404; ciphertexts of another key set: 400
    assert _post(server, "A" * len(sid), "segments/0", first).status_code == 404
    other = Client.load(model[1], seed=1)
    other.generate_keys()
    r = _post(server, sid, "segments/0", other.encrypt_segment(x, 0))
    assert r.status_code == 400 and "key set" in r.json()["detail"]
    # a genuine pass up to segment 2, whose inputs then come a level low, or at another scale: 400
    be = client.backend
    r = _post(server, sid, "segments/0", first)
    assert r.status_code == 200
    y = client.decrypt_segment(split(r.content, be, kinds=("ciphertext",), max_objects=8), 0, 1)
    r = _post(server, sid, "segments/1", client.encrypt_segment(client.model.stages[0].apply(y), 1))
    assert r.status_code == 200
    answer = split(r.content, be, kinds=("ciphertext",), max_objects=8)
    z = client.model.stages[1].apply(client.decrypt_segment(answer, 1, 1))
    genuine = client.encrypt_segment(z, 2)
    low = [be.serialize(be.evaluator(EvaluationKeys()).drop_level(be.deserialize(b))) for b in genuine]
    r = _post(server, sid, "segments/2", low)
    assert r.status_code == 400 and "at level 0" in r.json()["detail"]
    sk = client.runtime._sk  # the same values at the right level, encrypted at twice the scale
    cts = [be.deserialize(b) for b in genuine]
    rescaled = [be.serialize(be.encrypt(be.decrypt_decode(c, sk), sk, level=c.level, scale=2 * c.scale)) for c in cts]
    r = _post(server, sid, "segments/2", rescaled)
    assert r.status_code == 400 and "scale" in r.json()["detail"]
    # the refused requests moved nothing: segment 2 still comes next, and gives the logits
    r = _post(server, sid, "segments/2", genuine)
    assert r.status_code == 200
    logits = client.decrypt_segment(split(r.content, be, kinds=("ciphertext",), max_objects=8), 2, 1)
    assert np.abs(logits - torch_logits(model[0], x)).max() < 1e-3
    assert _post(server, sid, "segments/1", first).status_code == 409  # a pass ends with its last segment
    assert httpx.get(server.url + "/health").json()["status"] == "ok"


FORGED: dict[
    str, tuple[Callable[[dict, dict], Any], str]
] = {  # a change to a client-aided client part's manifest and arrays -> words of the refusal
    "a stage dropped": (lambda m, z: m["stages"].pop(), "do not match"),
    "a stage of other shapes": (
        lambda m, z: m["stages"][1].update(input_shape=[8, 6, 6], output_shape=[8, 3, 3]),
        "join",
    ),
    "a stage's pool widened": (lambda m, z: m["stages"][0]["ops"][1]["attrs"].update(kernel=[3, 3]), "output shape"),
    "a segment's map gone": (lambda m, z: z.pop(next(k for k in z if k.startswith("seg1."))), "KeyError"),
    "a bootstrapping segment": (lambda m, z: m["segments"][0].update(bootstraps=1), "bootstraps"),
    "other parameters": (lambda m, z: m["segments"][1]["params"].update(log_scale=40), "other parameters"),
}


@pytest.mark.parametrize("case", sorted(FORGED))
def test_a_forged_client_part_is_refused(model, case):
    from henn.deploy.files import archive
    from henn.errors import SerializationError
    from henn.program import open_archive

    z, m = open_archive(Artefact.load(model[1]).client_part().to_bytes(), "__manifest__")
    assert isinstance(m, dict)
    z = {k: v for k, v in z.items() if k != "__manifest__"}
    change, words = FORGED[case]
    change(m, z)
    with pytest.raises(SerializationError, match=words):
        ClientModel.from_bytes(archive(m, z))
