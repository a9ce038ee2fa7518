"""`henn infer` without and with `--cluster`, each in a process of its own: without it Ray is never
imported; with it the sets run on the loopback cluster (conftest.py, reached through $RAY_ADDRESS)."""

from __future__ import annotations

import os
import subprocess
import sys

INFER = ["infer", "--images", "3", "--activation", "square", "--calibration", "64"]
SCRIPT = """
import sys
from henn.cli import main
rc = main(sys.argv[1:])
print("ray imported:", "ray" in sys.modules)
sys.exit(rc)
"""


def _henn(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCRIPT, *args], capture_output=True, text=True, timeout=300, env=env)


def test_infer_without_cluster_never_imports_ray():
    out = _henn(*INFER)
    assert out.returncode == 0, out.stderr
    assert "ray imported: False" in out.stdout and "cluster" not in out.stdout


def test_infer_on_the_cluster(cluster):
    env = dict(os.environ, RAY_ADDRESS=cluster.address)
    out = _henn(*INFER, "--cluster", "ray", env=env)
    assert out.returncode == 0, out.stderr
    assert "ray imported: True" in out.stdout
    assert "cluster   ray: 2 workers on 2 node(s)" in out.stdout
    assert "agreement 100.00 %" in out.stdout


def test_a_bad_cluster_address_is_refused_while_parsing():
    out = _henn(*INFER, "--cluster", "spark://head:7077")
    assert out.returncode == 2 and "give 'ray'" in out.stderr
