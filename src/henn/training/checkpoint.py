"""Training checkpoints: the state after each epoch, so that a long run (ResNet-20: hours on 2 CPU
cores) can span several sessions (`henn train ... --resume`) and be stopped by a time budget.

The file holds tensors, numbers and strings only, read back with ``torch.load(weights_only=True)``
(no arbitrary unpickling). A resumed run must have the same model, activation, epochs and seed: the
schedule and the data order depend on them.
"""

from __future__ import annotations

import os
import pickle
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from henn.errors import InputError

__all__ = ["Checkpoint", "read_state"]


@dataclass
class Checkpoint:
    path: Path
    config: dict  # what a resumed run must match: model, activation, epochs, seed (and a fine-tune's start)
    resume: bool = False
    budget_s: float | None = None  # stop after the epoch that spends it (None: run to the end)
    started: float = field(default_factory=time.perf_counter)

    def restore(self, model, optimizer, scheduler, generator: torch.Generator) -> list[dict]:
        """Load the saved state into the objects; the epochs done so far (empty: a fresh run)."""
        if not self.resume:
            return []
        if not self.path.is_file():
            raise InputError(f"--resume: no checkpoint at {self.path}: start the run without --resume")
        state = read_state(
            self.path, f"checkpoint {self.path} cannot be read ({{}}): delete it and start again without --resume"
        )
        if not isinstance(state, dict) or state.get("config") != self.config:
            saved = state.get("config") if isinstance(state, dict) else None
            raise InputError(
                f"checkpoint {self.path} is of another run ({saved}), not {self.config}: resume with "
                "the same --model, --activation, --epochs and --seed, or pick another --out"
            )
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        generator.set_state(state["generator"])
        torch.set_rng_state(state["torch_rng"])
        return list(state["history"])

    def save(self, model, optimizer, scheduler, generator: torch.Generator, history: list[dict]) -> None:
        """Write atomically (a run killed while saving keeps the previous epoch's checkpoint)."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        torch.save(
            {
                "config": self.config,
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "generator": generator.get_state(),
                "torch_rng": torch.get_rng_state(),
                "history": history,
            },
            tmp,
        )
        os.replace(tmp, self.path)

    def out_of_time(self) -> bool:
        return self.budget_s is not None and time.perf_counter() - self.started > self.budget_s


def read_state(path: Path, refusal: str):
    """A checkpoint file's contents (tensors, numbers and strings only); a foreign or truncated file is refused
    with ``refusal``, its ``{}`` filled with the reason."""
    try:
        return torch.load(path, weights_only=True, map_location="cpu")  # a GPU run's too
    except (RuntimeError, EOFError, OSError, ValueError, pickle.UnpicklingError) as exc:  # foreign, truncated
        raise InputError(refusal.format(type(exc).__name__)) from None
