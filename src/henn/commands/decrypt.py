"""`henn decrypt`: a response file -> logits, with the saved client key that encrypted the request."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from henn import cli_secrets
from henn.cli_args import int_in, output_file
from henn.deploy.flood import MAX_BITS, MIN_BITS
from henn.errors import InputError

SHOWN = 20  # predictions printed


def register(sub) -> None:
    p = sub.add_parser("decrypt", help="decrypt a response file into logits with a saved client key")
    p.add_argument("response", type=Path, help="the response file (henn evaluate --out)")
    p.add_argument("--client", type=Path, required=True, help="the key file (henn keygen --out)")
    p.add_argument("--out", type=output_file, default=None, help="write the logits here (.npy)")
    p.add_argument(
        "--flood-bits",
        type=int_in(MIN_BITS, MAX_BITS),
        default=None,
        help="noise flooding of the decrypted logits: bits of precision kept (IND-CPA^D mitigation)",
    )
    cli_secrets.add_argument(p)
    p.set_defaults(handler=run)


def run(args) -> int:
    from henn.deploy import Client
    from henn.deploy.messages import Message

    client = Client.open(args.client, passphrase=cli_secrets.passphrase(args), flood_bits=args.flood_bits)
    try:
        p = client.program
        response = Message.read(
            args.response.read_bytes(),
            client.backend,
            kind="response",
            objects=p.output_cts,
            max_images=p.images_per_set,
            where=str(args.response),
        )
        if response.model_sha256 != client.model.model_sha256 or response.key_id != client.key_id:
            raise InputError(f"{args.response} answers another model or key set than {args.client}'s")
        logits = np.concatenate([client.decrypt(blobs, n) for blobs, n in zip(response.blobs, response.sets)])
    finally:
        client.close()
    pred = logits.reshape(len(logits), -1).argmax(axis=1)
    shown = " ".join(str(int(c)) for c in pred[:SHOWN]) + (" ..." if len(pred) > SHOWN else "")
    print(f"{len(logits)} images, predicted classes: {shown}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        np.save(args.out, logits)
        print(f"wrote {args.out} (logits {logits.shape})")
    return 0
