"""``henn train`` sub-command (argparse). Imports torch only when the command runs."""

from __future__ import annotations

import argparse
import json

# models.MODEL_NAMES, written out so that the CLI does not import torch (tests check the two agree)
CLI_MODELS = (
    "mnist-cnn",
    "cifar-cnn",
    "mnist-mlp",
    "resnet20",
    "lola",
    "orion-mlp",
    "lenet",
    "tenseal-cnn",
    "cryptonets",
)


def add_train_command(subparsers) -> argparse.ArgumentParser:
    """Register ``train`` on an ``argparse`` sub-parsers object; returns the sub-parser."""
    from henn.activations import ACTIVATIONS
    from henn.cli_args import int_in, output_file
    from henn.runtime.parallel import MAX_THREADS

    p = subparsers.add_parser(
        "train",
        help="train a paper-000 CNN with a polynomial activation and export it to ONNX",
        description="Seeded training (CPU, or --device cuda); writes OUT (.onnx), OUT.json (metrics) and OUT.log.",
    )
    p.add_argument("--model", required=True, choices=CLI_MODELS)
    # resnet20: AESPA or the ReLU reference (henn.training.resnet, imported with torch)
    p.add_argument("--activation", required=True, choices=(*ACTIVATIONS, "aespa", "relu"))
    p.add_argument(
        "--data-dir",
        default=None,
        help="folder holding mnist/ and cifar10/ (default: $HENN_DATA_DIR or "
        "../shared/datasets next to the repository)",
    )
    p.add_argument("--out", required=True, type=output_file, help="output .onnx path")
    p.add_argument(
        "--epochs",
        type=int_in(1, 10_000),
        default=None,
        help="default: 30 for mnist-cnn, 25 for cifar-cnn, 15 for mnist-mlp, 100 for resnet20 "
        "(about 10 h on 2 CPU cores: --time-budget and --resume)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue from OUT's checkpoint (OUT with .ckpt, written after every epoch)",
    )
    p.add_argument(
        "--time-budget",
        type=int_in(1, 100_000),
        default=None,
        metavar="MINUTES",
        help="stop after the epoch that passes this many minutes (then --resume goes on)",
    )
    p.add_argument("--seed", type=int_in(0, 2**32 - 1), default=0)
    p.add_argument("--threads", type=int_in(1, MAX_THREADS), default=2, help="torch CPU threads (default 2)")
    p.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="where to train (cuda: a CUDA GPU; same data order and augmentation as on the CPU)",
    )
    p.add_argument(
        "--init",
        default=None,
        metavar="CKPT",
        help="fine-tune: start from this finished run's checkpoint (same model and activation) "
        "instead of random weights; needs --lr",
    )
    p.add_argument(
        "--teacher",
        default=None,
        metavar="CKPT",
        help="with --init: distill this finished run's logits (e.g. src/henn/zoo/resnet20_relu.ckpt)",
    )
    p.add_argument(
        "--lr", type=float, default=None, help="with --init: the fine-tuning schedule's peak learning rate (e.g. 0.01)"
    )
    p.add_argument(
        "--activation-noise",
        type=float,
        default=0.0,
        metavar="STD",
        help="noise-aware training: Gaussian noise of this standard deviation on every polynomial activation's "
        "input and output while training (e.g. 0.05), for networks that CKKS noise moves less",
    )
    p.set_defaults(func=run_train, handler=run_train)
    return p


def run_train(args: argparse.Namespace) -> int:
    import sys

    from henn.errors import BackendError

    try:
        from henn.training.train import train
    except ImportError as exc:
        raise BackendError(f"training needs torch ({exc}): pip install 'henn[train]'") from None
    metrics = train(
        args.model,
        args.activation,
        args.data_dir,
        args.out,
        epochs=args.epochs,
        seed=args.seed,
        threads=args.threads,
        resume=args.resume,
        device=args.device,
        time_budget_s=None if args.time_budget is None else 60.0 * args.time_budget,
        fine_tune=_fine_tune(args),
        activation_noise=args.activation_noise,
    )
    if metrics["status"] != "complete":
        sys.stdout.write(f"stopped after epoch {metrics['epochs_done']} of {metrics['epochs']}: {metrics['command']}\n")
        return 0
    sys.stdout.write(json.dumps(metrics["accuracies"], indent=1) + "\n")
    return 0


def _fine_tune(args: argparse.Namespace):
    """The FineTune that --init/--teacher/--lr describe, or None; refused when they do not go together."""
    from henn.errors import InputError

    if args.init is None:
        if args.teacher is not None or args.lr is not None:
            raise InputError("--teacher and --lr fine-tune a trained network: name its checkpoint with --init")
        return None
    if args.lr is None or not (0.0 < args.lr <= 1.0):
        raise InputError(f"--init needs --lr, the fine-tuning peak learning rate in (0, 1] (e.g. 0.01), got {args.lr}")
    from pathlib import Path

    from henn.training.distill import FineTune

    return FineTune(Path(args.init), args.lr, None if args.teacher is None else Path(args.teacher))
