"""The cluster path's overhead on one machine: MNIST in batch mode (8,192 images per ciphertext set) through
henn.distributed.run on a local Ray instance, against the same compiled model run in one process
(CompiledModel.run), on the same cores.

Compiled as `henn infer --mode batch` compiles it (mnist-cnn_square, Lattigo, parameters chosen for
precision on 256 calibration digits). The single-process run and each cluster configuration (workers x
threads per worker) run the same --sets sets of real MNIST digits (the test set when --data-dir has it, else
the embedded digits, repeated to fill the sets). Reported per set (medians over the sets of one run):

- single: evaluation (the server's), and the wall time per set of the whole loop (encrypt, evaluate, decrypt);
- cluster: the workers' evaluation, the workers' (de)serialization, the client's (de)serialization, the wall
  time per set once the workers run (start-up: connect, keys to the object store, workers' first model load,
  reported apart), and the bytes that crossed (evaluation keys once, requests, responses);
- overhead: (cluster wall per set - single wall per set) / single evaluation per set, and the cluster-only
  work ((de)serialization on both ends) / single evaluation per set;
- evaluation only: every set encrypted first, then one started worker of 2 threads evaluates them: (wall from
  the first dispatch to the last result - evaluation) / evaluation, the cluster path without the client's
  encryption sharing the cores.

    flock /tmp/henn-heavy.lock .venv/bin/python benchmarks/distributed.py --sets 4 \\
        --out benchmarks/results/distributed_mnist_batch.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import write_json

import henn
from henn import datasets, distributed

ZOO = Path(__file__).resolve().parents[1] / "src" / "henn" / "zoo"
MODEL = "mnist-cnn_square"
CALIBRATION = 256


def digits(data_dir: Path | None, n: int) -> tuple[np.ndarray, str]:
    data_dir = data_dir or datasets.default_data_dir()
    if data_dir is not None and (data_dir / "mnist").is_dir():
        images, _ = datasets.load_mnist(data_dir, "test")
        source = f"MNIST test set in {data_dir}"
    else:
        images, _ = datasets.load_embedded_mnist()
        source = "embedded MNIST digits"
    reps = -(-n // len(images))
    return np.concatenate([images] * reps)[:n], source + (f", repeated {reps}x" if reps > 1 else "")


def single(cm, images: np.ndarray, threads: int) -> dict:
    cm.threads = threads
    with cm:
        t0 = time.perf_counter()
        logits = cm.run(images)
        wall = time.perf_counter() - t0
        t = dict(cm.timings)
    sets = len(t["evaluate_per_set"])
    return {
        "logits": logits,
        "threads": threads,
        "sets": sets,
        "evaluate_per_set_s": statistics.median(t["evaluate_per_set"]),
        "evaluate_each_set_s": list(t["evaluate_per_set"]),
        "wall_per_set_s": t["total"] / sets,
        "encrypt_per_set_s": (t["encode"] + t["encrypt"]) / sets,
        "decrypt_per_set_s": t["decrypt"] / sets,
        "setup_s": t["keygen"] + t["prepare"],
        "wall_s": wall,
    }


def cluster(cm, images: np.ndarray, workers: int, threads: int) -> dict:
    r = distributed.run(cm, images, "ray", workers=workers, threads=threads)
    t = r.timings
    sets = len(t.evaluate_per_set)
    steady = t.total - t.startup - t.keygen
    return {
        "logits": r.logits,
        "workers": r.placement.workers,
        "threads_per_worker": threads,
        "sets": sets,
        "evaluate_per_set_s": statistics.median(t.evaluate_per_set),
        "wall_per_set_s": steady / sets,
        "worker_wire_per_set_s": t.worker_wire / sets,
        "worker_wire_each_set_s": list(t.worker_wire_per_set),
        "evaluate_each_set_s": list(t.evaluate_per_set),
        "client_wire_per_set_s": t.serialize / sets,
        "encrypt_per_set_s": (t.encode + t.encrypt) / sets,
        "decrypt_per_set_s": t.decrypt / sets,
        "startup_s": t.startup,
        "keygen_s": t.keygen,
        "worker_ready_s": [w.ready_s for w in r.workers],
        "key_mib": t.key_bytes / 2**20,
        "request_mib_per_set": t.request_bytes / sets / 2**20,
        "response_mib_per_set": t.response_bytes / sets / 2**20,
        "memory_per_worker_gib": r.placement.need.memory / 2**30,
        "key_loads": [w.key_loads for w in r.workers],
        "wall_s": t.total,
    }


def evaluation_only(cm, images: np.ndarray, threads: int) -> dict:
    """The cluster path alone: every set encrypted first (the client's work out of the way), then one worker of
    `threads` threads, already started, evaluates them as they are dispatched; wall time from the first
    dispatch to the last result, against the workers' own evaluation seconds."""
    import ray

    from henn.deploy.local import Client
    from henn.distributed.batch import request_encoding
    from henn.distributed.cluster import capacities
    from henn.distributed.placement import plan, worker_need
    from henn.distributed.session import ClusterSession
    from henn.distributed.source import artefact_of

    artefact = artefact_of(cm)
    model = artefact.to_bytes()
    client = Client(artefact, threads=threads)
    try:
        client.generate_keys()
        sets = client.batches(len(images))
        encoding = request_encoding(client.backend)
        blobs = [
            [client.backend.serialize(ct, encoding=encoding) for ct in client.runtime.encrypt(images[r.start : r.stop])]
            for r in sets
        ]
        nodes = capacities(ray)
        need = worker_need(artefact.program, client.backend, len(model), threads, max(n.memory for n in nodes))
        placement = plan(nodes, need, len(sets), workers=1)
        results: dict = {}
        with ClusterSession(ray, model, client.key_blobs(), placement) as s:
            requests = [s.request(i, len(r), b) for i, (r, b) in enumerate(zip(sets, blobs))]
            s.stats()  # the worker is up: its model load and key read are start-up, not this
            t0 = time.perf_counter()
            s.evaluate(iter(requests), len(sets), lambda q, res: results.setdefault(q.index, res))
            wall = time.perf_counter() - t0
        evaluate = sum(r.evaluate_s for r in results.values())
        wire = sum(r.wire_s for r in results.values())
        return {"workers": 1, "threads_per_worker": threads, "sets": len(sets), "wall_s": wall,
                "evaluate_s": evaluate, "worker_wire_s": wire, "overhead": (wall - evaluate) / evaluate,
                "worker_wire_each_set_s": [results[i].wire_s for i in range(len(sets))]}
    finally:
        client.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", type=int, default=4)
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--configs", default="1x2,2x1", help="workers x threads per worker, comma-separated")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/distributed_mnist_batch.json"))
    args = ap.parse_args()

    import ray

    embedded, _ = datasets.load_embedded_mnist()
    t0 = time.perf_counter()
    cm = henn.compile(
        str(ZOO / f"{MODEL}.onnx"), (1, 28, 28), backend="lattigo", mode="batch", calibration=embedded[-CALIBRATION:]
    )
    compile_s = time.perf_counter() - t0
    per_set = cm.program.images_per_set
    images, source = digits(args.data_dir, args.sets * per_set)
    print(f"{MODEL} batch, {cm.params.describe()}, {per_set} images per set; {len(images)} images: {source}")

    ref = cm.reference(images).argmax(1)
    base = single(cm, images, threads=2)
    base["agreement_plaintext"] = float(np.mean(base["logits"].argmax(1) == ref))
    print(f"single    evaluate {base['evaluate_per_set_s']:.3f} s/set, wall {base['wall_per_set_s']:.3f} s/set")
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=2 * 2**30, log_to_driver=False)
    runs = []
    try:
        for cfg in args.configs.split(","):
            w, th = (int(v) for v in cfg.split("x"))
            c = cluster(cm, images, w, th)
            same = int(np.sum(c["logits"].argmax(1) == base["logits"].argmax(1)))
            c["predictions_equal_single"] = same  # of len(images): near-ties flip with the encryption noise
            c["agreement_plaintext"] = float(np.mean(c["logits"].argmax(1) == ref))
            c["max_logit_difference_to_single"] = float(np.max(np.abs(c["logits"] - base["logits"])))
            c["overhead_wall"] = (c["wall_per_set_s"] - base["wall_per_set_s"]) / base["evaluate_per_set_s"]
            c["overhead_wire"] = (c["worker_wire_per_set_s"] + c["client_wire_per_set_s"]) / base["evaluate_per_set_s"]
            print(
                f"cluster   {w} x {th}: evaluate {c['evaluate_per_set_s']:.3f} s/set, wall {c['wall_per_set_s']:.3f} "
                f"s/set, wire {c['worker_wire_per_set_s']:.3f} + {c['client_wire_per_set_s']:.3f} s/set, start-up "
                f"{c['startup_s']:.2f} s; overhead wall {c['overhead_wall'] * 100:+.1f} %, wire "
                f"{c['overhead_wire'] * 100:.1f} %; predictions equal to one process's: {same} of {len(images)}"
            )
            del c["logits"]
            runs.append(c)
        alone = evaluation_only(cm, images, threads=2)
        alone["overhead_vs_single"] = (alone["wall_s"] - sum(base["evaluate_each_set_s"])) / sum(
            base["evaluate_each_set_s"]
        )
        print(
            f"cluster   evaluation only, 1 x 2: wall {alone['wall_s']:.2f} s for {alone['sets']} sets, workers' "
            f"evaluation {alone['evaluate_s']:.2f} s, parse+write {alone['worker_wire_s']:.2f} s; overhead "
            f"{alone['overhead'] * 100:.1f} % of the workers' evaluation, {alone['overhead_vs_single'] * 100:.1f} % "
            "of one process's"
        )
    finally:
        ray.shutdown()
    del base["logits"]
    command = "benchmarks/distributed.py " + " ".join(sys.argv[1:])
    write_json(
        args.out,
        {
            "command": command,
            "model": MODEL,
            "mode": "batch",
            "backend": "lattigo",
            "params": cm.params.describe(),
            "images_per_set": per_set,
            "images": len(images),
            "source": source,
            "compile_s": compile_s,
            "single": base,
            "cluster": runs,
            "cluster_evaluation_only": alone,
        },
    )
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
