"""End to end on the plain backend with its CKKS noise model: both packings, client/server split."""

from typing import Any, cast

import numpy as np
import pytest

from henn.ckks import ParametersLiteral, open_backend, presets
from henn.compiler.driver import compile_model
from henn.program import Act, Bsgs, Program, StepKind, weight_count
from henn.errors import InputError
from henn.frontend.onnx_build import build_cnn, cifar_layers, mnist_layers
from henn.ir import interpret
from henn.passes import CompileOptions
from henn.runtime import Client, Server
from henn.runtime.memory import plaintext_budget, plaintext_bytes


def short_params(depth: int, log_n: int = 11):
    name = f"insecure_rt_n{log_n}_d{depth}"
    if name not in presets.names():
        presets.register(name, ParametersLiteral(log_n, (50,) + (36,) * depth, (50,), 36))
    return presets.get(name)


def run_encrypted(program, x, noise=True, threads=2):
    be = open_backend("plain", program.params, noise=noise, seed=1)
    client = Client(program, be)
    server = Server(program, be, client.generate_keys(), threads=threads)
    outs = []
    for r in client.batches(len(x)):
        outs.append(client.decrypt(server.evaluate(client.encrypt(x[r.start : r.stop])), len(r)))
    server.close()
    return np.concatenate(outs).reshape(len(x), -1)


@pytest.mark.parametrize("mode", ["batch", "single"])
@pytest.mark.parametrize("act", ["square", "swish-rg5-deg2", "swish-rg7-deg4"])
def test_mnist_shaped_three_way(mode, act, rng):
    layers = mnist_layers(act)
    layers[0], layers[3] = ("conv", 2, 5, 2, 0), ("conv", 4, 5, 2, 0)  # small channels, MNIST shapes
    c = compile_model(build_cnn(layers, seed=11), None, CompileOptions(mode=mode, params=short_params(7, 12)))
    check_three_way(c, rng.uniform(0, 1, (3, 1, 28, 28)))


def check_three_way(compiled, x):
    """Cleartext program == model (exactly), noisy encrypted program == model (within CKKS noise)."""
    ref = interpret.run(compiled.reference, x)
    clear = run_encrypted(compiled.program, x, noise=False)
    np.testing.assert_allclose(clear, ref, atol=1e-8)
    enc = run_encrypted(compiled.program, x)
    assert np.max(np.abs(enc - ref)) < 1e-3 * max(1.0, np.abs(ref).max())
    assert (enc.argmax(1) == ref.argmax(1)).all()


def test_cifar_shaped_batch(rng):
    model = build_cnn(cifar_layers("swish-rg5-deg2", (2, 3, 2), 8), (3, 32, 32), seed=5)
    c = compile_model(model, None, CompileOptions(mode="batch", params=short_params(7)))
    assert c.program.depth == 7
    x = rng.uniform(0, 1, (5, 3, 32, 32))
    ref = interpret.run(c.reference, x)
    enc = run_encrypted(c.program, x)
    assert np.max(np.abs(enc - ref)) < 1e-3 * max(1.0, np.abs(ref).max())


@pytest.mark.parametrize("act", ["square", "swish-rg5-deg2", "swish-rg7-deg4"])
def test_cifar_shaped_single_over_several_ciphertexts(act, rng):
    """16 x 32 x 32 maps exceed one ciphertext: multiplexed layouts over 2048-slot ciphertexts."""
    model = build_cnn(cifar_layers(act, (16, 4, 4), 8), (3, 32, 32), seed=6)
    depth = 10 if act == "swish-rg7-deg4" else 7
    c = compile_model(model, None, CompileOptions(mode="single", params=short_params(depth, 12)))
    steps = [s for s in c.program.steps if isinstance(s, Bsgs)]
    assert [(s.cts_in, s.cts_out) for s in steps] == [(2, 8), (8, 1), (1, 1), (1, 1)]
    assert c.program.packing.kind == "multi"
    check_three_way(c, rng.uniform(0, 1, (2, 3, 32, 32)))


@pytest.mark.parametrize("act", ["square", "swish-rg7-deg4"])
def test_cifar_shaped_grouped_batch_three_way(act, rng):
    """8 channels of one position per ciphertext, 128 images per set of 1024 slots; two sets."""
    model = build_cnn(cifar_layers(act, (8, 16, 8), 8), (3, 32, 32), seed=6)
    depth = 10 if act == "swish-rg7-deg4" else 7
    c = compile_model(model, None, CompileOptions(mode="batch", params=short_params(depth), batch_group=8))
    p = c.program
    assert p.packing.kind == "grouped" and p.images_per_set == 128 and p.input_cts == 32 * 32
    assert [s.kind for s in p.steps].count(StepKind.BSGS) == 4
    check_three_way(c, rng.uniform(0, 1, (p.images_per_set + 2, 3, 32, 32)))


