"""The Program contract: verify() after lowering and after loading, and a loader that refuses
malformed, oversized or weakly parameterized files."""

import dataclasses
import io
import json

import numpy as np
import pytest

from henn import program as program_module
from henn.program import archive
from henn.ckks import ParametersLiteral, presets
from henn.compiler.driver import compile_model
from henn.errors import SecurityError, SerializationError
from henn.frontend.onnx_build import build_cnn, mnist_layers
from henn.packing import bsgs
from henn.passes import CompileOptions
from henn.program import Act, Bsgs, Program, ProgramError, Step, StepKind, kind_table, step_archive
from henn.runtime.executor import HANDLERS


@pytest.fixture(scope="module")
def single():
    name = "insecure_program_n12_d5"
    if name not in presets.names():
        presets.register(name, ParametersLiteral(12, (50,) + (36,) * 5, (50,), 36))
    return compile_model(
        build_cnn(mnist_layers("square"), seed=1), None, CompileOptions(mode="single", params=presets.get(name))
    ).program


def _with_step(p: Program, i: int, **changes) -> Program:
    steps = list(p.steps)
    steps[i] = dataclasses.replace(steps[i], **changes)
    return dataclasses.replace(p, steps=steps)


def _rewrite(data: bytes, edit) -> bytes:
    """The same file with its JSON header changed by edit(header)."""
    z = np.load(io.BytesIO(data), allow_pickle=False)
    arrays = {k: z[k] for k in z.files if k != "__header__"}
    header = json.loads(bytes(z["__header__"]).decode())
    edit(header)
    buf = io.BytesIO()
    np.savez_compressed(buf, __header__=np.frombuffer(json.dumps(header).encode(), np.uint8), **arrays)
    return buf.getvalue()


def test_lowered_programs_verify_and_round_trip(single):
    back = Program.from_bytes(single.to_bytes())
    assert [s.kind for s in back.steps] == [StepKind.TAPS, StepKind.ACT, StepKind.BSGS, StepKind.ACT, StepKind.BSGS]
    assert back.params == single.params and back.verify() is back


def test_verify_names_what_breaks_the_contract(single):
    bsgs = next(i for i, s in enumerate(single.steps) if s.kind == StepKind.BSGS)
    t = single.steps[bsgs]
    assert isinstance(t, Bsgs)
    cases = {
        "unknown step kind": dataclasses.replace(single, steps=[single.steps[0], Step(name="x", level=1)]),
        "runs at level": _with_step(single, bsgs, level=single.steps[bsgs - 1].level + 1),
        "without a key": dataclasses.replace(single, rotation_steps=single.rotation_steps[:-1]),
        "BSGS tables": _with_step(single, bsgs, cts_in=2),
        "finite": _with_step(single, 0, bias=np.full_like(single.steps[0].bias, np.nan)),
        "not a valid form": _with_step(single, 1, form="__class__"),
        "BSGS tables do": _with_step(single, bsgs, fold=10**9),
        "BSGS tables do not": _with_step(single, bsgs, palette=t.palette[:, :1]),  # a code past its palette
        "unsigned integer": _with_step(single, bsgs, codes=t.codes.astype(float)),
        "valid int": _with_step(single, bsgs, stride=True),
    }
    for message, broken in cases.items():
        with pytest.raises(ProgramError, match=message):
            broken.verify()


def test_diagonals_are_kept_as_lossless_palette_codes():
    rng = np.random.default_rng(0)
    conv_like = np.repeat(rng.normal(size=(5, 64)), 128, axis=1) * (rng.uniform(size=(5, 64 * 128)) < 0.9)
    dense = rng.normal(size=(3, 4096))  # every value distinct: 16-bit codes
    for rows, dtype in ((conv_like, np.uint8), (dense, np.uint16), (np.zeros((2, 8)), np.uint8)):
        codes, palette = bsgs.palette_rows(rows)
        assert codes.dtype == dtype and codes.shape == rows.shape and len(palette) == len(rows)
        step = Bsgs(
            name="t",
            level=0,
            cts_in=1,
            cts_out=1,
            stride=1,
            fold=1,
            fold_stride=1,
            entries=np.zeros((0, 5), np.int64),
            codes=codes,
            palette=palette,
            biases=palette,
            bias_index=np.zeros(1, int),
        )
        for r in range(len(rows)):
            np.testing.assert_array_equal(program_module.weight_vector(step, r), rows[r])  # bit for bit
    assert bsgs.palette_rows(conv_like)[0].nbytes * 8 == conv_like.nbytes


