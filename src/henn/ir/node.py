"""The values and nodes of the henn IR (see henn.ir.graph), and the error a malformed IR raises."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from henn.errors import HennError


class IRError(HennError):
    """The IR is malformed: a bug in a frontend or a pass (the message names the node)."""


@dataclass
class Value:
    name: str
    shape: tuple[int, ...]
    level: int | None = None
    log_scale: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Node:
    op: str
    name: str
    inputs: list[str]
    output: str
    attrs: dict[str, Any] = field(default_factory=dict)
    params: dict[str, np.ndarray] = field(default_factory=dict)
