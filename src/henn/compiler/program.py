"""The compiled Program: what a server evaluates and how a client packs and unpacks.

Steps run in order on one value (a list of ciphertexts). Each step names its IR layer, the level of
its input, whether it rescales, plaintext recipes (NumPy arrays, encoded by the server at the
level where they are used) and small attributes. Step kinds:

    linear_batch  CSR rows (indptr, indices, data) + bias: out[j] = sum w * in[i] (batch packing)
    sum_batch     CSR rows of a sum-pool: additions only
    act           elementwise polynomial core (form, shift, inner, tcoef), see approximate_activations
    taps          single packing, first layer: sum_t in[t] * weight[t] + bias
    diag          single packing, BSGS generalized diagonals (giant, baby, diags) [+ rotate-and-sum]
    mpool, mdiag  single packing over several ciphertexts: pool by rotations, multi-ciphertext BSGS
    gdiag         grouped batch packing: BSGS over virtual ciphertexts of G slots, B images apart
    bootstrap     refresh every ciphertext to the top level; attrs bound: the values' range (calibrated)

The Program is serializable (`to_bytes` / `from_bytes`): JSON header + NumPy arrays, no pickle.
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass, field

import numpy as np

from henn.ckks.params import Parameters, ParametersLiteral
from henn.errors import SerializationError

FORMAT = "henn-program/1"


@dataclass
class Step:
    kind: str
    name: str
    level: int
    rescale: bool = False
    attrs: dict = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class Program:
    mode: str                       # "batch" | "single"
    params: Parameters
    depth: int
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    rotation_steps: tuple[int, ...]
    relin: bool
    steps: list[Step]
    input_pack: dict[str, np.ndarray | str | int]   # single: kind "taps" (index) or "natural" (elem)
    output_elem: np.ndarray | None  # single: logical output index of each slot of the final block
    output_gain: float = 1.0
    output_offset: np.ndarray | None = None
    final_level: int = 0

    @property
    def input_level(self) -> int:
        return self.depth

    @property
    def n_outputs(self) -> int:
        return math.prod(self.output_shape)

    @property
    def group(self) -> int:
        """Batch packing: channels per ciphertext (1: one element per ciphertext); 0 in single mode."""
        return int(self.input_pack.get("group", 1)) if self.mode == "batch" else 0

    @property
    def images_per_set(self) -> int:
        """Images one ciphertext set holds: slots / G in batch mode, one in single mode."""
        return self.params.slots // self.group if self.mode == "batch" else 1

    @property
    def bootstraps(self) -> int:
        """Bootstrap steps (each refreshes every ciphertext of its value)."""
        return sum(s.kind == "bootstrap" for s in self.steps)

    @property
    def input_cts(self) -> int:
        """Ciphertexts of one encrypted input set."""
        pack = self.input_pack
        if pack["kind"] == "batch":
            return math.prod(self.input_shape)
        if pack["kind"] == "taps":
            return len(pack["index"])
        if pack["kind"] == "grouped":
            return len(pack["elem"]) // int(pack["group"])
        if pack["kind"] == "multi":
            return len(pack["elem"]) // int(pack["period"])
        return 1  # natural: one replicated block

    def summary(self) -> dict:
        return {"mode": self.mode, "depth": self.depth, "params": self.params.describe(),
                "rotation_steps": len(self.rotation_steps), "steps": [(s.kind, s.name, s.level) for s in self.steps]}

    # ---- serialization ---------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        arrays: dict[str, np.ndarray] = {}
        steps = []
        for i, s in enumerate(self.steps):
            for k, a in s.arrays.items():
                arrays[f"s{i}.{k}"] = a
            steps.append({"kind": s.kind, "name": s.name, "level": s.level, "rescale": s.rescale,
                          "attrs": s.attrs, "arrays": sorted(s.arrays)})
        pack = {}
        for k, v in self.input_pack.items():
            if isinstance(v, np.ndarray):
                arrays[f"in.{k}"] = v
            else:
                pack[k] = v
        for k, v in (("out.elem", self.output_elem), ("out.offset", self.output_offset)):
            if v is not None:
                arrays[k] = v
        header = {"format": FORMAT, "mode": self.mode, "params": self.params.literal().to_dict(),
                  "params_name": self.params.name, "insecure": self.params.insecure, "depth": self.depth,
                  "input_shape": list(self.input_shape), "output_shape": list(self.output_shape),
                  "rotation_steps": list(self.rotation_steps), "relin": self.relin, "steps": steps,
                  "input_pack": pack, "input_arrays": sorted(k[3:] for k in arrays if k.startswith("in.")),
                  "output_gain": self.output_gain, "final_level": self.final_level}
        buf = io.BytesIO()
        np.savez_compressed(buf, __header__=np.frombuffer(json.dumps(header).encode(), np.uint8), **arrays)
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> Program:
        try:
            z = np.load(io.BytesIO(data), allow_pickle=False)
            h = json.loads(bytes(z["__header__"]).decode())
        except Exception as exc:  # noqa: BLE001 - any failure means unreadable data
            raise SerializationError(f"not a henn program ({exc}): save it with Program.to_bytes()") from None
        if h.get("format") != FORMAT:
            raise SerializationError(f"program format {h.get('format')!r} is not {FORMAT!r}: recompile the model")
        lit = ParametersLiteral.from_dict(h["params"])
        if h["insecure"]:
            from henn.ckks.params import _build

            params = _build(lit, h["params_name"], insecure=True)
        else:
            params = Parameters.from_literal(lit, name=h["params_name"])
        steps = [Step(s["kind"], s["name"], s["level"], s["rescale"], s["attrs"],
                      {k: z[f"s{i}.{k}"] for k in s["arrays"]}) for i, s in enumerate(h["steps"])]
        pack = dict(h["input_pack"])
        pack.update({k: z[f"in.{k}"] for k in h["input_arrays"]})
        return cls(h["mode"], params, h["depth"], tuple(h["input_shape"]), tuple(h["output_shape"]),
                   tuple(h["rotation_steps"]), h["relin"], steps, pack,
                   z["out.elem"] if "out.elem" in z else None, h["output_gain"],
                   z["out.offset"] if "out.offset" in z else None, h["final_level"])
