"""One file per `henn` subcommand; each defines register(subparsers). Shared argument types: henn.cli_args."""
