"""The whole trained ResNet-20 (the zoo's AESPA model) encrypted on one real CIFAR-10 test image, on Lattigo
at the 128-bit boot-n16 set with its bootstraps: the marked suite of issue 12. 3.5-5 minutes and 8 GiB:
heavy, so `make test-heavy` (and CI) runs it, not the default `make test`; it runs alone with

    .venv/bin/python -m pytest -m resnet20_encrypted tests/runtime/test_resnet20_encrypted.py

It runs benchmarks/resnet20.py in a process of its own (its keys and program are freed with it) and checks
what the benchmark reports: the prediction equal to plaintext, the logit error, no refused image, the
memory within 8.5 GiB (issue 32 asks for 8; seeded keys gave 7.6-7.8 GiB, full ones 12.8-12.9) besides
the DFT factors the bootstraps keep where memory is free (3.0 GiB: 10.8 GiB in all on a 23.5 GiB VM)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from henn import datasets

REPO = Path(__file__).resolve().parents[2]
DATA = datasets.default_data_dir()


@pytest.mark.heavy(gib=9)
@pytest.mark.resnet20_encrypted
@pytest.mark.skipif(DATA is None, reason="no dataset folder (CIFAR-10 in ../shared/datasets or $HENN_DATA_DIR)")
def test_trained_resnet20_on_one_real_image(tmp_path):
    out = tmp_path / "resnet20.json"
    cmd = [
        sys.executable,
        str(REPO / "benchmarks" / "resnet20.py"),
        "--weights",
        str(REPO / "src" / "henn" / "zoo" / "resnet20_aespa.onnx"),
        "--data-dir",
        str(DATA),
        "--calibration",
        "200",
        "--images",
        "1",
        "--out",
        str(out),
    ]  # the default path: no cache flag
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(out.read_text())["result"]
    assert r["images"] == 1 and r["images_refused"] == [] and r["bootstraps"] >= 3
    assert r["agreement"] == 1.0 and r["max_logit_error"] < 1e-3, r
    assert "insecure" not in r["params"] and "N=2^16" in r["params"]
    # the footprint a machine without spare memory gets: the default adds the bootstraps' DFT factors (about
    # 3 GiB, kept once encoded) only where the memory share holds them
    assert 0 <= r["bootstrap_factor_mib"] < 3.5 * 1024, r
    lean = r["peak_rss_mib"] - r["bootstrap_factor_mib"]
    assert lean < 8.5 * 1024, (
        f"peak {r['peak_rss_mib']:.0f} MiB with {r['bootstrap_factor_mib']:.0f} MiB of DFT factors"
    )
