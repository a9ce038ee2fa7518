"""ResNet-20 with AESPA (paper 002): the architecture, AESPA's basis-wise normalization and its
folding into one quadratic per channel, the ONNX export, and resumable training."""

from __future__ import annotations

import json
import math

import numpy as np
import onnx
import pytest
import torch
from onnx.reference import ReferenceEvaluator

from henn.errors import InputError
from henn.training import train as train_mod
from henn.training.models import build_model, export_onnx
from henn.training.resnet import HERMITE_RELU, Aespa, ResNet20


@pytest.mark.parametrize("act", ["aespa", "relu"])
def test_resnet20_shape_and_size(act):
    torch.manual_seed(0)
    model = build_model("resnet20", act).eval()
    assert model(torch.rand(2, 3, 32, 32)).shape == (2, 10)
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert len([c for c in convs if c.kernel_size == (3, 3)]) == 19  # stem + 9 blocks x 2
    assert 0.26e6 < sum(p.numel() for p in model.parameters()) < 0.28e6  # He et al.: 0.27 M


def test_activations_belong_to_their_models():
    with pytest.raises(InputError, match="aespa or relu"):
        build_model("resnet20", "square")
    with pytest.raises(InputError, match="ResNet-20's"):
        build_model("mnist-cnn", "aespa")


def _trained_aespa(channels=4, seed=1):
    torch.manual_seed(seed)
    act = Aespa(channels)
    with torch.no_grad():
        act.gamma.uniform_(0.5, 1.5)
        act.beta.uniform_(-0.5, 0.5)
    act.train()
    for _ in range(30):  # running statistics of a shifted, scaled input
        act(torch.randn(16, channels, 5, 5) * 2.0 + 0.7)
    return act


def test_aespa_normalizes_each_hermite_basis_in_training():
    act = _trained_aespa()
    x = torch.randn(64, 4, 6, 6) * 3.0 - 1.0
    with torch.no_grad():
        act.gamma.fill_(1.0)
        act.beta.fill_(0.0)
        y = act(x)
    f0, f1, f2 = HERMITE_RELU

    def normalized(h):  # per channel, with the batch's own statistics
        mean, var = h.mean(dim=(0, 2, 3), keepdim=True), h.var(dim=(0, 2, 3), unbiased=False, keepdim=True)
        return (h - mean) / torch.sqrt(var + 1e-5)

    expected = f0 + f1 * normalized(x) + f2 * normalized((x * x - 1.0) / math.sqrt(2.0))
    assert torch.allclose(y, expected, atol=1e-4)
    assert torch.allclose(y.mean(dim=(0, 2, 3)), torch.full((4,), f0), atol=1e-5)


def test_aespa_folds_into_one_quadratic_per_channel():
    act = _trained_aespa().eval()
    x = torch.randn(8, 4, 5, 5) * 2.0
    f0, f1, f2 = HERMITE_RELU
    h2 = (x * x - 1.0) / math.sqrt(2.0)
    expected = (f0 + f1 * act.norm1(x) + f2 * act.norm2(h2)) * act.gamma.view(1, -1, 1, 1) + act.beta.view(1, -1, 1, 1)
    with torch.no_grad():
        got = act(x)
        a, b, c = act.folded()
    assert torch.allclose(got, expected, atol=1e-5)
    assert torch.allclose(got, x * x * a.view(1, -1, 1, 1) + x * b.view(1, -1, 1, 1) + c.view(1, -1, 1, 1), atol=1e-5)


