"""The cluster path's overhead on one machine: MNIST in batch mode (8,192 images per ciphertext set) through
henn's Ray path on a local Ray instance, against the same compiled model evaluated in one process, on the
same cores.

Compiled as `henn infer --mode batch` compiles it (mnist-cnn_square, Lattigo, parameters chosen for
precision on 256 calibration digits), on --sets sets of real MNIST digits (the test set when --data-dir has
it, else the embedded digits, repeated to fill the sets).

**The overhead** (`overhead` in the JSON): the sets encrypted once, then --repeats rounds, each round
1. one process (henn.deploy.Server, 2 threads, in this process) evaluates every set: its evaluation seconds
   and its response bytes;
2. the cluster path runs the same ciphertexts on one started worker of 2 threads: the client writes each
   set's request and puts it in the object store, Ray calls the worker, the worker parses (the next set
   while the current one evaluates), evaluates and writes, Ray returns the response, the client reads it
   (henn.distributed.batch.SetLoop, as henn.distributed.run does it, less the encryption that both paths do).
   Every response must be byte for byte the one process's.
Per round: steady = (last result's arrival - first result's arrival) / (one process's evaluation of sets
2..S) - 1, the per-set cost of the cluster path once its pipeline runs; run = (wall from the first request to
the last result, decryption left out) / (one process's evaluation of all S sets) - 1, which adds the first
set's latency (written, put, parsed before any evaluation) and the last one's (written, returned, read) once
per run; each stage's seconds per set (result.STAGES) as a share of one process's evaluation. Reported: the
median over rounds, and each round.

**End to end** (`single`, `cluster`): henn.distributed.run with --configs (workers x threads per worker) against
CompiledModel.run, both encrypting and decrypting: on one 2-core machine the client's encryption of the next
set shares the cores with the workers, which separate machines do not.

    flock /tmp/henn-heavy.lock .venv/bin/python benchmarks/distributed.py --sets 4 --repeats 3 \\
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
from henn.distributed.result import STAGES

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
        "stages_each_set_s": t.stages,
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


class Pipeline:
    """One process's server and a started worker of the cluster path, on the same encrypted sets."""

    def __init__(self, cm, images: np.ndarray, threads: int, depth: int):
        import ray

        from henn.deploy.local import Client, Server
        from henn.distributed.cluster import capacities
        from henn.distributed.placement import plan, worker_need
        from henn.distributed.session import ClusterSession
        from henn.distributed.source import artefact_of

        artefact = artefact_of(cm)
        model = artefact.to_bytes()
        self.client = Client(artefact, threads=threads)
        self.client.generate_keys()
        keys = self.client.key_blobs()
        self.sets = self.client.batches(len(images))
        self.cts = [self.client.runtime.encrypt(images[r.start : r.stop]) for r in self.sets]
        self.server = Server(artefact, threads=threads)
        self.target = self.server.target(self.server.open_session(self.server.read_keys(keys)))
        nodes = capacities(ray)
        need = worker_need(artefact.program, self.client.backend, len(model), threads, max(n.memory for n in nodes))
        self.session = ClusterSession(ray, model, keys, plan(nodes, need, len(self.sets), workers=1), depth)
        self.ready_s = self.session.stats()[0].ready_s  # the worker is up: its start is no part of a round

    def one_process(self) -> tuple[list[float], list[list[bytes]]]:
        seconds, responses = [], []
        be = self.client.backend
        for c in self.cts:  # the same ciphertexts, read into this server's backend (untimed)
            cts = self.server.read_inputs([be.serialize(ct, encoding="packed") for ct in c])
            out, s = self.server.evaluate_inputs(self.target, cts)
            seconds.append(s)
            responses.append(self.server.write_outputs(out))
        return seconds, responses

    def cluster_path(self):
        from henn.distributed.batch import SetLoop
        from henn.distributed.result import RunTimings

        t = RunTimings()
        loop = SetLoop(self.client, self.session, t)
        got: dict[int, list[bytes]] = {}
        arrived: dict[int, float] = {}

        def on_result(req, res) -> None:
            arrived[req.index] = req.received
            got[req.index] = res.blobs
            loop.on_result(req, res)

        n = len(self.sets)
        t0 = time.time()
        requests = (loop.request(i, len(r), c) for i, (r, c) in enumerate(zip(self.sets, self.cts)))
        t.request_bytes = self.session.evaluate(requests, n, on_result).request_bytes
        wall = time.time() - t0 - t.decrypt
        t.in_order(n)
        return wall, [arrived[i] - t0 for i in range(n)], t, [got[i] for i in range(n)]

    def round(self) -> dict:
        single_s, expected = self.one_process()
        wall, arrivals, t, got = self.cluster_path()
        first_done = min(arrivals)
        return {
            "one_process_evaluate_each_set_s": single_s,
            "cluster_wall_s": wall,
            "arrivals_s": arrivals,
            "stages_each_set_s": t.stages,
            "request_mib_per_set": t.request_bytes / len(got) / 2**20,
            "responses_identical": all(g == e for g, e in zip(got, expected)),
            "overhead_run": wall / sum(single_s) - 1,
            "overhead_steady": (max(arrivals) - first_done) / sum(single_s[1:]) - 1,
            "overhead_steady_vs_worker": (max(arrivals) - first_done) / sum(t.stages["evaluate"][1:]) - 1,
            "first_set_latency_s": first_done - single_s[0],
        }

    def close(self) -> None:
        self.session.close()
        self.server.close()
        self.client.close()


