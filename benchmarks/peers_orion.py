"""Orion's side of benchmarks/peers.py, run by an interpreter that has orion-fhe 1.0.2 (and no henn).

    python peers_orion.py JOB_DIR

JOB_DIR (written by peers.py) holds job.json (the network), images.npy (the first image warms up),
calibration.npy (training images for Orion's fit), state.npz (the trained weights by torch name). The
network is Orion's own class from `orion.models`, the CKKS parameters those of Orion's config for it
(baahl-nyu/orion configs/{lola,mlp,lenet}.yaml), the flow that of Orion's examples/run_lola.py: fit,
compile, then per image encode, encrypt, evaluate, decrypt. Writes JOB_DIR/orion.json: logits and
timing samples (peers.py scores them as it scores henn's).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

# Orion's configs for its MNIST networks (LoLA: "Figure 3 of arXiv 1812.10659"; MLP; "LeNet Large"): the
# 128-bit secure ones (log QP 217 <= 218 at N = 2^13, 380 <= 438 at 2^14); henn holds itself to the same bound
CONFIGS = {
    "lola": (
        "LoLA",
        {
            "LogN": 13,
            "LogQ": [29, 26, 26, 26, 26, 26],
            "LogP": [29, 29],
            "LogScale": 26,
            "H": 8192,
            "RingType": "ConjugateInvariant",
        },
    ),
    "orion-mlp": (
        "MLP",
        {
            "LogN": 13,
            "LogQ": [29, 26, 26, 26, 26, 26],
            "LogP": [29, 29],
            "LogScale": 26,
            "H": 8192,
            "RingType": "ConjugateInvariant",
        },
    ),
    "lenet": (
        "LeNet",
        {"LogN": 14, "LogQ": [45] + [35] * 7, "LogP": [45, 45], "LogScale": 35, "RingType": "ConjugateInvariant"},
    ),
}
# Orion 1.0.2's own settings (its OrionParameters), as its configs give them; nothing saved or loaded
ORION = {
    "margin": 2,
    "embedding_method": "hybrid",
    "backend": "lattigo",
    "fuse_modules": True,
    "debug": False,
    "io_mode": "none",
}


def _version() -> str:
    from importlib.metadata import version

    return version("orion-fhe")  # the distribution's (orion.__version__ of 1.0.2 says 1.0.1)


def main(job: Path) -> None:
    import torch

    import orion
    import orion.models as models

    torch.manual_seed(0)
    net_name = json.loads((job / "job.json").read_text())["net"]
    cls, ckks = CONFIGS[net_name]
    orion.init_scheme({"ckks_params": ckks, "orion": ORION})
    net = getattr(models, cls)()
    state = {k: torch.from_numpy(np.array(v)) for k, v in np.load(job / "state.npz").items()}
    missing, unexpected = net.load_state_dict(state, strict=False)
    if unexpected or any(not k.endswith("num_batches_tracked") for k in missing):
        raise SystemExit(f"weights do not fit Orion's {cls}: missing {missing}, unexpected {unexpected}")
    net.eval()
    x = torch.from_numpy(np.load(job / "images.npy")).float()
    # a loader of batch size 1, as Orion's examples give it: fit() takes the loader's batch size as the
    # batch the network is compiled for (a tensor of 200 images would compile it for 200 at once)
    cal = torch.utils.data.TensorDataset(
        torch.from_numpy(np.load(job / "calibration.npy")).float(), torch.zeros(len(np.load(job / "calibration.npy")))
    )
    orion.fit(net, torch.utils.data.DataLoader(cal, batch_size=1))
    t0 = time.perf_counter()
    level = orion.compile(net)
    compile_s = time.perf_counter() - t0
    net.he()
    logits, evaluate, total = [], [], []
    for i in range(len(x)):  # image 0 warms up
        t0 = time.perf_counter()
        ct = orion.encrypt(orion.encode(x[i : i + 1], level))
        t1 = time.perf_counter()
        out = net(ct)
        t2 = time.perf_counter()
        logits.append(np.asarray(out.decrypt().decode(), dtype=np.float64).reshape(-1)[:10])
        t3 = time.perf_counter()
        if i:
            evaluate.append(t2 - t1)
            total.append(t3 - t0)
    ring = "real slots" if ckks["RingType"] == "ConjugateInvariant" else "complex slots"
    result = {
        "system": "orion",
        "mode": "single",
        "version": _version(),
        "params": f"N=2^{ckks['LogN']} {ring} log_q={ckks['LogQ']} log_p={ckks['LogP']} scale=2^{ckks['LogScale']}",
        "compile_seconds": compile_s,
        "threads": os.cpu_count(),
        "evaluate_samples": evaluate,
        "total_samples": total,
        "logits": [v.tolist() for v in logits[1:]],
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    (job / "orion.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