def test_onnx_export_matches_torch(tmp_path):
    torch.manual_seed(0)
    model = ResNet20("aespa").train()
    with torch.no_grad():
        for _ in range(3):
            model(torch.rand(8, 3, 32, 32))  # running statistics that are not the defaults
    model.eval()
    path = tmp_path / "resnet20.onnx"
    export_onnx(model, "resnet20", path)
    proto = onnx.load(str(path))
    ops = {n.op_type for n in proto.graph.node}
    assert {"Conv", "Mul", "Add", "Gemm"} <= ops and not ops & {"Relu", "Sqrt", "Reciprocal"}
    x = np.random.default_rng(0).random((2, 3, 32, 32), dtype=np.float32)
    (got,) = ReferenceEvaluator(proto).run(None, {"input": x})
    assert isinstance(got, np.ndarray)
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _train(tmp_path, name, **kw):
    return train_mod.train("resnet20", "aespa", tmp_path, tmp_path / name, epochs=2, seed=3, threads=1, **kw)


def test_training_resumes_where_it_stopped(tmp_path, tiny_cifar):
    whole = _train(tmp_path, "whole.onnx")
    first = _train(tmp_path, "split.onnx", time_budget_s=0.0)  # the budget is spent after epoch 1
    assert first["status"] == "incomplete" and first["epochs_done"] == 1
    assert not (tmp_path / "split.onnx").exists() and (tmp_path / "split.ckpt").is_file()
    assert json.loads((tmp_path / "split.json").read_text())["command"].endswith("--resume")
    second = _train(tmp_path, "split.onnx", resume=True)
    assert second["status"] == "complete"
    assert [r["loss"] for r in second["history"]] == [r["loss"] for r in whole["history"]]
    assert second["onnx_sha256"] == whole["onnx_sha256"]


def test_resume_refuses_what_it_cannot_continue(tmp_path, tiny_cifar):
    with pytest.raises(InputError, match="no checkpoint"):
        _train(tmp_path, "none.onnx", resume=True)
    _train(tmp_path, "run.onnx", time_budget_s=0.0)
    with pytest.raises(InputError, match="another run"):
        train_mod.train("resnet20", "aespa", tmp_path, tmp_path / "run.onnx", epochs=3, seed=3, threads=1, resume=True)
    ckpt = tmp_path / "run.ckpt"
    ckpt.write_bytes(ckpt.read_bytes()[:1000])
    with pytest.raises(InputError, match="cannot be read"):
        _train(tmp_path, "run.onnx", resume=True)


def test_cuda_device_refused_with_the_fix_when_torch_sees_no_gpu(tmp_path, tiny_cifar, monkeypatch):
    monkeypatch.setattr(train_mod.torch.cuda, "is_available", lambda: False)
    with pytest.raises(InputError, match="sees no CUDA GPU.*--device cpu"):
        _train(tmp_path, "gpu.onnx", device="cuda")
    assert not (tmp_path / "gpu.ckpt").exists()


def test_cpu_device_is_recorded_and_the_command_repeats_a_gpu_run(tmp_path, tiny_cifar):
    metrics = _train(tmp_path, "cpu.onnx", device="cpu")
    assert metrics["hyperparameters"]["device"] == "cpu" and "--device" not in metrics["command"]
    command = train_mod.train_command("resnet20", "aespa", tmp_path, tmp_path / "x.onnx", 2, 3, "cuda")
    assert command.endswith("--device cuda")


def test_a_finished_run_resumed_recomputes_only_its_statistics(tmp_path, tiny_cifar):
    """Resuming a complete run keeps its weights and history and recomputes the normalizations' statistics
    (over augmented batches, as training saw the images), saving them in the checkpoint."""
    import torch

    first = _train(tmp_path, "done.onnx")
    before = torch.load(tmp_path / "done.ckpt", weights_only=True)["model"]
    again = _train(tmp_path, "done.onnx", resume=True)
    after = torch.load(tmp_path / "done.ckpt", weights_only=True)["model"]
    assert again["history"] == first["history"]
    stats = [k for k in before if k.endswith(("running_mean", "running_var"))]
    assert stats and all(torch.equal(before[k], after[k]) for k in before if k not in stats and "num_batches" not in k)
    assert any(not torch.equal(before[k], after[k]) for k in stats)
    assert "statistics recomputed" in (tmp_path / "done.log").read_text()
