"""Unit tests of single passes: activation forms, folding, thresholds, depth, parameter checks."""

import numpy as np
import pytest

from henn.ckks import presets
from henn.errors import LevelError, UnsupportedOperation
from henn.frontend import load_model
from henn.frontend.onnx_build import build_cnn, cifar_layers, mnist_layers
from henn.ir import interpret
from henn.ir.graph import Graph, Node, Value
from henn.ir.ops import Op
from henn.passes import CompileOptions, run_pipeline
from henn.passes.approximate_activations import decompose
from henn.passes.threshold_coeffs import EPS_DEFAULT, EPS_DEG4


@pytest.mark.parametrize(
    "coeffs",
    [
        (0.3,),
        (0.1, -2.0),
        (0.24, 0.5, 0.1),
        (0.0, 0.0, 1.0),
        (1.0, -0.5, 0.2, 0.05),
        (0.1773, 0.5, 0.128, 0.0, -0.001328),
        (0.2, 0.1, -0.3, 0.02, 0.004),
    ],
)
def test_forms_reproduce_the_polynomial(coeffs, rng):
    form = decompose(coeffs)
    x = rng.uniform(-7, 7, 200)
    got = interpret.poly(form, x)
    np.testing.assert_allclose(got, np.polynomial.polynomial.polyval(x, coeffs), rtol=1e-9, atol=1e-9)
    assert form["levels"] == {1: 0, 2: 0, 3: 1, 4: 2, 5: 2}[len(coeffs)]


def test_degree_above_four_takes_the_general_form(rng):
    form = decompose((0, 1, 0, 1, 0, 1), "act7")
    assert form["form"] == "general" and form["levels"] == 3  # ceil(log2(6)), output at the input scale
    x = rng.uniform(-1, 1, 50)
    np.testing.assert_allclose(interpret.poly(form, x), x + x**3 + x**5, rtol=1e-12)
    assert decompose((0, 1, 0, 1, 0, 1), bound=4.0)["levels"] == 4  # x / 4 first: one level more


@pytest.mark.parametrize("act,depth", [("square", 5), ("swish-rg5-deg2", 5), ("swish-rg7-deg4", 7)])
def test_mnist_depth_matches_paper_table5(act, depth):
    g = run_pipeline(load_model(build_cnn(mnist_layers(act), seed=0)), CompileOptions(mode="single"))
    assert g.meta.depth == depth
    params = g.meta.params
    assert params is not None
    assert params.log_n == 14 and params.max_level == depth
    assert not params.insecure
    rescales = [n.attrs["rescale"] for n in g.nodes if n.op in ("conv2d", "linear")]
    assert rescales == [True, True, True]  # the last too: the response at level 0, the same depth
    assert g.values[g.output].level == 0


@pytest.mark.parametrize("act,depth", [("square", 7), ("swish-rg7-deg4", 10)])
def test_cifar_depth_with_fused_head(act, depth):
    g = run_pipeline(load_model(build_cnn(cifar_layers(act, (2, 2, 2), 4), (3, 32, 32))), CompileOptions(mode="batch"))
    assert g.meta.depth == depth  # paper 000: 8 / 11 with an unfused 2048-256-10 head
    assert sum(n.op == "linear" for n in g.nodes) == 1
    assert all(n.op != "avgpool" for n in g.nodes)


def test_threshold_eps_follows_the_paper(rng):
    for act, eps in (("square", EPS_DEFAULT), ("swish-rg7-deg4", EPS_DEG4)):
        model = build_cnn(mnist_layers(act), seed=0)
        g = run_pipeline(load_model(model), CompileOptions(mode="batch"), until="threshold_coeffs")
        assert g.meta.threshold_eps == eps
        for n in g.nodes:
            if n.op in ("conv2d", "linear"):
                limit = eps * abs(n.attrs.get("folded_gain", 1.0))
                w = n.params["weight"]
                assert np.all(np.abs(w[w != 0]) >= limit * (1 - 1e-12))


def test_tiny_weights_become_eps_and_zeros_stay():
    model = build_cnn(mnist_layers("square"), seed=0)
    g = load_model(model)
    g.nodes[0].params["weight"][0, 0, 0, :3] = [0.0, -1e-9, 1e-9]
    g = run_pipeline(g, CompileOptions(mode="batch"), until="threshold_coeffs")
    assert list(g.nodes[0].params["weight"][0, 0, 0, :3]) == [0.0, -1e-7, 1e-7]


def test_activation_output_affine_reaches_the_client(rng):
    model = build_cnn([("conv", 2, 3, 1, 0), ("poly", "swish-rg5-deg2"), ("avgpool", 2)], (1, 6, 6), seed=3)
    g0 = load_model(model)
    g = run_pipeline(g0, CompileOptions(mode="batch"))
    assert g.meta.output_gain == pytest.approx(0.1 / 4)
    x = rng.uniform(0, 1, (2, 1, 6, 6))
    np.testing.assert_allclose(interpret.run(g, x), interpret.run(g0, x), rtol=1e-9)


