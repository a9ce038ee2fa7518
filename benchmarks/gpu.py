"""The gpu backend's figures on one device, each checked for correctness, as JSON.

    python3 benchmarks/gpu.py --out benchmarks/results/gpu_h100.json [--images .devdata/mnist_test16.npz]
    python3 benchmarks/gpu.py --export-images .devdata/mnist_test16.npz --data-dir ../shared/datasets

Sections (each runs on its own; a failure is recorded with its traceback and the others go on):
- ntt: N = 2^16 x 40 word primes, Triton kernels against the plain-torch reference on the same device and
  on the CPU (bit for bit), with the plain-torch time beside;
- ops: a 26-modulus chain at N = 2^16 (30-bit scale, 4 special pairs): encryption, multiplication, key
  switching (relinearization) at three levels, rescaling, a rotation, 8 hoisted rotations; every result
  decrypted against NumPy and the key switches and rotations compared bit for bit with the CPU;
- mnist, mnist_paper000: paper 000's MNIST CNN (deg-4 activation) on encrypted MNIST test images at henn's
  parameters for this backend (chosen for precision from training images carried with them) and at paper
  000's (N = 2^15, 50-bit scale), predictions and logits against the plaintext model;
- bootstrap: the gpu backend's bootstrapping at boot-n16-gpu (N = 2^16, every slot; at --log-n below 16 the
  insecure_boot_gpu_n10 test ring): key generation, the bootstrap's time and its precision in bits against the
  plaintext, then a product of the result;
- resnet20: paper 002's ResNet-20 (AESPA) at boot-n16-gpu on --resnet-images CIFAR-10 test images (bootstraps
  placed from 64 training images carried with them), logits against the plaintext model; the session's key
  generation and weight encoding are timed apart and printed before the first image;
- boot_graph (not run by default): a whole bootstrap captured as one CUDA graph (the default) against the
  chain's graphs alone (HENN_GPU_GRAPHS=chain), bit for bit on two inputs, with the time of each and the device time of
  their kernels (torch.profiler);
- graphs: replayed CUDA graphs of ModUp, ModDown and a rescale's word against the same kernels launched one
  by one, bit for bit at three levels with fresh inputs (on a CPU both run uncaptured);
- host (not run by default): opening the boot-n16-gpu bootstrapping chain, one encoding at its top and
  --host-keys rotation keys over it (what ResNet-20 and the first bootstrap spend before computing).
Needs only numpy, torch and (on a GPU) Triton: it runs on the device machine from the carried tree.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import torch  # noqa: E402

from henn.ckks import ParametersLiteral, presets  # noqa: E402
from henn.ckks.backends.gpu import graphs, ntt, triton_modular  # noqa: E402
from henn.ckks.backends.gpu.backend import GpuBackend  # noqa: E402
from henn.ckks.backends.gpu.values import RawCiphertext, RawGaloisKeys, RawSwitchKey  # noqa: E402
from henn.ckks.params import Parameters  # noqa: E402
from henn.ckks.precision import precision_bits  # noqa: E402
from henn.ckks.primes import word_primes  # noqa: E402

MNIST_MODEL = REPO / "src" / "henn" / "zoo" / "mnist-cnn_swish-rg7-deg4.onnx"


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def kernel_time(fn, device: torch.device, inner: int = 20, outer: int = 7) -> dict:
    """Per-call time of fn: `outer` batches of `inner` back-to-back calls (no host sync between calls), the
    median and the slowest batch."""
    fn()
    sync(device)
    samples = []
    for _ in range(outer):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        sync(device)
        samples.append((time.perf_counter() - start) / inner)
    return {"median_us": 1e6 * statistics.median(samples), "max_us": 1e6 * max(samples), "calls": inner * outer}


def op_time(fn, device: torch.device, reps: int = 10) -> dict:
    fn()
    sync(device)
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        sync(device)
        samples.append(time.perf_counter() - start)
    samples.sort()
    return {
        "median_ms": 1e3 * statistics.median(samples),
        "p90_ms": 1e3 * samples[int(0.9 * (len(samples) - 1))],
        "reps": reps,
    }


def section_ntt(device: torch.device, log_n: int, limbs: int) -> dict:
    n = 1 << log_n
    primes = list(word_primes(log_n)[-limbs:])
    tables = ntt.NttTables.build(primes, log_n, device)
    rng = np.random.default_rng(1)
    x = torch.from_numpy(np.stack([rng.integers(0, q, n) for q in primes]).astype(np.int32)).to(device)
    out: dict = {"log_n": log_n, "limbs": limbs, "triton": ntt.triton_ntt.usable(x)}
    fwd, inv = ntt.forward(x, tables), ntt.inverse(x, tables)
    ref_fwd, ref_inv = ntt.forward_reference(x, tables), ntt.inverse_reference(x, tables)
    cpu_tables = ntt.NttTables.build(primes, log_n, torch.device("cpu"))
    out["equal_to_reference"] = bool(torch.equal(fwd, ref_fwd) and torch.equal(inv, ref_inv))
    out["equal_to_cpu"] = bool(
        torch.equal(fwd.cpu(), ntt.forward_reference(x.cpu(), cpu_tables))
        and torch.equal(inv.cpu(), ntt.inverse_reference(x.cpu(), cpu_tables))
    )
    out["round_trip"] = bool(torch.equal(ntt.inverse(fwd, tables), x))
    out["forward"] = kernel_time(lambda: ntt.forward(x, tables), device)
    out["inverse"] = kernel_time(lambda: ntt.inverse(x, tables), device)
    out["forward_plain_torch"] = kernel_time(lambda: ntt.forward_reference(x, tables), device, inner=3, outer=3)
    pair = torch.stack((x, x))
    out["forward_ciphertext"] = kernel_time(lambda: ntt.forward(pair, tables), device)
    if out["triton"]:
        out["tile_sweep"] = tile_sweep(x, tables, device)
    return out


def tile_sweep(x, tables, device) -> list[dict]:
    """Forward and inverse time per (elements per program, warps): the defaults' evidence."""
    kernels = ntt.triton_ntt
    default = kernels.TILE, kernels.WARPS
    rows = []
    for tile in (1024, 2048, 4096, 8192):
        for warps in (2, 4, 8):
            kernels.TILE, kernels.WARPS = tile, warps
            try:
                fwd = kernel_time(lambda: ntt.forward(x, tables), device, outer=3)["median_us"]
                inv = kernel_time(lambda: ntt.inverse(x, tables), device, outer=3)["median_us"]
                rows.append({"tile": tile, "warps": warps, "forward_us": fwd, "inverse_us": inv})
            except Exception as exc:  # noqa: BLE001 - a shape the compiler refuses is a row, not the end
                rows.append({"tile": tile, "warps": warps, "error": str(exc)[-300:]})
    kernels.TILE, kernels.WARPS = default
    return rows


