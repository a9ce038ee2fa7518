"""`henn encrypt`: images (.npy) -> a request file of their ciphertexts, under a saved client's key."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from henn import cli_secrets
from henn.cli_args import output_file
from henn.errors import InputError


def register(sub) -> None:
    p = sub.add_parser("encrypt", help="encrypt images (.npy) into a request file with a saved client key")
    p.add_argument("--client", type=Path, required=True, help="the key file (henn keygen --out)")
    p.add_argument("--images", type=Path, required=True, help="a .npy of images, shape (n, *input-shape)")
    p.add_argument("--out", type=output_file, required=True, help="the request file to write (e.g. request.bin)")
    cli_secrets.add_argument(p)
    p.set_defaults(handler=run)


def run(args) -> int:
    from henn.deploy import Client
    from henn.deploy.messages import Message

    try:
        images = np.load(args.images, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read images from {args.images}: {exc}; give a .npy written by numpy.save") from None
    client = Client.open(args.client, passphrase=cli_secrets.passphrase(args))
    try:
        x = client.check(images)
        sets = client.batches(len(x))
        blobs = [client.encrypt(x[r.start : r.stop], checked=True) for r in sets]
        message = Message("request", client.model.model_sha256, client.key_id or "", [len(r) for r in sets], blobs)
        size = message.save(args.out)
    finally:
        client.close()
    print(f"wrote {args.out} ({size / 2**20:.1f} MiB): {len(x)} images in {len(sets)} sets")
    return 0
