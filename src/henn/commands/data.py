"""`henn data fetch`: download MNIST or CIFAR-10 (official files, checksums checked) into a folder."""

from __future__ import annotations

from pathlib import Path

from henn.cli_args import output_folder


def register(sub) -> None:
    p = sub.add_parser("data", help="datasets: fetch the official MNIST / CIFAR-10 files")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    f = actions.add_parser("fetch", help="download a dataset and check its checksums")
    f.add_argument("dataset", choices=("mnist", "cifar10"))
    f.add_argument(
        "--dir",
        type=output_folder,
        default=Path("data"),
        help="the data folder (mnist/ and cifar10/ go inside; default ./data)",
    )
    f.add_argument(
        "--mirror", default=None, metavar="URL", help="base URL to download from instead of the official one"
    )
    f.set_defaults(handler=run)


def run(args) -> int:
    from henn.data_fetch import fetch

    files = fetch(args.dataset, args.dir, mirror=args.mirror)
    size = sum(f.stat().st_size for f in files)
    print(f"{args.dataset}: {len(files)} files checked in {args.dir / files[0].parent.name} ({size / 2**20:.1f} MiB)")
    return 0
