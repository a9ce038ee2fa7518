"""A profiling sweep on the loopback cluster (conftest.py): the records of every configuration, merged in
the sweep's order into one results document, as the local sweep gives them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import partial

from henn.distributed import profile as on_cluster
from henn.profile import harness, primitives, results

OPS = ("encode", "add")
SETTINGS = harness.Settings(repeats=2, min_repeats=1, warmup=0, budget_s=0.0)


def _shape(records: list[dict]) -> list[tuple]:
    return [(r["backend"], r["mode"], r["depth"], r["op"], r["status"]) for r in records]


def test_sweep_on_the_cluster_gives_the_local_records_in_order(cluster):
    configs = harness.configurations(["plain"], ["library"], [1, 2, 3])
    body = partial(primitives.run, ops=OPS)
    got, interrupted = on_cluster.sweep("primitives", configs, body, SETTINGS, "ray", cpus=1, progress=False)
    want, _ = harness.sweep("primitives", configs, body, SETTINGS, isolate=False, progress=False)
    assert not interrupted and _shape(got) == _shape(want) and all(r["status"] == "ok" for r in got)
    assert len({r["extra"]["ray_node"] for r in got}) == 2  # both nodes measured (1 CPU each, 3 configurations)


def test_profile_command_on_the_cluster_writes_one_report(cluster, tmp_path):
    out = tmp_path / "profile.json"
    args = ["primitives", "--backends", "plain", "--modes", "library", "--depths", "1,2", "--ops", *OPS]
    args += ["--repeats", "2", "--min-repeats", "1", "--warmup", "0", "--cluster", "ray", "--out", str(out)]
    env = dict(os.environ, RAY_ADDRESS=cluster.address, HENN_THREADS="1")
    run = subprocess.run(
        [sys.executable, "-m", "henn.cli", "profile", *args], capture_output=True, text=True, timeout=300, env=env
    )
    assert run.returncode == 0, run.stderr
    doc = results.read_results(out)  # validated against the schema
    assert doc["run"]["settings"]["cluster"] == "ray" and "--cluster ray" in doc["run"]["command"]
    assert [(r["depth"], r["op"]) for r in doc["records"] if r["op"] in OPS] == [(1, "encode"), (1, "add")] + [
        (2, "encode"),
        (2, "add"),
    ]
    assert all("ray_node" in r["extra"] for r in doc["records"]), json.dumps(doc["records"][0])[:500]
