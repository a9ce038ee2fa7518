"""ResNet-20 (henn.training.resnet) from PyTorch through ONNX into the IR: residual additions, the folded
AESPA quadratics fused back into one channel_poly each, the strided projection shortcuts, global
average pool; the imported graph computes what torch computes, and compiles."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from henn.api import CompiledModel  # noqa: E402
from henn.compiler.driver import compile_graph  # noqa: E402
from henn.errors import InputError, UnsupportedOperation  # noqa: E402
from henn.frontend import load_model  # noqa: E402
from henn.ir import interpret  # noqa: E402
from henn.ir.ops import Op  # noqa: E402
from henn.passes import CompileOptions  # noqa: E402
from henn.training.models import export_onnx  # noqa: E402
from henn.training.resnet import ResNet20  # noqa: E402


def _trained_like(blocks: int, seed: int = 0):
    """A ResNet-20 whose normalizations have seen data (non-trivial running statistics), in eval mode."""
    torch.manual_seed(seed)
    model = ResNet20("aespa", blocks_per_stage=blocks)
    model.train()
    with torch.no_grad():
        for _ in range(3):
            model(torch.rand(16, 3, 32, 32))
    return model.eval()


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    model = _trained_like(1)
    path = tmp_path_factory.mktemp("resnet") / "r.onnx"
    export_onnx(model, "resnet20", path)
    return model, path


def _torch(model, x):
    with torch.no_grad():
        return model(torch.from_numpy(x).float()).double().numpy()


@pytest.mark.parametrize("blocks", [1, 3])
def test_imported_resnet_computes_what_torch_computes(tmp_path, blocks):
    model = _trained_like(blocks, seed=blocks)
    path = tmp_path / "r.onnx"
    export_onnx(model, "resnet20", path)
    g = load_model(str(path), (3, 32, 32))
    ops = [n.op for n in g.nodes]
    assert ops.count(Op.ADD) == 3 * blocks and ops.count(Op.CHANNEL_POLY) == 1 + 6 * blocks
    assert "poly" not in ops and ops.count(Op.CONV2D) == 1 + 6 * blocks + 2  # two projection shortcuts
    x = np.random.default_rng(blocks).uniform(0, 1, (4, 3, 32, 32))
    ref = _torch(model, x)
    np.testing.assert_allclose(interpret.run(g, x), ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def test_imported_resnet_compiles_and_runs_with_bootstraps_on_the_plain_backend(small):
    model, path = small
    g = load_model(str(path), (3, 32, 32))
    rng = np.random.default_rng(0)
    cal, x = rng.uniform(0, 1, (16, 3, 32, 32)), rng.uniform(0, 1, (1, 3, 32, 32))
    options = CompileOptions(mode="single", backend="plain", bootstrap=True, calibration=cal)
    with CompiledModel(compile_graph(g, options), "plain", activation_check=False) as cm:
        assert cm.program.bootstraps >= 1
        np.testing.assert_allclose(cm.run(x, encrypted=False), _torch(model, x), rtol=1e-4, atol=1e-4)


def test_residual_and_per_channel_errors(tmp_path):
    from onnx import TensorProto, helper, numpy_helper

    def model(nodes, inits, out_shape):
        graph = helper.make_graph(
            nodes,
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
            [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in inits.items()],
        )
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    w = np.ones((3, 2, 1, 1))
    bad_add = model(
        [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Add", ["c", "x"], ["y"])],
        {"w": w},
        [1, 3, 4, 4],
    )
    with pytest.raises(InputError, match="cannot apply to shape"):
        load_model(bad_add)
    two = model(
        [
            helper.make_node("Conv", ["x", "w"], ["c"]),
            helper.make_node("Conv", ["x", "w"], ["d"]),
            helper.make_node("Mul", ["c", "d"], ["y"]),
        ],
        {"w": w},
        [1, 3, 4, 4],
    )
    with pytest.raises(UnsupportedOperation, match="Mul"):
        load_model(two)
    odd = model([helper.make_node("Mul", ["x", "k"], ["y"])], {"k": np.arange(8.0).reshape(1, 2, 4, 1)}, [1, 2, 4, 4])
    with pytest.raises(UnsupportedOperation, match="neither a scalar nor one value per channel"):
        load_model(odd)
