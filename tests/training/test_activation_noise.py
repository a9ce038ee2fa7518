"""Noise-aware training (train.py's activation_noise): Gaussian noise on each polynomial activation's input and
output while training only, drawn from the run's seeded generator, recorded in the run and its command, and a
resumed run repeats a whole one."""

from __future__ import annotations

import argparse
import json

import pytest
import torch

from henn.errors import InputError
from henn.training import train as train_mod
from henn.training.cli import add_train_command
from henn.training.polyact import PolyAct


def test_noise_is_added_while_training_only_and_repeats_with_its_seed():
    act = PolyAct("swish-rg7-deg4")
    x = torch.linspace(-3, 3, 64)
    exact = act.eval()(x)
    act.train()
    assert torch.equal(act(x), exact)  # no noise asked
    act.noise_std = 0.1
    outs = []
    for _ in range(2):
        act.noise_generator = torch.Generator().manual_seed(7)
        outs.append(act(x))
    assert torch.equal(outs[0], outs[1]) and not torch.allclose(outs[0], exact)
    assert 0.05 < float((outs[0] - exact).std()) < 0.5  # input and output noise of 0.1, through the polynomial
    assert torch.equal(act.eval()(x), exact)


def test_the_run_records_the_noise_and_resumes_to_the_whole_run(tmp_path, tiny_data):
    def run(name, resume=False, budget=None):
        return train_mod.train(
            "mnist-cnn",
            "swish-rg7-deg4",
            tmp_path,
            tmp_path / name,
            epochs=2,
            seed=1,
            threads=1,
            resume=resume,
            time_budget_s=budget,
            activation_noise=0.05,
        )

    whole = run("whole.onnx")
    assert whole["hyperparameters"]["activation_noise"] == 0.05
    assert whole["command"].endswith("--activation-noise 0.05")
    clean = train_mod.train(
        "mnist-cnn", "swish-rg7-deg4", tmp_path, tmp_path / "clean.onnx", epochs=2, seed=1, threads=1
    )
    assert clean["history"][-1]["loss"] != whole["history"][-1]["loss"]  # the noise changed the training
    assert run("resumed.onnx", budget=0.0)["status"] == "incomplete"  # stopped after its first epoch
    resumed = run("resumed.onnx", resume=True)
    assert [h["loss"] for h in resumed["history"]] == [h["loss"] for h in whole["history"]]
    saved = json.loads((tmp_path / "resumed.json").read_text())
    assert saved["hyperparameters"]["activation_noise"] == 0.05


@pytest.mark.parametrize(
    "model,noise,match",
    [("mnist-cnn", -0.1, "in \\[0, 1\\]"), ("mnist-cnn", 2.0, "in \\[0, 1\\]"), ("resnet20", 0.1, "AESPA")],
)
def test_unusable_noise_is_refused(tmp_path, model, noise, match):
    act = "aespa" if model == "resnet20" else "swish-rg7-deg4"
    with pytest.raises(InputError, match=match):
        train_mod.train(model, act, tmp_path, tmp_path / "x.onnx", epochs=1, activation_noise=noise)


def test_the_command_line_takes_the_noise():
    parser = argparse.ArgumentParser()
    add_train_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        ["train", "--model", "mnist-cnn", "--activation", "square", "--out", "x.onnx", "--activation-noise", "0.05"]
    )
    assert args.activation_noise == 0.05
