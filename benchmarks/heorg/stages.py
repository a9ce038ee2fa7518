"""henn's stage programs for the HomomorphicEncryption.org FHE Benchmarking Suite's ML-inference workload.

The suite's harness (github.com/fhe-benchmarking/ml-inference, harness/run_submission.py) runs, from the
root of its checkout, one process per stage: `submission/build/<stage> SIZE` (server_preprocess_model without
SIZE), SIZE 0..3 = single 1 / small 15 / medium 1,000 / large 10,000 MNIST test images. Each stage here is
one such process doing one henn step (henn's CLI, in process) over the harness's folders:

    datasets/<size>/intermediate/test_pixels.txt   the harness's input: one image a line, 784 pixels in [0, 1]
    io/<size>/public_keys/eval_keys.evk            evaluation keys (public: relinearization, rotations)
    io/<size>/secret_key/client.key                the secret key, encrypted at rest (henn keygen's key file)
    io/<size>/secret_key/passphrase                its passphrase (0600; the client's own storage)
    io/<size>/intermediate/images.npy              the preprocessed images (client)
    io/<size>/ciphertexts_upload/request.bin       the encrypted images (henn encrypt)
    io/<size>/ciphertexts_download/response.bin    the encrypted logits (henn evaluate)
    io/<size>/intermediate/logits.npy              the decrypted logits (client)
    io/<size>/encrypted_model_predictions.txt      one predicted label a line: what the harness scores

The model: submission/build/model.henn (the server's, with the weights) and model.client.henn (the client's
part, no weights), compiled by `build` from mnist_mlp.onnx (train.py) before any stage runs; the harness's
build step (scripts/build_task.sh) is where that happens, untimed, as the reference submission compiles its
weights into a library there.

    stages.py install HARNESS_DIR      make HARNESS_DIR (a checkout of the harness) run henn's stages
    stages.py build [--root DIR]       compile the model into DIR/submission/build (skipped when up to date)
    stages.py STAGE SIZE [--root DIR]  one stage (what submission/build/STAGE runs); DIR defaults to the cwd
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import shlex
import stat
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
MODEL_ONNX = HERE / "mnist_mlp.onnx"
SIZES = (1, 15, 1000, 10000)  # the harness's batch sizes (harness/params.py)
NAMES = ("single", "small", "medium", "large")
CALIBRATION_IMAGES = 256  # training images, seeded: the ReLU ranges, the sign precision and the parameters
BACKEND = "lattigo"
# single mode, one image per ciphertext set: 29 rotation keys (1.2 GiB of evaluation keys). Several images
# per set (--images-per-set) need more rotation keys (16: 131 keys) than this machine's memory allows.
COMPILE_OPTIONS = ["--backend", BACKEND, "--mode", "single", "--input-check", "warn"]

STAGES = (
    "client_key_generation",
    "client_preprocess_input",
    "client_encode_encrypt_input",
    "server_preprocess_model",
    "server_encrypted_compute",
    "client_decrypt_decode",
    "client_postprocess",
)


class Layout:
    """The harness's folders for one instance size (its harness/params.py), relative to the harness root."""

    def __init__(self, root: Path, size: int):
        self.root, self.size, self.name = root, size, NAMES[size]
        self.io = root / "io" / self.name
        self.pixels = root / "datasets" / self.name / "intermediate" / "test_pixels.txt"
        self.labels = root / "datasets" / self.name / "intermediate" / "test_labels.txt"
        self.public = self.io / "public_keys"
        self.secret = self.io / "secret_key"
        self.up = self.io / "ciphertexts_upload"
        self.down = self.io / "ciphertexts_download"
        self.inter = self.io / "intermediate"
        self.evk = self.public / "eval_keys.evk"
        self.key = self.secret / "client.key"
        self.passphrase = self.secret / "passphrase"
        self.images = self.inter / "images.npy"
        self.request = self.up / "request.bin"
        self.response = self.down / "response.bin"
        self.logits = self.inter / "logits.npy"
        self.predictions = self.io / "encrypted_model_predictions.txt"


def build_dir(root: Path) -> Path:
    return root / "submission" / "build"


def henn(*argv: str | Path) -> None:
    """One henn command, in this process (the stage is the process)."""
    from henn.cli import main

    rc = main([str(a) for a in argv])
    if rc:
        raise SystemExit(rc)


def calibration_images(data_dir: str | None) -> np.ndarray:
    from henn.datasets import load_mnist

    x, _ = load_mnist(data_dir, "train")  # None: $HENN_DATA_DIR or ../shared/datasets
    idx = np.random.default_rng(0).choice(len(x), CALIBRATION_IMAGES, replace=False)
    return x[np.sort(idx)]


def build(root: Path, data_dir: str | None = None) -> Path:
    """Compile mnist_mlp.onnx into root/submission/build (model.henn, model.client.henn), unless the files
    there were compiled from the same ONNX bytes and options."""
    out = build_dir(root)
    out.mkdir(parents=True, exist_ok=True)
    stamp = hashlib.sha256(MODEL_ONNX.read_bytes() + json.dumps(COMPILE_OPTIONS).encode()).hexdigest()
    stamp_file = out / "model.stamp"
    model, client = out / "model.henn", out / "model.client.henn"
    if stamp_file.exists() and stamp_file.read_text() == stamp and model.exists() and client.exists():
        print(f"[henn] {model} is up to date")
        return model
    calib = out / "calibration.npy"
    np.save(calib, calibration_images(data_dir))
    for f in (model, client):
        f.unlink(missing_ok=True)
    henn(
        "compile",
        MODEL_ONNX,
        "--input-shape",
        "1,28,28",
        *COMPILE_OPTIONS,
        "--calibration",
        calib,
        "--out",
        model,
        "--client-out",
        client,
    )
    stamp_file.write_text(stamp)
    return model