def test_mnist_shaped_grouped_batch_three_way(rng):
    layers = mnist_layers("swish-rg5-deg2")
    layers[0], layers[3] = ("conv", 3, 5, 2, 0), ("conv", 6, 5, 2, 0)
    c = compile_model(
        build_cnn(layers, seed=8), None, CompileOptions(mode="batch", params=short_params(5), batch_group=4)
    )
    assert c.program.group == 4
    check_three_way(c, rng.uniform(0, 1, (5, 1, 28, 28)))


def test_consumed_input_is_released_as_the_program_runs(rng):
    model = build_cnn(cifar_layers("square", (4, 4, 4), 4), (3, 8, 8), seed=2)
    c = compile_model(model, None, CompileOptions(mode="batch", params=short_params(7), batch_group=4))
    be = open_backend("plain", c.program.params)
    client = Client(c.program, be)
    server = Server(c.program, be, client.generate_keys())
    x = rng.uniform(0, 1, (3, 3, 8, 8))
    kept = client.encrypt(x)
    out = client.decrypt(server.evaluate(kept), 3)
    assert all(ct is not None for ct in kept)  # not handed over: the caller's list stays whole
    given = client.encrypt(x)
    np.testing.assert_allclose(client.decrypt(server.evaluate(given, consume=True), 3), out, atol=1e-9)
    assert all(ct is None for ct in given)
    with pytest.raises(InputError, match="1 to 256 images"):
        client.encrypt(np.zeros((257, 3, 8, 8)))
    server.close()


def test_weights_beyond_the_cache_budget_are_encoded_on_the_fly(rng):
    model = build_cnn(cifar_layers("square", (16, 4, 4), 8), (3, 32, 32), seed=6)
    c = compile_model(model, None, CompileOptions(mode="single", params=short_params(7, 12)))
    program = Program.from_bytes(c.program.to_bytes())  # and the multi-ciphertext steps serialize
    be = open_backend("plain", program.params)
    client = Client(program, be)
    server = Server(program, be, client.generate_keys())
    server.executor.prepare(budget=0)
    assert server.executor.weights.streamed == {i for i, s in enumerate(program.steps) if s.kind == "bsgs"}
    x = rng.uniform(0, 1, (1, 3, 32, 32))
    out = client.decrypt(server.evaluate(client.encrypt(x)), 1).reshape(1, -1)
    np.testing.assert_allclose(out, interpret.run(c.reference, x), atol=1e-8)
    assert not server.executor._step_plain  # each plaintext dropped after its last read
    server.close()


def test_the_default_cache_is_all_or_nothing(monkeypatch):
    """A cache pays only across evaluations (a streamed layer encodes each vector once per evaluation), and a
    partial one takes the heap headroom Go's collector needs: by default a program whose plaintexts do not fit
    whole caches none; a budget the caller or $HENN_PLAINTEXT_CACHE sets is filled as far as it goes."""
    from henn.runtime import encoded

    model = build_cnn(cifar_layers("square", (16, 4, 4), 8), (3, 32, 32), seed=6)
    program = compile_model(model, None, CompileOptions(mode="single", params=short_params(7, 12))).program
    be = open_backend("plain", program.params)
    keys = Client(program, be).generate_keys()
    weights = [i for i, s in enumerate(program.steps) if s.kind == "bsgs"]
    sizes = {i: weight_count(program.steps[i]) * plaintext_bytes(be, program.steps[i].level) for i in weights}
    whole, most = sum(sizes.values()), sum(sizes.values()) - min(sizes.values())

    def streamed(budget=None, default_budget=None):
        monkeypatch.setattr(encoded, "plaintext_budget", lambda p, b, reserved=0: default_budget)
        server = Server(program, be, keys)
        server.executor.prepare(budget)
        out = set(server.executor.weights.streamed)
        server.close()
        return out

    monkeypatch.delenv("HENN_PLAINTEXT_CACHE", raising=False)
    assert streamed(default_budget=whole) == set()
    assert streamed(default_budget=most) == set(weights)  # all or nothing
    assert streamed(budget=most) != set(weights) and streamed(budget=most)  # the caller's budget: as far as it goes
    monkeypatch.setenv("HENN_PLAINTEXT_CACHE", "1")
    partial = streamed(default_budget=most)
    assert partial and partial != set(weights)


