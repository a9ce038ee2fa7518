"""henn.compile / CompiledModel.run and `henn infer`: the user-facing API and its errors."""

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

import henn
from henn.ckks import presets
from henn.cli import main
from henn.errors import InputError, LevelError
from henn.frontend.onnx_build import build_cnn, mnist_layers


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("zoo") / "mnist.onnx"
    onnx.save(build_cnn(mnist_layers("swish-rg7-deg4"), seed=1), str(path))
    return str(path)


@pytest.fixture(scope="module")
def compiled(model_path):
    with henn.compile(model_path, (1, 28, 28), backend="plain", mode="single") as cm:
        yield cm


def test_compile_and_three_way_check(compiled, rng):
    assert compiled.depth == 7 and compiled.params.log_n == 14 and len(compiled.rotation_steps) > 0
    x = rng.uniform(0, 1, (2, 1, 28, 28))
    ref = compiled.reference(x)
    clear = compiled.run(x, encrypted=False)
    enc = compiled.run(x)
    np.testing.assert_allclose(clear, ref, atol=1e-8)
    assert np.max(np.abs(enc - ref)) < 1e-4 and enc.shape == (2, 10)
    assert {"encode", "encrypt", "evaluate", "decrypt", "total"} <= set(compiled.timings)
    assert compiled.timings["images"] == 2 and compiled.timings["encrypted"]
    per_set = compiled.timings["evaluate_per_set"]  # single mode: one set per image, and they add up
    assert len(per_set) == 2 and sum(per_set) == pytest.approx(compiled.timings["evaluate"])


def test_bad_images(compiled, rng):
    with pytest.raises(InputError, match=r"expected images of shape \(B, 1, 28, 28\), got \(2, 1, 27, 28\)"):
        compiled.run(np.zeros((2, 1, 27, 28)))
    with pytest.raises(InputError, match=r"expected images of shape"):
        compiled.run(np.zeros((1, 28, 28)))
    x = rng.uniform(0, 1, (2, 1, 28, 28))
    x[1, 0, 3, 4] = np.nan
    with pytest.raises(InputError, match=r"image 1 contains NaN.*\(0, 3, 4\)"):
        compiled.run(x)
    with pytest.raises(InputError, match=r"layer 'poly2'.*fitted range \[-7, 7\].*activation_check=False"):
        compiled.run(rng.uniform(0, 1, (1, 1, 28, 28)) * 100)


def test_activation_check_can_be_disabled(model_path, rng):
    cm = henn.compile(model_path, backend="plain", mode="single", activation_check=False)
    out = cm.run(rng.uniform(0, 1, (1, 1, 28, 28)) * 100, encrypted=False)
    assert out.shape == (1, 10)


def test_relu_and_maxpool_without_calibration_are_refused_with_the_fix(tmp_path):
    """They are approximated on the range their inputs take: without calibration images there is no range."""
    for layers in (
        [("conv", 2, 3, 1, 0), ("relu",), ("flatten",), ("gemm", 2)],
        [("conv", 2, 3, 1, 0), ("poly", "square"), ("maxpool", 2), ("flatten",), ("gemm", 2)],
    ):
        path = tmp_path / "m.onnx"
        onnx.save(build_cnn(layers, (1, 6, 6)), str(path))
        with pytest.raises(InputError, match="calibration"):
            henn.compile(str(path), backend="plain")


def test_model_too_deep_for_given_parameters(model_path):
    with pytest.raises(LevelError, match="needs depth 7 .* allow 4 .*depth >= 7"):
        henn.compile(model_path, backend="plain", params=presets.get("insecure_short_d4"))


def test_not_a_model():
    with pytest.raises(InputError, match="give a path to an .onnx file or a torch.nn.Module"):
        henn.compile(42)


