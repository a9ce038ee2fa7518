"""One file per `henn` subcommand; each defines register(subparsers)."""
