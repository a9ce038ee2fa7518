"""`henn serve`: the inference server of a model file (henn.deploy.app on uvicorn)."""

from __future__ import annotations

import logging
from pathlib import Path

from henn.cli_args import int_in, output_folder

log = logging.getLogger(__name__)


def register(sub) -> None:
    p = sub.add_parser("serve", help="serve a model file (henn compile --out) over HTTP")
    p.add_argument("model", type=Path, help="the model file")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int_in(0, 65535), default=8000)
    p.add_argument(
        "--store",
        type=output_folder,
        default=Path("henn-sessions"),
        help="folder of the sessions and their keys (kept across restarts; default ./henn-sessions)",
    )
    p.add_argument("--workers", type=int_in(1, 64), default=1, help="evaluations at once (default 1)")
    p.add_argument(
        "--max-queue",
        type=int_in(0, 4096),
        default=8,
        help="inference requests waiting beyond those running; more get HTTP 429 (default 8)",
    )
    p.add_argument("--max-sessions", type=int_in(1, 1 << 20), default=1000, help="sessions kept (default 1000)")
    p.add_argument("--session-ttl", type=int_in(1, 1 << 30), default=3600, help="seconds a session lives")
    p.add_argument(
        "--memory-budget",
        type=int_in(1, 1 << 30),
        default=None,
        metavar="MIB",
        help="MiB for live sessions and evaluations (default: 60%% of the machine's memory)",
    )
    p.add_argument("--threads", type=int_in(1, 1024), default=None, help="backend threads per evaluation")
    p.set_defaults(handler=run)


def run(args) -> int:
    from henn.deploy.serve import serve
    from henn.deploy.service import Limits

    options = {} if args.memory_budget is None else {"memory_budget": args.memory_budget << 20}
    limits = Limits(
        workers=args.workers,
        max_queue=args.max_queue,
        max_sessions=args.max_sessions,
        session_ttl=float(args.session_ttl),
        **options,
    )
    serve(
        args.model,
        host=args.host,
        port=args.port,
        store=args.store,
        limits=limits,
        threads=args.threads,
        verbose=args.verbose,
    )
    return 0
