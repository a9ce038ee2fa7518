"""Shared by the cluster tests: the zoo model they compile and `henn` run as a process of its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SQUARE = Path(__file__).resolve().parents[2] / "src" / "henn" / "zoo" / "mnist-cnn_square.onnx"
INFER = ["infer", "--images", "3", "--activation", "square", "--calibration", "64"]
SCRIPT = """
import sys
from henn.cli import main
rc = main(sys.argv[1:])
print("ray imported:", "ray" in sys.modules)
sys.exit(rc)
"""


def henn_process(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`henn ARGS` in a fresh interpreter; its stdout ends with whether Ray was imported."""
    return subprocess.run([sys.executable, "-c", SCRIPT, *args], capture_output=True, text=True, timeout=300, env=env)
