"""Fine-tuning a trained network from its checkpoint, optionally distilling a teacher (Hinton et al. 2015).

``henn train ... --init RUN.ckpt [--teacher TEACHER.ckpt] --lr 0.01`` starts from the weights of a finished
run instead of a random initialization and trains ``--epochs`` more under a fresh cosine schedule from
``--lr``. With a teacher (for ResNet-20: the ReLU reference, which a polynomial network trails by about a
point), the loss is

    WEIGHT * T^2 * KL(softmax(teacher / T) || softmax(student / T)) + (1 - WEIGHT) * cross-entropy,

the teacher in eval mode on the same augmented batch. The student keeps learning the labels; the teacher's
soft targets carry what the polynomial network cannot find alone from the labels of images it already fits
(the 100-epoch AESPA run ends at 99% training accuracy, where the cross-entropy's gradient is small).

The checkpoints named are fingerprinted (sha256) into the run's configuration, so ``--resume`` refuses a run
whose starting point or teacher changed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from henn.errors import InputError
from henn.training.checkpoint import read_state
from henn.training.models import INPUT_SHAPES, build_model

__all__ = ["FineTune", "distillation_loss", "load_run_weights", "load_teacher", "TEMPERATURE", "WEIGHT"]

TEMPERATURE = 4.0  # softens the teacher's logits (Hinton et al.: 2-5 for 10 classes)
WEIGHT = 0.9  # share of the distillation term in the loss; the rest is the cross-entropy with the labels


@dataclass(frozen=True)
class FineTune:
    """Where a fine-tuning run starts and what it imitates."""

    init: Path  # checkpoint of a finished run of the same model and activation
    peak_lr: float  # the cosine schedule's starting learning rate
    teacher: Path | None = None  # checkpoint of a finished run whose logits the student imitates

    def config(self) -> dict:
        """What a resumed run must match (the files' contents, not their names)."""
        return {
            "init_sha256": _sha256(self.init),
            "peak_lr": self.peak_lr,
            "teacher_sha256": None if self.teacher is None else _sha256(self.teacher),
            "temperature": TEMPERATURE if self.teacher else None,
            "weight": WEIGHT if self.teacher else None,
        }

    def cli_args(self) -> list[str]:
        args = ["--init", str(self.init), "--lr", repr(self.peak_lr)]
        return args + (["--teacher", str(self.teacher)] if self.teacher else [])

    def describe(self) -> dict:
        """For the run's .json: the paths and the fingerprints."""
        return {"init": str(self.init), "teacher": None if self.teacher is None else str(self.teacher), **self.config()}


def _sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _read_finished_run(path: Path, flag: str) -> dict:
    """The state of a finished run's checkpoint; refused with the fix when absent, foreign or unfinished."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{flag} {path}: no such checkpoint (a run's OUT.ckpt, e.g. src/henn/zoo/resnet20_relu.ckpt)")
    state = read_state(path, f"{flag} {path} is not a henn training checkpoint ({{}})")
    config = state.get("config") if isinstance(state, dict) else None
    if not isinstance(config, dict) or not {"model", "activation", "epochs"} <= config.keys():
        raise InputError(f"{flag} {path} is not a henn training checkpoint (no run configuration in it)")
    if len(state.get("history", [])) < config["epochs"]:
        raise InputError(
            f"{flag} {path} is of an unfinished run ({len(state.get('history', []))} of "
            f"{config['epochs']} epochs): finish it with --resume first"
        )
    return state


def load_run_weights(path: Path, model_name: str, activation: str) -> dict:
    """The weights of a finished run of ``model_name`` with ``activation`` (for ``--init``)."""
    state = _read_finished_run(path, "--init")
    config = state["config"]
    if (config["model"], config["activation"]) != (model_name, activation):
        raise InputError(
            f"--init {path} holds {config['model']} with {config['activation']}, not {model_name} "
            f"with {activation}: start from a run of the same model and activation"
        )
    return state["model"]


def load_teacher(path: Path, model_name: str, device: torch.device) -> torch.nn.Module:
    """A finished run's network in eval mode, frozen, for ``--teacher``; it must take the student's inputs."""
    state = _read_finished_run(path, "--teacher")
    config = state["config"]
    if INPUT_SHAPES.get(config["model"]) != INPUT_SHAPES[model_name]:
        raise InputError(
            f"--teacher {path} is a {config['model']}, whose inputs are not {model_name}'s: "
            "pick a teacher trained on the same dataset"
        )
    teacher = build_model(config["model"], config["activation"])
    teacher.load_state_dict(state["model"])
    teacher.to(device).eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    return teacher


def distillation_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """WEIGHT * T^2 * KL(teacher_T || student_T) + (1 - WEIGHT) * CE(student, labels); T^2 keeps the soft
    term's gradient on the scale of the hard one's as T changes (Hinton et al., section 2)."""
    t = TEMPERATURE
    soft = F.kl_div(
        F.log_softmax(student_logits / t, dim=1),
        F.log_softmax(teacher_logits / t, dim=1),
        reduction="batchmean",
        log_target=True,
    )
    return WEIGHT * t * t * soft + (1.0 - WEIGHT) * F.cross_entropy(student_logits, labels)
