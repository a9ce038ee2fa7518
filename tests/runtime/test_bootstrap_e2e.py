"""A network deeper than its parameters, end to end: paper 000's MNIST CNN (swish-rg7-deg4, depth 7)
over a chain of 3 levels, so that the compiler must place bootstraps; encrypted on Lattigo (small
insecure ring, ~1 s per bootstrap), on OpenFHE (its own bootstrapping set) and on the plain backend, against
the plaintext model, on real digits. benchmarks/bootstrap.py runs the secure N = 2^16 set."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import precision_table
import henn
from henn.ckks import presets
from henn.datasets import load_embedded_mnist
from henn.errors import InputError

ZOO = "src/henn/zoo/mnist-cnn_swish-rg7-deg4.onnx"
PRESET = "insecure_boot_n12"


@pytest.fixture(scope="module")
def digits():
    x, y = load_embedded_mnist()
    return x[:300], x[300:303], y[300:303]  # calibration images, test images, labels


def _compile(backend: str, calibration, mode: str = "single", activation_check="error"):
    return henn.compile(
        ZOO,
        (1, 28, 28),
        backend=backend,
        mode=mode,
        params=presets.get(PRESET),
        bootstrap=True,
        calibration=calibration,
        activation_check=activation_check,
    )


def test_compiled_program_bootstraps(digits):
    cal, _, _ = digits
    cm = _compile("plain", cal)
    boots = [s for s in cm.program.steps if s.kind == "bootstrap"]
    assert cm.program.bootstraps == len(boots) >= 2
    assert cm.depth <= cm.params.max_level < 7
    assert "bootstraps" in cm.describe()


def test_plain_backend_computes_the_model_exactly(digits):
    cal, x, _ = digits
    with _compile("plain", cal) as cm:
        np.testing.assert_allclose(cm.run(x, encrypted=False), cm.reference(x), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("mode", ["single", "batch"])
def test_plain_noise_model_keeps_predictions(digits, mode):
    cal, x, _ = digits
    with _compile("plain", cal, mode) as cm:
        out, ref = cm.run(x), cm.reference(x)  # encrypted=True on plain: its noise model
        assert np.abs(out - ref).max() < 0.05
        assert (out.argmax(1) == ref.argmax(1)).all()


def test_lattigo_encrypted_logits_match_plaintext(digits):
    cal, x, y = digits
    with _compile("lattigo", cal) as cm:
        out, ref = cm.run(x), cm.reference(x)
        # N = 2^12: the factors fit any machine's share, so every bootstrap after the first reads them
        assert cm._session(True)[1].executor.bootstrap_factor_budget > 0
    precision_table.within("lattigo-e2e", "bootstrapped_mlp", ref, out, 0.01)
    assert (out.argmax(1) == ref.argmax(1)).all()
    assert (ref.argmax(1) == y).all()


def test_openfhe_encrypted_logits_match_plaintext(digits):
    """OpenFHE bootstraps only at a scale equal to its 59-bit primes under a 60-bit q0: level 0 holds no
    logit, so the network ends at level 1 or above (place_bootstraps.output_floor)."""
    cal, x, y = digits
    cm = henn.compile(
        ZOO,
        (1, 28, 28),
        backend="openfhe",
        params=presets.get("insecure_boot_n12_openfhe"),
        bootstrap=True,
        calibration=cal,
    )
    assert cm.program.bootstraps >= 2 and cm.program.final_level >= 1
    with cm:
        out, ref = cm.run(x), cm.reference(x)
    precision_table.within("openfhe-e2e", "bootstrapped_mlp", ref, out, 0.1)  # 12-13-bit bootstraps
    assert (out.argmax(1) == ref.argmax(1)).all()
    assert (ref.argmax(1) == y).all()


def test_inputs_beyond_a_bootstrap_bound_are_refused(digits):
    cal, x, _ = digits
    cm = _compile("plain", cal, activation_check="off")  # the activations' own check would refuse first
    with pytest.raises(InputError, match="beyond the bound"):
        cm.run(x * 40.0, encrypted=False)
    # the plaintext reference has no bootstrap to protect: it still answers (a benchmark reports the refused
    # images' plaintext predictions beside the encrypted ones)
    assert np.isfinite(cm.reference(x * 40.0)).all()


@pytest.mark.heavy(gib=12)
@pytest.mark.bootstrap_n16
def test_secure_deep_mlp_on_lattigo_n16(tmp_path):
    """The zoo's 7-activation MLP (15 levels) on the 128-bit boot-n16 set (13 levels between
    bootstraps): one bootstrap at N = 2^16, full slots, one digit, as a user runs it. A process of
    its own: its peak (keys ~9 GiB, weights cached in what is left) must fit the machine, and none of
    it may stay behind in the suite's process (a CI run was once killed for memory after it)."""
    out = tmp_path / "deep.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "henn.cli",
            "infer",
            "--model",
            "mnist-mlp",
            "--activation",
            "swish-rg5-deg2",
            "--backend",
            "lattigo",
            "--params",
            "boot-n16",
            "--bootstrap",
            "--images",
            "1",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["bootstraps"] >= 1 and r["log_n"] == 16 and "insecure" not in r["params"]
    assert r["max_logit_error"] < 0.05 and r["agreement"] == 1.0, r
    assert r["peak_rss_mib"] < 20 * 1024, f"peak {r['peak_rss_mib']:.0f} MiB"
