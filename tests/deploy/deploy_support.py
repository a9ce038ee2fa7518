"""Shared by the deployment tests: model files compiled once per session, a real `henn serve`
process on a free loopback port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np

import henn
from henn import datasets
from henn.deploy import Artefact
from henn.deploy.checks import InputChecks

REPO = Path(__file__).resolve().parents[2]
ZOO = REPO / "src" / "henn" / "zoo" / "mnist-cnn_swish-rg7-deg4.onnx"
SQUARE_ZOO = REPO / "src" / "henn" / "zoo" / "mnist-cnn_square.onnx"


def compile_file(path: Path, backend: str = "plain", mode: str = "single", model: Path = ZOO):
    """(CompiledModel, the model file's path) of a zoo model."""
    cm = henn.compile(str(model), (1, 28, 28), backend=backend, mode=mode)
    checks = InputChecks.from_compiled(cm.compiled.checked, cm.activation_intervals(), cm.activation_check)
    Artefact(cm.program, backend, checks, model=model.stem).save(path)
    return cm, path


def digits(n: int):
    images, labels = datasets.load_embedded_mnist()
    return images[:n], labels[:n]


def served_through_a_restart(path: Path, store: Path, x) -> tuple:
    """x's logits from a `henn serve` process of the model file at `path`, restarted between the first two
    images and the rest (the store brings the session's keys back), with the client's stats and the
    server's info."""
    with ServerProcess(path, store) as server:
        with henn.connect(server.url, progress=False) as remote:
            before = remote.predict(x[:2])
            server.restart()
            after = remote.predict(x[2:])
            return np.concatenate([before, after]), remote.stats, remote.info


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """`henn serve MODEL` in a subprocess on 127.0.0.1; restart() keeps the port and the store."""

    def __init__(self, model: Path, store: Path, *extra: str, verbose: int = 1):
        self.model, self.store, self.extra, self.verbose = model, store, extra, verbose
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.log = store.parent / f"serve-{self.port}.log"

    def start(self, timeout: float = 120.0) -> ServerProcess:
        env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
        cmd = [
            sys.executable,
            "-m",
            "henn.cli",
            *["-v"] * self.verbose,
            "serve",
            str(self.model),
            "--port",
            str(self.port),
            "--store",
            str(self.store),
            *self.extra,
        ]
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log.open("ab"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"henn serve exited with {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(self.url + "/health", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.2)
        raise RuntimeError(f"henn serve did not come up in {timeout} s: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
