"""benchmarks/heorg: henn's stage programs for the HE.org FHE Benchmarking Suite's ML-inference workload run
end to end, each stage a separate process over the harness's folders (io/<size>/public_keys, secret_key,
ciphertexts_upload, ciphertexts_download), on two MNIST test images, and the decrypted predictions equal the
plaintext model's (mnist_mlp.onnx with the exact ReLU). Lattigo at N = 2^15, 128-bit secure: ~40 s here (key
generation and the server's stage load 1.2 GiB of evaluation keys; 5-6 GiB peak in those processes)."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("onnx")

HEORG = Path(__file__).resolve().parents[2] / "benchmarks" / "heorg"
sys.path.insert(0, str(HEORG))
import run_local  # noqa: E402
import stages  # noqa: E402

from henn.datasets import default_data_dir  # noqa: E402

needs_data = pytest.mark.skipif(default_data_dir() is None, reason="no dataset folder (set HENN_DATA_DIR)")


@needs_data
def test_stages_as_separate_processes_give_the_plaintext_models_predictions(tmp_path):
    subprocess.run(
        [sys.executable, str(HEORG / "stages.py"), "build", "--root", str(tmp_path)], check=True, capture_output=True
    )
    x, y = run_local.draw_images(2, seed=0)
    r = run_local.run_instance(tmp_path, 0, x, y)

    assert r["predictions"] == r["plaintext_predictions"]
    assert r["max_logit_error"] < 2.0  # 5-bit composite ReLU: ~0.6 on these logits (|logit| up to ~20)
    lay = stages.Layout(tmp_path, 0)
    assert lay.predictions.read_text().split() == [str(p) for p in r["predictions"]]
    # the server's folders hold public material only; the key file is the client's, 0600
    assert sorted(p.name for p in lay.public.iterdir()) == ["eval_keys.evk"]
    assert stat.S_IMODE(lay.key.stat().st_mode) == 0o600
    assert stat.S_IMODE(lay.passphrase.stat().st_mode) == 0o600
    assert not any(b"HENNKEY" in p.read_bytes()[:16] for d in (lay.up, lay.down) for p in d.iterdir())