def test_the_cache_budget_counts_freed_heap_as_available(monkeypatch):
    """The compiler's noise simulation frees gigabytes that glibc keeps until trimmed: the budget trims first
    (CIFAR-10 at N = 2^15 streamed its last convolution's 3,887 plaintexts without it: 10.3 s per image)."""
    from henn.runtime import memory

    model = build_cnn(cifar_layers("square", (16, 4, 4), 8), (3, 32, 32), seed=6)
    program = compile_model(model, None, CompileOptions(mode="single", params=short_params(7, 12))).program
    be = open_backend("plain", program.params)
    events = []
    monkeypatch.setattr(memory, "return_freed_memory", lambda: events.append("trim"))
    real = memory.psutil.virtual_memory

    def measured():
        events.append("measure")
        return real()

    monkeypatch.setattr(memory.psutil, "virtual_memory", measured)
    memory.plaintext_budget(program, be)
    assert events[:2] == ["trim", "measure"]


def test_the_plaintext_cache_can_be_capped(monkeypatch):
    model = build_cnn(cifar_layers("square", (16, 4, 4), 8), (3, 32, 32), seed=6)
    program = compile_model(model, None, CompileOptions(mode="single", params=short_params(7, 12))).program
    be = open_backend("plain", program.params)
    uncapped = plaintext_budget(program, be)
    assert uncapped > 1 << 20
    monkeypatch.setenv("HENN_PLAINTEXT_CACHE", "0.0005")
    assert plaintext_budget(program, be) == int(0.0005 * 2**30)
    monkeypatch.setenv("HENN_PLAINTEXT_CACHE", "0")
    server = Server(program, be, Client(program, be).generate_keys())
    server.executor.prepare()
    assert server.executor.weights.streamed == {i for i, s in enumerate(program.steps) if s.kind == "bsgs"}
    server.close()
    for bad in ("-1", "lots", "nan"):
        monkeypatch.setenv("HENN_PLAINTEXT_CACHE", bad)
        with pytest.raises(InputError, match="HENN_PLAINTEXT_CACHE"):
            plaintext_budget(program, be)