def read_pixels(path: Path) -> np.ndarray:
    rows = [line.split() for line in path.read_text().splitlines() if line.strip()]
    x = np.asarray(rows, dtype=np.float32)
    if x.ndim != 2 or x.shape[1] != 784:
        raise SystemExit(f"{path}: expected lines of 784 pixel values, got shape {x.shape}")
    return x.reshape(-1, 1, 28, 28)


def stage(name: str, root: Path, size: int | None) -> None:
    if name == "server_preprocess_model":
        # the harness gives no size here; the model was compiled at build time, its weights stay on the server:
        # check that the file is there and opens
        from henn.deploy.artefact import Artefact

        model = build_dir(root) / "model.henn"
        Artefact.load(str(model))
        print(f"         [server] model file {model} ({model.stat().st_size / 2**20:.1f} MiB) opens")
        return
    if size is None:
        raise SystemExit(f"{name} needs the instance size (0-3)")
    lay = Layout(root, size)
    pw: list[str | Path] = ["--passphrase-file", lay.passphrase]
    if name == "client_key_generation":
        for d in (lay.public, lay.secret):
            d.mkdir(parents=True, exist_ok=True)
        os.chmod(lay.secret, stat.S_IRWXU)
        for f in (lay.key, lay.evk):
            f.unlink(missing_ok=True)  # henn keygen never overwrites a key file
        fd = os.open(lay.passphrase, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as phrase:
            phrase.write(secrets.token_urlsafe(32) + "\n")
        henn("keygen", "--model", build_dir(root) / "model.client.henn", "--out", lay.key, "--keys-out", lay.evk, *pw)
    elif name == "client_preprocess_input":
        lay.inter.mkdir(parents=True, exist_ok=True)
        x = read_pixels(lay.pixels)
        if len(x) != SIZES[size]:  # the harness writes SIZES[size]; run_local.py and the test may write others
            print(f"         [client] {len(x)} images (the {lay.name} instance has {SIZES[size]})")
        np.save(lay.images, x)
    elif name == "client_encode_encrypt_input":
        lay.up.mkdir(parents=True, exist_ok=True)
        henn("encrypt", "--client", lay.key, "--images", lay.images, "--out", lay.request, *pw)
    elif name == "server_encrypted_compute":
        lay.down.mkdir(parents=True, exist_ok=True)
        henn("evaluate", build_dir(root) / "model.henn", lay.request, "--keys", lay.evk, "--out", lay.response)
    elif name == "client_decrypt_decode":
        henn("decrypt", lay.response, "--client", lay.key, "--out", lay.logits, *pw)
    elif name == "client_postprocess":
        labels = np.load(lay.logits).argmax(axis=1)
        lay.predictions.write_text("".join(f"{int(v)}\n" for v in labels))
    else:
        raise SystemExit(f"unknown stage {name!r}: one of {', '.join(STAGES)}")


def install(harness: Path, python: str) -> None:
    """Point a checkout of the harness at these stages: submission/build/<stage> wrappers, and the harness's
    two build scripts replaced (no OpenFHE to build; build_task.sh compiles henn's model instead)."""
    if not (harness / "harness" / "run_submission.py").exists():
        raise SystemExit(f"{harness} is not a checkout of fhe-benchmarking/ml-inference (no harness/run_submission.py)")
    me = shlex.quote(str(Path(__file__).resolve()))
    py = shlex.quote(python)
    scripts = harness / "scripts"
    scripts.mkdir(exist_ok=True)
    files = {
        scripts / "get_openfhe.sh": "#!/usr/bin/env bash\n# henn's submission does not use OpenFHE\nexit 0\n",
        scripts / "build_task.sh": "\n".join(
            [
                "#!/usr/bin/env bash",
                "# henn's submission: compile the model (skipped when up to date)",
                "set -euo pipefail",
                'ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"',
                f'exec {py} {me} build --root "$ROOT"',
                "",
            ]
        ),
    }
    for name in STAGES:
        files[build_dir(harness) / name] = f'#!/usr/bin/env bash\nexec {py} {me} {name} "$@"\n'
    (harness / "submission" / "README.md").parent.mkdir(exist_ok=True)
    files[harness / "submission" / "README.md"] = (
        "# henn's submission\n\nThe stages are henn's (benchmarks/heorg/stages.py in the henn repository, "
        f"{REPO}); see benchmarks/heorg/README.md there for the model, the parameters and their security.\n"
    )
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if path.suffix != ".md":
            path.chmod(0o755)
        print(f"wrote {path}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", help=f"install, build or a stage: {', '.join(STAGES)}")
    ap.add_argument("arg", nargs="?", help="the instance size (0-3) for a stage, the harness folder for install")
    ap.add_argument("--root", default=".", help="the harness root (default: the current folder)")
    ap.add_argument(
        "--data-dir", default=None, help="MNIST for calibration (default: $HENN_DATA_DIR, else ../shared/datasets)"
    )
    ap.add_argument("--python", default=sys.executable, help="install: the interpreter the wrappers run")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(REPO / "src"))
    root = Path(args.root).resolve()
    if args.what == "install":
        if not args.arg:
            raise SystemExit("install needs the harness folder")
        install(Path(args.arg).resolve(), args.python)
    elif args.what == "build":
        build(root, args.data_dir)
    else:
        size = None if args.arg is None else int(args.arg)
        if size is not None and size not in range(4):
            raise SystemExit(f"instance size {size}: one of 0 (single), 1 (small), 2 (medium), 3 (large)")
        stage(args.what, root, size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