def ops_params(log_n: int, levels: int) -> Parameters:
    """128-bit secure at N = 2^16 (1014 of 1772 bits); smaller rings (quick checks on a CPU) only as an
    insecure_ preset."""
    lit = ParametersLiteral(log_n, (50,) + (30,) * levels, (61,) * 4, 30)
    if log_n >= 16:
        return Parameters.from_literal(lit, name=f"gpu-bench-n{log_n}-l{levels}")
    name = f"insecure_gpu_bench_n{log_n}_l{levels}"
    if name not in presets.names():
        presets.register(name, lit)
    return presets.get(name)


def _moved(raw, device):
    if isinstance(raw, RawCiphertext):
        return RawCiphertext(raw.data.to(device), raw.level)
    if isinstance(raw, RawGaloisKeys):
        return RawGaloisKeys({g: RawSwitchKey(k.data.to(device)) for g, k in raw.keys.items()})
    return RawSwitchKey(raw.data.to(device))


def section_graphs(device: torch.device, log_n: int) -> dict:
    """Replayed CUDA graphs against the same kernels launched one by one (a second chain with graphs off):
    ModUp, ModDown and a rescale's word at three levels, three rounds of fresh inputs, bit for bit."""
    from henn.ckks.backends.gpu import moduli
    from henn.ckks.backends.gpu.chain import Chain

    both = moduli.chain_moduli([50, 30, 30, 31, 61, 61], log_n)
    captured, plain = (Chain(both[:4], both[4:], log_n, device) for _ in range(2))
    plain.graphs.enabled = False
    rng = np.random.default_rng(0)

    def residues(rows: int, lead: tuple[int, ...] = ()) -> torch.Tensor:
        x = np.stack([rng.integers(0, q, (*lead, captured.n)) for q in captured.words[:rows]], axis=-2)
        return torch.from_numpy(x.astype(np.int32)).to(device)

    equal = []
    for _ in range(3):  # fresh inputs into the same captured buffers
        for level in range(1, 4):
            rows = captured.rows(level)
            x = residues(rows)
            equal.append(torch.equal(captured.mod_up(x, level), plain.mod_up(x, level)))
            full = residues(len(captured.words), (2,))  # Q_level * P rows of it
            wide = torch.cat((full[:, :rows], full[:, len(captured.q_words) :]), dim=1)
            equal.append(torch.equal(captured.mod_down(wide, level), plain.mod_down(wide, level)))
            data = residues(rows, (2,))
            equal.append(torch.equal(captured.drop_top_word(data), plain.drop_top_word(data)))
    return {"enabled": captured.graphs.enabled, "captured": captured.graphs.captured, "equal": all(equal)}


