"""Fine-tuning from a finished run and distilling a teacher (henn.training.distill): the run starts from the
named weights, imitates the teacher, resumes like any run, and refuses starting points it cannot use."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from henn.errors import InputError
from henn.training import train as train_mod
from henn.training.cli import _fine_tune
from henn.training.distill import WEIGHT, FineTune, distillation_loss


def _train(tmp_path, name, activation="aespa", epochs=1, **kw):
    return train_mod.train("resnet20", activation, tmp_path, tmp_path / name, epochs=epochs, seed=3, threads=1, **kw)


@pytest.fixture
def finished(tmp_path, tiny_cifar):
    """Checkpoints of a finished AESPA run (the student's start) and a finished ReLU run (the teacher)."""
    _train(tmp_path, "student.onnx")
    _train(tmp_path, "teacher.onnx", activation="relu")
    return tmp_path / "student.ckpt", tmp_path / "teacher.ckpt"


def test_the_distillation_term_vanishes_when_the_student_matches_the_teacher():
    torch.manual_seed(0)
    logits, labels = torch.randn(8, 10), torch.randint(0, 10, (8,))
    assert torch.allclose(distillation_loss(logits, logits, labels), (1 - WEIGHT) * F.cross_entropy(logits, labels))
    student = torch.zeros(8, 10, requires_grad=True)
    distillation_loss(student, logits, labels).backward()
    # the soft term pulls the student toward the teacher's ranking of the classes
    assert student.grad is not None
    assert np.corrcoef(-student.grad.numpy().ravel(), logits.numpy().ravel())[0, 1] > 0.5


def test_fine_tuning_starts_from_the_named_weights_and_records_its_origin(tmp_path, finished):
    student, teacher = finished
    start = torch.load(student, weights_only=True)["model"]
    metrics = _train(tmp_path, "tuned.onnx", fine_tune=FineTune(student, 1e-12, teacher))
    tuned = torch.load(tmp_path / "tuned.ckpt", weights_only=True)["model"]
    weights = [k for k in start if k.endswith("weight") and start[k].dim() == 4]  # the convolutions
    assert weights and all(torch.allclose(start[k], tuned[k], atol=1e-9) for k in weights)  # lr ~0: unchanged
    assert metrics["status"] == "complete" and metrics["hyperparameters"]["peak_lr"] == 1e-12
    assert metrics["fine_tune"]["teacher"] == str(teacher) and len(metrics["fine_tune"]["init_sha256"]) == 64
    assert "--init" in metrics["command"] and "--teacher" in metrics["command"] and "--lr 1e-12" in metrics["command"]


def test_a_fine_tuning_run_resumes_where_it_stopped(tmp_path, finished):
    student, teacher = finished
    tune = FineTune(student, 0.01, teacher)
    whole = _train(tmp_path, "whole.onnx", epochs=2, fine_tune=tune)
    first = _train(tmp_path, "split.onnx", epochs=2, fine_tune=tune, time_budget_s=0.0)
    assert first["status"] == "incomplete" and "--teacher" in first["command"]
    second = _train(tmp_path, "split.onnx", epochs=2, fine_tune=tune, resume=True)
    assert [r["loss"] for r in second["history"]] == [r["loss"] for r in whole["history"]]
    # another teacher is another run: resuming with it is refused
    with pytest.raises(InputError, match="another run"):
        _train(tmp_path, "split.onnx", epochs=2, fine_tune=FineTune(student, 0.01, None), resume=True)


def test_unusable_starting_points_are_refused_with_the_fix(tmp_path, finished):
    student, teacher = finished
    with pytest.raises(InputError, match="not resnet20 with aespa"):
        _train(tmp_path, "x.onnx", fine_tune=FineTune(teacher, 0.01))  # a ReLU run cannot start an AESPA one
    with pytest.raises(InputError, match="no such checkpoint"):
        _train(tmp_path, "x.onnx", fine_tune=FineTune(tmp_path / "absent.ckpt", 0.01))
    (tmp_path / "foreign.ckpt").write_bytes(b"not a checkpoint")
    with pytest.raises(InputError, match="not a henn training checkpoint"):
        _train(tmp_path, "x.onnx", fine_tune=FineTune(student, 0.01, tmp_path / "foreign.ckpt"))
    _train(tmp_path, "unfinished.onnx", epochs=2, time_budget_s=0.0)
    with pytest.raises(InputError, match="unfinished run.*--resume"):
        _train(tmp_path, "x.onnx", fine_tune=FineTune(tmp_path / "unfinished.ckpt", 0.01))


def test_the_cli_flags_go_together():
    def args(**kw):
        return argparse.Namespace(**{"init": None, "teacher": None, "lr": None, **kw})

    assert _fine_tune(args()) is None
    with pytest.raises(InputError, match="--init"):
        _fine_tune(args(teacher="t.ckpt"))
    with pytest.raises(InputError, match="needs --lr"):
        _fine_tune(args(init="s.ckpt"))
    tune = _fine_tune(args(init="s.ckpt", lr=0.01, teacher="t.ckpt"))
    assert tune.peak_lr == 0.01 and str(tune.teacher) == "t.ckpt"
