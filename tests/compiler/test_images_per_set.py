"""Several images side by side in single mode's multiplexed ciphertexts (images_per_set): the
bit-reversed placement, the diagonals it saves, and the packed program against the plaintext graph,
image by image, on the program simulator, the plain backend and Lattigo (small insecure rings)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from program_sim import simulate
from residual_params import insecure

import precision_table
from henn.api import CompiledModel
from henn.compiler.driver import compile_graph
from henn.compiler.lower import lower
from henn.errors import InputError, SerializationError
from henn.ir import interpret
from henn.ir.synthetic import random_resnet
from henn.packing.layout import bit_reverse, image_starts
from henn.packing.multi import feature_layout
from henn.passes import CompileOptions, run_pipeline
from henn.program import Bsgs, MultiPacking, Program, ProgramError

DEEP = "insecure_test_images_l17"
BOOT = "insecure_test_images_boot_l9"


@pytest.fixture(scope="module")
def images():
    return np.random.default_rng(11).uniform(0, 1, (24, 3, 8, 8))


def _program(images_per_set: int) -> Program:
    options = CompileOptions(mode="single", params=insecure(DEEP, 17), images_per_set=images_per_set)
    return lower(run_pipeline(random_resnet(), options))


def _entries(program: Program) -> int:
    return sum(len(s.entries) for s in program.steps if isinstance(s, Bsgs))


def test_bit_reverse_and_image_starts():
    assert bit_reverse(np.arange(8), 8).tolist() == [0, 4, 2, 6, 1, 5, 3, 7]
    starts, cts = image_starts(4096, 32768, 8)  # ResNet-20's input: 8 images in one ciphertext
    assert cts == 1 and sorted(starts.tolist()) == list(range(0, 32768, 4096))
    starts, cts = image_starts(3072, 32768, 3)  # spans round up to a power of two
    assert cts == 1 and starts.tolist() == [0, 16384, 8192]
    starts, cts = image_starts(40000, 32768, 3)  # wider than a ciphertext: two of its own each
    assert cts == 6 and starts.tolist() == [0, 65536, 131072]
    # halving the span: each image's offset changes by an amount its ciphertexts alone decide
    for wide, narrow in ((16384, 8192), (8192, 4096), (4096, 2048)):
        a, _ = image_starts(wide, 32768, 16)
        b, _ = image_starts(narrow, 32768, 16)
        shift: dict[tuple[int, int], int] = {}
        for i in range(16):
            key = (a[i] // 32768, b[i] // 32768)
            assert shift.setdefault(key, a[i] % 32768 - b[i] % 32768) == a[i] % 32768 - b[i] % 32768


def test_layouts_hold_every_image_once():
    lay = feature_layout((16, 8, 8), (32, 32), 32768, images=8)  # a ResNet-20 stage-3-like map, gap 4
    assert lay.cts == 1 and lay.images == 8
    pos = lay.require(8 * 1024)
    assert len(np.unique(pos)) == 8 * 1024
    single = feature_layout((16, 8, 8), (32, 32), 32768).require(1024)
    for b in range(8):  # every image keeps one image's layout, moved by its start
        assert len(np.unique(pos[b * 1024 : (b + 1) * 1024] - single)) == 1


@pytest.mark.parametrize("per_set", [2, 4, 8])
def test_packed_programs_compute_every_image(images, per_set):
    program = _program(per_set)
    assert isinstance(program.packing, MultiPacking)
    assert program.images_per_set == per_set and program.packing.images_per_set == per_set
    g = random_resnet()
    x = images[:8]
    out = np.concatenate([simulate(program, x[i : i + per_set]) for i in range(0, len(x), per_set)])
    np.testing.assert_allclose(out, interpret.run(g, x), rtol=1e-9, atol=1e-9)
    again = Program.from_bytes(program.to_bytes())
    np.testing.assert_array_equal(simulate(again, x[:per_set]), simulate(program, x[:per_set]))


def test_packing_images_shares_the_diagonals():
    # one image alone repeats over the slots the other seven would take, which already halves its diagonals
    one, eight = _entries(_program(1)), _entries(_program(8))
    assert eight < 3 * one, f"8 images take {eight} diagonal products, one image {one}"


def test_a_partial_set_repeats_its_images(images):
    program = _program(4)
    x = images[:3]
    np.testing.assert_allclose(simulate(program, x), interpret.run(random_resnet(), x), rtol=1e-9, atol=1e-9)
    # the missing fourth image is the first again, not zeros: a zero image can leave a bootstrap's calibrated
    # range (trained ResNet-20: 10.3 against 9.19) and wrap the whole set around
    from henn.runtime.client import Client

    class _Slots:  # what Client.pack needs from a backend
        slots, releases_gil = program.params.slots, True

    client = Client(program, _Slots())
    padded = np.concatenate(client.pack(x))
    np.testing.assert_array_equal(padded, np.concatenate(client.pack(np.concatenate([x, x[:1]]))))


def test_packed_images_encrypted_on_lattigo_match_plaintext(images):
    options = CompileOptions(mode="single", backend="lattigo", params=insecure(DEEP, 17), images_per_set=4)
    with CompiledModel(compile_graph(random_resnet(), options), "lattigo", activation_check=False) as cm:
        x = images[:5]  # two sets, the second with one image
        out, ref = cm.run(x), cm.reference(x)
    assert out.shape == (5, 10)
    precision_table.within("lattigo-e2e", "packed_images", ref, out, 1e-5)
    assert (out.argmax(1) == ref.argmax(1)).all()


def test_packed_images_with_bootstraps(images):
    params = insecure(BOOT, 9, boot=True)
    for backend in ("plain", "lattigo"):
        options = CompileOptions(
            mode="single", backend=backend, params=params, bootstrap=True, calibration=images, images_per_set=4
        )
        with CompiledModel(compile_graph(random_resnet(), options), backend, activation_check=False) as cm:
            assert cm.program.bootstraps >= 1
            x = images[:4]
            ref = cm.reference(x)
            if backend == "plain":
                np.testing.assert_allclose(cm.run(x, encrypted=False), ref, rtol=1e-9, atol=1e-9)
            out = cm.run(x)
        precision_table.within(f"{backend}-e2e", "packed_images_bootstrapped", ref, out, 5e-3)
        assert (out.argmax(1) == ref.argmax(1)).all()


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, 1000])
def test_images_per_set_is_checked(bad):
    with pytest.raises(InputError, match="images_per_set"):
        CompileOptions(mode="single", images_per_set=bad)


def test_batch_mode_refuses_images_per_set():
    with pytest.raises(InputError, match="batch mode"):
        CompileOptions(mode="batch", images_per_set=4)


def test_programs_refuse_malformed_image_counts():
    program = _program(4)
    packing = program.packing
    assert isinstance(packing, MultiPacking)
    bads: tuple[Any, ...] = (0, -2, True, "4", 1 << 20)
    for bad in bads:
        broken = dataclasses.replace(program, packing=dataclasses.replace(packing, images_per_set=bad))
        with pytest.raises(ProgramError, match="images"):
            broken.verify()
        with pytest.raises(SerializationError, match="images"):
            Program.from_bytes(broken.to_bytes())
    fewer = dataclasses.replace(program, packing=dataclasses.replace(packing, images_per_set=2))
    with pytest.raises(ProgramError, match="does not fit"):  # its slots hold four images' pixels
        fewer.verify()
