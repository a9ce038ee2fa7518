"""ONNX frontend: imported graphs compute what onnx.reference computes; unsupported input is refused."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from henn.errors import InputError, UnsupportedOperation
from henn.frontend import load_model
from henn.frontend.onnx_build import build_cnn, cifar_layers, mnist_layers, reference_session
from henn.ir import interpret
from henn.passes import CompileOptions, run_pipeline


@pytest.mark.parametrize(
    "layers,shape",
    [
        (mnist_layers("swish-rg7-deg4"), (1, 28, 28)),
        (mnist_layers("square"), (1, 28, 28)),
        (cifar_layers("swish-rg5-deg2", (2, 3, 4), 8), (3, 32, 32)),
        ([("conv", 2, 3, 1, 1), ("poly", "square"), ("globalavgpool",), ("flatten",), ("matmul", 3)], (1, 5, 5)),
    ],
)
def test_import_matches_onnx_reference(layers, shape, rng):
    model = build_cnn(layers, shape, seed=7)
    onnx.checker.check_model(model)
    g = load_model(model)
    x = rng.uniform(0, 1, (2,) + shape).astype(np.float32)
    want = reference_session(model).run(None, {"input": x})[0]
    np.testing.assert_allclose(interpret.run(g, x), want, rtol=1e-4, atol=1e-4)


def test_import_from_file_and_shapes(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(build_cnn(mnist_layers("square"), seed=1), str(path))
    g = load_model(str(path), (1, 1, 28, 28))  # a leading batch axis is accepted
    assert g.input_shape == (1, 28, 28) and g.output_shape == (10,)
    assert [n.op for n in g.nodes] == [
        "conv2d",
        "batchnorm",
        "poly",
        "conv2d",
        "batchnorm",
        "poly",
        "flatten",
        "linear",
    ]
    with pytest.raises(InputError, match="does not match"):
        load_model(str(path), (1, 32, 32))
    with pytest.raises(InputError, match="does not exist"):
        load_model(str(tmp_path / "missing.onnx"))


def test_maxpool_is_read():
    model = build_cnn([("conv", 2, 3, 1, 0), ("poly", "square"), ("maxpool", 2), ("flatten",), ("gemm", 2)], (1, 6, 6))
    g = load_model(model)
    (pool,) = [n for n in g.nodes if n.op == "maxpool"]
    assert pool.attrs == {"kernel": (2, 2), "stride": (2, 2), "pads": (0, 0, 0, 0)}


def test_unknown_op_is_refused():
    model = build_cnn([("conv", 2, 3, 1, 0), ("op", "Softsign"), ("flatten",), ("gemm", 2)], (1, 6, 6))
    with pytest.raises(UnsupportedOperation, match="op1.*Softsign.*not supported"):
        load_model(model)


def test_relu_reaches_the_activation_pass():
    model = build_cnn([("conv", 2, 3, 1, 0), ("relu",), ("flatten",), ("gemm", 2)], (1, 6, 6))
    g = load_model(model)  # imported: the reference model can still run
    assert g.nodes[1].op == "activation"
    with pytest.raises(InputError, match=r"relu1.*relu activation.*calibration images are needed"):
        run_pipeline(g, CompileOptions(mode="batch"))  # approximated on the range calibration images give


def test_square_as_mul_and_trailing_softmax(rng):
    w = numpy_helper.from_array(rng.normal(size=(3, 4)).astype(np.float32), "w")
    nodes = [
        helper.make_node("Flatten", ["x"], ["f"], axis=1),
        helper.make_node("Mul", ["f", "f"], ["sq"]),
        helper.make_node("Gemm", ["sq", "w"], ["y"], transB=1),
        helper.make_node("Softmax", ["y"], ["p"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 1, 2, 2])],
        [helper.make_tensor_value_info("p", TensorProto.FLOAT, ["b", 3])],
        initializer=[w],
    )
    g = load_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert [n.op for n in g.nodes] == ["flatten", "poly", "linear"]
    x = rng.uniform(size=(2, 1, 2, 2))
    want = (x.reshape(2, -1) ** 2) @ numpy_helper.to_array(w).T.astype(np.float64)
    np.testing.assert_allclose(interpret.run(g, x), want, rtol=1e-6)


def test_batchnorm_without_conv_is_refused():
    model = build_cnn([("bn",), ("conv", 2, 3, 1, 0), ("flatten",), ("gemm", 2)], (1, 6, 6))
    with pytest.raises(UnsupportedOperation, match="bn0.*Conv or Gemm"):
        run_pipeline(load_model(model), CompileOptions(mode="batch"))
