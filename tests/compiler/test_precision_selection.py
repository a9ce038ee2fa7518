"""Precision-driven parameters (selection="precision"): the smallest 128-bit secure set whose
noise-model error keeps the calibration predictions, checked on every zoo model and, for one, on
Lattigo against the measured error."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import precision_table
import henn
from henn import datasets
from henn.ckks import security
from henn.compiler.precision import DEFAULT_PRECISION_BITS, GAP_QUANTILE, GAP_SHARE, tolerance
from henn.errors import InputError

ZOO = Path(henn.__file__).parent / "zoo"
# ResNet-20 is left out: it runs with bootstrapping, which selection="precision" does not place (without it,
# its depth of 58 fits only N = 2^16 with small primes, and the search took 2.5-5 min of the suite)
MODELS = sorted(p.stem for p in ZOO.glob("*.onnx") if not p.stem.startswith("resnet20"))


def _calibration(model: str, n: int) -> tuple[tuple[int, ...], np.ndarray]:
    """Held-out MNIST digits (the last n embedded ones); CIFAR (its data may be absent): seeded grey images (the noise
    does not depend on the data, the gap rule only needs some predictions)."""
    if not model.startswith("cifar"):  # the MNIST networks, the peers' included
        return (1, 28, 28), datasets.load_embedded_mnist()[0][-n:]
    return (3, 32, 32), np.random.default_rng(0).uniform(0.4, 0.6, (n, 3, 32, 32))


@pytest.mark.parametrize("model", MODELS)
def test_selection_is_128_bit_secure_on_every_zoo_model(model):
    shape, cal = _calibration(model, 2)
    cm = henn.compile(str(ZOO / f"{model}.onnx"), shape, backend="lattigo", calibration=cal)
    p, choice = cm.params, cm.precision
    assert choice is not None and choice.params == p
    assert p.security_ok and not p.insecure and p.log_qp <= security.max_log_qp(p.log_n)
    assert p.real_slots  # lattigo has the real-slot ring
    assert choice.predicted_error <= choice.tolerance <= 2.0**-DEFAULT_PRECISION_BITS
    assert "predicted max logit error" in cm.describe()


def test_chosen_set_keeps_predictions_on_lattigo_and_the_model_is_pessimistic():
    shape, cal = _calibration("mnist-cnn_swish-rg5-deg2", 16)
    cm = henn.compile(str(ZOO / "mnist-cnn_swish-rg5-deg2.onnx"), shape, backend="lattigo", calibration=cal)
    assert cm.params.log_n == 13  # half the ring of the library's choice (2^14) for this depth-5 net
    x = datasets.load_embedded_mnist()[0][:4]
    with cm:
        enc = cm.run(x)
    plain = cm.run(x, encrypted=False)
    assert np.array_equal(enc.argmax(1), plain.argmax(1))
    # the noise model errs on the safe side
    precision_table.within("lattigo-e2e", "predicted_error_holds", plain, enc, cm.precision.predicted_error)


def test_more_precision_asked_gives_a_larger_scale_or_ring():
    shape, cal = _calibration("mnist-cnn_swish-rg5-deg2", 4)
    path = str(ZOO / "mnist-cnn_swish-rg5-deg2.onnx")
    default = henn.compile(path, shape, backend="plain", calibration=cal)
    precise = henn.compile(path, shape, backend="plain", calibration=cal, precision_bits=14)
    assert precise.precision.predicted_error <= 2.0**-14 < default.precision.predicted_error
    assert (precise.params.log_n, precise.params.log_scale) > (default.params.log_n, default.params.log_scale)
    assert precise.params.security_ok


def test_standard_ring_for_backends_without_real_slots():
    shape, cal = _calibration("mnist-cnn_square", 2)
    cm = henn.compile(str(ZOO / "mnist-cnn_square.onnx"), shape, backend="seal", calibration=cal)
    assert not cm.params.real_slots and cm.params.security_ok
    (special,) = cm.params.log_p  # SEAL's one special prime of at most 60 bits, above the largest digit q0
    assert cm.params.log_q[0] + 5 <= special <= 60


def test_tolerance_is_the_smaller_of_the_gap_share_and_the_bits():
    exact = np.array([[0.0, 1.0, 3.0], [2.0, 2.5, -1.0]])  # top-2 gaps 2.0 and 0.5
    assert tolerance(exact, 1) == 0.5 / GAP_SHARE  # under 100 images: the smallest gap
    assert tolerance(exact, 10) == 2.0**-10
    assert math.isclose(tolerance(exact[:1], -2), 2.0 / GAP_SHARE)
    rng = np.random.default_rng(0)  # 1000 images: the gap at GAP_QUANTILE, one outlier does not decide it
    many = np.stack([np.zeros(1000), rng.uniform(1.0, 2.0, 1000)], axis=1)
    many[0, 1] = 1e-6
    gaps = np.sort(many[:, 1])
    assert tolerance(many, -2) == gaps[int(GAP_QUANTILE * (len(gaps) - 1))] / GAP_SHARE > 0.5 / GAP_SHARE


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"selection": "precision"}, "calibration"),
        ({"selection": "precision", "calibration": np.zeros((1, 1, 28, 28)), "bootstrap": True}, "bootstrap"),
        ({"selection": "precision", "calibration": np.zeros((1, 1, 28, 28)), "precision_bits": 0}, "precision_bits"),
        ({"selection": "budget"}, "selection"),
    ],
)
def test_precision_selection_refuses_bad_requests(kwargs, match):
    with pytest.raises(InputError, match=match):
        henn.compile(str(ZOO / "mnist-cnn_square.onnx"), (1, 28, 28), backend="plain", **kwargs)


def test_real_slot_program_round_trips():
    from henn.program import Program

    shape, cal = _calibration("mnist-cnn_square", 2)
    cm = henn.compile(str(ZOO / "mnist-cnn_square.onnx"), shape, backend="lattigo", calibration=cal)
    back = Program.from_bytes(cm.program.to_bytes())
    assert back.params == cm.params and back.params.real_slots
    assert back.params.fingerprint() == cm.params.fingerprint()
