"""Both ends of a client-aided model (henn.segments) in the runtime: the server's Server per segment on one
key set, and the client's walk through the segments (encrypt, evaluate, decrypt, apply the stage, again)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from henn.ckks.values import Ciphertext, EvaluationKeys
from henn.errors import InputError
from henn.program import Program
from henn.runtime.encoded import EncodedWeights
from henn.runtime.server import Server
from henn.segments import ClientStage


class SegmentServer:
    """One runtime Server per segment, all on the same evaluation keys (checked against each segment)."""

    def __init__(
        self,
        programs: Sequence[Program],
        backend,
        keys: EvaluationKeys,
        *,
        threads: int | None = None,
        weights: Sequence[EncodedWeights] | None = None,
    ):
        shared = [None] * len(programs) if weights is None else list(weights)
        self.parts = [Server(p, backend, keys, threads=threads, weights=w) for p, w in zip(programs, shared)]
        self.key_id = self.parts[0].key_id

    def prepare(self) -> None:
        for part in self.parts:
            part.prepare()

    def segment(self, k: int) -> Server:
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < len(self.parts):
            raise InputError(f"segment {k!r}: the model has segments 0 to {len(self.parts) - 1}")
        return self.parts[k]

    def evaluate(self, cts: list[Ciphertext], *, consume: bool = False, segment: int = 0) -> list[Ciphertext]:
        """Segment `segment`'s output ciphertexts (its inputs checked as a Server checks a program's)."""
        return self.segment(segment).evaluate(cts, consume=consume)

    @property
    def seconds(self) -> dict[str, float]:
        return {k: sum(p.seconds[k] for p in self.parts) for k in ("prepare", "evaluate")}

    def seconds_by_kind(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for part in self.parts:
            for kind, t in part.seconds_by_kind().items():
                out[kind] = out.get(kind, 0.0) + t
        return out

    def close(self) -> None:
        for part in self.parts:
            part.close()


def through_segments(
    x: np.ndarray,
    stages: Sequence[ClientStage],
    encrypt: Callable[[int, np.ndarray], Any],
    evaluate: Callable[[int, Any], Any],
    decrypt: Callable[[int, Any, int], np.ndarray],
) -> np.ndarray:
    """The logits of one ciphertext set of images x: segment k encrypted (encrypt(k, x)), evaluated by the
    server (evaluate(k, request), in process or over the network), decrypted (decrypt(k, response, images)),
    stage k applied to the decrypted values in the clear; the last segment's outputs are the logits."""
    for k in range(len(stages) + 1):
        y = decrypt(k, evaluate(k, encrypt(k, x)), len(x))
        if k == len(stages):
            return y
        x = stages[k].apply(y)
    raise AssertionError("unreachable")
