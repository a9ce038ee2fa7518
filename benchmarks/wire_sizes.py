"""Bytes on the wire (issue 30, item 3): request and response sizes of each zoo model, Lattigo's full
encoding (MarshalBinary: 64-bit words, c1 sent whole) against henn's compact ones (secret-key requests as
c0 and a 32-byte seed, everything bit-packed to each prime's width), with the time to serialize and parse.

Each zoo model is compiled as the HE.org submission compiles its model (benchmarks/heorg: `--calibration`
with seeded training images, so precision-driven parameters: the real-slot ring where they fit), in batch
and single mode (where it compiles). The request holds `input_cts` fresh
secret-key encryptions at the program's input level (what the client sends: Client.encrypt encrypts at
Program.input_level, not the top level) and the response `output_cts` ciphertexts at the program's final
level. A compact or full payload's size follows from level and degree alone, so --sample ciphertexts of each
are made and measured and the totals scaled to the counts (response stand-ins are public-key encryptions at
the final level: the same size as the server's results). Serialize: Backend.serialize of each ciphertext;
parse: henn.deploy.wire.read_objects over the body and Backend.deserialize of each object.

The MNIST batch request (`--headline`, one set of 8,192 images) is made in full, as `henn encrypt` makes
its request file (deploy.Client, one Message): every one of its ciphertexts is encrypted and written.

    .venv/bin/python benchmarks/wire_sizes.py --out benchmarks/results/wire_sizes.json
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import write_json

ZOO = Path(__file__).resolve().parents[1] / "src" / "henn" / "zoo"
SHAPES = {
    "mnist": (1, 28, 28),
    "cryptonets": (1, 28, 28),
    "lenet": (1, 28, 28),
    "lola": (1, 28, 28),
    "orion": (1, 28, 28),
    "tenseal": (1, 28, 28),
    "cifar": (3, 32, 32),
}
MODELS = (
    "mnist-cnn_square",
    "mnist-cnn_swish-rg5-deg2",
    "mnist-cnn_swish-rg7-deg4",
    "mnist-mlp_swish-rg5-deg2",
    "cryptonets_square",
    "lenet_square",
    "lola_square",
    "orion-mlp_square",
    "tenseal-cnn_square",
    "cifar-cnn_square",
    "cifar-cnn_swish-rg5-deg2",
    "cifar-cnn_swish-rg7-deg4",
)
HEADLINE = "mnist-cnn_square"  # 784 input ciphertexts (one a pixel), 8,192 images a set


def calibration(name: str, count: int) -> np.ndarray:
    """`count` seeded training images of the model's data set (what --calibration takes)."""
    from henn.datasets import load_cifar10, load_mnist

    x = (load_cifar10 if shape_of(name)[0] == 3 else load_mnist)(None, "train")[0]
    return x[np.random.default_rng(0).choice(len(x), count, replace=False)]


def compiled(name: str, mode: str, count: int):
    import henn

    return henn.compile(
        str(ZOO / f"{name}.onnx"), shape_of(name), backend="lattigo", mode=mode, calibration=calibration(name, count)
    )


def shape_of(name: str) -> tuple[int, ...]:
    return SHAPES[name.split("-")[0].split("_")[0]]


def timed_bytes(be, cts, encoding) -> tuple[list[bytes], float]:
    t0 = time.perf_counter()
    blobs = [be.serialize(ct, encoding=encoding) for ct in cts]
    return blobs, time.perf_counter() - t0


def parse_seconds(be, blobs: list[bytes]) -> float:
    from henn.deploy.wire import read_objects

    body = b"".join(blobs)
    t0 = time.perf_counter()
    for obj in read_objects(io.BytesIO(body), be, max_objects=len(blobs), max_bytes=len(body)):
        be.deserialize(obj)
    return time.perf_counter() - t0


def side(be, cts, count: int) -> dict:
    """Old (full) and new (default compact) bytes and seconds of `count` ciphertexts like `cts`."""
    out: dict[str, Any] = {"ciphertexts": count}
    for label, encoding in (("old", "full"), ("new", None)):
        blobs, ser = timed_bytes(be, cts, encoding)
        per = len(blobs[0])
        assert all(len(b) == per for b in blobs)
        scale = count / len(cts)
        out[label] = {
            "bytes": per * count,
            "bytes_per_ciphertext": per,
            "serialize_s": ser * scale,
            "parse_s": parse_seconds(be, blobs) * scale,
        }
    out["ratio"] = out["new"]["bytes"] / out["old"]["bytes"]
    return out


