"""`henn train`: train a paper-000 CNN (needs the [train] extra: torch). See henn.training.cli."""

from __future__ import annotations

from henn.training.cli import add_train_command


def register(sub) -> None:
    add_train_command(sub)
