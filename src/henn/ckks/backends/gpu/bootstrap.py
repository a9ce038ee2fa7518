"""CKKS bootstrapping on the gpu backend (Cheon-Han-Kim-Kim-Song 2018; Bossuat et al. 2021 and 2022).

    ScaleDown -> encapsulate (s -> sparse s') -> ModRaise -> back to s -> CoeffsToSlots -> EvalMod -> SlotsToCoeffs

The circuit runs on a second GpuBackend over the *bootstrapping chain*: henn's residual moduli (the same word
primes, so a residual ciphertext at level l is one of this chain at level l), then the circuit's moduli bottom
up (SlotsToCoeffs, EvalMod, CoeffsToSlots: BootstrapParameters.circuit_log_q), with the circuit's own special
moduli (log_p). The whole modulus is held to the 128-bit bound. The steps are henn's evaluator on that
backend: DFT factors as baby-step giant-step linear transforms (dft.py), EvalMod on the Chebyshev evaluator
(eval_mod.py). What needs the chain's internals is here: ModRaise and the encapsulation's key switches.

Scales. ScaleDown multiplies the input by an integer and rescales once, so that level 0 holds
Delta0 * values with Delta0 = q0 / 2^log_message_ratio. After ModRaise the ciphertext is read at scale
S = 2^evalmod_log_scale: CoeffsToSlots multiplies by S / (q0 K') so that its slots hold t / K' (t: a
coefficient over q0), scale-neutral (plaintexts at the level's prime). EvalMod gives sin(2 pi t) near S, and
SlotsToCoeffs multiplies by q0 / (2 pi Delta0) with plaintexts encoded below their primes, which brings the
scale down to the residual default scale over its levels.
"""

from __future__ import annotations

import dataclasses
import math
import weakref
from dataclasses import dataclass
from typing import Any

import torch

from henn.ckks import security
from henn.ckks.backends.gpu import dft, moduli
from henn.ckks.backends.gpu.eval_mod import EvalMod
from henn.ckks.backends.gpu.graphs import BOOTSTRAP, Graphs
from henn.ckks.backends.gpu.graphs import setting as graphs_setting
from henn.ckks.backends.gpu.values import RawBootstrapKeys, RawCiphertext, RawSecretKey
from henn.ckks.params import ParametersLiteral, _build
from henn.ckks.values import Ciphertext, EvaluationKeys, GaloisKeys, RelinKey
from henn.errors import InputError, ParameterError, SecurityError

MIN_PLAINTEXT_BITS = 20  # a DFT factor's plaintexts below this scale would hold too little of the matrix


@dataclass(frozen=True)
class Levels:
    residual: int  # henn's max_level: where the bootstrap lands
    stc: int
    evalmod: int
    cts: int

    @property
    def top(self) -> int:
        return self.residual + self.stc + self.evalmod + self.cts


