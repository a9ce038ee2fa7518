"""Warm start: how long a fresh server process takes from its model file to ready to evaluate (issue 30).

For each MNIST zoo model in single and batch mode, a model file is compiled (not timed), then a new Python
process loads it as `henn serve` does (henn.deploy.Server: the artefact, the backend, the weights encoded
once for every session) and a first session opens on a client's uploaded keys. Each is measured in its own
process --repeats times; the medians are reported:

- import: `import henn.deploy` (the interpreter's start is not counted);
- load: Artefact + backend + weight encoding (Server.load), after which no request pays any encoding;
- ready: import + load;
- session: reading one client's evaluation keys and opening its session (keys deserialized and checked).

    .venv/bin/python benchmarks/warm_start.py --out results/warm_start.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import write_json

MODELS = ("mnist-cnn_square", "cryptonets_square", "lenet_square", "mnist-cnn_swish-rg7-deg4")
ZOO = Path(__file__).resolve().parents[1] / "src" / "henn" / "zoo"

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from henn.deploy import Client, Server
t1 = time.perf_counter()
server = Server.load(sys.argv[1])
t2 = time.perf_counter()
client = Client.load(sys.argv[1])
client.generate_keys()
blobs = client.key_blobs()
t3 = time.perf_counter()
server.open_session(server.read_keys(blobs))
t4 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "load": t2 - t1, "encode": server.seconds["encode"], "session": t4 - t3}))
server.close()
"""


def measure(path: Path, repeats: int) -> dict:
    runs = []
    for _ in range(repeats):
        out = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True)
        if out.returncode:
            raise RuntimeError(f"{path.name}: {out.stderr[-2000:]}")
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    med["ready"] = statistics.median(r["import"] + r["load"] for r in runs)
    return {**med, "repeats": repeats}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="lattigo")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default="results/warm_start.json")
    args = ap.parse_args()
    import henn
    from henn.deploy import Artefact
    from henn.deploy.checks import InputChecks

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in MODELS:
            for mode in ("single", "batch"):
                path = Path(tmp) / f"{name}-{mode}.henn"
                cm = henn.compile(str(ZOO / f"{name}.onnx"), (1, 28, 28), backend=args.backend, mode=mode)
                checks = InputChecks.from_compiled(cm.compiled.checked, cm.activation_intervals(), cm.activation_check)
                Artefact(cm.program, args.backend, checks, model=name).save(path)
                row = {"model": name, "mode": mode, "params": cm.params.describe(), **measure(path, args.repeats)}
                cm.close()
                rows.append(row)
                print(
                    f"{name:28s} {mode:6s} ready {row['ready']:.2f} s (import {row['import']:.2f}, load "
                    f"{row['load']:.2f} of which encode {row['encode']:.2f}), session {row['session']:.2f} s",
                    flush=True,
                )
    write_json(args.out, {"benchmark": "warm_start", "backend": args.backend, "rows": rows})


if __name__ == "__main__":
    main()
