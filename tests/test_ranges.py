"""Every polynomial activation has a checked input range (henn.ranges), the square included: out of
range is an error or, in the explicit warning mode, a logged warning; never silent garbage."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import onnx
import pytest

import henn
from henn import ranges
from henn.errors import InputError
from henn.frontend.onnx_build import build_cnn

ZOO = Path(henn.__file__).parent / "zoo"
SQUARE_LAYERS = [("conv", 2, 3, 2, 0), ("poly", "square"), ("flatten",), ("gemm", 3)]


@pytest.fixture(scope="module")
def zoo_square():
    return henn.compile(str(ZOO / "mnist-cnn_square.onnx"), (1, 28, 28), backend="plain")


def test_zoo_square_model_refuses_unscaled_pixels(zoo_square, rng):
    """Regression: a square model fed 0-255 pixels returned garbage with no warning."""
    x = rng.uniform(0, 1, (2, 1, 28, 28))
    zoo_square.check_input(x)  # pixels in [0, 1], like the training data: accepted
    intervals = zoo_square.activation_intervals()
    assert all(iv is not None and iv[0] == 0 for iv in intervals.values())  # from the training set maxima
    with pytest.raises(InputError, match=r"calibration data.*activation_check=False"):
        zoo_square.check_input(x * 255)


def test_warning_mode_logs_and_evaluates(rng, caplog):
    cm = henn.compile(str(ZOO / "mnist-cnn_square.onnx"), (1, 28, 28), backend="plain", activation_check="warn")
    with caplog.at_level(logging.WARNING, logger="henn.ranges"):
        out = cm.run(rng.uniform(0, 1, (1, 1, 28, 28)) * 255, encrypted=False)
    assert out.shape == (1, 10)
    assert any("far outside" in r.getMessage() and "warn" in r.getMessage() for r in caplog.records)


def test_calibration_gives_the_square_its_range(tmp_path, rng, caplog):
    path = tmp_path / "sq.onnx"
    onnx.save(build_cnn(SQUARE_LAYERS, (1, 7, 7), seed=2), str(path))
    with caplog.at_level(logging.WARNING, logger="henn.api"):
        bare = henn.compile(str(path), backend="plain")
    assert any("no fitted range and no calibration data" in r.getMessage() for r in caplog.records)
    assert list(bare.activation_intervals().values()) == [None]
    sample = rng.uniform(0, 1, (16, 1, 7, 7))
    cm = henn.compile(str(path), backend="plain", calibration=sample)
    ((mid, half),) = cm.activation_intervals().values()
    peak = max(ranges.observed_peaks(cm.compiled.checked, sample).values())
    assert mid == 0 and half == pytest.approx(peak * ranges.OBSERVED_SLACK)
    cm.check_input(sample)
    with pytest.raises(InputError, match="pre-activations of layer"):
        cm.check_input(sample[:1] * 100)
    with pytest.raises(InputError, match="shape"):
        henn.compile(str(path), backend="plain", calibration=np.zeros((2, 7, 7)))


def test_check_modes(tmp_path):
    for mode, want in ((True, "error"), ("error", "error"), ("warn", "warn"), (False, "off"), ("off", "off")):
        assert ranges.check_mode(mode) == want
    for bad in ("yes", 1, None, "WARN"):
        with pytest.raises(InputError, match="activation_check"):
            ranges.check_mode(bad)
    path = tmp_path / "sq.onnx"
    onnx.save(build_cnn(SQUARE_LAYERS, (1, 7, 7), seed=2), str(path))
    with pytest.raises(InputError, match="activation_check"):
        henn.compile(str(path), backend="plain", activation_check="maybe")


@pytest.mark.parametrize("maxima", [["a"], [1.0, 2.0], [float("nan")], [float("inf")], [-1.0], {"x": 1}, 3, [[1]]])
def test_hostile_model_metadata_is_ignored(tmp_path, rng, caplog, maxima):
    path = tmp_path / "sq.onnx"
    onnx.save(build_cnn(SQUARE_LAYERS, (1, 7, 7), seed=2), str(path))
    path.with_suffix(".json").write_text(json.dumps({"max_abs_preactivation": {"train": maxima}}))
    with caplog.at_level(logging.WARNING):
        cm = henn.compile(str(path), backend="plain")
    assert list(cm.activation_intervals().values()) == [None]
    assert any("ignoring the pre-activation maxima" in r.getMessage() for r in caplog.records)
    cm.check_input(rng.uniform(0, 1, (1, 1, 7, 7)))


def test_overflowing_inputs_are_input_errors(zoo_square):
    """Regression: 1e400 (or an int beyond float64) in an object array."""
    for value in (1e400, 10**400, -1e400):
        x = np.full((1, 1, 28, 28), 0.5, dtype=object)
        x[0, 0, 3, 3] = value
        with pytest.raises(InputError):
            zoo_square.run(x)


def test_a_large_batch_is_checked_in_chunks_and_names_its_image(zoo_square):
    """A batch set is interpreted CHUNK_IMAGES at a time (bounded scratch); the refusal names the image
    by its index in the whole batch."""
    x = np.zeros((ranges.CHUNK_IMAGES + 5, 1, 28, 28))
    zoo_square.check_input(x)
    x[ranges.CHUNK_IMAGES + 3] = 255.0
    with pytest.raises(InputError, match=f"image {ranges.CHUNK_IMAGES + 3}:"):
        zoo_square.check_input(x)
