"""place_bootstraps: the placement (a shortest path over levels) and the pass on real graphs."""

from __future__ import annotations

import numpy as np
import pytest

from henn.ckks import ParametersLiteral, presets
from henn.ckks.bootstrap_params import BootstrapLiteral
from henn.errors import InputError, LevelError, ParameterError, UnsupportedOperation
from henn.frontend import load_model
from henn.frontend.onnx_build import build_cnn
from henn.ir import interpret
from henn.passes import CompileOptions, run_pipeline
from henn.passes import place_bootstraps

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
SHAPE = (1, 6, 6)


def boot_params(levels: int, name_prefix: str = "insecure_test_boot_n11"):
    name = f"{name_prefix}_l{levels}"
    if name not in presets.names():
        presets.register(
            name,
            ParametersLiteral(11, (50,) + (36,) * levels, (50,), 36, bootstrap=BootstrapLiteral(precision_bits=20.0)),
        )
    return presets.get(name)


def _graph_and_images(seed: int = 0):
    g = load_model(build_cnn(DEG4, SHAPE, seed=seed))
    x = np.random.default_rng(3).uniform(0, 1, (16,) + SHAPE)
    return g, x


# ---- the placement ------------------------------------------------------------------------------
W1 = (1, 0)


def place(costs, weights, top):
    """place_bootstraps.place on a chain of layers costing these levels."""
    return place_bootstraps.place(lambda j, i: sum(costs[j + 1 : i + 1]), weights, top)


def test_place_uses_as_few_bootstraps_as_the_levels_allow():
    # three levels between bootstraps, and a bootstrap needs one left at its input: a run before a
    # bootstrap takes 2 layers of one level, the last run 3. Five layers: 2 + 3, one bootstrap
    assert place([1] * 5, [W1] * 5, 3) == [1]
    # eight: 2 + 2 + 2 + 2 (2 + 2 + 3 = 7 is one short) -> three
    assert len(place([1] * 8, [W1] * 8, 3)) == 3
    # fits: none
    assert place([1, 2], [W1, W1], 3) == []


def test_place_prefers_positions_with_fewer_ciphertexts():
    # the bootstrap can go after node 0 or 1 (levels 3, cost 1 each): node 1 holds fewer ciphertexts
    assert place([1, 1, 1, 1], [(8, 0), (2, 0), (8, 0), (8, 0)], 3) == [1]
    assert place([1, 1, 1, 1], [(2, 0), (8, 0), (8, 0), (8, 0)], 3) == [0]


def test_place_breaks_ties_by_range_then_unused_levels():
    assert place([1, 1, 1, 1], [(1, 9), (1, 2), (1, 0), (1, 0)], 3) == [1]
    # equal ranges: the later position leaves fewer levels unused
    assert place([1, 1, 1, 1], [(1, 0), (1, 0), (1, 0), (1, 0)], 3) == [1]


def test_place_never_bootstraps_at_level_zero_or_where_no_ciphertext_is():
    # node 1 consumes the last two levels; no bootstrap possible after it, so one goes after node 0
    assert place([1, 2, 1], [W1, W1, W1], 3) == [0]
    assert place([1, 1, 1], [W1, None, W1], 2) == [0]
    assert place([1, 1, 1, 1], [(0, 0), W1, W1, W1], 3) == [1]


def test_the_last_run_stops_at_the_output_floor():
    # five one-level layers over runs of 3: 2 + 3 ends at level 0; with the output held at level 1 the
    # last run takes 2 layers too
    assert place([1] * 5, [W1] * 5, 3) == [1]
    assert len(place_bootstraps.place(lambda j, i: i - j, [W1] * 5, 3, floor=1)) == 2
    with pytest.raises(UnsupportedOperation, match="at level 3"):
        place_bootstraps.place(lambda j, i: i - j, [W1] * 2, 3, floor=3)


def test_the_output_floor_is_where_the_modulus_holds_the_outputs():
    assert place_bootstraps.output_floor(presets.get("boot-n16"), 30.0) == 0  # q0 60 bits over a 40-bit scale
    openfhe = presets.get("insecure_boot_n12_openfhe")  # q0 60 bits over a 59-bit scale
    assert place_bootstraps.output_floor(openfhe, 0.3) == 0
    assert place_bootstraps.output_floor(openfhe, 30.0) == 1
    with pytest.raises(ParameterError, match="do not fit"):
        place_bootstraps.output_floor(openfhe, 2.0**200)