def section_ops(device: torch.device, log_n: int, levels: int, cpu_check: bool) -> dict:
    params = ops_params(log_n, levels)
    be = GpuBackend(params, device=str(device), seed=1)
    out: dict = {"params": params.describe(), "words": len(be.chain.words), "digits": len(be.chain.digits)}
    start = time.perf_counter()
    sk = be.generate_secret_key()
    keys = be.keys_of(sk, rotations=list(range(1, 9)), conjugate=False)
    assert keys.public is not None and keys.relin is not None and keys.galois is not None
    sync(device)
    out["keygen_s_10_keys"] = time.perf_counter() - start
    ev = be.evaluator(keys)
    rng = np.random.default_rng(2)
    x, y = rng.uniform(-1, 1, be.slots), rng.uniform(-1, 1, be.slots)
    cx, cy = be.encrypt(x, keys.public), be.encrypt(y, keys.public)
    out["encrypt"] = op_time(lambda: be.encrypt(x, keys.public), device)
    out["encrypt_symmetric"] = op_time(lambda: be.encrypt(x, sk), device)
    out["add"] = op_time(lambda: ev.add(cx, cy), device, reps=50)
    pt = be.encode(y, scale=be.prime(be.max_level))
    out["mul_plain"] = op_time(lambda: ev.multiply(cx, pt), device, reps=50)
    tensor = be._mul(cx.raw, cy.raw, None)
    rk = keys.relin.raw
    gk = keys.galois.raw
    out["tensor_product"] = op_time(lambda: be._mul(cx.raw, cy.raw, None), device, reps=50)
    out["key_switch"] = {}
    for level in sorted({be.max_level, be.max_level // 2, 2}, reverse=True):
        low = be._drop_level(tensor, be.max_level - level)
        out["key_switch"][str(level)] = op_time(lambda low=low: be._relinearize(low, rk), device, reps=20)
    prod = ev.multiply(cx, cy)
    out["rescale"] = op_time(lambda: ev.rescale(prod), device, reps=20)
    out["rotate"] = op_time(lambda: ev.rotate(cx, 1), device, reps=20)
    out["rotate_hoisted_8"] = op_time(lambda: ev.rotate_hoisted(cx, list(range(1, 9))), device, reps=10)
    out["precision_bits"] = {
        "encrypt": precision_bits(x, be.decrypt_decode(cx, sk)),
        "encrypt_symmetric": precision_bits(x, be.decrypt_decode(be.encrypt(x, sk), sk)),
        "mul_relin_rescale": precision_bits(x * y, be.decrypt_decode(ev.rescale(prod), sk)),
        "rotate": precision_bits(np.roll(x, -3), be.decrypt_decode(ev.rotate(cx, 3), sk)),
        "hoisted": min(
            precision_bits(np.roll(x, -k), be.decrypt_decode(c, sk))
            for k, c in ev.rotate_hoisted(cx, list(range(1, 9))).items()
        ),
    }
    out["cuda_graphs"] = {"enabled": be.chain.graphs.enabled, "captured": be.chain.graphs.captured}
    if device.type == "cuda":
        out["key_switch_profile"] = kernel_profile(lambda: be._relinearize(tensor, rk))
    if cpu_check:
        cpu = GpuBackend(params, device="cpu")
        rel_gpu = be._relinearize(tensor, rk).data.cpu()
        rel_cpu = cpu._relinearize(_moved(tensor, "cpu"), _moved(rk, "cpu")).data
        rot_gpu = be._rotate(cx.raw, 5, gk).data.cpu()
        rot_cpu = cpu._rotate(_moved(cx.raw, "cpu"), 5, _moved(gk, "cpu")).data
        res_gpu = be._rescale(prod.raw).data.cpu()
        res_cpu = cpu._rescale(_moved(prod.raw, "cpu")).data
        out["equal_to_cpu"] = {
            "key_switch": bool(torch.equal(rel_gpu, rel_cpu)),
            "rotate": bool(torch.equal(rot_gpu, rot_cpu)),
            "rescale": bool(torch.equal(res_gpu, res_cpu)),
        }
    if device.type == "cuda":
        out["peak_device_gib"] = torch.cuda.max_memory_allocated() / 2**30
    return out


def section_bootstrap(device: torch.device, log_n: int, reps: int) -> dict:
    params = presets.get("boot-n16-gpu" if log_n >= 16 else "insecure_boot_gpu_n10")
    start = time.perf_counter()
    be = GpuBackend(params, device=str(device), seed=3)
    info, bootstrapper = be.bootstrap_info, be._bootstrapper
    assert info is not None and bootstrapper is not None  # a bootstrapping preset
    out: dict = {
        "params": params.describe(),
        "open_s": time.perf_counter() - start,
        "log_qp": info["log_qp"],
        "galois_keys": info["galois_keys"],
        "words": len(bootstrapper.inner.chain.words),
    }
    start = time.perf_counter()
    sk, keys = be.generate_keys(bootstrap=True)
    sync(device)
    assert keys.bootstrap is not None
    out["keygen_s"], out["bootstrap_keys_gib"] = time.perf_counter() - start, keys.bootstrap.nbytes / 2**30
    ev = be.evaluator(keys)
    rng = np.random.default_rng(4)
    x = (rng.uniform(-1, 1, be.slots) + 1j * rng.uniform(-1, 1, be.slots)) / np.sqrt(2)
    ct = be.encrypt(x, sk, level=1)
    start = time.perf_counter()
    refreshed = ev.bootstrap(ct)
    sync(device)
    out["first_bootstrap_s"] = time.perf_counter() - start  # encodes and caches the DFT's plaintexts
    out["bootstrap"] = op_time(lambda: ev.bootstrap(ct), device, reps=reps)
    got = be.decode(be.decrypt(refreshed, sk), as_complex=True)
    squared = ev.rescale(ev.multiply(refreshed, refreshed))
    out["precision_bits"] = {
        "bootstrap": precision_bits(x, got),
        "vs_input": precision_bits(be.decode(be.decrypt(ct, sk), as_complex=True), got),
        "square_after": precision_bits(x * x, be.decode(be.decrypt(squared, sk), as_complex=True)),
    }
    out["level_after"], out["max_level"] = refreshed.level, be.max_level
    if device.type == "cuda":
        out["peak_device_gib"] = torch.cuda.max_memory_allocated() / 2**30
    return out


def section_boot_graph(device: torch.device, log_n: int, reps: int) -> dict:
    """A whole bootstrap as one CUDA graph (the default) against the chain's graphs alone (HENN_GPU_GRAPHS=chain),
    on the same keys and inputs: bit for bit on the capture's input and on a fresh one, the time of each, and
    where the device time of one plain bootstrap goes (its kernels' total against its wall time)."""
    params = presets.get("boot-n16-gpu" if log_n >= 16 else "insecure_boot_gpu_n10")
    be = GpuBackend(params, device=str(device), seed=3)
    sk, keys = be.generate_keys(bootstrap=True)
    assert keys.bootstrap is not None
    ev = be.evaluator(keys)
    rng = np.random.default_rng(4)
    xs = [(rng.uniform(-1, 1, be.slots) + 1j * rng.uniform(-1, 1, be.slots)) / np.sqrt(2) for _ in range(2)]
    cts = [be.encrypt(x, sk, level=1) for x in xs]
    out: dict = {"params": params.describe()}
    previous = os.environ.get(graphs.ENV)
    try:
        os.environ[graphs.ENV] = graphs.CHAIN
        plain = [ev.bootstrap(ct) for ct in cts]  # the first also encodes the DFT's plaintexts
        out["chain_graphs"] = op_time(lambda: ev.bootstrap(cts[0]), device, reps=reps)
        if device.type == "cuda":
            out["plain_profile"] = kernel_profile(lambda: ev.bootstrap(cts[0]), rows=12)
        os.environ[graphs.ENV] = graphs.BOOTSTRAP
        start = time.perf_counter()
        whole = [ev.bootstrap(cts[0])]
        sync(device)
        out["capture_s"] = time.perf_counter() - start
        whole.append(ev.bootstrap(cts[1]))  # a fresh input into the captured buffers
        out["whole_graph"] = op_time(lambda: ev.bootstrap(cts[0]), device, reps=reps)
        bootstrapper = be._bootstrapper
        assert bootstrapper is not None
        captured = bootstrapper._graphs.get(id(keys.bootstrap.raw))
        out["captured"] = {"enabled": captured.enabled, "graphs": captured.captured} if captured else None
        if device.type == "cuda":
            out["whole_profile"] = kernel_profile(lambda: ev.bootstrap(cts[0]), rows=4)
    finally:
        if previous is None:
            os.environ.pop(graphs.ENV, None)
        else:
            os.environ[graphs.ENV] = previous
    out["equal"] = [torch.equal(a.raw.data, b.raw.data) for a, b in zip(plain, whole)]
    out["precision_bits"] = [
        precision_bits(x, be.decode(be.decrypt(c, sk), as_complex=True)) for x, c in zip(xs, whole)
    ]
    out["speedup"] = out["chain_graphs"]["median_ms"] / out["whole_graph"]["median_ms"]
    if device.type == "cuda":
        out["peak_device_gib"] = torch.cuda.max_memory_allocated() / 2**30
    return out


def section_host(device: torch.device, keys: int) -> dict:
    """Set-up work at boot-n16-gpu over the bootstrapping chain (62 words): opening it, encoding one plaintext
    at its top (the DFT's and the weights' plaintexts are encoded the same way) and `keys` rotation keys."""
    start = time.perf_counter()
    outer = GpuBackend(presets.get("boot-n16-gpu"), device=str(device), seed=1)
    assert outer._bootstrapper is not None  # a preset with bootstrap parameters
    be = outer._bootstrapper.inner
    out: dict = {"open_s": time.perf_counter() - start, "words": len(be.chain.words)}
    values = np.random.default_rng(2).uniform(-1, 1, be.slots)
    scale, top = float(be.prime(be.max_level)), be.max_level
    out["encode"] = op_time(lambda: be.encode(values, level=top, scale=scale), device, reps=5)
    out["encode"]["rows"] = be.chain.rows(top)
    sk = be._gen_secret_key()
    start = time.perf_counter()
    be._gen_galois_keys(sk, list(range(1, keys + 1)), False)
    sync(device)
    out["rotation_keys"] = {"count": keys, "per_key_s": (time.perf_counter() - start) / keys}
    return out


def kernel_profile(fn, rows: int = 15) -> list[dict]:
    """Where one call's device time goes: torch.profiler's kernels by total CUDA time (5 calls)."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            fn()
        torch.cuda.synchronize()

    def device_us(e) -> float:
        return getattr(e, "self_device_time_total", 0.0)

    events = sorted(prof.key_averages(), key=lambda e: -device_us(e))
    top = [{"kernel": e.key[:90], "calls_per_op": e.count / 5, "us_per_op": device_us(e) / 5} for e in events[:rows]]
    total = {"kernel": "(all)", "calls_per_op": sum(e.count for e in events) / 5}
    total["us_per_op"] = sum(device_us(e) for e in events) / 5
    return [total, *top]


MNIST_CALIBRATION = 200  # training images for the precision-driven parameters (henn infer takes 500)

# paper 000's deg-4 MNIST CNN ran at N = 2^15, 60 + 7 x 50-bit primes, scale 2^50 (docs/openfhe.md): here every
# 50-bit level is a pair of word primes
PAPER000_MNIST = ParametersLiteral(15, (60,) + (50,) * 7, (61, 61), 50)


def section_mnist(images_file: Path | None, count: int, literal: ParametersLiteral | None = None) -> dict:
    """The CNN at henn's own choice of parameters for the backend, or at `literal`."""
    import henn

    if images_file is None or not images_file.exists():
        return {"skipped": f"no images file ({images_file}): export one with --export-images"}
    data = np.load(images_file)
    x, labels = data["images"][:count], data["labels"][:count]
    start = time.perf_counter()
    params = None if literal is None else Parameters.from_literal(literal, name="paper000-mnist-pairs")
    # henn's own choice is the precision-driven one, as `henn infer` makes it from calibration images
    calibration = data["calibration"] if literal is None and "calibration" in data else None
    cm = henn.compile(
        str(MNIST_MODEL), (1, 28, 28), backend="gpu", mode="single", params=params, calibration=calibration
    )
    out: dict = {"model": MNIST_MODEL.name, "params": cm.params.describe(), "compile_s": time.perf_counter() - start}
    logits = cm.run(x)
    reference = cm.reference(x)
    out["timings"] = {k: v for k, v in cm.timings.items() if isinstance(v, (int, float, list))}
    per_set = cm.timings.get("evaluate_per_set") or []
    out["evaluate_median_s"] = statistics.median(per_set[1:] or per_set) if per_set else None
    out["images"] = int(len(x))
    out["predictions_equal"] = int(np.sum(logits.argmax(1) == reference.argmax(1)))
    out["correct"] = int(np.sum(logits.argmax(1) == labels))
    out["max_logit_error"] = float(np.max(np.abs(logits - reference)))
    cm.close()
    return out


RESNET20_MODEL = REPO / "src" / "henn" / "zoo" / "resnet20_aespa.onnx"
RESNET20_CALIBRATION = 64  # training images that set the bootstraps' ranges (as benchmarks/resnet20.py)


def section_resnet20(images_file: Path, count: int) -> dict:
    """Paper 002's ResNet-20 (AESPA) at boot-n16-gpu, `count` CIFAR-10 test images, against the plaintext
    model; bootstraps placed from the calibration images carried with the test images."""
    import henn

    if not images_file.exists():
        return {"skipped": f"no images file ({images_file}): export one with --export-images"}
    data = np.load(images_file)
    x, labels = data["images"][:count], data["labels"][:count]
    start = time.perf_counter()
    cm = henn.compile(
        str(RESNET20_MODEL),
        (3, 32, 32),
        backend="gpu",
        mode="single",
        bootstrap=True,
        calibration=data["calibration"],
        params=presets.get("boot-n16-gpu"),
    )
    out: dict = {
        "model": RESNET20_MODEL.name,
        "params": cm.params.describe(),
        "compile_s": time.perf_counter() - start,
        "bootstraps": cm.program.bootstraps,
        "rotation_keys": len(cm.rotation_steps),
    }
    out.update(open_session(cm))
    print(f"resnet20 session: {json.dumps(out, default=str)[:1500]}", flush=True)  # shown if the run is cut off
    logits = cm.run(x)
    reference = cm.reference(x)
    out["timings"] = {k: v for k, v in cm.timings.items() if isinstance(v, (int, float, list, dict))}
    out["images"] = int(len(x))
    out["predictions_equal"] = int(np.sum(logits.argmax(1) == reference.argmax(1)))
    out["correct"] = int(np.sum(logits.argmax(1) == labels))
    out["max_logit_error"] = float(np.max(np.abs(logits - reference)))
    if torch.cuda.is_available():
        out["peak_device_gib"] = torch.cuda.max_memory_allocated() / 2**30
    cm.close()
    return out


def open_session(cm) -> dict:
    """Open the encrypted session before the first image, timed apart: key generation (rotation and bootstrap
    keys) and the encoding of the weight plaintexts (the runtime's prepare)."""
    start = time.perf_counter()
    client, server = cm._session(True)
    sync(torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu"))
    return {
        "session_s": time.perf_counter() - start,
        "keygen_s": client.seconds["keygen"],
        "prepare_s": server.seconds["prepare"],
        "weight_plaintexts": sum(len(v) for v in server.executor.weights.plain.values()),
    }


def export_images(path: Path, data_dir: str, count: int) -> None:
    """The MNIST test images at `path`, and beside it CIFAR-10 test images with ResNet-20's calibration
    images (the device machine has no datasets)."""
    from henn.datasets import load_cifar10, load_mnist

    images, labels = load_mnist(data_dir, "test")
    path.parent.mkdir(parents=True, exist_ok=True)
    mnist_train, _ = load_mnist(data_dir, "train")
    np.savez_compressed(
        path, images=images[:count], labels=labels[:count], calibration=mnist_train[:MNIST_CALIBRATION].copy()
    )
    test, test_labels = load_cifar10(data_dir, "test")
    train, _ = load_cifar10(data_dir, "train")
    np.savez_compressed(
        cifar_file(path),
        images=test[:count],
        labels=test_labels[:count],
        calibration=train[:RESNET20_CALIBRATION].copy(),
    )


def cifar_file(images: Path) -> Path:
    return images.with_name("cifar_resnet20.npz")


def run(args) -> dict:
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    report: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "machine": {
            "device": torch.cuda.get_device_name() if device.type == "cuda" else platform.processor(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "triton": getattr(ntt.triton_ntt.triton, "__version__", None),
            "cpu": platform.machine(),
        },
        "command": " ".join(sys.argv),
        "settings": {"graphs": graphs.setting(), "modular_kernels": triton_modular.ENABLED},
    }
    sections = {
        "ntt": lambda: section_ntt(device, args.log_n, args.limbs),
        "ops": lambda: section_ops(device, args.log_n, args.levels, not args.no_cpu_check),
        "mnist": lambda: section_mnist(args.images, args.count),
        "mnist_paper000": lambda: section_mnist(args.images, args.count, PAPER000_MNIST),
        "bootstrap": lambda: section_bootstrap(device, args.log_n, args.bootstrap_reps),
        "boot_graph": lambda: section_boot_graph(device, args.log_n, args.bootstrap_reps),
        "resnet20": lambda: section_resnet20(cifar_file(args.images), args.resnet_images),
        "host": lambda: section_host(device, args.host_keys),
        "graphs": lambda: section_graphs(device, 12),
    }
    for name in args.sections.split(","):
        start = time.perf_counter()
        try:
            report[name] = sections[name]()
        except Exception:  # noqa: BLE001 - one section's failure must not lose the others' figures
            report[name] = {"error": traceback.format_exc(limit=8)}
        report[name]["section_s"] = time.perf_counter() - start
        print(f"{name}: {json.dumps(report[name], default=str)[:1500]}", flush=True)
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps(report, indent=1, default=str))
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="JSON file to write (rewritten after every section)")
    ap.add_argument("--device", help="torch device (default: cuda when present, else cpu)")
    ap.add_argument("--sections", default="ntt,graphs,ops,mnist,mnist_paper000,bootstrap,resnet20")
    ap.add_argument("--bootstrap-reps", type=int, default=3, help="timed bootstraps after the first")
    ap.add_argument("--log-n", type=int, default=16)
    ap.add_argument("--limbs", type=int, default=40, help="word primes of the NTT section")
    ap.add_argument("--levels", type=int, default=24, help="30-bit levels of the ops section's chain")
    ap.add_argument("--images", type=Path, default=REPO / ".devdata" / "mnist_test16.npz")
    ap.add_argument("--count", type=int, default=16, help="MNIST images to infer")
    ap.add_argument("--resnet-images", type=int, default=1, help="CIFAR-10 test images through ResNet-20")
    ap.add_argument("--host-keys", type=int, default=4, help="rotation keys of the host section")
    ap.add_argument("--no-cpu-check", action="store_true", help="skip the bit-for-bit comparison with the CPU")
    ap.add_argument(
        "--export-images",
        type=Path,
        help="write the first 16 MNIST test images here (and CIFAR-10's beside them) and exit",
    )
    ap.add_argument("--data-dir", help="datasets folder for --export-images (../shared/datasets)")
    args = ap.parse_args()
    if args.export_images:
        export_images(args.export_images, args.data_dir, 16)
        return
    run(args)


if __name__ == "__main__":
    main()