def test_padded_conv_after_activation_gets_a_full_bias_map(rng):
    layers = [("conv", 2, 3, 1, 0), ("poly", "swish-rg5-deg2"), ("conv", 3, 3, 1, 1), ("flatten",), ("gemm", 2)]
    g0 = load_model(build_cnn(layers, (1, 6, 6), seed=4))
    merged = run_pipeline(g0, CompileOptions(mode="batch"), until="merge_act_pool")
    assert merged.nodes[2].params["bias"].shape == (3, 4, 4)  # the offset meets zero padding at the border
    g = run_pipeline(g0, CompileOptions(mode="batch"))  # fuse_linear then composes the conv into the Gemm
    x = rng.uniform(0, 1, (2, 1, 6, 6))
    np.testing.assert_allclose(interpret.run(g, x), interpret.run(g0, x), rtol=1e-7, atol=1e-9)


def test_explicit_parameters_too_shallow():
    model = build_cnn(mnist_layers("swish-rg7-deg4"), seed=0)
    with pytest.raises(LevelError, match="needs depth 7 but the given parameters allow 4"):
        run_pipeline(load_model(model), CompileOptions(mode="batch", params=presets.get("insecure_short_d4")))


def test_branches_are_refused_in_batch_mode():
    w = np.ones((2, 2))
    values = {k: Value(k, (2,)) for k in ("x", "a", "b")}
    nodes = [
        Node(Op.LINEAR, "l1", ["x"], "a", {}, {"weight": w, "bias": np.zeros(2)}),
        Node(Op.LINEAR, "l2", ["a"], "b", {}, {"weight": w, "bias": np.zeros(2)}),
    ]
    g = Graph("x", "b", nodes, values).verify()
    g.nodes[1].inputs = ["x"]  # x feeds both layers; a is dead
    g.output = "b"
    with pytest.raises(UnsupportedOperation, match="residual connections, shared values or per-channel polynomials"):
        run_pipeline(g, CompileOptions(mode="batch"))


def test_single_mode_keys_are_exactly_the_plan_steps():
    g = run_pipeline(load_model(build_cnn(mnist_layers("square"), seed=0)), CompileOptions(mode="single"))
    steps = {2048, 4096}  # the block sum of the client's taps
    for n in g.nodes:
        plan = n.attrs.get("packing")
        if plan is not None and plan.strategy != "taps":
            steps |= set(plan.split.baby) | set(plan.split.giant) | {plan.fold_stride << i for i in range(plan.fold)}
    assert g.meta.rotation_steps is not None
    assert set(g.meta.rotation_steps) == steps - {0}
    conv2 = [n for n in g.nodes if n.op == "conv2d"][1]
    assert conv2.attrs["packing"].blocks == 2 and conv2.attrs["packing"].split.ndiag == 64  # 128 diagonals / 2
    assert len(g.meta.rotation_steps) <= 32
    batch = run_pipeline(load_model(build_cnn(mnist_layers("square"), seed=0)), CompileOptions(mode="batch"))
    assert batch.meta.rotation_steps == ()


def test_fused_head_keeps_the_folded_gain(rng):
    layers = [("conv", 2, 3, 1, 1), ("poly", "swish-rg7-deg4"), ("avgpool", 2), ("flatten",), ("gemm", 6), ("gemm", 3)]
    g0 = load_model(build_cnn(layers, (1, 4, 4), seed=9))
    g = run_pipeline(g0, CompileOptions(mode="batch"), until="threshold_coeffs")
    head = g.nodes[-1]
    assert head.op == "linear" and head.attrs["folded_gain"] == pytest.approx(-0.001328 / 4)
    x = rng.uniform(0, 1, (3, 1, 4, 4))
    np.testing.assert_allclose(interpret.run(g, x), interpret.run(g0, x), atol=1e-7)


def _relin_flags(g):
    acts = {n.name: n.attrs.get("relin", True) for n in g.nodes if n.op == "poly"}
    layers = {n.name: n.attrs.get("relin_outputs", False) for n in g.nodes if n.op in ("conv2d", "linear")}
    return acts, layers


def test_lazy_relin_where_the_layer_after_has_fewer_outputs():
    """MNIST CNN in batch mode: the 800 squares before the 800 -> 10 layer stay of degree 2 (10 key switches
    instead of 800); the 720 before conv2's 800 outputs do not (that would be more key switches, not
    fewer). Single mode and grouped batch packing (rotations) never defer."""
    model = build_cnn(mnist_layers("square"), seed=0)
    g = run_pipeline(load_model(model), CompileOptions(mode="batch"))
    acts, layers = _relin_flags(g)
    assert list(acts.values()) == [True, False]
    assert list(layers.values()) == [False, False, True]
    for opts in (CompileOptions(mode="single"), CompileOptions(mode="batch", batch_group=4)):
        acts, layers = _relin_flags(run_pipeline(load_model(model), opts))
        assert all(acts.values()) and not any(layers.values())


def test_lazy_relin_needs_a_core_that_ends_on_its_product():
    """The quartic core adds tcoef * u after its last square: that square is relinearized where it is."""
    g = run_pipeline(load_model(build_cnn(mnist_layers("swish-rg7-deg4"), seed=0)), CompileOptions(mode="batch"))
    acts, layers = _relin_flags(g)
    quartics = [n for n in g.nodes if n.op == "poly" and n.attrs["form"] == "quartic" and n.attrs["tcoef"]]
    assert quartics and all(acts[n.name] for n in quartics)
    assert sum(layers.values()) == sum(not v for v in acts.values())
