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

**--model resnet20**: ResNet-20 (AESPA) in single mode with its bootstraps, compiled as `henn infer --model
resnet20 --calibration 200` compiles it (the first 200 CIFAR-10 training images; needs --data-dir), one CIFAR-10
test image a set, no end-to-end runs. The one process's server and the cluster's worker each hold the
bootstrapping and rotation keys and a bootstrap's working memory, more than a 23.5 GiB machine holds twice
beside the client's keys and the object store's copy: each round opens one, evaluates, closes it, then the
other (their start is outside the timed paths, as the MNIST worker's is).

    flock /tmp/henn-heavy.lock .venv/bin/python benchmarks/distributed.py --model resnet20 --sets 2 \\
        --repeats 1 --data-dir ../shared/datasets --out benchmarks/results/distributed_resnet20.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import write_json

import henn
from henn import datasets, distributed
from henn.commands.infer import load_calibration, load_images
from henn.distributed.result import STAGES

ZOO = Path(__file__).resolve().parents[1] / "src" / "henn" / "zoo"
MODELS = {"mnist": "mnist-cnn_square", "resnet20": "resnet20_aespa"}
MNIST_CALIBRATION = 256
RESNET_CALIBRATION = 200  # as benchmarks/resnet20.py --calibration 200 (henn infer's default is 500)


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


def compile_model(model: str, data_dir: Path | None):
    """The model as `henn infer` compiles it: MNIST batch with precision-chosen parameters, ResNet-20 single
    with bootstraps placed on its calibration images (henn infer's own loaders)."""
    path = str(ZOO / f"{MODELS[model]}.onnx")
    if model == "mnist":
        cal = datasets.load_embedded_mnist()[0][-MNIST_CALIBRATION:]
        return henn.compile(path, (1, 28, 28), backend="lattigo", mode="batch", calibration=cal)
    cal, _ = load_calibration("resnet20", data_dir, RESNET_CALIBRATION, 0)
    return henn.compile(path, (3, 32, 32), backend="lattigo", mode="single", bootstrap=True, calibration=cal)


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
    """One process's server and a started worker of the cluster path, on the same encrypted sets. resident:
    both stay open for every round (MNIST); else each round opens one, runs it and closes it before the
    other (ResNet-20: the two would not fit in memory together)."""

    def __init__(self, cm, images: np.ndarray, threads: int, depth: int, resident: bool = True):
        from henn.deploy.local import Client
        from henn.distributed.source import artefact_of

        self.artefact, self.threads, self.depth, self.resident = artefact_of(cm), threads, depth, resident
        self.model = self.artefact.to_bytes()
        self.client = Client(self.artefact, threads=threads)
        self.client.generate_keys()
        # the evaluation keys wait on disk, read by each server or worker that opens (ResNet-20: 5.3 GiB
        # of them, held in the client, its blobs, the object store and a server at once would not fit)
        self._key_dir = tempfile.TemporaryDirectory(prefix="henn-bench-keys-")
        self._key_files = []
        for i, blob in enumerate(self.client.key_blobs()):
            self._key_files.append(Path(self._key_dir.name) / f"{i}.key")
            self._key_files[-1].write_bytes(blob)
        self.client.release_keys()  # the servers' now, as henn.distributed.run does
        self.sets = self.client.batches(len(images))
        self.cts = [self.client.runtime.encrypt(images[r.start : r.stop]) for r in self.sets]
        self.server: Any = None  # henn.deploy.local.Server while open
        self.session: Any = None  # henn.distributed.session.ClusterSession while open
        self.ready_s: list[float] = []  # each worker start, outside the timed paths
        if resident:
            self._open_server()
            self._open_session()

    def _open_server(self) -> None:
        from henn.deploy.local import Server

        self.server = Server(self.artefact, threads=self.threads)
        self.target = self.server.target(self.server.open_session(self.server.read_keys(self._keys())))

    def _open_session(self) -> None:
        import ray

        from henn.distributed.cluster import capacities
        from henn.distributed.placement import plan, worker_need
        from henn.distributed.session import ClusterSession

        nodes = capacities(ray)
        top = max(n.memory for n in nodes)
        need = worker_need(self.artefact.program, self.client.backend, len(self.model), self.threads, top)
        where = plan(nodes, need, len(self.sets), workers=1)
        self.session = ClusterSession(ray, self.model, self._keys(), where, self.depth)
        self.ready_s.append(self.session.stats()[0].ready_s)  # the worker is up: its start is no part of a round

    def _keys(self) -> list[bytes]:
        return [f.read_bytes() for f in self._key_files]

    def _close_server(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None

    def _close_session(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None

    def one_process(self) -> tuple[list[float], list[list[bytes]]]:
        if self.server is None:
            self._open_server()
        seconds, responses = [], []
        be = self.client.backend
        try:
            for c in self.cts:  # the same ciphertexts, read into this server's backend (untimed)
                cts = self.server.read_inputs([be.serialize(ct, encoding="packed") for ct in c])
                out, s = self.server.evaluate_inputs(self.target, cts)
                seconds.append(s)
                responses.append(self.server.write_outputs(out))
        finally:
            if not self.resident:
                self._close_server()
        return seconds, responses

    def cluster_path(self):
        from henn.distributed.result import RunTimings

        if self.session is None:
            self._open_session()
        try:
            return self._cluster_path(RunTimings())
        finally:
            if not self.resident:
                self._close_session()

    def _cluster_path(self, t):
        from henn.distributed.batch import SetLoop

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
        self._close_session()
        self._close_server()
        self.client.close()
        self._key_dir.cleanup()


def overhead(cm, images: np.ndarray, repeats: int, threads: int = 2, depth: int = 2, resident: bool = True) -> dict:
    p = Pipeline(cm, images, threads, depth, resident)
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
    ap.add_argument("--model", choices=sorted(MODELS), default="mnist")
    ap.add_argument("--sets", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3, help="rounds of the overhead measurement")
    ap.add_argument("--depth", type=int, default=2, help="sets in flight to the worker (1: no read-ahead)")
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--configs", default="1x2,2x1", help="end to end: workers x threads per worker ('' for none)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/distributed_mnist_batch.json"))
    args = ap.parse_args()

    import ray

    name, resnet = MODELS[args.model], args.model == "resnet20"
    t0 = time.perf_counter()
    cm = compile_model(args.model, args.data_dir)
    compile_s = time.perf_counter() - t0
    per_set = cm.program.images_per_set
    if resnet:
        images, _, source = load_images("resnet20", args.data_dir, args.sets)
    else:
        images, source = digits(args.data_dir, args.sets * per_set)
    mode = "single" if resnet else "batch"
    print(f"{name} {mode}, {cm.params.describe()}, {per_set} images per set; {len(images)} images: {source}")

    # the object store holds the keys (ResNet-20: 5.3 GiB, Galois keys seeded) and the requests in flight
    store = (6 if resnet else 2) * 2**30
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=store, log_to_driver=False)
    try:
        summary = overhead(cm, images, args.repeats, depth=args.depth, resident=not resnet)
        print(
            f"overhead (median of {args.repeats} rounds): steady {summary['overhead_steady'] * 100:+.1f} % of one "
            f"process's evaluation ({summary['one_process_evaluate_per_set_s']:.2f} s/set), whole run "
            f"{summary['overhead_run'] * 100:+.1f} %; stages: "
            + ", ".join(f"{k} {v * 100:.1f} %" for k, v in summary["stages_share_of_evaluation"].items())
        )
        base, runs = None, []
        if args.configs and not resnet:
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
            "model": name,
            "mode": mode,
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
