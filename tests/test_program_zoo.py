"""Every zoo model's Program survives its file: the header and arrays written again after loading are
those loaded, and the loaded program verifies (batch, grouped, multiplexed and complex packings on the MNIST
networks; single mode on all)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import henn
from henn.program import Program, open_archive

ZOO = Path(henn.__file__).parent / "zoo"
MODELS = sorted(p.stem for p in ZOO.glob("*.onnx"))
MNIST_MODES: dict[str, dict] = {
    "batch": {"mode": "batch"},
    "grouped": {"mode": "batch", "batch_group": 4},
    "multi": {"mode": "single", "images_per_set": 2},
}


def _cases() -> list[tuple[str, str]]:
    cases = [(m, "single") for m in MODELS]
    for m in MODELS:
        if not m.startswith(("cifar", "resnet")):
            cases += [(m, mode) for mode in MNIST_MODES]
            if "square" in m:
                cases.append((m, "complex"))
    return cases


def _parts(data: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    arrays, header = open_archive(data, "__header__")
    assert isinstance(header, dict)
    return header, arrays


@pytest.mark.parametrize("model,mode", _cases())
def test_zoo_program_round_trips(model, mode):
    shape = (3, 32, 32) if model.startswith(("cifar", "resnet")) else (1, 28, 28)
    cal = np.random.default_rng(0).uniform(0.45, 0.55, (4, *shape))  # grey images: every activation in range
    kw: dict = {"mode": "single", "bootstrap": model.startswith("resnet")}
    kw.update({"complex": {"mode": "batch", "complex_packing": True}}.get(mode, MNIST_MODES.get(mode, {})))
    cm = henn.compile(str(ZOO / f"{model}.onnx"), shape, backend="plain", calibration=cal, selection="library", **kw)
    data = cm.program.to_bytes()
    back = Program.from_bytes(data)
    header, arrays = _parts(data)
    header2, arrays2 = _parts(back.to_bytes())
    assert header2 == header and sorted(arrays2) == sorted(arrays)
    for name, a in arrays.items():
        assert arrays2[name].dtype == a.dtype
        np.testing.assert_array_equal(arrays2[name], a, err_msg=name)
    assert [dataclasses.fields(s) for s in back.steps] == [dataclasses.fields(s) for s in cm.program.steps]
    assert back.input_cts == cm.program.input_cts and back.images_per_set == cm.program.images_per_set
