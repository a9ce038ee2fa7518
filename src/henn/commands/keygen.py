"""`henn keygen`: a client's keys as files: the secret key encrypted under a passphrase (--out, a new
file of mode 0600) and the public evaluation keys a server needs (--keys-out)."""

from __future__ import annotations

from pathlib import Path

from henn import cli_secrets
from henn.cli_args import output_file
from henn.errors import InputError


def register(sub) -> None:
    p = sub.add_parser("keygen", help="make a client's keys: a passphrase-protected key file, the evaluation keys")
    p.add_argument(
        "--model",
        type=Path,
        required=True,
        help="the model's client part (henn compile --client-out, or the server's GET /v1/model/file) or the "
        "whole model file",
    )
    p.add_argument("--out", type=Path, required=True, help="the key file to write (a new file: never overwritten)")
    p.add_argument(
        "--keys-out",
        type=output_file,
        default=None,
        help="the evaluation keys for the server (public; default: OUT.evk)",
    )
    cli_secrets.add_argument(p)
    p.set_defaults(handler=run)


def run(args) -> int:
    from henn.deploy import Client

    keys_out = args.keys_out or args.out.with_name(args.out.name + ".evk")
    if args.out.exists():
        raise InputError(f"{args.out} exists: give a new path (a key file is never overwritten) or delete it")
    secret = cli_secrets.passphrase(args, confirm=True)
    client = Client.load(args.model)
    try:
        client.generate_keys()
        size = client.save_evaluation_keys(keys_out)
        client.release_keys()
        client.save(args.out, passphrase=secret)
        key_id = client.key_id or ""
    finally:
        client.close()
    print(f"wrote {args.out} (the secret key, encrypted; key set {key_id[:8]})")
    print(f"wrote {keys_out} ({size / 2**20:.1f} MiB of evaluation keys: upload them, `henn evaluate --keys`)")
    return 0
