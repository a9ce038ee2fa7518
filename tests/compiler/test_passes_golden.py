"""Golden tests: the exact IR after every pass on tiny hand-built ONNX graphs.

Regenerate after an intended change with HENN_REGEN_GOLDEN=1 and review the diff.
"""

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from henn.ckks import ParametersLiteral, presets
from henn.ckks.bootstrap_params import BootstrapLiteral
from henn.frontend import load_model
from henn.frontend.onnx_build import build_cnn
from henn.ir import interpret
from henn.passes import PASSES, CompileOptions

GOLDEN = Path(__file__).parent / "golden"
TINY = [("conv", 2, 3, 1, 0), ("bn",), ("poly", "swish-rg5-deg2"), ("avgpool", 2), ("flatten",), ("gemm", 3)]
DEG4 = [
    ("conv", 2, 2, 2, 0),
    ("bn",),
    ("poly", "swish-rg7-deg4"),
    ("conv", 3, 2, 1, 0),
    ("bn",),
    ("poly", "square"),
    ("flatten",),
    ("gemm", 4),
    ("gemm", 2),
]
CASES: dict[str, tuple[list, tuple[int, ...], str, dict[str, Any]]] = {
    "tiny_single": (TINY, (1, 6, 6), "single", {}),
    "tiny_batch": (TINY, (1, 6, 6), "batch", {}),
    "tiny_grouped": (TINY, (1, 6, 6), "batch", {"batch_group": 2}),
    "tiny_complex": (TINY, (1, 6, 6), "batch", {"complex_packing": True}),
    "deg4_single": (DEG4, (1, 6, 6), "single", {}),
    "deg4_bootstrap": (DEG4, (1, 6, 6), "single", {"bootstrap": True}),
}


def _params(bootstrap: bool = False):
    """Depth 6; with bootstrapping, 3 levels between bootstraps (DEG4 needs 7: two bootstraps)."""
    name = "insecure_golden_boot_n11_d3" if bootstrap else "insecure_golden_n11_d6"
    if name not in presets.names():
        presets.register(
            name,
            ParametersLiteral(11, (50,) + (36,) * 3, (50,), 36, bootstrap=BootstrapLiteral())
            if bootstrap
            else ParametersLiteral(11, (50,) + (36,) * 6, (50,), 36),
        )
    return presets.get(name)


@pytest.mark.parametrize("case", sorted(CASES))
def test_ir_after_each_pass(case):
    layers, shape, mode, extra = CASES[case]
    g = load_model(build_cnn(layers, shape, seed=0))
    x = np.random.default_rng(5).uniform(0, 1, (3,) + shape)
    boot = extra.get("bootstrap", False)
    opts = CompileOptions(mode=mode, params=_params(boot), calibration=x if boot else None, **extra)
    ref = interpret.run(g, x)
    for i, (name, fn) in enumerate(PASSES):
        g = fn(g, opts).verify()
        path = GOLDEN / case / f"{i:02d}_{name}.txt"
        if os.environ.get("HENN_REGEN_GOLDEN") == "1":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(g.dump() + "\n")
        assert g.dump() + "\n" == path.read_text(), f"IR after {name} differs from {path}"
        # every pass keeps the function (thresholding moves weights by at most 1e-6)
        np.testing.assert_allclose(interpret.run(g, x), ref, atol=1e-5, err_msg=name)