def measure(name: str, mode: str, sample: int, count: int, rng) -> dict:
    from henn.ckks import open_backend

    cm = compiled(name, mode, count)
    p = cm.program
    be = open_backend("lattigo", cm.params)
    try:
        sk = be.generate_secret_key()
        pk = be.generate_public_key(sk)
        ins = [
            be.encrypt(rng.uniform(0, 0.5, be.slots), sk, level=p.input_level) for _ in range(min(sample, p.input_cts))
        ]
        outs = [
            be.encrypt(rng.uniform(-1, 1, be.slots), pk, level=p.final_level) for _ in range(min(sample, p.output_cts))
        ]
        return {
            "model": name,
            "mode": mode,
            "params": cm.params.describe(),
            "prime_bits": [q.bit_length() for q in be.q_primes],
            "max_level": be.max_level,
            "input_level": p.input_level,
            "final_level": p.final_level,
            "images": p.images_per_set,
            "request": side(be, ins, p.input_cts),
            "response": side(be, outs, p.output_cts),
        }
    finally:
        be.close()


def headline(sample_images: int, count: int, rng) -> dict:
    """The MNIST batch request of one full set, made as `henn encrypt` makes it (deploy.Client, Message)."""
    from henn.deploy import Artefact, Client
    from henn.deploy.checks import InputChecks
    from henn.deploy.messages import Message

    cm = compiled(HEADLINE, "batch", count)
    checks = InputChecks.from_compiled(cm.compiled.checked, cm.activation_intervals(), cm.activation_check)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.henn"
        Artefact(cm.program, "lattigo", checks, model=HEADLINE).save(path)
        client = Client.load(path)
    try:
        client.generate_keys()
        n = cm.program.images_per_set if sample_images <= 0 else sample_images
        x = rng.uniform(0, 1, (n, *shape_of(HEADLINE))).astype(np.float32)
        t0 = time.perf_counter()
        cts = client.runtime.encrypt(x)
        encrypt_s = time.perf_counter() - t0
        be = client.backend
        row = {
            "model": HEADLINE,
            "mode": "batch",
            "images": n,
            "encrypt_s": encrypt_s,
            "params": cm.params.describe(),
            "input_level": cm.program.input_level,
            "max_level": be.max_level,
            "ciphertexts": len(cts),
        }
        for label, encoding in (("old", "full"), ("new", None)):
            blobs, ser = timed_bytes(be, cts, encoding)
            msg = Message("request", client.model.model_sha256, client.key_id or "", [n], [blobs])
            data = msg.to_bytes()
            t0 = time.perf_counter()
            back = Message.read(data, be, kind="request", objects=len(cts), max_images=n, where="request")
            read_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            for b in back.blobs[0]:
                be.deserialize(b)
            row[label] = {
                "bytes": len(data),
                "MiB": len(data) / 2**20,
                "serialize_s": ser,
                "read_s": read_s,
                "deserialize_s": time.perf_counter() - t0,
            }
            del data, back, blobs
        row["ratio"] = row["new"]["bytes"] / row["old"]["bytes"]
        return row
    finally:
        client.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--modes", nargs="*", default=["batch", "single"])
    ap.add_argument("--calibration", type=int, default=256, help="seeded training images to compile with")
    ap.add_argument("--sample", type=int, default=16, help="ciphertexts made per side (sizes are exact per level)")
    ap.add_argument("--headline-images", type=int, default=0, help="images of the MNIST batch request (0: a full set)")
    ap.add_argument("--no-headline", action="store_true")
    ap.add_argument("--out", default="benchmarks/results/wire_sizes.json")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    head = None if args.no_headline else headline(args.headline_images, args.calibration, rng)
    if head:
        print(
            f"{head['model']} batch request, {head['images']} images: {head['old']['MiB']:.1f} MiB -> "
            f"{head['new']['MiB']:.1f} MiB ({head['ratio']:.3f})",
            flush=True,
        )
    for name in args.models:
        for mode in args.modes:
            try:
                row = measure(name, mode, args.sample, args.calibration, rng)
            except Exception as exc:  # noqa: BLE001 - a mode a model does not compile in is reported, not fatal
                rows.append({"model": name, "mode": mode, "error": f"{type(exc).__name__}: {exc}"[:300]})
                print(f"{name} {mode}: {rows[-1]['error']}", flush=True)
                continue
            rows.append(row)
            rq, rs = row["request"], row["response"]
            print(
                f"{name} {mode}: request {rq['old']['bytes'] / 2**20:.2f} -> {rq['new']['bytes'] / 2**20:.2f} MiB, "
                f"response {rs['old']['bytes'] / 2**20:.3f} -> {rs['new']['bytes'] / 2**20:.3f} MiB "
                f"(levels in {row['input_level']}/{row['max_level']}, out {row['final_level']})",
                flush=True,
            )
    write_json(args.out, {"command": " ".join(sys.argv), "headline": head, "rows": rows})


if __name__ == "__main__":
    main()
