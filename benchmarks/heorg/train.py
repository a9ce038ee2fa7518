"""Train the HE.org ML-inference workload's MNIST network and export it to ONNX for `henn compile`.

The network is the harness's (fhe-benchmarking/ml-inference, harness/mnist/model.py):
784 -> 128 -> ReLU -> 64 -> ReLU -> 10. The recipe is the harness's too (harness/mnist/mnist.py, train.py):
inputs normalized by (x - 0.1307) / 0.3081, an 80/20 random split of the 60,000 training images, Adam at
lr 1e-3, batch 64, 15 epochs, cross-entropy, the epoch with the best validation accuracy kept, seed 42. The
only difference is where the images come from: the official MNIST files in ../shared/datasets/mnist
(henn.datasets.load_mnist) instead of torchvision's download.

The exported model takes the harness's own inputs, pixels in [0, 1] shaped (1, 28, 28): the normalization is
folded into the first layer (W (x - m) / s + b = (W / s) x + (b - W 1 m / s)), so the stages encrypt the pixels
as the harness writes them. Writes mnist_mlp.onnx, train_log.txt and train_result.json beside this file.

    .venv/bin/python benchmarks/heorg/train.py [--data-dir ../shared/datasets] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
MEAN, STD = 0.1307, 0.3081  # the harness's normalization (harness/mnist/mnist.py, test.py)
SEED = 42
EPOCHS, BATCH, LR = 15, 64, 1e-3


class HarnessMLP(nn.Module):
    """The harness's SimpleFFNN: 784 -> 128 -> ReLU -> 64 -> ReLU -> 10 (one ReLU module, used twice)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 128)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(128, 64)
        self.fc3 = nn.Linear(64, 10)

    def forward(self, x):
        x = x.reshape(-1, 784)
        return self.fc3(self.relu(self.fc2(self.relu(self.fc1(x)))))


def folded(model: HarnessMLP) -> nn.Sequential:
    """The trained network on raw pixels in [0, 1]: the normalization folded into fc1."""
    w, b = model.fc1.weight.detach(), model.fc1.bias.detach()
    fc1 = nn.Linear(784, 128)
    fc1.weight.data = w / STD
    fc1.bias.data = b - (w.sum(dim=1) * MEAN / STD)
    fc2, fc3 = nn.Linear(128, 64), nn.Linear(64, 10)
    fc2.load_state_dict(model.fc2.state_dict())
    fc3.load_state_dict(model.fc3.state_dict())
    return nn.Sequential(nn.Flatten(), fc1, nn.ReLU(), fc2, nn.ReLU(), fc3).eval()


def accuracy(model, x, y) -> float:
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def _fit(model, x, y, tr_idx, va_idx, gen, log):
    """EPOCHS of Adam on the training split; (best validation accuracy, its epoch, its weights)."""
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    loss_fn = nn.CrossEntropyLoss()
    n_train = len(tr_idx)
    best_val, best_state, best_epoch = -1.0, None, 0
    for epoch in range(EPOCHS):
        model.train()
        order = tr_idx[torch.randperm(n_train, generator=gen)]
        total_loss, correct = 0.0, 0
        for i in range(0, n_train, BATCH):
            idx = order[i : i + BATCH]
            xb, yb = x[idx], y[idx]
            opt.zero_grad()
            out = model(xb)
            loss = loss_fn(out, yb)
            loss.backward()
            opt.step()
            total_loss += loss.item() * len(idx)
            correct += int((out.argmax(1) == yb).sum())
        model.eval()
        val = accuracy(model, x[va_idx], y[va_idx])
        log(
            f"epoch {epoch + 1}/{EPOCHS} loss {total_loss / n_train:.4f} train {100 * correct / n_train:.2f}% "
            f"val {100 * val:.2f}%"
        )
        if val > best_val:
            best_val, best_epoch = val, epoch + 1
            best_state = {k: v.clone() for k, v in model.state_dict().items()}
    return best_val, best_epoch, best_state


def _export(net: nn.Module, out: str) -> None:
    """The folded net as ONNX with a dynamic batch axis (the legacy exporter: dynamo=False)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            net,
            (torch.zeros(1, 1, 28, 28),),
            out,
            dynamo=False,
            input_names=["x"],
            output_names=["logits"],
            dynamic_axes={"x": {0: "b"}, "logits": {0: "b"}},
            opset_version=17,
        )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", default=str(REPO.parent / "shared" / "datasets"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(HERE / "mnist_mlp.onnx"))
    args = ap.parse_args(argv)
    sys.path.insert(0, str(REPO / "src"))
    from henn.datasets import load_mnist

    torch.set_num_threads(args.threads)
    torch.manual_seed(SEED)
    np.random.seed(SEED)
    log_lines: list[str] = []

    def log(line: str) -> None:
        print(line, flush=True)
        log_lines.append(line)

    t0 = time.perf_counter()
    xtr, ytr = load_mnist(args.data_dir, "train")
    xte, yte = load_mnist(args.data_dir, "test")

    def norm(a):
        return (torch.from_numpy(a) - MEAN) / STD

    xtr_t, ytr_t, xte_t, yte_t = norm(xtr), torch.from_numpy(ytr), norm(xte), torch.from_numpy(yte)
    gen = torch.Generator().manual_seed(SEED)
    perm = torch.randperm(len(xtr_t), generator=gen)
    n_train = int(0.8 * len(perm))
    tr_idx, va_idx = perm[:n_train], perm[n_train:]

    model = HarnessMLP()
    best_val, best_epoch, best_state = _fit(model, xtr_t, ytr_t, tr_idx, va_idx, gen, log)
    model.load_state_dict(best_state)
    model.eval()
    test_acc = accuracy(model, xte_t, yte_t)
    net = folded(model)
    raw_te = torch.from_numpy(xte)
    folded_acc = accuracy(net, raw_te, yte_t)
    with torch.no_grad():
        gap = float((net(raw_te) - model(xte_t)).abs().max())
    seconds = time.perf_counter() - t0
    log(
        f"best epoch {best_epoch} (val {100 * best_val:.2f}%); test accuracy {100 * test_acc:.2f}% "
        f"(folded, raw pixels: {100 * folded_acc:.2f}%, max logit difference {gap:.1e}); {seconds:.0f} s"
    )

    _export(net, args.out)
    (HERE / "train_log.txt").write_text("\n".join(log_lines) + "\n")
    result = {
        "architecture": "784 -> 128 -> ReLU -> 64 -> ReLU -> 10 (harness/mnist/model.py)",
        "recipe": {
            "optimizer": "Adam",
            "lr": LR,
            "batch": BATCH,
            "epochs": EPOCHS,
            "split": "80/20 of train",
            "normalization": [MEAN, STD],
            "seed": SEED,
            "keep": "best validation accuracy",
        },
        "best_epoch": best_epoch,
        "val_accuracy": best_val,
        "test_accuracy": test_acc,
        "test_accuracy_folded_onnx_input": folded_acc,
        "seconds": round(seconds, 1),
        "threads": args.threads,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "onnx": Path(args.out).name,
    }
    (HERE / "train_result.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
