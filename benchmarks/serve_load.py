"""Load on a real `henn serve` process over loopback: requests/s and latency percentiles under 1, 2,
4, 8 concurrent clients, for the MNIST zoo CNN on Lattigo in single and batch mode; the server's
peak memory; and the network overhead of one image against the same model run in process.

Per mode: compile the model into a model file, start `henn serve` on 127.0.0.1 (a free port, one
worker, a queue of 16), connect one client (henn.connect: keys made here, evaluation keys uploaded),
then:
  - overhead (single mode): the same images one at a time, in process (CompiledModel.run: checks,
    encode, encrypt, evaluate, decrypt) and through the server (the same plus serialization, HTTP on
    loopback, the server's checks): paired medians, and the network's share measured directly (see
    overhead());
  - load: C client threads send requests of pre-encrypted ciphertexts (encryption is the clients'
    work, not the server's) for each C in --clients; requests/s = requests / wall time, latency =
    each request's round trip (queueing included); 429s are counted and retried after Retry-After.
    The threads share the one session (one key set): the server's work per request is the same as
    with distinct clients, without uploading ~0.5 GB of keys per client.
  - the server's peak RSS (sampled every 0.2 s, and its own ru_maxrss).

    .venv/bin/python benchmarks/serve_load.py --quick --out results/serve_load.json   # ~10 min, 2 cores
    .venv/bin/python benchmarks/serve_load.py --out results/serve_load.json           # 1, 2, 4, 8 clients
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "deploy"))
from _common import write_json
from deploy_support import ServerProcess, compile_file

import henn
from henn import datasets
from henn.deploy.remote import RemoteError
from henn.deploy.wire import split

ZOO = Path(__file__).resolve().parents[1] / "src" / "henn" / "zoo" / "mnist-cnn_swish-rg7-deg4.onnx"


class PeakRSS(threading.Thread):
    """The largest RSS of a process, sampled; the samples too (is the memory flat over a long run?)."""

    def __init__(self, pid: int, every: float = 0.2):
        super().__init__(daemon=True)
        self.proc, self.every, self.peak, self.stop = psutil.Process(pid), every, 0, threading.Event()
        self.samples: list[tuple[float, int]] = []

    def run(self):
        t0 = time.perf_counter()
        while not self.stop.is_set():
            try:
                rss = self.proc.memory_info().rss
            except psutil.Error:
                return
            self.peak = max(self.peak, rss)
            self.samples.append((time.perf_counter() - t0, rss))
            time.sleep(self.every)

    def timeline(self, points: int = 60) -> dict:
        """About `points` (seconds, MiB) samples, and the median RSS of the first and last tenth."""
        if not self.samples:
            return {}
        step = max(1, len(self.samples) // points)
        tenth = max(1, len(self.samples) // 10)
        mib = [r / 2**20 for _, r in self.samples]
        return {
            "t_s": [round(t, 1) for t, _ in self.samples[::step]],
            "rss_mib": [round(m, 1) for m in mib[::step]],
            "first_tenth_median_mib": float(np.median(mib[:tenth])),
            "last_tenth_median_mib": float(np.median(mib[-tenth:])),
        }


def percentiles(samples: list[float]) -> dict:
    a = np.asarray(samples)
    return {f"p{q}": float(np.percentile(a, q)) for q in (50, 90, 99)} | {"mean": float(a.mean()), "n": len(a)}


def overhead(cm, remote, images: np.ndarray) -> dict:
    """Per image: the in-process run's wall time; the remote one's; and the network's own share of the
    remote one, measured directly: its wall time minus the work an in-process run does too (input
    checks, encoding, encryption, decryption on the client, the evaluation on the server, timed by the
    server: X-Henn-Evaluate-Seconds). The paired medians are at the mercy of a loaded machine; the
    direct share is not (it subtracts each request's own evaluation time)."""
    client, local, far, net = remote.client, [], [], []
    for i in range(len(images)):
        x = images[i : i + 1]
        t0 = time.perf_counter()  # wall time of both calls: input checks, encryption, evaluation, decryption
        cm.run(x)
        local.append(time.perf_counter() - t0)
        client.runtime.reset_timings()
        evaluated = remote.stats["server_evaluate_s"]
        t0 = time.perf_counter()
        checked = client.check(x)
        t_check = time.perf_counter() - t0
        remote.predict_set(checked, checked=True)
        far.append(time.perf_counter() - t0)
        sec = client.runtime.seconds
        work = t_check + sec["encode"] + sec["encrypt"] + sec["decrypt"] + remote.stats["server_evaluate_s"] - evaluated
        net.append(far[-1] - work)
    med_local, med_far, med_net = statistics.median(local), statistics.median(far), statistics.median(net)
    return {
        "images": len(images),
        "in_process_s": med_local,
        "remote_s": med_far,
        "overhead_s": med_far - med_local,
        "overhead_pct": 100 * (med_far - med_local) / med_local,
        "network_s": med_net,
        "network_pct": 100 * med_net / med_local,
        "in_process_samples": local,
        "remote_samples": far,
        "network_samples": net,
    }


def load(remote, bodies: list[list[bytes]], clients: int, per_client: int) -> dict:
    latencies, busy = [], [0]

    def one_client(c: int):
        out = []
        for r in range(per_client):
            blobs = bodies[(c * per_client + r) % len(bodies)]
            t0 = time.perf_counter()
            while True:
                try:
                    remote.send(blobs)
                    break
                except RemoteError as exc:
                    if exc.status != 429:
                        raise
                    busy[0] += 1
            out.append(time.perf_counter() - t0)
        return out

    t0 = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        for lat in pool.map(one_client, range(clients)):
            latencies += lat
    wall = time.perf_counter() - t0
    return {
        "clients": clients,
        "requests": len(latencies),
        "wall_s": wall,
        "requests_per_s": len(latencies) / wall,
        "latency_s": percentiles(latencies),
        "retried_429": busy[0],
    }


def run_mode(mode: str, args, tmp: Path) -> dict:
    images, labels = datasets.load_embedded_mnist()
    cm, path = compile_file(tmp / f"{mode}.henn", backend="lattigo", mode=mode, model=ZOO)
    server = ServerProcess(path, tmp / f"store-{mode}", "--workers", "1", "--max-queue", "16").start()
    assert server.proc is not None  # started
    rss = PeakRSS(server.proc.pid)
    rss.start()
    result: dict = {"mode": mode, "model": ZOO.stem, "params": cm.params.describe()}
    try:
        t0 = time.perf_counter()
        remote = henn.connect(server.url, progress=False, retries=0)
        result["connect_s"] = time.perf_counter() - t0
        result["sizes"] = {
            "key_bytes": remote.stats["key_bytes"],
            "keygen_s": remote.stats["keygen_s"],
            "upload_s": remote.stats["upload_s"],
        }
        client = remote.client
        per_set = args.batch_images if mode == "batch" else 1
        if mode == "single":
            result["overhead"] = overhead(cm, remote, images[: args.overhead_images])
        n_bodies = 1 if mode == "batch" else args.bodies
        bodies = [client.encrypt(images[i * per_set : (i + 1) * per_set]) for i in range(n_bodies)]
        result["sizes"]["request_bytes"] = sum(len(b) for b in bodies[0])
        answer = remote.send(bodies[0])  # a correctness check of the load path
        out = client.decrypt(split(answer, client.backend, kinds=("ciphertext",), max_objects=128), per_set)
        result["sizes"]["response_bytes"] = len(answer)
        result["check_accuracy"] = float(np.mean(out.argmax(1) == labels[:per_set]))
        levels = [] if args.overhead_only else args.batch_clients if mode == "batch" else args.clients
        per_client = 1 if mode == "batch" else args.requests
        result["load"] = []
        for c in levels:
            result["load"].append(load(remote, bodies, c, per_client))
            print(mode, result["load"][-1], flush=True)
        metrics = dict(line.split() for line in remote.http.get("/metrics").text.splitlines())
        result["server_peak_rss_mib"] = max(rss.peak, int(metrics["henn_peak_rss"])) / 2**20
        result["server_rss_timeline"] = rss.timeline()
        remote.close()
    finally:
        rss.stop.set()
        server.stop()
        cm.close()
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--modes", nargs="+", choices=("single", "batch"), default=["single", "batch"])
    p.add_argument("--clients", nargs="+", type=int, default=[1, 2, 4, 8], help="single mode concurrency levels")
    p.add_argument("--batch-clients", nargs="+", type=int, default=[1, 2, 4, 8], help="batch mode concurrency levels")
    p.add_argument("--requests", type=int, default=8, help="single mode: requests per client per level")
    p.add_argument("--bodies", type=int, default=8, help="single mode: distinct encrypted images sent")
    p.add_argument("--batch-images", type=int, default=100, help="batch mode: images in the one set sent")
    p.add_argument("--overhead-images", type=int, default=10, help="images of the overhead measurement")
    p.add_argument("--quick", action="store_true", help="a short run: 3 requests per client, batch with 1-2 clients")
    p.add_argument("--overhead-only", action="store_true", help="single mode: the overhead measurement, no load")
    p.add_argument("--out", default="results/serve_load.json")
    args = p.parse_args()
    if args.quick:
        args.requests, args.bodies, args.batch_clients, args.overhead_images = 3, 4, [1, 2], 5
    if args.overhead_only:
        args.modes = ["single"]
    with tempfile.TemporaryDirectory(prefix="henn-serve-load-") as tmp:
        results = [run_mode(mode, args, Path(tmp)) for mode in args.modes]
    path = write_json(
        args.out,
        {"benchmark": "serve_load", "quick": args.quick, "results": results, "load_average": list(psutil.getloadavg())},
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
