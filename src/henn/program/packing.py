"""How a program's input is packed into ciphertexts and its output read back: one class per input packing.

    batch     (batch mode) element e of every image in ciphertext e, image b in slot b; `complex`: image
              b + slots in the imaginary part of slot b (complex packing)
    grouped   (batch mode) `group` channels per ciphertext: virtual slot j of image b at physical slot
              j * B + b, `elem` the input element of each virtual slot (-1: none)
    taps      (single mode) the first convolution's taps: ciphertext t holds the input elements `index[t]`
              (a block of `period` slots, repeated over the slots)
    multi     (single mode) multiplexed layouts over several ciphertexts: element b * n + e is pixel e of
              image b, `elem` one per slot of every ciphertext, `images` images side by side
    natural   (single mode) one block of `period` slots, `elem` per slot, repeated over the slots

Each class knows its mode, its ciphertext and image counts, its checks, how a client packs images and
unpacks logits, and its form in a file's header (`packing_header`, `packing_from_header`).
`OutputPacking` is the output half: where each output element lies, and the gain and offset to apply.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from henn.program.steps import ProgramError


def _int_map(v, ndim: int) -> bool:
    return isinstance(v, np.ndarray) and v.dtype.kind == "i" and v.ndim == ndim


def _divides(v, slots: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1 and slots % v == 0


def _gather(flat: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """flat[idx] where idx >= 0, 0 where it is -1."""
    return np.where(idx >= 0, flat[np.maximum(idx, 0)], 0.0)


@dataclass(frozen=True, kw_only=True, eq=False)
class OutputPacking:
    """The output: its shape, the logical output index of each slot of the output ciphertexts (every packing
    but batch; -1: none; image b's output o is element b * n_outputs + o), and y = gain * x + offset."""

    shape: tuple[int, ...]
    elem: np.ndarray | None = None
    gain: float = 1.0
    offset: np.ndarray | None = None  # one per output element

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def check(self, images: int, batch: bool) -> None:
        out = self.elem
        if not batch and (
            out is None
            or out.dtype.kind != "i"
            or out.ndim != 1
            or (out.size and (out.max() >= self.size * images or out.min() < -1))
        ):
            raise ProgramError("output_elem missing or malformed")
        if self.offset is not None and self.offset.size != self.size:
            raise ProgramError("output_offset does not match the outputs")

    def finish(self, logits: np.ndarray) -> np.ndarray:
        """(images, n_outputs) logits with the gain and offset applied, in the output's shape."""
        out = logits * self.gain
        if self.offset is not None:
            out = out + np.asarray(self.offset).reshape(1, -1)
        return out.reshape((len(out),) + tuple(self.shape))

    def unpack_single(self, vecs: list[np.ndarray], per: int, n_images: int) -> np.ndarray:
        """Single mode: output element b * n + o is logit o of image b."""
        assert self.elem is not None
        flat = np.concatenate(vecs)
        out = np.zeros(per * self.size)
        used = np.nonzero(self.elem >= 0)[0][::-1]
        out[self.elem[used]] = flat[used]
        return out.reshape(per, self.size)[:n_images]


@dataclass(frozen=True, kw_only=True, eq=False)
class InputPacking:
    """What every input packing has: the input's shape (one image). A kind is a subclass (PACKINGS)."""

    kind: ClassVar[str]
    mode: ClassVar[str]  # "batch" | "single"
    maps: ClassVar[dict[str, int]] = {}  # its slot maps (name -> ndim), held as .npy members
    scalars: ClassVar[tuple[str, ...]] = ()  # its integer facts that must divide the slots
    shape: tuple[int, ...]

    @property
    def n_inputs(self) -> int:
        return math.prod(self.shape)

    def cts(self) -> int:
        """Ciphertexts of one encrypted input set."""
        raise NotImplementedError

    def images(self, slots: int) -> int:
        """Images one ciphertext set holds."""
        return 1

    def output_cts(self, out: OutputPacking, slots: int) -> int:
        return -(-len(out.elem) // slots) if out.elem is not None else 0

    def pack(self, full: np.ndarray, slots: int) -> list[np.ndarray]:
        """The slot vectors of one set of images (images(slots), flat; a partial set already repeated)."""
        raise NotImplementedError

    def unpack(self, vecs: list[np.ndarray], out: OutputPacking, slots: int, n_images: int) -> np.ndarray:
        """(n_images, n_outputs) logits from the decrypted output vectors (before gain and offset)."""
        return out.unpack_single(vecs, self.images(slots), n_images)

    def check(self, slots: int) -> None:
        """The packing fits `slots` slots and its input (ProgramError)."""
        for key, ndim in self.maps.items():
            if not _int_map(getattr(self, key), ndim):
                raise ProgramError(f"input packing {self.kind!r}: {key} missing or malformed")
        for key in self.scalars:
            if not _divides(getattr(self, key), slots):
                raise ProgramError(f"input packing {self.kind!r}: {key} missing or malformed")
        n_in = self.n_inputs * self.mapped_images()
        for key in self.maps:
            v = getattr(self, key)
            if not self._fits(v, slots) or (v.size and (v.max() >= n_in or v.min() < -1)):
                raise ProgramError(f"input packing {self.kind!r}: {key} does not fit {n_in} inputs in {slots} slots")

    def _fits(self, v: np.ndarray, slots: int) -> bool:
        return slots % v.shape[-1] == 0

    def mapped_images(self) -> int:
        """Images the slot maps (and the output's) index: element b * n + e is element e of image b."""
        return 1


@dataclass(frozen=True, kw_only=True, eq=False)
class BatchPacking(InputPacking):
    kind, mode = "batch", "batch"
    complex: bool = False  # two images per slot (real and imaginary parts)

    def cts(self) -> int:
        return self.n_inputs

    def images(self, slots: int) -> int:
        return slots * (2 if self.complex else 1)

    def output_cts(self, out: OutputPacking, slots: int) -> int:
        return out.size

    def pack(self, full: np.ndarray, slots: int) -> list[np.ndarray]:
        if self.complex:  # image b in the real part of slot b, image b + slots in its imaginary part
            return list(full[:slots].T + 1j * full[slots:].T)
        return list(full.T)

    def unpack(self, vecs: list[np.ndarray], out: OutputPacking, slots: int, n_images: int) -> np.ndarray:
        logits = np.stack(vecs, axis=1)
        if self.complex:
            logits = np.concatenate([logits.real, logits.imag])
        return logits[:n_images]

    def check(self, slots: int) -> None:
        if not isinstance(self.complex, bool):
            raise ProgramError(f"input packing: complex must be true or false, got {self.complex!r}")


@dataclass(frozen=True, kw_only=True, eq=False)
class GroupedPacking(InputPacking):
    kind, mode, maps, scalars = "grouped", "batch", {"elem": 1}, ("group",)
    group: int  # channels (virtual slots) per ciphertext
    elem: np.ndarray  # the input element of each virtual slot of every ciphertext (-1: none)

    def cts(self) -> int:
        return len(self.elem) // int(self.group)

    def images(self, slots: int) -> int:
        return slots // self.group

    def output_cts(self, out: OutputPacking, slots: int) -> int:
        return -(-len(out.elem) // self.group) if out.elem is not None else 0

    def pack(self, full: np.ndarray, slots: int) -> list[np.ndarray]:
        per = len(full)  # virtual slot j of image b at physical slot j * B + b
        vals = np.where(self.elem >= 0, full[:, np.maximum(self.elem, 0)], 0.0)  # (images, K * G)
        return list(vals.reshape(per, -1, int(self.group)).transpose(1, 2, 0).reshape(-1, slots))

    def unpack(self, vecs: list[np.ndarray], out: OutputPacking, slots: int, n_images: int) -> np.ndarray:
        assert out.elem is not None
        virt = np.stack(vecs).reshape(-1, self.images(slots))[:, :n_images]  # (K * G, images)
        logits = np.zeros((n_images, out.size))
        used = np.nonzero(out.elem >= 0)[0]
        logits[:, out.elem[used]] = virt[used].T
        return logits

    def _fits(self, v: np.ndarray, slots: int) -> bool:
        return v.shape[-1] % self.group == 0


@dataclass(frozen=True, kw_only=True, eq=False)
class TapsPacking(InputPacking):
    kind, mode, maps, scalars = "taps", "single", {"index": 2}, ("period",)
    period: int
    index: np.ndarray  # (ciphertexts, period): the input element of each slot of each tap's block (-1: none)

    def cts(self) -> int:
        return len(self.index)

    def pack(self, full: np.ndarray, slots: int) -> list[np.ndarray]:
        return [np.tile(v, slots // len(v)) for v in _gather(full[0], self.index)]


@dataclass(frozen=True, kw_only=True, eq=False)
class MultiPacking(InputPacking):
    kind, mode, maps, scalars = "multi", "single", {"elem": 1}, ("period",)
    period: int  # slots of one ciphertext's layout
    elem: np.ndarray  # one per slot of every ciphertext: element b * n + e is pixel e of image b (-1: none)
    images_per_set: int = 1  # images side by side (compile's images_per_set)

    def cts(self) -> int:
        return len(self.elem) // int(self.period)

    def images(self, slots: int) -> int:
        return self.images_per_set

    def mapped_images(self) -> int:
        return self.images_per_set

    def pack(self, full: np.ndarray, slots: int) -> list[np.ndarray]:
        return list(_gather(full.reshape(-1), self.elem).reshape(-1, slots))

    def check(self, slots: int) -> None:
        n = self.images_per_set
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= slots:
            raise ProgramError(f"input packing 'multi': images {n!r} malformed (multi packing only, 1 to {slots})")
        super().check(slots)

    def _fits(self, v: np.ndarray, slots: int) -> bool:
        return v.shape[-1] % self.period == 0


@dataclass(frozen=True, kw_only=True, eq=False)
class NaturalPacking(InputPacking):
    kind, mode, maps, scalars = "natural", "single", {"elem": 1}, ("period",)
    period: int
    elem: np.ndarray  # the input element of each slot of one block (-1: none)

    def cts(self) -> int:
        return 1  # one replicated block

    def pack(self, full: np.ndarray, slots: int) -> list[np.ndarray]:
        v = _gather(full[0], self.elem)
        return [np.tile(v, slots // len(v))]


PACKINGS: dict[str, type[InputPacking]] = {
    cls.kind: cls for cls in (BatchPacking, GroupedPacking, TapsPacking, MultiPacking, NaturalPacking)
}
_HEADER_NAMES = {"images_per_set": "images"}  # field -> its key in the header, where they differ


def packing_header(p: InputPacking, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """The header's "input_pack" object (the slot maps go into `arrays` as in.<name>)."""
    header: dict[str, Any] = {"kind": p.kind}
    for name in p.maps:
        arrays[f"in.{name}"] = getattr(p, name)
    for name in (*p.scalars, *_extra(type(p))):
        header[_HEADER_NAMES.get(name, name)] = getattr(p, name)
    if isinstance(p, BatchPacking) and p.complex is not False:
        header["complex"] = p.complex
    return header


def _extra(cls: type[InputPacking]) -> tuple[str, ...]:
    return ("images_per_set",) if cls is MultiPacking else ()


def packing_from_header(mode: str, shape: tuple[int, ...], h: dict, maps: dict[str, np.ndarray]) -> InputPacking:
    """An input packing from a header's "input_pack" object and its in.* arrays (ProgramError where they
    do not make one of the kinds; its values are checked by InputPacking.check)."""
    cls = PACKINGS.get(h.get("kind"))  # type: ignore[arg-type]
    if cls is None or cls.mode != mode:
        raise ProgramError(f"input packing {h.get('kind')!r} does not fit {mode!r} mode")
    values: dict[str, Any] = {}
    for name in (*cls.maps, *cls.scalars):
        v = maps.get(name) if name in cls.maps else h.get(name)
        if v is None:
            raise ProgramError(f"input packing {cls.kind!r}: {name} missing or malformed")
        values[name] = v
    if "images" in h and cls is not MultiPacking:
        raise ProgramError(f"input packing {cls.kind!r}: images {h['images']!r} malformed (multi packing only)")
    if cls is MultiPacking and "images" in h:
        values["images_per_set"] = h["images"]
    flag = h.get("complex", False)
    if not isinstance(flag, bool):
        raise ProgramError(f"input packing: complex must be true or false, got {flag!r}")
    if flag and cls is not BatchPacking:
        raise ProgramError(f"complex packing applies to the 'batch' input packing, not {cls.kind!r}")
    if cls is BatchPacking:
        values["complex"] = flag
    unknown = set(h) - {"kind", "images", "complex", *cls.scalars} or set(maps) - set(cls.maps)
    if unknown:
        raise ProgramError(f"input packing {cls.kind!r}: unexpected {sorted(unknown)}")
    return cls(shape=shape, **values)