def test_place_refuses_a_layer_deeper_than_the_parameters():
    with pytest.raises(UnsupportedOperation, match="layer 1 .3 levels"):
        place([1, 3], [W1, W1], 2)
    with pytest.raises(UnsupportedOperation, match="layer 2"):
        place([1, 1, 1], [(0, 0), W1, W1], 2)
    # a layer too deep to be followed by a bootstrap is named, not the layer after it
    with pytest.raises(UnsupportedOperation, match="reaches layer 2: layer 1 alone takes 3 levels.*activation_bits"):
        place([1, 3, 1], [W1, W1, W1], 3)


# ---- the pass -----------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["single", "batch"])
def test_pass_inserts_bootstraps_and_keeps_the_function(mode):
    g, x = _graph_and_images()
    params = boot_params(3)
    opts = CompileOptions(mode=mode, params=params, bootstrap=True, calibration=x)
    final = run_pipeline(g, opts)
    boots = [n for n in final.nodes if n.op == "bootstrap"]
    assert boots, "depth 7 over 3 levels needs bootstraps"
    for n in boots:
        level = final.values[n.inputs[0]].level
        assert level is not None and level >= 1
        assert final.values[n.output].level == params.max_level
        assert n.attrs["bound"] > 0
    assert all(v.level is not None and v.level >= 0 for v in final.values.values())
    assert final.meta.depth is not None and final.meta.depth <= params.max_level
    np.testing.assert_allclose(interpret.run(final, x), interpret.run(g, x), rtol=1e-9, atol=1e-9)


def test_bounds_cover_the_calibration_values_with_margin():
    g, x = _graph_and_images()
    final = run_pipeline(g, CompileOptions(params=boot_params(3), bootstrap=True, calibration=x))
    seen = {}

    def hook(node, inp, out):
        if node.op == "bootstrap":
            seen[node.name] = (float(np.abs(inp).max()), node.attrs["bound"])

    interpret.run(final, x, hook=hook)
    for peak, bound in seen.values():
        assert peak < bound <= 1.3 * peak


def test_an_outlier_calibration_image_is_left_out_of_the_bound_and_refused(caplog):
    """One image scaled 1000x among 16: its values would set a bound 1000x the others' and leave them no
    precision; it is left out of the bound with a warning, and an input like it is refused."""
    import henn

    g, x = _graph_and_images()
    cal = x.copy()
    cal[5] *= 1000.0
    final = run_pipeline(g, CompileOptions(params=boot_params(3), bootstrap=True, calibration=cal))
    assert "left out of the bounds" in caplog.text and caplog.text.count("calibration images") == 1
    seen = {}

    def hook(node, inp, out):
        if node.op == "bootstrap":
            seen[node.name] = (float(np.abs(inp).max()), node.attrs["bound"])

    interpret.run(final, x, hook=hook)  # the 16 ordinary images
    for peak, bound in seen.values():
        assert peak < bound <= 1.3 * peak
    cm = henn.compile(
        build_cnn(DEG4, SHAPE, seed=0),
        backend="plain",
        mode="single",
        params=boot_params(3),
        bootstrap=True,
        calibration=cal,
        activation_check="off",
    )
    with pytest.raises(InputError, match="beyond the bound"):
        cm.run(cal[5:6], encrypted=False)
    cm.run(x[:2], encrypted=False)


def test_no_bootstrap_when_the_depth_fits():
    g, x = _graph_and_images()
    plain = run_pipeline(g, CompileOptions(params=boot_params(8)))
    boot = run_pipeline(g, CompileOptions(params=boot_params(8), bootstrap=True, calibration=x))
    assert plain.dump() == boot.dump()


def test_without_bootstrap_option_depth_is_checked_as_before():
    g, _ = _graph_and_images()
    with pytest.raises(LevelError, match="needs depth 6 but the given parameters allow 3"):
        run_pipeline(g, CompileOptions(params=boot_params(3)))


def test_errors_name_the_fix():
    g, x = _graph_and_images()
    with pytest.raises(InputError, match="calibration"):
        run_pipeline(g, CompileOptions(params=boot_params(3), bootstrap=True))
    with pytest.raises(ParameterError, match="bootstrap parameters"):
        run_pipeline(g, CompileOptions(params=presets.get("insecure_short_d4"), bootstrap=True, calibration=x))
    with pytest.raises(ParameterError, match="at least 2"):
        run_pipeline(g, CompileOptions(params=boot_params(1), bootstrap=True, calibration=x))
    with pytest.raises(InputError, match="calibration images must have shape"):
        run_pipeline(g, CompileOptions(params=boot_params(3), bootstrap=True, calibration=x[:, 0]))
