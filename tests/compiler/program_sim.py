"""Run a Program's steps in NumPy on slot vectors (rotations = np.roll, no CKKS): checks the lowering
alone, for every step kind."""

from types import SimpleNamespace

import numpy as np

from henn.ir.interpret import core
from henn.program import Act, Add, Bootstrap, Bsgs, ChannelPoly, Load, Program, RotationPool, Save, SumBatch, Taps
from henn.program import weight_vector
from henn.runtime.client import Client


def _expand(vec, stride, slots):
    vec = np.repeat(vec, stride)
    return np.tile(vec, slots // len(vec))


def _bsgs(step: Bsgs, vecs, slots):
    stride = step.stride
    out = []
    for ko in range(step.cts_out):
        y = np.zeros(slots)
        for k, _, g, b, v in step.entries[step.entries[:, 1] == ko]:
            d = _expand(weight_vector(step, v), stride, slots)
            y = y + np.roll(d * np.roll(vecs[k], -b * stride), -g * stride)
        for i in range(step.fold):
            y = y + np.roll(y, -(step.fold_stride << i))
        out.append(y + _expand(step.biases[step.bias_index[ko]], stride, slots))
    return out


def simulate(program: Program, x: np.ndarray) -> np.ndarray:
    """Outputs (images, n_outputs) of the program on images x, the client's gain and offset applied."""
    slots = program.params.slots

    backend = SimpleNamespace(slots=slots, releases_gil=True)  # what Client.pack needs from a backend
    client = Client(program, backend)
    vecs = client.pack(x)
    registers = {}
    for step in program.steps:
        if isinstance(step, Save):
            registers[step.register] = list(vecs)
        elif isinstance(step, Load):
            vecs = registers.pop(step.register)
        elif isinstance(step, Add):
            vecs = [u + v for u, v in zip(vecs, registers.pop(step.register))]
        elif isinstance(step, ChannelPoly):
            coef = step.coefficients  # (degree + 1, ciphertexts, width)
            vecs = [
                sum(np.tile(coef[d][k], slots // coef.shape[2]) * v**d for d in range(len(coef)))
                for k, v in enumerate(vecs)
            ]
        elif isinstance(step, Bootstrap):
            pass
        elif isinstance(step, Taps):
            y = (np.array(vecs) * np.tile(step.weight, (1, slots // step.weight.shape[1]))).sum(0)
            for k in range(int(step.blocks).bit_length() - 1):
                y = y + np.roll(y, -(step.period << k))
            vecs = [y + _expand(step.bias, 1, slots)]
        elif isinstance(step, Bsgs):
            vecs = _bsgs(step, vecs, slots)
        elif isinstance(step, SumBatch):
            ip, idx = step.indptr, step.indices
            vecs = [sum(vecs[k] for k in idx[ip[r] : ip[r + 1]]) for r in range(len(ip) - 1)]
        elif isinstance(step, RotationPool):
            for s in step.steps:
                vecs = [v + np.roll(v, -s) for v in vecs]
        else:
            assert isinstance(step, Act), step.kind
            vecs = [core(step.form, step.core, v) for v in vecs]
    out = program.packing.unpack(vecs, program.output, slots, len(x))
    return program.output.finish(out).reshape(len(x), -1)