def test_insecure_parameters_come_only_from_an_existing_insecure_preset(single):
    """A file once built weak parameters from a header flag: now they pass the same 128-bit check as
    parameters built in code, unless named by an insecure_ preset that exists, with its exact literal."""
    data = single.to_bytes()

    def unnamed(h):
        h["params_name"], h["insecure"] = "", True

    with pytest.raises(SecurityError, match="128-bit"):
        Program.from_bytes(_rewrite(data, unnamed))
    with pytest.raises(SerializationError, match="not a known insecure_ preset"):
        Program.from_bytes(_rewrite(data, lambda h: h.update(params_name="insecure_made_up")))
    with pytest.raises(SerializationError, match="differ from the preset"):
        Program.from_bytes(_rewrite(data, lambda h: h.update(params_name="insecure_short_d4")))


def test_loader_refuses_malformed_files(single, monkeypatch):
    data = single.to_bytes()
    bad = {
        "kind": lambda h: h["steps"][0].update(kind="__init__"),
        "attrs": lambda h: h["steps"][1]["attrs"].pop("form"),
        "types": lambda h: h.update(depth="5"),
        "arrays": lambda h: h["steps"][0].update(arrays=["weight"]),
    }
    for what, edit in bad.items():
        with pytest.raises(SerializationError, match="malformed") as err:
            Program.from_bytes(_rewrite(data, edit))
        assert what != "attrs" or "has attributes ['inner', 'relin', 'shift', 'tcoef']" in str(err.value)
    for junk in (b"", b"PK\x03\x04junk", np.arange(3).tobytes()):
        with pytest.raises(SerializationError):
            Program.from_bytes(junk)
    monkeypatch.setattr(archive, "MAX_FILE_BYTES", 1000)
    with pytest.raises(SerializationError, match="decompressed"):
        Program.from_bytes(data)


def test_a_new_step_kind_is_a_spec_in_the_registry(single):
    assert set(program_module.STEPS) == set(StepKind) == set(program_module.STEP_CLASSES) == set(HANDLERS)
    with pytest.raises(ImportError, match=r"the executor has no entry for step kinds \['mmax'\]"):
        kind_table({k: h for k, h in HANDLERS.items() if k != StepKind.ROTATION_MAX}, "the executor")
    step = Act(name="extra", level=single.final_level, form="identity", shift=0.5, inner=0, tcoef=0, relin=True)
    dataclasses.replace(single, steps=[*single.steps, step]).verify()


@pytest.fixture(scope="module")
def lazy_batch():
    """Batch MNIST CNN: its second square stays of degree 2 for the last layer to relinearize."""
    return compile_model(build_cnn(mnist_layers("square"), seed=1), None, CompileOptions(mode="batch")).program


def test_lazy_relinearization_round_trips(lazy_batch):
    kinds = [(s.kind, s.relin) for s in lazy_batch.steps if hasattr(s, "relin")]
    assert kinds == [
        (StepKind.LINEAR_BATCH, False),
        (StepKind.ACT, True),
        (StepKind.LINEAR_BATCH, False),
        (StepKind.ACT, False),
        (StepKind.LINEAR_BATCH, True),
    ]
    back = Program.from_bytes(lazy_batch.to_bytes())
    assert [step_archive(s)[0] for s in back.steps] == [step_archive(s)[0] for s in lazy_batch.steps]


def test_products_of_degree_two_go_only_where_they_are_relinearized(lazy_batch):
    steps = lazy_batch.steps
    act = next(i for i, s in enumerate(steps) if isinstance(s, Act) and not s.relin)
    last = len(steps) - 1
    never = _with_step(lazy_batch, last, relin=False)
    with pytest.raises(ProgramError, match="ends on products that are not relinearized"):
        never.verify()
    twice = _with_step(lazy_batch, act - 1, relin=True)  # conv2 reads degree-1 values
    with pytest.raises(ProgramError, match="relinearizes outputs of degree 1"):
        twice.verify()
    early = _with_step(lazy_batch, act - 2, relin=False)
    with pytest.raises(ProgramError, match="reads products that are not relinearized"):
        early.verify()  # conv2 does not relinearize: the act after it would get degree 2
    quartic = _with_step(lazy_batch, act, form="quartic", tcoef=0.5)
    with pytest.raises(ProgramError, match="cannot skip its relinearization"):
        quartic.verify()
    with pytest.raises(ProgramError, match="not a valid bool"):
        _with_step(lazy_batch, act, relin=0).verify()
