"""Every model x activation pair that ``henn train --help`` offers trains and exports (a tiny budget: one step
of 16 random images), or is refused before training when the model is not made for the activation; an export
that fails keeps the trained weights and says how to export them again."""

from __future__ import annotations

import argparse

import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

from henn import cli  # noqa: E402
from henn.errors import BackendError, InputError  # noqa: E402
from henn.training import models  # noqa: E402
from henn.training import train as train_mod  # noqa: E402
from henn.training.cli import add_train_command  # noqa: E402
from henn.training.models import build_model, check_activation  # noqa: E402
from henn.training.polyact import PolyAct  # noqa: E402
from henn.training.resnet import Aespa  # noqa: E402


def _offered() -> list[tuple[str, str]]:
    """The (model, activation) pairs that the `henn train` parser accepts."""
    parser = argparse.ArgumentParser()
    sub = add_train_command(parser.add_subparsers())
    choices = {a.dest: a.choices for a in sub._actions if a.dest in ("model", "activation")}
    models, activations = choices["model"], choices["activation"]
    assert models is not None and activations is not None
    return [(m, a) for m in models for a in activations]


def _trains(model: str, activation: str) -> bool:
    try:
        check_activation(model, activation)
    except InputError:
        return False
    return True


OFFERED = _offered()
TRAINABLE = [p for p in OFFERED if _trains(*p)]
REFUSED = [p for p in OFFERED if not _trains(*p)]


def test_every_model_trains_with_some_offered_activation():
    assert {m for m, _ in TRAINABLE} == {m for m, _ in OFFERED} and len(TRAINABLE) >= 26


@pytest.mark.parametrize("model,activation", TRAINABLE)
def test_each_offered_pair_trains_and_exports(tmp_path, tiny_data, model, activation):
    out = tmp_path / "m.onnx"
    metrics = train_mod.train(model, activation, tmp_path, out, epochs=1, seed=1, threads=1)
    assert metrics["status"] == "complete" and out.is_file() and (tmp_path / "m.ckpt").is_file()
    assert not list(tmp_path.glob("*.tmp"))
    proto = onnx.load(str(out))
    onnx.checker.check_model(proto)
    meta = {p.key: p.value for p in proto.metadata_props}
    assert meta["henn.model"] == model and meta["henn.activation"] == activation
    layers = [m for m in build_model(model, activation).modules() if isinstance(m, (PolyAct, Aespa))]
    polys = [n for n in proto.graph.node if n.op_type == "Poly"]
    assert len(polys) == sum(isinstance(m, PolyAct) for m in layers)
    assert len(metrics["max_abs_preactivation"]["train"]) == len(layers)


@pytest.mark.parametrize("model,activation", REFUSED)
def test_pairs_the_model_is_not_made_for_are_refused_before_training(tmp_path, tiny_data, model, activation):
    with pytest.raises(InputError, match="activation"):
        train_mod.train(model, activation, tmp_path, tmp_path / "m.onnx", epochs=1, threads=1)
    assert not list(tmp_path.iterdir())


def _cli(tmp_path, *extra: str) -> int:
    return cli.main(
        [
            "train",
            "--model",
            "mnist-mlp",
            "--activation",
            "swish-rg5-deg2",
            "--epochs",
            "1",
            "--threads",
            "1",
            "--data-dir",
            str(tmp_path),
            "--out",
            str(tmp_path / "m.onnx"),
            *extra,
        ]
    )


def test_the_reported_command_trains_and_exports(tmp_path, tiny_data, capsys):
    assert _cli(tmp_path) == 0
    assert (tmp_path / "m.onnx").is_file() and "internal error" not in capsys.readouterr().err


def test_a_failed_export_keeps_the_weights_and_says_how_to_export_again(tmp_path, tiny_data, monkeypatch, capsys):
    def broken(*args, **kwargs):
        raise RuntimeError("exporter broke")

    monkeypatch.setattr(train_mod, "export_onnx", broken)
    assert _cli(tmp_path) == 2
    err = capsys.readouterr().err
    ckpt = tmp_path / "m.ckpt"
    assert "exporter broke" in err and f"weights are in {ckpt}" in err and "internal error" not in err
    assert ckpt.is_file() and not (tmp_path / "m.onnx").exists()
    command = err.split("`")[1]
    assert command.startswith("henn train --model mnist-mlp") and command.endswith("--epochs 1 --seed 0 --resume")


def test_resume_after_a_failed_export_exports_the_same_weights(tmp_path, tiny_data, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("exporter broke")

    monkeypatch.setattr(train_mod, "export_onnx", broken)
    with pytest.raises(BackendError, match=r"m\.ckpt.*--resume"):
        train_mod.train("mnist-cnn", "swish-rg7-deg4", tmp_path, tmp_path / "m.onnx", epochs=1, seed=2, threads=1)
    trained = torch.load(tmp_path / "m.ckpt", weights_only=True)
    monkeypatch.setattr(train_mod, "export_onnx", models.export_onnx)
    again = train_mod.train(
        "mnist-cnn", "swish-rg7-deg4", tmp_path, tmp_path / "m.onnx", epochs=1, seed=2, threads=1, resume=True
    )
    assert again["status"] == "complete" and again["history"] == trained["history"]
    after = torch.load(tmp_path / "m.ckpt", weights_only=True)
    assert all(torch.equal(trained["model"][k], after["model"][k]) for k in trained["model"])
    assert (tmp_path / "m.onnx").is_file()


def test_a_model_fresh_from_a_training_step_exports(tmp_path):
    """export_onnx copes with layers that still hold the last step's autograd graph (a user's own loop)."""
    for name, act in (("mnist-mlp", "swish-rg5-deg2"), ("mnist-cnn", "swish-rg7-deg4")):
        model = build_model(name, act).train()
        model(torch.rand(4, 1, 28, 28)).sum().backward()
        assert any(getattr(m, "range_excess", None) is not None for m in model.modules())
        models.export_onnx(model, name, tmp_path / f"{name}.onnx")
        assert (tmp_path / f"{name}.onnx").is_file()