class Bootstrapper:
    """The bootstrapping circuit of one gpu backend with bootstrap parameters."""

    def __init__(self, outer):
        params, boot = outer.params, outer.params.bootstrap
        lit = boot.literal
        if lit.mod1_inv_degree:
            raise ParameterError("the gpu backend's EvalMod has no arcsine step: use mod1_inv_degree=0")
        self.outer, self.boot = outer, boot
        self.inner = _inner_backend(outer)
        self.levels = Levels(params.max_level, len(lit.stc_log_scales), boot.evalmod_depth, len(lit.cts_log_scales))
        self.evalmod = EvalMod(lit.k, max(lit.mod1_degree, 2 * lit.k - 1), lit.double_angle, lit.log_message_ratio)
        if self.evalmod.depth != boot.evalmod_depth:
            raise AssertionError(f"EvalMod takes {self.evalmod.depth} levels, henn counts {boot.evalmod_depth}")
        self.q0 = float(outer.q_primes[0])
        self.delta0 = self.q0 / 2.0**lit.log_message_ratio
        self.raise_scale = 2.0**lit.evalmod_log_scale
        self.m = boot.slots
        self.period = self.m if self.m == params.slots else 2 * self.m
        self._build_transforms()
        self._graphs: dict[int, Graphs] = {}  # id(keys) -> their captured bootstraps (run)

    # ---- plan ---------------------------------------------------------------------------------
    def _build_transforms(self) -> None:
        lv, slots = self.levels, self.outer.slots
        # fewer slots: the trace before CoeffsToSlots multiplies the subring's coefficients by slots / m
        self.trace_steps = [self.m << i for i in range((slots // self.m).bit_length() - 1)]
        alpha = self.raise_scale / (self.q0 * self.evalmod.interval) * self.m / slots
        cts = dft.coeffs_to_slots(self.m, slots, lv.cts, alpha)
        self.cts = dft.transforms(cts, slots, self.period)
        evalmod_in = lv.top - lv.cts
        s_y = self.evalmod.output_scale(self.inner, evalmod_in, self.raise_scale)
        beta = self.q0 / (2 * math.pi * self.delta0)
        stc = dft.slots_to_coeffs(self.m, slots, lv.stc, beta)
        ratio = (self.outer.params.default_scale / s_y) ** (1.0 / len(stc))
        for level in range(lv.residual + 1, lv.residual + len(stc) + 1):
            bits = math.log2(self.inner.prime(level) * ratio)
            if bits < MIN_PLAINTEXT_BITS:
                raise ParameterError(
                    f"SlotsToCoeffs would encode its plaintexts at 2^{bits:.0f}: give it larger "
                    "moduli (stc_log_scales) or more levels"
                )
        self.stc = dft.transforms(stc, slots, self.period, [ratio] * len(stc))
        self.steps = sorted({s for t in self.cts + self.stc for s in t.rotations()} | set(self.trace_steps))

    def info(self) -> dict:
        inner = self.inner
        return {
            "q": list(inner.q_primes),
            "p": list(inner.p_primes),
            "log_qp": inner.params.log_qp,
            "depth": self.boot.depth,
            "output_level": self.levels.residual,
            "log_slots": self.boot.log_slots,
            "galois_keys": len(self.steps) + 1,
            "rotations": list(self.steps),
            "ephemeral_weight": self.boot.literal.ephemeral_weight,
            "evalmod_fit_bits": -math.log2(self.evalmod.fit_error()),
        }

    # ---- keys ---------------------------------------------------------------------------------
    def keys(self, sk: RawSecretKey) -> tuple[RawBootstrapKeys, int]:
        inner = self.inner
        s = inner._secret_from(sk.signed)
        sparse = inner._secret_from(inner._sampler.sparse_ternary(inner.params.n, self.boot.literal.ephemeral_weight))
        keys = RawBootstrapKeys(
            inner._gen_relin_key(s),
            inner._gen_galois_keys(s, self.steps, True),
            inner._switch_key(sparse, s.data),
            inner._switch_key(s, sparse.data),
        )
        size = sum(k.data.numel() * 4 for k in (keys.relin, keys.to_sparse, keys.from_sparse))
        size += sum(k.data.numel() * 4 for k in keys.galois.keys.values())
        return keys, size

    # ---- the circuit ----------------------------------------------------------------------------
    def run(self, ct: Ciphertext, divide: float, keys: RawBootstrapKeys) -> RawCiphertext:
        """The circuit; on a CUDA device (unless HENN_GPU_GRAPHS is 0 or chain), one CUDA graph per keys, input
        level, scale and bound, captured at its first call and replayed after (graphs.py): a bootstrap is
        thousands of launches, and what they read (keys, the DFT's plaintexts, constants) stays where it is."""
        graphs = self._graphs_of(keys)
        if graphs is None:
            return self._circuit(ct, divide, keys)
        level = self.levels.residual

        def circuit(data: torch.Tensor) -> torch.Tensor:
            out = self._circuit(dataclasses.replace(ct, raw=RawCiphertext(data, ct.level)), divide, keys)
            if out.level != level:
                raise AssertionError(f"a bootstrap landed at level {out.level}, not {level}")
            return out.data

        return RawCiphertext(graphs.run(("bootstrap", ct.level, ct.scale, divide), circuit, ct.raw.data), level)

    def _graphs_of(self, keys: RawBootstrapKeys) -> Graphs | None:
        """The captured bootstraps over these keys: they die with the keys (a graph reads the keys in place,
        so it must not outlive them, nor keep a client's keys alive)."""
        if graphs_setting() != BOOTSTRAP or self.inner.device.type != "cuda":
            return None
        graphs = self._graphs.get(id(keys))
        if graphs is None:
            graphs = self._graphs[id(keys)] = Graphs(self.inner.device)
            weakref.finalize(keys, self._graphs.pop, id(keys), None)
        return graphs

    def _circuit(self, ct: Ciphertext, divide: float, keys: RawBootstrapKeys) -> RawCiphertext:
        inner, key_id = self.inner, ct.key_id
        ev = inner.evaluator(
            EvaluationKeys(
                relin=RelinKey(keys.relin, inner.name, key_id),
                galois=GaloisKeys(keys.galois, inner.name, frozenset(self.steps), True, key_id),
            )
        )
        low = self._scale_down(ev, Ciphertext(ct.raw, ct.level, ct.scale, inner.name, key_id=key_id), divide)
        top = Ciphertext(self._mod_raise(low, keys), self.levels.top, self.raise_scale, inner.name, key_id=key_id)
        parts = [self.evalmod.evaluate(ev, c) for c in self._coeffs_to_slots(ev, top)]
        return self._slots_to_coeffs(ev, parts).raw

    def _scale_down(self, ev, ct: Ciphertext, divide: float) -> RawCiphertext:
        """Level 0 holding delta0 * values / divide: one integer product, one rescale."""
        ct = ev.drop_to_level(ct, 1)
        factor = round(self.delta0 * self.inner.prime(1) / (ct.scale * divide))
        if factor < 1 << MIN_PLAINTEXT_BITS:
            raise InputError(
                f"cannot bootstrap a ciphertext at scale 2^{math.log2(ct.scale):.1f} with bound "
                f"{divide:g}: the modular reduction's scale would hold less than 20 bits of it"
            )
        raw = self.inner._mul_scalar(ct.raw, complex(factor), 1, 1.0)
        return self.inner._rescale(raw)

    def _mod_raise(self, low: RawCiphertext, keys: RawBootstrapKeys) -> RawCiphertext:
        """Switch to the sparse secret at q0, lift the residues mod q0 (centered) to the whole chain, and switch
        back at the top: the result decrypts under s to the message plus q0 * I, |I| <= K."""
        inner, chain = self.inner, self.inner.chain
        rows0, top_rows = chain.rows(0), chain.rows(self.levels.top)
        q0 = inner._q(rows0)[0]
        k = inner._switch(low.data[1], keys.to_sparse, 0)
        data = torch.stack((chain.add(low.data[0], k[0], q0), k[1]))
        coeff = chain.inverse(data, slice(0, rows0))
        lifted = chain.convert(coeff, tuple(range(rows0)), tuple(range(rows0, top_rows)), exact=True)
        data = torch.cat((data, chain.forward(lifted, slice(rows0, top_rows))), dim=1)
        k = inner._switch(data[1], keys.from_sparse, self.levels.top)
        return RawCiphertext(torch.stack((chain.add(data[0], k[0], inner._q(top_rows)[0]), k[1])), self.levels.top)

    def _coeffs_to_slots(self, ev, ct: Ciphertext) -> list[Ciphertext]:
        """With fewer slots, first the trace onto the subring of X^(N/2m) (the sum of the rotations by
        multiples of m): ModRaise's q0 * I fills every coefficient, the message only the subring's."""
        for step in self.trace_steps:
            ct = ev.add(ct, ev.rotate(ct, step))
        for t in self.cts:
            ct = ev.rescale(t.evaluate(ev, ct))
        conj = ev.conjugate(ct)
        if self.period != self.m:  # fewer slots: real and imaginary halves side by side in one ciphertext
            return [ev.add(ct, conj)]
        return [ev.add(ct, conj), self._times(ev.sub(ct, conj), -1j)]

    def _slots_to_coeffs(self, ev, parts: list[Ciphertext]) -> Ciphertext:
        ct = parts[0] if len(parts) == 1 else ev.add(parts[0], self._times(parts[1], 1j))
        for t in self.stc:
            ct = ev.rescale(t.evaluate(ev, ct))
        return ct

    def _times(self, ct: Ciphertext, unit: complex) -> Ciphertext:
        """ct times +-i in every slot: the monomial +-X^(N/2) in this slot order, exact, no level."""
        raw = self.inner._mul_scalar(ct.raw, unit, ct.level, 1.0)
        return Ciphertext(raw, ct.level, ct.scale, ct.backend, key_id=ct.key_id)


def _inner_backend(outer) -> Any:
    """A GpuBackend over the bootstrapping chain (residual moduli first, the same words)."""
    params, boot = outer.params, outer.params.bootstrap
    circuit = list(boot.circuit_log_q(params.log_scale))
    special = list(boot.log_p(len(params.log_q)))
    used = [w for m in outer.chain.q_moduli + outer.chain.p_moduli for w in m]
    try:
        made = moduli.chain_moduli(circuit + special, params.log_n, exclude=used)
    except ValueError as exc:
        raise ParameterError(
            f"the gpu backend cannot make the bootstrapping circuit's moduli {circuit} and "
            f"special moduli {special}: {exc}; choose sizes of at most 31 or 46..62 bits"
        ) from None
    q = tuple(outer.q_primes) + tuple(math.prod(w) for w in made[: len(circuit)])
    p = tuple(math.prod(w) for w in made[len(circuit) :])
    log_qp = sum(math.log2(x) for x in q + p)
    if not params.insecure and not security.is_secure(params.log_n, log_qp, params.secret):
        raise SecurityError(
            f"the bootstrapping modulus is {log_qp:.1f} bits at N = 2^{params.log_n}, above the "
            f"128-bit bound of {security.max_log_qp(params.log_n)}: fewer bootstrapping or residual "
            "levels, or fewer special moduli (bootstrap log_p)"
        )
    lit = ParametersLiteral(
        params.log_n,
        tuple(x.bit_length() for x in q),
        tuple(x.bit_length() for x in p),
        params.log_scale,
        q,
        p,
        params.secret,
    )
    inner_params = _build(lit, f"{params.name or 'gpu'}/bootstrapping", insecure=params.insecure)
    return type(outer)(inner_params, device=str(outer.device), seed=outer._sampler.child_seed())
