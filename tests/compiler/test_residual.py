"""Residual networks (paper 002's ResNet blocks) through the compiler: the IR ops add and channel_poly,
packing units and registers, levels at additions, bootstraps at the joins, and the encrypted result
against the plaintext graph on the plain and Lattigo backends (small insecure rings)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from program_sim import simulate
from residual_params import insecure

import precision_table
from henn.api import CompiledModel
from henn.compiler.driver import compile_graph
from henn.compiler.lower import lower
from henn.errors import UnsupportedOperation
from henn.ir import interpret
from henn.ir.graph import Graph, Node, Value
from henn.ir.ops import Op
from henn.ir.synthetic import random_resnet
from henn.passes import CompileOptions, run_pipeline
from henn.passes.place_bootstraps import live_values
from henn.program import Program, ProgramError, Save, StepKind


DEEP = "insecure_test_residual_l17"  # random_resnet needs depth 16 without bootstrapping
BOOT = "insecure_test_residual_boot_l9"  # 9 levels between bootstraps: a residual block takes 6
TIGHT = "insecure_test_residual_boot_l4"  # 4 levels: a bootstrap goes inside each block


@pytest.fixture(scope="module")
def images():
    return np.random.default_rng(7).uniform(0, 1, (24, 3, 8, 8))


def _compiled(backend: str, preset: str, calibration=None, bootstrap: bool = False, seed: int = 0):
    params = insecure(preset, {DEEP: 17, BOOT: 9, TIGHT: 4}[preset], boot=bootstrap)
    options = CompileOptions(
        mode="single", backend=backend, params=params, bootstrap=bootstrap, calibration=calibration
    )
    return CompiledModel(compile_graph(random_resnet(seed=seed), options), backend, activation_check=False)


def test_interpreter_runs_graphs():
    g = random_resnet()
    assert sum(n.op == "add" for n in g.nodes) == 2 and sum(n.op == "channel_poly" for n in g.nodes) == 5
    x = np.random.default_rng(0).uniform(0, 1, (3, 3, 8, 8))
    y = interpret.run(g, x)
    assert y.shape == (3, 10) and np.all(np.isfinite(y))


def test_program_computes_the_graph_with_registers(images):
    g = random_resnet()
    program = lower(run_pipeline(g, CompileOptions(mode="single", params=insecure(DEEP, 17))))
    kinds = [s.kind for s in program.steps]
    # identity block: save the block input, add it back; strided block: the projection runs on the
    # loaded block input after the main branch is saved, then the branches join
    assert kinds.count(StepKind.ADD) == 2 and kinds.count(StepKind.CHANNEL_POLY) == 5
    assert kinds.count(StepKind.SAVE) == 3 and kinds.count(StepKind.LOAD) == 1
    for x in images[:3]:
        np.testing.assert_allclose(simulate(program, x[None]), interpret.run(g, x[None]), rtol=1e-9, atol=1e-9)
    again = Program.from_bytes(program.to_bytes())
    np.testing.assert_allclose(simulate(again, images[:1]), simulate(program, images[:1]), rtol=0, atol=0)


def test_additions_sit_at_the_lower_operand_level():
    g = run_pipeline(random_resnet(), CompileOptions(mode="single", params=insecure(DEEP, 17)))
    for n in (n for n in g.nodes if n.op == "add"):
        a, b = (g.values[v].level for v in n.inputs)
        assert a is not None and b is not None
        assert a != b and g.values[n.output].level == min(a, b)  # the shortcut has levels to spare


def test_equal_levels_cost_the_addition_one_level():
    values = {"x": Value("x", (1, 4, 4))}
    nodes = []
    rng = np.random.default_rng(1)
    for name in ("a", "b"):
        values[name] = Value(name, (1, 4, 4))
        nodes.append(
            Node(
                Op.CONV2D,
                name,
                ["x"],
                name,
                {"stride": (1, 1), "pads": (1, 1, 1, 1)},
                {"weight": rng.normal(size=(1, 1, 3, 3)), "bias": np.zeros(1)},
            )
        )
    values["s"] = Value("s", (1, 4, 4))
    values["q"] = Value("q", (1, 4, 4))
    nodes.append(Node(Op.ADD, "s", ["a", "b"], "s"))
    nodes.append(Node(Op.CHANNEL_POLY, "q", ["s"], "q", {}, {"coefficients": np.array([[0.1, 0.5, 0.2]])}))
    g = run_pipeline(Graph("x", "q", nodes, values).verify(), CompileOptions(mode="single", params=insecure(DEEP, 17)))
    s_level = g.values["s"].level
    assert s_level is not None
    assert g.values["a"].level == g.values["b"].level == s_level + 1
    cm = CompiledModel(
        compile_graph(
            Graph("x", "q", nodes, values).verify(),
            CompileOptions(mode="single", backend="lattigo", params=insecure(DEEP, 17)),
        ),
        "lattigo",
        activation_check=False,
    )
    x = rng.uniform(0, 1, (2, 1, 4, 4))
    with cm:
        for xi in x:
            precision_table.within("lattigo-e2e", "residual_join", cm.reference(xi[None]), cm.run(xi[None]), 1e-5)


def test_program_refuses_broken_registers():
    program = lower(run_pipeline(random_resnet(), CompileOptions(mode="single", params=insecure(DEEP, 17))))
    steps = list(program.steps)
    first_add = next(i for i, s in enumerate(steps) if s.kind == StepKind.ADD)
    bad = [s for i, s in enumerate(steps) if not (s.kind == StepKind.SAVE and i < first_add)]
    with pytest.raises(ProgramError, match="holds no value"):
        dataclasses.replace(program, steps=bad).verify()
    extra = steps[:1] + [Save(name="leak", level=0, register=7)] + steps[1:]
    with pytest.raises(ProgramError, match="still holding"):
        dataclasses.replace(program, steps=extra).verify()
    twice = steps[:1] + [Save(name="s", level=0, register=0)] * 2 + steps[1:]
    with pytest.raises(ProgramError, match="which holds a value"):
        dataclasses.replace(program, steps=twice).verify()


def test_batch_mode_refuses_graphs():
    with pytest.raises(UnsupportedOperation, match="mode='single'"):
        run_pipeline(random_resnet(), CompileOptions(mode="batch"))


def _joins(g: Graph) -> set[str]:
    """Values that are alone live after the node that makes them: where one bootstrap serves every branch."""
    return {n.output for n, live in zip(g.nodes, live_values(g)) if live == (n.output,)}


def test_bootstraps_go_where_the_branches_have_joined_when_a_block_fits(images):
    g = random_resnet()
    joins = _joins(g)
    inside = {n.output for n in g.nodes if n.op == "conv2d"}
    assert len(inside - joins) >= 4  # the convolutions inside the blocks are not joins
    cm = _compiled("plain", BOOT, calibration=images, bootstrap=True)
    boots = [n for n in cm.compiled.final.nodes if n.op == "bootstrap"]
    assert len(boots) >= 1 and all(b.inputs[0] in joins for b in boots)
    x = images[:2]
    np.testing.assert_allclose(cm.run(x, encrypted=False), cm.reference(x), rtol=1e-9, atol=1e-9)


def test_a_block_deeper_than_the_levels_is_bootstrapped_inside_on_both_branches(images):
    """4 levels between bootstraps, a block takes more: a bootstrap inside the block refreshes the main
    branch and the shortcut together, so each addition joins values of one run of levels."""
    options = CompileOptions(mode="single", params=insecure(TIGHT, 4, boot=True), bootstrap=True, calibration=images)
    joins = _joins(run_pipeline(random_resnet(), options, until="plan_levels"))
    cm = _compiled("plain", TIGHT, calibration=images, bootstrap=True)
    final = cm.compiled.final
    inside = [i for i, n in enumerate(final.nodes) if n.op == "bootstrap" and n.inputs[0].split(".")[0] not in joins]
    assert inside, "some bootstrap sits inside a block"
    for i in inside:  # next to the bootstrap of the other branch
        assert "bootstrap" in (final.nodes[i - 1].op, final.nodes[i + 1].op)
    assert all(v.level >= 0 for v in final.values.values())
    x = images[:2]
    np.testing.assert_allclose(cm.run(x, encrypted=False), cm.reference(x), rtol=1e-9, atol=1e-9)
    assert np.abs(cm.run(x) - cm.reference(x)).max() < 5e-3  # the plain backend's noise model


def test_random_resnet_bootstrapped_inside_its_blocks_on_lattigo(images):
    x = images[:2]
    with _compiled("lattigo", TIGHT, calibration=images, bootstrap=True) as cm:
        assert cm.program.bootstraps == 7  # 3 joins, 2 inside blocks on both branches
        out, ref = cm.run(x), cm.reference(x)
    precision_table.within("lattigo-e2e", "random_resnet_bootstrapped_inside", ref, out, 5e-3)
    assert (out.argmax(1) == ref.argmax(1)).all()


def test_random_resnet_encrypted_on_lattigo_matches_plaintext(images):
    x = images[:2]
    with _compiled("lattigo", DEEP) as cm:
        out, ref = cm.run(x), cm.reference(x)
    precision_table.within("lattigo-e2e", "random_resnet", ref, out, 1e-5)
    assert (out.argmax(1) == ref.argmax(1)).all()


def test_random_resnet_with_bootstraps_on_lattigo(images):
    x = images[:2]
    with _compiled("lattigo", BOOT, calibration=images, bootstrap=True) as cm:
        assert cm.program.bootstraps >= 1
        out, ref = cm.run(x), cm.reference(x)
    precision_table.within("lattigo-e2e", "random_resnet_bootstrapped", ref, out, 5e-3)
    assert (out.argmax(1) == ref.argmax(1)).all()


def test_resnet20_sized_program_is_exact_with_bootstraps_on_the_plain_backend(monkeypatch):
    """ResNet-20's shape (16/32/64 channels, 32x32, 9 blocks, strided projections) at boot-n16: the
    whole compiled program, with its bootstraps, on the plain backend against the plaintext graph."""
    monkeypatch.setenv("HENN_PLAINTEXT_CACHE", "0")  # the cache would take 60% of free memory (16 GB peak)
    g = random_resnet(channels=(16, 32, 64), hw=32, blocks=3)
    rng = np.random.default_rng(5)
    cal, x = rng.uniform(0, 1, (32, 3, 32, 32)), rng.uniform(0, 1, (1, 3, 32, 32))
    options = CompileOptions(mode="single", backend="plain", bootstrap=True, calibration=cal)
    with CompiledModel(compile_graph(g, options), "plain", activation_check=False) as cm:
        assert cm.params.name == "boot-n16" and cm.program.bootstraps == 4
        assert sum(s.kind == StepKind.BSGS for s in cm.program.steps) == 22  # 19 convs, 2 projections, the Gemm
        ref = cm.reference(x)
        np.testing.assert_allclose(cm.run(x, encrypted=False), ref, rtol=0, atol=1e-12)
        assert np.abs(cm.run(x) - ref).max() < 1e-3  # the plain backend's noise model, bootstraps included


def test_a_chain_with_per_channel_polynomials_runs_multiplexed_and_batch_refuses_it():
    rng = np.random.default_rng(3)
    values = {
        "x": Value("x", (2, 6, 6)),
        "c": Value("c", (3, 6, 6)),
        "q": Value("q", (3, 6, 6)),
        "f": Value("f", (108,)),
        "y": Value("y", (4,)),
    }
    nodes = [
        Node(
            Op.CONV2D,
            "c",
            ["x"],
            "c",
            {"stride": (1, 1), "pads": (1, 1, 1, 1)},
            {"weight": rng.normal(size=(3, 2, 3, 3)), "bias": rng.normal(size=3)},
        ),
        Node(Op.CHANNEL_POLY, "q", ["c"], "q", {}, {"coefficients": rng.normal(size=(3, 3))}),
        Node(Op.FLATTEN, "f", ["q"], "f"),
        Node(Op.LINEAR, "y", ["f"], "y", {}, {"weight": rng.normal(size=(4, 108)), "bias": np.zeros(4)}),
    ]
    g = Graph("x", "y", nodes, values).verify()
    with pytest.raises(UnsupportedOperation, match="per-channel polynomials"):
        run_pipeline(g, CompileOptions(mode="batch"))
    program = lower(run_pipeline(g, CompileOptions(mode="single", params=insecure(DEEP, 17))))
    assert program.packing.kind == "multi" and any(s.kind == StepKind.CHANNEL_POLY for s in program.steps)
    x = rng.uniform(0, 1, (1, 2, 6, 6))
    np.testing.assert_allclose(simulate(program, x), interpret.run(g, x), rtol=1e-9, atol=1e-9)


def test_quadratics_after_a_wide_bootstrap_keep_their_scale(images):
    """Inputs 32x larger: a bootstrap bound of ~2600 leaves the value at scale Delta / 2^12; each quadratic
    must bring its output back to Delta (a square of that deficit would end in a failed rescale)."""
    cm = _compiled("plain", BOOT, calibration=images * 32, bootstrap=True)
    assert max(n.attrs["bound"] for n in cm.compiled.final.nodes if n.op == "bootstrap") > 1000
    x = images[:2] * 32
    ref = cm.reference(x)
    assert np.abs(cm.run(x) - ref).max() < 1e-3 * np.abs(ref).max()