def test_bootstrap_factors_are_kept_whole_or_not_at_all(monkeypatch):
    """The bootstraps keep their DFT factors where the memory share holds all of them, and the weight
    plaintexts' budget then leaves those bytes out; $HENN_PLAINTEXT_CACHE caps both together (a Ray worker
    sets it to what it declared)."""
    from types import SimpleNamespace

    from henn.runtime import memory

    gib = 2**30
    program = cast(Program, SimpleNamespace(bootstraps=4))  # only its bootstrap count is read here
    monkeypatch.setattr(memory, "_free_for_plaintexts", lambda p, b: 10 * gib)
    monkeypatch.delenv("HENN_PLAINTEXT_CACHE", raising=False)
    assert memory.bootstrap_factor_budget(program, None, 2 * gib) == 2 * gib
    assert memory.bootstrap_factor_budget(program, None, 7 * gib) == 0  # beyond 60% of 10 GiB: none
    assert memory.bootstrap_factor_budget(program, None, 0) == 0
    assert memory.bootstrap_factor_budget(cast(Program, SimpleNamespace(bootstraps=0)), None, gib) == 0
    assert memory.plaintext_budget(program, None, reserved=4 * gib) == int(6 * gib * memory.MEMORY_SHARE)
    monkeypatch.setenv("HENN_PLAINTEXT_CACHE", "1")
    assert memory.bootstrap_factor_budget(program, None, 2 * gib) == 0
    assert memory.bootstrap_factor_budget(program, None, gib // 2) == gib // 2
    assert memory.plaintext_budget(program, None, reserved=gib // 2) == gib // 2  # the cap holds both together
    monkeypatch.setenv("HENN_PLAINTEXT_CACHE", "0")
    assert memory.bootstrap_factor_budget(program, None, 1) == 0


def test_sessions_do_not_promise_the_same_memory_for_bootstrap_factors(monkeypatch):
    """Kept factors fill as bootstraps run, after the memory check: a second session deciding meanwhile
    counts what the first may still fill, and the first's filled bytes no longer count twice."""
    from henn.ckks.evaluator import Evaluator
    from henn.runtime import executor as executor_module

    gib = 2**30
    held: dict[int, int] = {}  # id(evaluator) -> bytes its keys hold

    def keep(ev, budget=None):
        assert budget != 0, "a session must not drop the factors of keys it may share"
        return 2 * gib, held.get(id(ev), 0)

    def budget(program, backend, need, promised=0):
        return need if need + promised <= 3 * gib else 0  # room for one session's factors

    monkeypatch.setattr(Evaluator, "keep_bootstrap_factors", keep)
    monkeypatch.setattr(executor_module, "bootstrap_factor_budget", budget)
    model = build_cnn([("conv", 2, 3, 2, 0), ("poly", "square"), ("flatten",), ("gemm", 3)], (1, 7, 7), seed=2)
    program = compile_model(model, None, CompileOptions(mode="batch", params=short_params(3, 10))).program
    be = open_backend("plain", program.params)
    keys = Client(program, be).generate_keys()
    first, second, third = (Server(program, be, keys) for _ in range(3))
    first.prepare()
    assert first.executor.bootstrap_factor_budget == 2 * gib
    second.prepare()  # the first's 2 GiB are promised, not yet filled
    assert second.executor.bootstrap_factor_budget == 0
    held[id(first.executor.ev)] = 2 * gib  # its bootstraps filled them: now out of what is available
    third.prepare()
    assert third.executor.bootstrap_factor_budget == 2 * gib
    for server in (first, second, third):
        server.close()


def test_batch_mode_splits_into_sets_of_slots(rng):
    model = build_cnn([("conv", 2, 3, 2, 0), ("poly", "square"), ("flatten",), ("gemm", 3)], (1, 7, 7), seed=2)
    c = compile_model(model, None, CompileOptions(mode="batch", params=short_params(3, 10)))
    x = rng.uniform(0, 1, (c.program.params.slots + 3, 1, 7, 7))
    be = open_backend("plain", c.program.params)
    assert [len(r) for r in Client(c.program, be).batches(len(x))] == [c.program.params.slots, 3]
    np.testing.assert_allclose(run_encrypted(c.program, x, noise=False), interpret.run(c.reference, x), atol=1e-9)


def test_server_takes_public_keys_only():
    c = compile_model(build_cnn(mnist_layers("square"), seed=1), None, CompileOptions(mode="single"))
    be = open_backend("plain", c.program.params)
    client = Client(c.program, be)
    keys = client.generate_keys()
    with pytest.raises(InputError, match="never a secret key"):
        Server(c.program, be, cast(Any, client._sk))
    partial = be.generate_keys(rotations=c.program.rotation_steps[:3])[1]
    with pytest.raises(InputError, match="lack rotation steps"):
        Server(c.program, be, partial)
    assert keys.steps == frozenset(c.program.rotation_steps)  # exactly the steps the program needs


def test_client_refuses_work_without_keys():
    c = compile_model(build_cnn(mnist_layers("square"), seed=1), None, CompileOptions(mode="single"))
    with pytest.raises(InputError, match="generate_keys"):
        Client(c.program, open_backend("plain", c.program.params)).encrypt(np.zeros((1, 1, 28, 28)))


def test_memory_guard_refuses_oversized_batches():
    from henn.errors import UnsupportedOperation
    from henn.runtime.memory import check_memory, ciphertext_bytes

    c = compile_model(build_cnn(mnist_layers("square"), seed=1), None, CompileOptions(mode="batch"))
    be = open_backend("plain", c.program.params)
    need = ciphertext_bytes(c.program, be)
    # the second conv: 720 in, 800 out (complex slots); activations free as they go
    assert need == (720 + 800) * 16 * 8192
    check_memory(c.program, be, need)
    with pytest.raises(UnsupportedOperation, match="GiB of ciphertexts"):
        check_memory(c.program, be, need - 1)


def test_memory_counts_unrelinearized_products_as_one_and_a_half():
    """Batch MNIST CNN: the 800 squares left of degree 2 (three polynomials) for the last layer."""
    from henn.runtime.memory import program_stages

    program = compile_model(build_cnn(mnist_layers("square"), seed=1), None, CompileOptions(mode="batch")).program
    stages = program_stages(program)
    acts = [(st, s) for st, s in zip(stages, program.steps) if isinstance(s, Act)]
    assert [(st.cts_in, st.cts_out, s.relin) for st, s in acts] == [(720, 720, True), (800, 1200, False)]
    assert (stages[-1].cts_in, stages[-1].cts_out) == (1200, 10)
