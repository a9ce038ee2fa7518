"""henn.kernels.bsgs with diagonals streamed (vector()): encoded inside Evaluator.dot_encode_parts, a batch of
giant steps per call, mixed with cached plaintexts: the same transform as the cached path."""

import numpy as np
import pytest

from henn.ckks import presets
from henn.ckks.backends import open_backend
from henn.kernels import bsgs
from henn.kernels.linear import LinearTransform
from kernel_support import REAL, Recorder, real_backend
from test_linear import conv2d, dense

PARAMS = presets.get("insecure_short_d4")
SLOTS = PARAMS.slots
GIVEN = {
    "all": lambda vecs: vecs.__getitem__,
    "none": lambda vecs: lambda v: None,
    "mixed": lambda vecs: lambda v: vecs[v] if v % 3 else None,
}


class Counting(Recorder):
    """A Recorder that counts dot_encode_parts calls and their parts."""

    def __init__(self, backend, keys):
        super().__init__(backend, keys)
        self.calls, self.parts = 0, 0

    def dot_encode_parts(self, cts, vectors, parts, **kw):
        self.calls, self.parts = self.calls + 1, self.parts + len(parts)
        return super().dot_encode_parts(cts, vectors, parts, **kw)


def transform(be, mat, x, given: str):
    """(M x decrypted, the evaluator) with the diagonals given by GIVEN[given], the rest as plaintexts."""
    lt = LinearTransform(mat, be.slots)
    sk, keys = be.generate_keys(rotations=lt.rotations())
    ev = Counting(be, keys)
    ct = be.encrypt(lt.pack_input(x), keys.public)
    pts = lt.prepare(be, ct.level)
    out = bsgs.evaluate(ev, [ct], lt._transform, pts.__getitem__, vector=GIVEN[given](lt._vectors))[0]
    assert ev.used - {0} == lt.rotations()
    return lt.unpack_output(be.decrypt_decode(ev.rescale(out), sk)), ev


@pytest.mark.parametrize("given", list(GIVEN))
@pytest.mark.parametrize("batch", ["one call", "split"])
def test_streamed_diagonals_compute_the_transform(monkeypatch, given, batch):
    if batch == "split":  # two parts, or 3 slots' worth of values, per call
        monkeypatch.setattr(bsgs, "PARTS_MAX", 2)
        monkeypatch.setattr(bsgs, "PARTS_VALUES", 3 * SLOTS)
    be = open_backend("plain", PARAMS, noise=False, seed=0)
    rng = np.random.default_rng(3)
    for mat in (dense(rng, 64, 64), conv2d(16, rng.uniform(-1, 1, (3, 3)))):
        x = rng.uniform(-1, 1, mat.shape[1])
        y, ev = transform(be, mat, x, given)
        assert np.max(np.abs(y - mat @ x)) < 1e-9
        giants = len(np.unique(LinearTransform(mat, SLOTS)._transform.entries[:, 2]))
        assert {"none": ev.parts == 0, "all": ev.parts == giants, "mixed": 0 < ev.parts <= giants}[given]
        assert (ev.calls == 0) == (given == "none")
        if batch == "split" and given == "all":
            assert ev.calls >= giants / 2


@pytest.mark.parametrize("name", REAL)
def test_streamed_diagonals_on_a_library(name):
    """The fused sums (Lattigo: one call for every giant step) against the cached plaintexts, to the noise."""
    be = real_backend(name, PARAMS)
    rng = np.random.default_rng(5)
    mat = conv2d(16, rng.uniform(-1, 1, (3, 3)))
    x = rng.uniform(-1, 1, mat.shape[1])
    streamed, ev = transform(be, mat, x, "all")
    cached, _ = transform(be, mat, x, "none")
    assert ev.calls == 1
    assert np.max(np.abs(streamed - mat @ x)) < 2.0**-15
    assert np.max(np.abs(streamed - cached)) < 2.0**-15
