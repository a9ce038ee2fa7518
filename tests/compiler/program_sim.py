"""Run a Program's steps in NumPy on slot vectors (rotations = np.roll, no CKKS): checks the lowering
alone, for every step kind."""

import numpy as np

from henn.ir.interpret import core
from henn.program import Program, StepKind, weight_vector
from henn.runtime.client import Client


def _expand(vec, stride, slots):
    vec = np.repeat(vec, stride)
    return np.tile(vec, slots // len(vec))


def _bsgs(step, vecs, slots):
    a, stride = step.attrs, step.attrs["stride"]
    out = []
    for ko in range(a["cts_out"]):
        y = np.zeros(slots)
        for k, _, g, b, v in step.arrays["entries"][step.arrays["entries"][:, 1] == ko]:
            d = _expand(weight_vector(step, v), stride, slots)
            y = y + np.roll(d * np.roll(vecs[k], -b * stride), -g * stride)
        for i in range(a["fold"]):
            y = y + np.roll(y, -(a["fold_stride"] << i))
        out.append(y + _expand(step.arrays["biases"][step.arrays["bias_index"][ko]], stride, slots))
    return out


def simulate(program: Program, x: np.ndarray) -> np.ndarray:
    """Outputs (images, n_outputs) of the program on images x, before the client's gain and offset."""
    slots = program.params.slots

    class _Slots:  # what Client.pack needs from a backend
        releases_gil = True

    _Slots.slots = slots
    client = Client(program, _Slots())
    vecs = client.pack(x)
    registers = {}
    for step in program.steps:
        a = step.arrays
        if step.kind == StepKind.SAVE:
            registers[step.attrs["register"]] = list(vecs)
        elif step.kind == StepKind.LOAD:
            vecs = registers.pop(step.attrs["register"])
        elif step.kind == StepKind.ADD:
            vecs = [u + v for u, v in zip(vecs, registers.pop(step.attrs["register"]))]
        elif step.kind == StepKind.CHANNEL_POLY:
            coef = a["coefficients"]  # (degree + 1, ciphertexts, width)
            vecs = [
                sum(np.tile(coef[d][k], slots // coef.shape[2]) * v**d for d in range(len(coef)))
                for k, v in enumerate(vecs)
            ]
        elif step.kind == StepKind.BOOTSTRAP:
            pass
        elif step.kind == StepKind.TAPS:
            y = (np.array(vecs) * np.tile(a["weight"], (1, slots // a["weight"].shape[1]))).sum(0)
            for k in range(int(step.attrs["blocks"]).bit_length() - 1):
                y = y + np.roll(y, -(step.attrs["period"] << k))
            vecs = [y + _expand(a["bias"], 1, slots)]
        elif step.kind == StepKind.BSGS:
            vecs = _bsgs(step, vecs, slots)
        elif step.kind == StepKind.SUM_BATCH:
            ip, idx = a["indptr"], a["indices"]
            vecs = [sum(vecs[k] for k in idx[ip[r] : ip[r + 1]]) for r in range(len(ip) - 1)]
        elif step.kind == StepKind.ROTATION_POOL:
            for s in step.attrs["steps"]:
                vecs = [v + np.roll(v, -s) for v in vecs]
        else:
            vecs = [core(step.attrs["form"], step.attrs, v) for v in vecs]
    return _unpack(program, vecs, len(x))


def _unpack(program, vecs, n):
    elem = program.output_elem
    used = np.nonzero(elem >= 0)[0]
    if program.input_pack["kind"] == "grouped":
        virt = np.stack(vecs).reshape(-1, program.images_per_set)[:, :n]
        out = np.zeros((n, program.n_outputs))
        out[:, elem[used]] = virt[used].T
    else:  # element b * n + o: output o of image b
        flat = np.concatenate(vecs)
        out = np.zeros(program.images_per_set * program.n_outputs)
        out[elem[used[::-1]]] = flat[used[::-1]]
        out = out.reshape(program.images_per_set, program.n_outputs)[:n]
    offset = 0 if program.output_offset is None else program.output_offset.reshape(1, -1)
    return out * program.output_gain + offset