def test_cli_infer(model_path, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["infer", "--weights", model_path, "--backend", "plain", "--images", "3", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "accuracy" in text and "latency" in text and "peak RSS" in text
    r = json.loads(out.read_text())
    assert r["images"] == 3 and r["agreement"] == 1.0 and r["depth"] == 7
    assert set(r["per_image_seconds"]) == {"encode", "encrypt", "evaluate", "decrypt"}
    assert r["group"] == 0 and r["images_per_set"] == 1  # single mode: one image per ciphertext set
    # precision-driven parameters by default: the chosen set with its predicted error, beside the measured one
    assert r["selection"] == "precision" and r["ring"] == "conjugate_invariant"
    assert 0 < r["predicted_logit_error"] <= r["precision_tolerance"]
    assert r["max_logit_error"] <= r["precision_tolerance"]  # the measured error within what the selection allowed
    assert "chosen for precision" in text and "predicted by the noise model" in text


def test_cli_infer_missing_model(tmp_path, capsys):
    assert main(["infer", "--weights", str(tmp_path / "none.onnx"), "--images", "1"]) == 2
    assert "henn train" in capsys.readouterr().err


def test_cifar_zoo_model_single_mode_on_real_images():
    """CIFAR-10 deg4 at its real 128-bit parameters (N = 2^15, several ciphertexts per image) on the
    plain backend's CKKS noise model: 2 real test images."""
    from henn.datasets import default_data_dir, load_cifar10

    path = Path(henn.__file__).parent / "zoo" / "cifar-cnn_swish-rg7-deg4.onnx"
    if default_data_dir() is None:
        pytest.skip("CIFAR-10 test images not found: set HENN_DATA_DIR (tests/conftest.py fails skips under CI)")
    x, _ = load_cifar10(default_data_dir(), split="test")
    with henn.compile(str(path), backend="plain", mode="single") as cm:
        assert cm.params.log_n == 15 and not cm.params.insecure and cm.depth == 10
        steps = [s for s in cm.program.steps if s.kind == "bsgs"]
        assert len(steps) == 4 and steps[0].cts_out == 2  # 32 x 32 x 32 = 2 ciphertexts of 16384
        ref = cm.reference(x[:2])
        enc = cm.run(x[:2])
    assert np.max(np.abs(enc - ref)) < 1e-2 and (enc.argmax(1) == ref.argmax(1)).all()


def test_activation_check_uses_training_maxima(tmp_path, rng):
    path = tmp_path / "m.onnx"
    onnx.save(build_cnn(mnist_layers("swish-rg7-deg4"), seed=1), str(path))
    x = rng.uniform(0, 1, (1, 1, 28, 28)) * 10
    cm = henn.compile(str(path), backend="plain")
    with pytest.raises(InputError, match="fitted range"):
        cm.check_input(x)
    path.with_suffix(".json").write_text(json.dumps({"max_abs_preactivation": {"train": [500.0, 500.0]}}))
    cm = henn.compile(str(path), backend="plain")
    assert cm.observed_preactivation == [500.0, 500.0]
    cm.check_input(x)  # the model saw pre-activations this large in training: accepted


def test_cifar_zoo_model_grouped_batch_on_real_images():
    """CIFAR-10 deg4 in batch mode at its real 128-bit parameters on the plain backend's CKKS noise
    model: 64 channels per ciphertext, so one set of 256 images; 64 real test images."""
    from henn.datasets import default_data_dir, load_cifar10

    path = Path(henn.__file__).parent / "zoo" / "cifar-cnn_swish-rg7-deg4.onnx"
    if default_data_dir() is None:
        pytest.skip("CIFAR-10 test images not found: set HENN_DATA_DIR (tests/conftest.py fails skips under CI)")
    x, labels = load_cifar10(default_data_dir(), split="test")
    with henn.compile(str(path), backend="plain", mode="batch", batch_group=64) as cm:
        p = cm.program
        assert not cm.params.insecure and cm.depth == 10 and p.group == 64 and p.images_per_set == cm.params.slots // 64
        assert [s.kind for s in p.steps].count("bsgs") == 4 and p.input_cts == 32 * 32  # replicated 3-channel input
        ref = cm.reference(x[:64])
        enc = cm.run(x[:64])
    assert np.max(np.abs(enc - ref)) < 1e-2 and (enc.argmax(1) == ref.argmax(1)).all()
    assert (ref.argmax(1) == labels[:64]).mean() > 0.6
