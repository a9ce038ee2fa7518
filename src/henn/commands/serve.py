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
    p.add_argument(
        "--max-per-session",
        type=int_in(0, 4096),
        default=0,
        help="inference requests one session may have running or waiting; more get HTTP 429 "
        "(default 0: half of workers + max-queue)",
    )
    p.add_argument(
        "--max-uploads", type=int_in(1, 1024), default=2, help="key uploads at once; more get HTTP 429 (default 2)"
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
    p.add_argument(
        "--read-timeout",
        type=int_in(1, 3600),
        default=20,
        metavar="S",
        help="seconds a request's line and headers may take and a body may pause; beyond, HTTP 408 (default 20)",
    )
    p.add_argument(
        "--min-rate",
        type=int_in(1, 1 << 30),
        default=64 << 10,
        metavar="BYTES_PER_S",
        help="a body may keep the server waiting read-timeout + its bytes / this seconds in all; "
        "beyond, HTTP 408 (default 65536)",
    )
    p.add_argument(
        "--max-header-bytes",
        type=int_in(1024, 1 << 24),
        default=64 << 10,
        help="request line and headers; beyond, HTTP 431 and the connection closed (default 65536)",
    )
    p.add_argument(
        "--shutdown-timeout",
        type=int_in(1, 3600),
        default=30,
        metavar="S",
        help="seconds running requests get to finish on SIGTERM/SIGINT (default 30); bodies "
        "still arriving get HTTP 503 at once",
    )
    p.add_argument(
        "--share-input-checks",
        action="store_true",
        help="hand clients the weight-derived input checks too (activation ranges, bootstrap bounds: "
        "they hold the layers up to the last activation or bootstrap); by default clients get the "
        "model's client part without weights (docs/deployment.md)",
    )
    p.set_defaults(handler=run)


def run(args) -> int:
    from henn.deploy.serve import serve
    from henn.deploy.service import Limits

    options = {} if args.memory_budget is None else {"memory_budget": args.memory_budget << 20}
    limits = Limits(
        workers=args.workers,
        max_queue=args.max_queue,
        max_per_session=args.max_per_session,
        max_uploads=args.max_uploads,
        max_sessions=args.max_sessions,
        session_ttl=float(args.session_ttl),
        read_timeout=float(args.read_timeout),
        min_rate=args.min_rate,
        max_header_bytes=args.max_header_bytes,
        shutdown_timeout=float(args.shutdown_timeout),
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
        share_input_checks=args.share_input_checks,
    )
    return 0
