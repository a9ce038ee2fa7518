"""Client-aided activations: a model as linear segments the server evaluates, with the activations between
them applied by the client, exactly, on decrypted values (nGraph-HE2's client-aided model, paper 003).

    segment 0 (server) -> stage 0 (client) -> segment 1 (server) -> ... -> segment K-1 (server) -> logits

Each segment is an ordinary Program (henn.program); they share the parameters, the rotation keys (the union
of what every segment uses) and the relinearization need, so one key set serves them all. Between segment k
and k + 1 the client decrypts segment k's outputs (its output packing), applies stage k (`ClientStage`:
activations and max pools, no weights), and encrypts the result in segment k + 1's input packing: a fresh
ciphertext at the top of the next segment's levels, so the program never bootstraps.

A stage is a list of IR ops (`activation` of a kind with a NumPy reference, `maxpool`) with their small
attributes, stored as JSON; henn.ir.interpret gives each its meaning (one implementation of every op).
The client learns every value a stage reads: all pre-activations of every client-aided layer."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from henn.activations import NONPOLYNOMIAL
from henn.errors import SerializationError
from henn.ir.ops import IRError, Node, Op

CLIENT_OPS = (Op.ACTIVATION, Op.MAXPOOL)  # what a stage applies: weightless, non-polynomial
MAX_SEGMENTS = 256
MAX_STAGE_OPS = 16
MAX_WINDOW = 64  # a max pool's kernel, stride and padding


@dataclass(frozen=True)
class ClientStage:
    """The activations and max pools the client applies between two segments, on (B, *input_shape)."""

    ops: tuple[Node, ...]
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]

    def apply(self, x: np.ndarray) -> np.ndarray:
        from henn.ir import interpret

        for node in self.ops:
            x = interpret.apply(node, x)
        if x.shape[1:] != self.output_shape:
            raise SerializationError(f"a client stage gives shape {x.shape[1:]}, its header says {self.output_shape}")
        return x

    def describe(self) -> str:
        return " -> ".join(
            n.attrs["kind"] if n.op == Op.ACTIVATION else f"maxpool {n.attrs['kernel'][0]}x{n.attrs['kernel'][1]}"
            for n in self.ops
        )

    def to_header(self) -> dict:
        return {
            "ops": [{"op": str(n.op), "name": n.name, "attrs": _jsonable(n.attrs)} for n in self.ops],
            "input_shape": list(self.input_shape),
            "output_shape": list(self.output_shape),
        }

    @classmethod
    def from_header(cls, h: dict) -> ClientStage:
        """A stage from a file's header, every field checked (SerializationError)."""
        try:
            ops = h["ops"]
            if not isinstance(ops, list) or not 1 <= len(ops) <= MAX_STAGE_OPS:
                raise ValueError(f"a stage holds 1 to {MAX_STAGE_OPS} ops")
            nodes = tuple(_node(i, o) for i, o in enumerate(ops))
            shapes = [tuple(_dims(h[k])) for k in ("input_shape", "output_shape")]
        except (KeyError, TypeError, ValueError) as exc:
            raise SerializationError(f"malformed client stage: {type(exc).__name__}: {exc}") from None
        stage = cls(nodes, shapes[0], shapes[1])
        if stage.infer_shape() != stage.output_shape:
            raise SerializationError("a client stage's ops do not give its output shape")
        return stage

    def infer_shape(self) -> tuple[int, ...]:
        from henn.ir import ops

        shape = self.input_shape
        for n in self.ops:
            try:
                shape = tuple(ops.infer_shape(n, [shape]))
            except (IRError, ValueError, ZeroDivisionError) as exc:
                raise SerializationError(f"client stage op {n.name!r} does not fit shape {shape}: {exc}") from None
        return shape


def _node(i: int, o: dict) -> Node:
    op, name, attrs = Op(o["op"]), o["name"], o["attrs"]
    if op not in CLIENT_OPS or not isinstance(name, str) or not isinstance(attrs, dict):
        raise ValueError(f"stage op {i}: only {[str(c) for c in CLIENT_OPS]} with a name and attributes")
    if op == Op.ACTIVATION:
        act = NONPOLYNOMIAL.get(attrs.get("kind"))  # type: ignore[arg-type]
        if act is None or act.function is None:
            raise ValueError(f"stage op {i}: no reference for activation {attrs.get('kind')!r}")
    else:
        for key, n in (("kernel", 2), ("stride", 2), ("pads", 4)):
            v = attrs.get(key)
            if not isinstance(v, list) or len(v) != n or any(not _int(d) or not 0 <= d <= MAX_WINDOW for d in v):
                raise ValueError(f"stage op {i}: maxpool {key} must be {n} integers from 0 to {MAX_WINDOW}")
        if min(attrs["kernel"] + attrs["stride"]) < 1:
            raise ValueError(f"stage op {i}: maxpool kernel and stride of at least 1")
        attrs = {k: tuple(attrs[k]) for k in ("kernel", "stride", "pads")}
    return Node(op, name, ["x"], "y", dict(attrs))


def _dims(v) -> list[int]:
    if not isinstance(v, list) or not 1 <= len(v) <= 4 or any(not _int(d) or not 1 <= d <= 1 << 16 for d in v):
        raise ValueError(f"a shape is 1 to 4 positive integers, got {v!r}")
    if math.prod(v) > 1 << 24:
        raise ValueError(f"shape {v} is too large")
    return v


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _jsonable(attrs: dict) -> dict:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.items()}


def check_segments(programs, stages) -> None:
    """Segments that chain: one parameter set and key set, each stage between two segments' shapes, the same
    images per set (a set goes through every segment in turn). Programs or client parts (PackedIO)."""
    if not 1 <= len(programs) <= MAX_SEGMENTS or len(stages) != len(programs) - 1:
        raise SerializationError(f"{len(programs)} segments with {len(stages)} client stages: expected one stage fewer")
    first = programs[0]
    for k, p in enumerate(programs):
        same = (
            p.params.fingerprint() == first.params.fingerprint()
            and tuple(p.rotation_steps) == tuple(first.rotation_steps)
            and p.relin == first.relin
            and p.mode == first.mode
            and p.images_per_set == first.images_per_set
        )
        if not same:
            raise SerializationError(f"segment {k} has other parameters, keys or images per set than segment 0")
        if p.bootstraps:
            raise SerializationError(f"segment {k} bootstraps: client-aided segments never need to")
    for k, s in enumerate(stages):
        if s.input_shape != tuple(programs[k].output_shape) or s.output_shape != tuple(programs[k + 1].input_shape):
            raise SerializationError(
                f"client stage {k} does not join segment {k}'s outputs to segment {k + 1}'s inputs"
            )
