"""Client-aided activations (henn.segments) on a ReLU + MaxPool MNIST CNN over a real `henn serve` on loopback:
round trips, bytes each way and latency per image on Lattigo at the 128-bit parameters henn chooses, against
the plaintext model's accuracy and its predictions.

The model (plain torch): Conv(1->8, 5x5) -> ReLU -> MaxPool 2 -> Conv(8->16, 5x5) -> ReLU -> MaxPool 2 ->
Linear(256 -> 10), trained for --epochs on 4000 of the 5000 MNIST digits embedded in henn
(henn.datasets.load_embedded_mnist, split by a seeded permutation: they are sorted by label); evaluated on the
other 1000 (plaintext) and the first --images of them encrypted. The ONNX export goes through
`henn compile --client-aided`; `henn serve` runs it with one worker; henn.connect makes the keys, uploads
them and walks the segments image by image.

    .venv/bin/python benchmarks/client_aided.py --images 200 --out benchmarks/results/client_aided.json  # ~2 min
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "deploy"))
from _common import summarize, write_json
from deploy_support import ServerProcess

import henn
from henn.cli import main as henn_main
from henn.datasets import load_embedded_mnist
from henn.deploy import Artefact
from henn.training.models import export_onnx

TRAIN = 4000


def cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 8, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(256, 10),
    )  # fmt: skip


def train(x: np.ndarray, y: np.ndarray, epochs: int, seed: int) -> tuple[nn.Module, float]:
    torch.manual_seed(seed)
    model = cnn()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    xt, yt = torch.tensor(x), torch.tensor(y)
    t0 = time.perf_counter()
    for _ in range(epochs):
        for idx in torch.randperm(len(xt)).split(64):
            opt.zero_grad()
            nn.functional.cross_entropy(model(xt[idx]), yt[idx]).backward()
            opt.step()
    return model.eval(), time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=100, help="test digits to run encrypted")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/results/client_aided.json")
    args = ap.parse_args()

    images, labels = load_embedded_mnist()  # sorted by label: split them by a seeded permutation
    order = np.random.default_rng(args.seed).permutation(len(images))
    train_i, test_i = order[:TRAIN], order[TRAIN:]
    model, train_s = train(images[train_i], labels[train_i], args.epochs, args.seed)
    test_x, test_y = images[test_i].astype(np.float64), labels[test_i]
    with torch.no_grad():
        plain = model.double()(torch.tensor(test_x)).numpy()
    n = args.images
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        export_onnx(model.float(), "mnist-cnn", where / "cnn.onnx")
        path = where / "cnn.henn"
        argv = ["compile", str(where / "cnn.onnx"), "--input-shape", "1,28,28", "--client-aided", "--out", str(path)]
        assert henn_main(argv) == 0
        described = Artefact.load(path).describe()
        with ServerProcess(path, where / "sessions", verbose=0) as server:
            with henn.connect(server.url, progress=False) as remote:
                latency, replies = [], []
                for i in range(n):
                    t0 = time.perf_counter()
                    replies.append(remote.predict(test_x[i : i + 1]))
                    latency.append(time.perf_counter() - t0)
                stats = dict(remote.stats)
    got = np.concatenate(replies)
    want = plain[:n]
    result = {
        "model": "Conv(1->8,5)-ReLU-MaxPool2-Conv(8->16,5)-ReLU-MaxPool2-Linear(256->10)",
        "weights": f"trained {args.epochs} epochs (Adam, batch 64, seed {args.seed}) on {TRAIN} of the embedded "
        f"MNIST digits (seeded permutation), {train_s:.0f} s",
        "backend": "lattigo",
        "params": described["params_describe"],
        "segments": len(described["segments"]),
        "client_stages": described["client_stages"],
        "images": n,
        "plaintext_accuracy": float((plain.argmax(1) == test_y).mean()),
        "plaintext_accuracy_images": len(test_y),
        "plaintext_accuracy_same_images": float((want.argmax(1) == test_y[:n]).mean()),
        "encrypted_accuracy": float((got.argmax(1) == test_y[:n]).mean()),
        "agreement_with_plaintext": float((got.argmax(1) == want.argmax(1)).mean()),
        "max_abs_logit_error": float(np.abs(got - want).max()),
        "rounds_per_image": stats["requests"] / n,
        "bytes_up_per_image": stats["request_bytes"] / n,
        "bytes_down_per_image": stats["response_bytes"] / n,
        "key_bytes": stats["key_bytes"],
        "latency_s": summarize(latency),
        "client_s_per_image": {k: stats[k] / n for k in ("encrypt_s", "decrypt_s")},
        "server_evaluate_s_per_image": stats["server_evaluate_s"] / n,
        "command": " ".join(["benchmarks/client_aided.py", *sys.argv[1:]]),
    }
    out = write_json(args.out, result)
    print(
        f"{n} images: {result['rounds_per_image']:.0f} rounds, {result['bytes_up_per_image'] / 2**20:.2f} MiB up and "
        f"{result['bytes_down_per_image'] / 2**20:.2f} MiB down per image, latency median "
        f"{result['latency_s']['median']:.3f} s; accuracy {result['encrypted_accuracy']:.3f} encrypted vs "
        f"{result['plaintext_accuracy_same_images']:.3f} plaintext on the same images "
        f"({result['plaintext_accuracy']:.3f} on {len(test_y)}), agreement {result['agreement_with_plaintext']:.3f}, "
        f"max logit error {result['max_abs_logit_error']:.2g}; {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
