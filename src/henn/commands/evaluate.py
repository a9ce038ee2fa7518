"""`henn evaluate`: the server's step offline: a request file -> a response file, with the model file
and the client's evaluation keys (public material only: it cannot decrypt anything)."""

from __future__ import annotations

from pathlib import Path

from henn.cli_args import output_file
from henn.errors import InputError

KEY_KINDS = ("relin_key", "galois_keys", "bootstrap_keys")


def register(sub) -> None:
    p = sub.add_parser("evaluate", help="evaluate a request file on the model (the server's step, offline)")
    p.add_argument("model", type=Path, help="the whole model file (henn compile --out)")
    p.add_argument("request", type=Path, help="the request file (henn encrypt --out)")
    p.add_argument("--keys", type=Path, required=True, help="the client's evaluation keys (henn keygen --keys-out)")
    p.add_argument("--out", type=output_file, required=True, help="the response file to write")
    p.set_defaults(handler=run)


def run(args) -> int:
    from henn.deploy import Server
    from henn.deploy.messages import Message
    from henn.deploy.wire import split

    server = Server.load(args.model)
    try:
        program, backend = server.program, server.backend
        request = Message.read(
            args.request.read_bytes(),
            backend,
            kind="request",
            objects=program.input_cts,
            max_images=program.images_per_set,
            where=str(args.request),
        )
        if request.model_sha256 != server.artefact.digest:
            raise InputError(f"{args.request} was encrypted for another model than {args.model}")
        keys = server.read_keys(split(args.keys.read_bytes(), backend, kinds=KEY_KINDS, max_objects=len(KEY_KINDS)))
        if keys.key_id != request.key_id:
            raise InputError(
                f"{args.request} was encrypted under key set {request.key_id[:8]}, {args.keys} holds the keys of "
                f"{(keys.key_id or '')[:8]}: give the evaluation keys `henn keygen` wrote with the client's key file"
            )
        session = server.open_session(keys)
        out = [server.evaluate(session, blobs) for blobs in request.blobs]
        size = Message("response", request.model_sha256, request.key_id, request.sets, out).save(args.out)
    finally:
        server.close()
    print(f"wrote {args.out} ({size / 2**20:.1f} MiB): {sum(request.sets)} images in {len(request.sets)} sets")
    return 0
