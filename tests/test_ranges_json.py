"""The pre-activation maxima a model's .json records (`henn train`: one per activation layer, AESPA's per-channel
quadratics included) are read without a false warning for every zoo model, and a .json that does not fit the
model still warns, saying what it expected and what to do."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

import henn
from henn import ranges
from henn.api import _observed_preactivation
from henn.compiler.driver import load_model
from henn.passes import CompileOptions
from henn.passes.pipeline import run_pipeline

ZOO = Path(henn.__file__).parent / "zoo"
SHAPES = {"mnist": (1, 28, 28), "cifar": (3, 32, 32), "resnet20": (3, 32, 32)}
WARNING = "ignoring the pre-activation maxima"


def _checked(onnx_path: Path):
    """The graph whose activations henn.compile range-checks (CompiledModel.compiled.checked)."""
    stem = onnx_path.stem
    shape = next((s for k, s in SHAPES.items() if stem.startswith(k)), SHAPES["mnist"])
    options = CompileOptions(mode="single", bootstrap=stem.startswith("resnet20"))
    return run_pipeline(load_model(str(onnx_path), shape), options, until="approximate_activations")


def _zoo_models() -> list[Path]:
    """The zoo's models with a training .json, but the ReLU reference: its ReLUs are approximated on ranges
    calibrated from sample images, so its pipeline does not run without them (and reads no .json maxima)."""
    return sorted(p for p in ZOO.glob("*.onnx") if p.with_suffix(".json").is_file() and "relu" not in p.stem)


@pytest.mark.parametrize("onnx_path", _zoo_models(), ids=lambda p: p.stem)
def test_every_zoo_models_json_is_read_without_a_warning(onnx_path, caplog):
    graph = _checked(onnx_path)
    maxima = _observed_preactivation(str(onnx_path))
    assert maxima is not None  # these models have their .json
    with caplog.at_level(logging.WARNING, logger="henn.ranges"):
        peaks = ranges.clean_peaks(maxima, graph, "the model's .json")
    assert not [r for r in caplog.records if WARNING in r.getMessage()]
    polys = [n.name for n in ranges.poly_layers(graph)]  # their peaks are used; AESPA's only counted
    assert peaks == (dict(zip(polys, maxima)) if polys else {})


def test_resnet20_records_one_maximum_per_aespa_quadratic(caplog):
    graph = _checked(ZOO / "resnet20_aespa.onnx")
    maxima = json.loads((ZOO / "resnet20_aespa.json").read_text())["max_abs_preactivation"]["train"]
    assert len(ranges.activation_layers(graph)) == len(maxima) == 19 and not ranges.poly_layers(graph)
    with caplog.at_level(logging.WARNING, logger="henn.ranges"):
        assert ranges.clean_peaks(maxima, graph, "the model's .json") == {}  # AESPA's ranges: the bootstrap checks
    assert not caplog.records


@pytest.mark.parametrize("model", ["resnet20_aespa", "mnist-cnn_swish-rg7-deg4"])
@pytest.mark.parametrize(
    "maxima,got",
    [
        (lambda m: m[:-1], "got {n_minus_1};"),
        (lambda m: m + [1.0], "got {n_plus_1};"),
        (lambda m: [-1.0] + m[1:], "negative or non-finite"),
        (lambda m: [float("nan")] + m[1:], "negative or non-finite"),
        (lambda m: "12", "got a str"),
        (lambda m: {"layer": 1.0}, "got a dict"),
        (lambda m: [[1.0]] * len(m), "got a list of non-numbers"),
    ],
)
def test_a_json_that_does_not_fit_the_model_still_warns(model, maxima, got, caplog):
    graph = _checked(ZOO / f"{model}.onnx")
    real = json.loads((ZOO / f"{model}.json").read_text())["max_abs_preactivation"]["train"]
    with caplog.at_level(logging.WARNING, logger="henn.ranges"):
        assert ranges.clean_peaks(maxima(real), graph, "the model's .json") == {}
    (message,) = [r.getMessage() for r in caplog.records]
    assert message.startswith(f"{WARNING} in the model's .json: expected {len(real)} finite non-negative numbers")
    assert got.format(n_minus_1=len(real) - 1, n_plus_1=len(real) + 1) in message
    assert "put the .json that `henn train` wrote beside the model" in message