def overhead(cm, images: np.ndarray, repeats: int, threads: int = 2, depth: int = 2) -> dict:
    p = Pipeline(cm, images, threads, depth)
    try:
        rounds = []
        for k in range(repeats):
            r = p.round()
            rounds.append(r)
            print(
                f"round {k + 1}: one process {sum(r['one_process_evaluate_each_set_s']):.2f} s, cluster path "
                f"{r['cluster_wall_s']:.2f} s; overhead steady {r['overhead_steady'] * 100:+.1f} %, run "
                f"{r['overhead_run'] * 100:+.1f} %; responses identical: {r['responses_identical']}"
            )
    finally:
        p.close()
    evaluation = statistics.median(s for r in rounds for s in r["one_process_evaluate_each_set_s"])
    stages = {
        name: statistics.median(statistics.median(r["stages_each_set_s"][name]) for r in rounds) for name in STAGES
    }
    med = lambda key: statistics.median(r[key] for r in rounds)
    return {
        "sets": len(p.sets),
        "repeats": repeats,
        "threads": threads,
        "depth": depth,
        "worker_ready_s": p.ready_s,
        "one_process_evaluate_per_set_s": evaluation,
        "stages_per_set_s": stages,
        "stages_share_of_evaluation": {k: v / evaluation for k, v in stages.items()},
        "added_work_share": sum(v for k, v in stages.items() if k not in ("evaluate", "wait")) / evaluation,
        "overhead_steady": med("overhead_steady"),
        "overhead_steady_vs_worker": med("overhead_steady_vs_worker"),
        "overhead_run": med("overhead_run"),
        "first_set_latency_s": med("first_set_latency_s"),
        "responses_identical": all(r["responses_identical"] for r in rounds),
        "rounds": rounds,
    }


def end_to_end(cm, images: np.ndarray, base: dict, configs: str, ref: np.ndarray) -> list[dict]:
    runs = []
    for cfg in configs.split(","):
        w, th = (int(v) for v in cfg.split("x"))
        c = cluster(cm, images, w, th)
        same = int(np.sum(c["logits"].argmax(1) == base["logits"].argmax(1)))
        c["predictions_equal_single"] = same  # of len(images)
        c["agreement_plaintext"] = float(np.mean(c["logits"].argmax(1) == ref))
        c["max_logit_difference_to_single"] = float(np.max(np.abs(c["logits"] - base["logits"])))
        c["overhead_wall"] = (c["wall_per_set_s"] - base["wall_per_set_s"]) / base["evaluate_per_set_s"]
        print(
            f"cluster   {w} x {th}: evaluate {c['evaluate_per_set_s']:.3f} s/set, wall {c['wall_per_set_s']:.3f} "
            f"s/set, start-up {c['startup_s']:.2f} s; end to end {c['overhead_wall'] * 100:+.1f} % of one "
            f"process's evaluation; predictions equal to one process's: {same} of {len(images)}"
        )
        del c["logits"]
        runs.append(c)
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3, help="rounds of the overhead measurement")
    ap.add_argument("--depth", type=int, default=2, help="sets in flight to the worker (1: no read-ahead)")
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--configs", default="1x2,2x1", help="end to end: workers x threads per worker ('' for none)")
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

    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=2 * 2**30, log_to_driver=False)
    try:
        summary = overhead(cm, images, args.repeats, depth=args.depth)
        print(
            f"overhead (median of {args.repeats} rounds): steady {summary['overhead_steady'] * 100:+.1f} % of one "
            f"process's evaluation ({summary['one_process_evaluate_per_set_s']:.2f} s/set), whole run "
            f"{summary['overhead_run'] * 100:+.1f} %; stages: "
            + ", ".join(f"{k} {v * 100:.1f} %" for k, v in summary["stages_share_of_evaluation"].items())
        )
        base, runs = None, []
        if args.configs:
            ref = cm.reference(images).argmax(1)
            base = single(cm, images, threads=2)
            base["agreement_plaintext"] = float(np.mean(base["logits"].argmax(1) == ref))
            print(f"single    evaluate {base['evaluate_per_set_s']:.3f} s/set, wall {base['wall_per_set_s']:.3f} s/set")
            runs = end_to_end(cm, images, base, args.configs, ref)
            del base["logits"]
    finally:
        ray.shutdown()
    write_json(
        args.out,
        {
            "command": "benchmarks/distributed.py " + " ".join(sys.argv[1:]),
            "model": MODEL,
            "mode": "batch",
            "backend": "lattigo",
            "params": cm.params.describe(),
            "images_per_set": per_set,
            "images": len(images),
            "source": source,
            "compile_s": compile_s,
            "overhead": summary,
            "single": base,
            "cluster": runs,
        },
    )
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
