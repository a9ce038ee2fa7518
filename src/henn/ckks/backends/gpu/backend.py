"""The gpu backend: RNS-CKKS written for henn on torch tensors, 31-bit words, Triton NTT kernels.

Keys and ciphertexts live on the device (CUDA when there is one, else the CPU, where the same code runs
slowly and every test runs). Hybrid key switching: the ciphertext part is cut into digits of word primes
whose product stays below P, each raised to Q*P by fast base conversion (ModUp), multiplied with the key
in NTT form, and divided by P (ModDown); hoisted rotations raise once and permute the raised digits per
rotation. Rotation k is the automorphism X -> X^(5^k) (encoding.py's slot order), conjugation X -> X^-1.
"""

from __future__ import annotations

import importlib
import math
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from henn.ckks import security
from henn.ckks.backend import Backend
from henn.ckks.backends.gpu import encoding, moduli
from henn.ckks.backends.gpu.sampling import Sampler
from henn.ckks.backends.gpu.values import (
    RawBootstrapKeys,
    RawCiphertext,
    RawGaloisKeys,
    RawPlaintext,
    RawPublicKey,
    RawSecretKey,
    RawSwitchKey,
)
from henn.ckks.params import MAX_SPECIAL_PRIME_BITS, ParametersLiteral
from henn.ckks.selection import check_depth, smallest_secure_log_n
from henn.errors import BackendError, InputError, ParameterError, UnsupportedOperation

if TYPE_CHECKING:
    from henn.ckks.backends.gpu.bootstrap import Bootstrapper

torch: Any = None  # imported when a backend opens or reports its version: listing backends loads no torch

INSTALL_HINT = "pip install -e '.[train]' (torch, with Triton on Linux)"
DEFAULT_LOG_SCALE = 30  # one 31-bit word per level (Cheddar's word size); q0 and special moduli are pairs
_CONSTANTS_KEPT = 65536  # real constants per backend ([words, 1] int64: at most 62 x 8 B each)
_COMPLEX_CONSTANTS_KEPT = 16  # complex ones are whole plaintexts (up to 16 MB at N = 2^16)
_CHUNK = 32  # terms of a fused sum of products held at once (int64 copies: 32 x 2.4 MB at N = 2^14, 9 words)


class GpuBackend(Backend):
    name = "gpu"
    wire_encodings = ()
    bootstraps = True  # parameters with bootstrap parameters: bootstrap.py's circuit over its own chain
    special_prime_bits = MAX_SPECIAL_PRIME_BITS  # a special modulus is a pair of word primes

    def __init__(self, params, *, device: str | None = None, seed: int | None = None):
        _load_torch()
        wanted = device or os.environ.get("HENN_GPU_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
        try:
            self.device = torch.device(wanted)
        except (RuntimeError, TypeError):
            raise InputError(
                f"unknown torch device {wanted!r}: give 'cuda', 'cuda:N' or 'cpu' (device= or HENN_GPU_DEVICE)"
            ) from None
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise BackendError(f"device {wanted!r} asked for, but torch sees no CUDA GPU here: use device='cpu'")
        if self.device.type == "cpu" and torch.get_num_threads() > 1:
            # torch's intra-op threads on a small shared CPU make these int64 kernels 5-15x slower (measured on
            # 2 cores: 15.6 ms against 1.2 ms for one product with remainder); the setting is process-wide
            torch.set_num_threads(1)
        self._sampler = Sampler(seed, self.device)
        super().__init__(params)

    # ---- library --------------------------------------------------------------------------
    @classmethod
    def version(cls) -> str:
        _load_torch()
        from henn.ckks.backends.gpu import triton_ntt

        triton_version = "none" if triton_ntt.triton is None else triton_ntt.triton.__version__
        where = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
        return f"henn-gpu (torch {torch.__version__}, triton {triton_version}, {where})"

    @classmethod
    def recommend(cls, depth: int, slots: int | None, log_scale: int | None) -> ParametersLiteral:
        """One 30-bit word per level, q0 a 50-bit pair (20 bits for the integer part), and as many 61-bit
        special pairs as the 128-bit ring holds without growing, up to half the chain."""
        check_depth(depth)
        log_scale = DEFAULT_LOG_SCALE if log_scale is None else int(log_scale)
        if not 20 <= log_scale <= moduli.MAX_MODULUS_BITS - 20:
            raise ParameterError(
                f"log_scale {log_scale} out of range 20..{moduli.MAX_MODULUS_BITS - 20} for the gpu backend"
            )
        log_q = (log_scale + 20,) + (log_scale,) * depth
        log_n = smallest_secure_log_n(sum(log_q) + MAX_SPECIAL_PRIME_BITS, slots, depth)
        budget = security.max_log_qp(log_n) - sum(log_q)
        count = max(1, min(-(-len(log_q) // 2), budget // MAX_SPECIAL_PRIME_BITS))
        lit = ParametersLiteral(log_n, log_q, (MAX_SPECIAL_PRIME_BITS,) * count, log_scale)
        try:
            cls.chain_primes(lit.log_q + lit.log_p, log_n)
        except ValueError as exc:
            raise ParameterError(
                f"the gpu backend cannot make this chain: {exc}; use log_scale <= 31 or >= {2 * (log_n + 1) + 4}"
            ) from None
        return lit

    @classmethod
    def chain_primes(cls, sizes, log_n: int, ring: str = "standard") -> list[int]:
        """The chain moduli: one word prime, or the product of a pair (moduli.py)."""
        if ring != "standard":
            raise ValueError("the gpu backend has only the standard ring")
        return [math.prod(w) for w in moduli.chain_moduli(list(sizes), log_n)]

    def _open(self, params) -> None:
        log_n = params.log_n
        try:
            if params.q is not None:
                q_mod = [moduli.split_modulus(q, log_n) for q in params.q]
                p_mod = [moduli.split_modulus(p, log_n) for p in params.p]
            else:
                both = moduli.chain_moduli(list(params.log_q) + list(params.log_p), log_n)
                q_mod, p_mod = both[: len(params.log_q)], both[len(params.log_q) :]
            words = [w for m in q_mod + p_mod for w in m]
            if len(set(words)) != len(words):
                raise ValueError("two chain moduli share a word prime")
        except ValueError as exc:
            raise ParameterError(
                f"the gpu backend computes in 31-bit words and cannot use this chain: {exc}; "
                "choose parameters for it (select_parameters(depth, backend='gpu'))"
            ) from None
        from henn.ckks.backends.gpu.chain import Chain
        from henn.ckks.backends.gpu.encoding import Embedding

        self.chain = Chain(q_mod, p_mod, log_n, self.device)
        self._memo: dict[tuple, Any] = {}
        self._memo_counts: dict[str, int] = {}
        self.embedding = Embedding(log_n, self.device)
        self.q_primes = tuple(math.prod(m) for m in q_mod)
        self.p_primes = tuple(math.prod(m) for m in p_mod)
        self._bootstrapper: Bootstrapper | None = None
        if params.bootstrap is not None:
            from henn.ckks.backends.gpu.bootstrap import Bootstrapper

            self._bootstrapper = Bootstrapper(self)
            self.bootstrap_info = self._bootstrapper.info()

    def memory_available(self) -> int:
        """On CUDA, the device's free memory (keys and ciphertexts live there), else the host's."""
        if self.device.type == "cuda":
            return int(torch.cuda.mem_get_info(self.device)[0])
        return super().memory_available()

    # ---- helpers ----------------------------------------------------------------------------
    def _rows(self, level: int) -> int:
        return self.chain.rows(level)

    def _q(self, rows: int):
        return self.chain.q32[:rows], self.chain.q64[:rows]

    def _tensor(self, array: np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(array)).to(self.device)

    def _small(self, values, rows: int):
        """NTT residues over the first `rows` words of a small signed polynomial ([N] int64 tensor)."""
        return self.chain.from_signed(values, slice(0, rows))

    def _kept(self, key: tuple, make: Callable[[], Any], limit: int | None = None) -> Any:
        """make(), made once per backend and kept while it lives: a captured bootstrap (graphs.py) reads
        these tensors at fixed addresses, so none is ever evicted. Past `limit` entries of a kind, new ones
        are made per call instead (a capture that meets one falls back to plain launches)."""
        value = self._memo.get(key)
        if value is None:
            value = make()
            if limit is None or self._memo_counts.get(key[0], 0) < limit:
                self._memo[key] = value
                self._memo_counts[key[0]] = self._memo_counts.get(key[0], 0) + 1
        return value

    def _permutation(self, galois: int):
        from henn.ckks.backends.gpu.ntt import automorphism_index

        return self._kept(("permutation", galois), lambda: self._tensor(automorphism_index(self.params.log_n, galois)))

    def galois_element(self, step: int) -> int:
        return pow(5, step, 2 * self.params.n)

    @property
    def conjugation_element(self) -> int:
        return 2 * self.params.n - 1

    # ---- keys ---------------------------------------------------------------------------------
    def _gen_secret_key(self):
        return self._secret_from(self._sampler.ternary(self.params.n))

    def _secret_from(self, signed) -> RawSecretKey:
        """The secret of a signed polynomial ([N] int64: a tensor, or an array read from a key file)."""
        s = torch.as_tensor(signed, dtype=torch.int64, device=self.device)
        return RawSecretKey(self.chain.from_signed(s, slice(None)), s)

    def _gen_public_key(self, sk: RawSecretKey):
        rows = len(self.chain.q_words)
        q32, q64 = self._q(rows)
        a = self._sampler.uniform(self.chain.q_words, self.params.n)
        e = self._small(self._sampler.gaussian(self.params.n), rows)
        b = self.chain.sub(e, self.chain.mul(a, sk.data[:rows], q64), q32)
        return RawPublicKey(torch.stack((b, a)))

    def _switch_key(self, sk: RawSecretKey, target) -> RawSwitchKey:
        """The key that turns a ciphertext part decrypting under `target` (NTT over every word) into one
        under sk."""
        chain, words = self.chain, len(self.chain.words)
        q32, q64 = chain.q32, chain.q64
        parts = []
        for digit in chain.digits:
            a = self._sampler.uniform(chain.words, self.params.n)
            e = self._small(self._sampler.gaussian(self.params.n), words)
            b = chain.sub(e, chain.mul(a, sk.data, q64), q32)
            b = chain.add(b, chain.mul(target, chain.gadget(digit), q64), q32)
            parts.append(torch.stack((b, a)))
        return RawSwitchKey(torch.stack(parts))

    def _gen_relin_key(self, sk: RawSecretKey):
        return self._switch_key(sk, self.chain.mul(sk.data, sk.data, self.chain.q64))

    def _gen_galois_keys(self, sk: RawSecretKey, steps: list[int], conjugate: bool):
        elements = [self.galois_element(s) for s in steps] + ([self.conjugation_element] if conjugate else [])
        return RawGaloisKeys({g: self._switch_key(sk, sk.data[:, self._permutation(g)]) for g in elements})

    def _circuit(self) -> Bootstrapper:
        if self._bootstrapper is None:  # Backend checks the parameters first; this is the backstop
            raise UnsupportedOperation("these parameters have no bootstrap parameters: use a boot-* preset")
        return self._bootstrapper

    def _gen_bootstrap_keys(self, sk: RawSecretKey):
        return self._circuit().keys(sk)

    def _bootstrap_ciphertext(self, a, divide, keys: RawBootstrapKeys, parallel):
        """The circuit reads the input's scale, which a RawCiphertext does not carry."""
        return self._circuit().run(a, divide, keys)

    def _export_secret(self, raw: RawSecretKey) -> bytes:
        from henn.ckks.backends.gpu import wire

        return wire.write_secret(raw.signed.cpu().numpy())

    def _import_secret(self, data: bytes):
        from henn.ckks.backends.gpu import wire

        return self._secret_from(wire.read_secret(data, self.params.n))

    # ---- encoding, encryption ---------------------------------------------------------------
    def _encode(self, values, level, scale):
        rows = self._rows(level)
        values = np.asarray(values, dtype=np.complex128)
        coeffs = self.embedding.coefficients(self._tensor(values)) * scale
        # |coefficient| <= max |slot| (N/2 slots, each weighing 2/N); twice that covers the FFT's rounding
        bound = 2 * scale * float(np.max(np.abs(values), initial=0.0))
        res = encoding.residues(coeffs, self.chain.q64[:rows], bound)
        return RawPlaintext(self.chain.forward(res, slice(0, rows)), level)

    def _decode(self, pt: RawPlaintext, level, scale):
        rows = pt.data.shape[0]
        k = encoding.primes_to_decode(self.chain.words[:rows], scale)
        coeff = self.chain.inverse(pt.data[:k].contiguous(), slice(0, k)).cpu().numpy()
        values = encoding.centered(coeff, self.chain.words[:k]) / scale
        return self.embedding.slots(self._tensor(values)).cpu().numpy()

    def _encrypt(self, pt: RawPlaintext, pk: RawPublicKey):
        rows = pt.data.shape[0]
        q32, q64 = self._q(rows)
        n = self.params.n
        v = self._small(self._sampler.ternary(n), rows)
        e0, e1 = (self._small(self._sampler.gaussian(n), rows) for _ in range(2))
        c0 = self.chain.add(self.chain.add(self.chain.mul(pk.data[0, :rows], v, q64), e0, q32), pt.data, q32)
        c1 = self.chain.add(self.chain.mul(pk.data[1, :rows], v, q64), e1, q32)
        return RawCiphertext(torch.stack((c0, c1)), pt.level)

    def _encrypt_symmetric(self, pt: RawPlaintext, sk: RawSecretKey):
        rows = pt.data.shape[0]
        q32, q64 = self._q(rows)
        a = self._sampler.uniform(self.chain.words[:rows], self.params.n)
        e = self._small(self._sampler.gaussian(self.params.n), rows)
        c0 = self.chain.add(self.chain.sub(e, self.chain.mul(a, sk.data[:rows], q64), q32), pt.data, q32)
        return RawCiphertext(torch.stack((c0, a)), pt.level)

    def _decrypt(self, ct: RawCiphertext, sk: RawSecretKey):
        rows = ct.data.shape[1]
        q32, q64 = self._q(rows)
        s = sk.data[:rows]
        acc, power = ct.data[0], s
        for part in ct.data[1:]:
            acc = self.chain.add(acc, self.chain.mul(part, power, q64), q32)
            power = self.chain.mul(power, s, q64)
        return RawPlaintext(acc, ct.level)

    # ---- arithmetic ---------------------------------------------------------------------------
    def _add(self, a, b):
        return RawCiphertext(self.chain.add(a.data, b.data, self._q(a.data.shape[1])[0]), a.level)

    def _sub(self, a, b):
        return RawCiphertext(self.chain.sub(a.data, b.data, self._q(a.data.shape[1])[0]), a.level)

    def _add_plain(self, a, pt):
        rows = a.data.shape[1]
        c0 = self.chain.add(a.data[0], pt.data[:rows], self._q(rows)[0])
        return RawCiphertext(torch.cat((c0.unsqueeze(0), a.data[1:])), a.level)

    def _sub_plain(self, a, pt):
        rows = a.data.shape[1]
        c0 = self.chain.sub(a.data[0], pt.data[:rows], self._q(rows)[0])
        return RawCiphertext(torch.cat((c0.unsqueeze(0), a.data[1:])), a.level)

    def _negate(self, a):
        return RawCiphertext(self.chain.neg(a.data, self._q(a.data.shape[1])[0]), a.level)

    def _mul_plain(self, a, pt):
        rows = a.data.shape[1]
        return RawCiphertext(self.chain.mul(a.data, pt.data[:rows], self._q(rows)[1]), a.level)

    def _constant(self, c: complex, rows: int, scale: float):
        """The residues of round(c * scale) per word ([rows, 1]): a real constant is the constant
        polynomial, the same value at every NTT point."""
        big = int(round(c.real * scale))
        return self._kept(
            ("constant", big, rows),
            lambda: torch.tensor(
                [big % q for q in self.chain.words[:rows]], dtype=torch.int64, device=self.device
            ).unsqueeze(1),
            _CONSTANTS_KEPT,
        )

    def _complex_constant(self, c: complex, level: int, scale: float) -> RawPlaintext:
        """c in every slot, encoded once (bootstrapping multiplies by +-i at every call)."""
        return self._kept(
            ("complex", c, level, scale),
            lambda: self._encode(np.full(self.slots, c, np.complex128), level, scale),
            _COMPLEX_CONSTANTS_KEPT,
        )

    def _add_scalar(self, a, c, level, scale):
        if complex(c).imag != 0:
            return self._add_plain(a, self._complex_constant(complex(c), level, scale))
        rows = a.data.shape[1]
        q32, _ = self._q(rows)
        c0 = self.chain.add(a.data[0], self._constant(complex(c), rows, scale).to(torch.int32), q32)
        return RawCiphertext(torch.cat((c0.unsqueeze(0), a.data[1:])), a.level)

    def _mul_scalar(self, a, c, level, scale):
        if complex(c).imag != 0:
            return self._mul_plain(a, self._complex_constant(complex(c), level, scale))
        rows = a.data.shape[1]
        return RawCiphertext(self.chain.mul(a.data, self._constant(complex(c), rows, scale), self._q(rows)[1]), a.level)

    def _sum_of_products(self, cts, factors, level: int) -> RawCiphertext:
        """sum_i ct_i * f_i (f_i [R, N] or [R, 1] residues) a chunk of terms at a time: one product, one
        reduction and one sum per chunk instead of three launches per term."""
        rows = cts[0].data.shape[1]
        q32, q64 = self._q(rows)
        from henn.ckks.backends.gpu import triton_modular

        if triton_modular.usable(cts[0].data) and len({tuple(f.shape) for f in factors}) == 1:
            parts = [  # [k, 2, R, N] int32 copies, a chunk at a time
                triton_modular.sum_products(
                    torch.stack([c.data for c in cts[i : i + _CHUNK]]), torch.stack(factors[i : i + _CHUNK]), q32
                )
                for i in range(0, len(cts), _CHUNK)
            ]
            out = parts[0]
            for part in parts[1:]:
                out = self.chain.add(out, part, q32)
            return RawCiphertext(out, level)
        acc = None
        for i in range(0, len(cts), _CHUNK):
            stacked = torch.stack([c.data for c in cts[i : i + _CHUNK]]).to(torch.int64)  # [k, 2, R, N]
            f = torch.stack(factors[i : i + _CHUNK]).to(torch.int64).unsqueeze(1)
            part = (stacked * f % q64).sum(dim=0)  # at most _CHUNK terms below 2^31: no overflow
            acc = part if acc is None else (acc + part) % q64
        return RawCiphertext((acc % q64).to(torch.int32), level)

    def _dot_plain(self, cts, pts):
        rows = cts[0].data.shape[1]
        return self._sum_of_products(cts, [p.data[:rows] for p in pts], cts[0].level)

    def _linear_combination(self, cts, weights, level, scale):
        """sum_i w_i ct_i with real weights as constants (complex ones through the default path)."""
        if np.iscomplexobj(weights) and np.any(np.imag(weights) != 0):
            return super()._linear_combination(cts, weights, level, scale)
        rows = cts[0].data.shape[1]
        return self._sum_of_products(cts, [self._constant(complex(w), rows, scale) for w in np.real(weights)], level)

    def _rotate_sum(self, gk):
        if gk is None:  # unrotated parts only: nothing to switch
            return super()._rotate_sum(gk)
        return _SwitchedSum(self, gk)

    def _tensor_product(self, a, b):
        rows = a.data.shape[1]
        q32, q64 = self._q(rows)
        mul, add = self.chain.mul, self.chain.add
        d1 = add(mul(a.data[0], b.data[1], q64), mul(a.data[1], b.data[0], q64), q32)
        return torch.stack((mul(a.data[0], b.data[0], q64), d1, mul(a.data[1], b.data[1], q64)))

    def _mul(self, a, b, rk):
        out = RawCiphertext(self._tensor_product(a, b), a.level)
        return out if rk is None else self._relinearize(out, rk)

    def _square(self, a, rk):
        return self._mul(a, a, rk)

    def _switch(self, c, key: RawSwitchKey, level: int):
        """(k0, k1) over Q_level with k0 + k1 s = c * target."""
        digits = self.chain.mod_up(c, level)
        return self.chain.mod_down(self.chain.key_product(digits, key.data, level), level)

    def _relinearize(self, a, rk):
        rows = a.data.shape[1]
        q32 = self._q(rows)[0]
        k = self._switch(a.data[2], rk, a.level)
        return RawCiphertext(self.chain.add(a.data[:2], k, q32), a.level)

    def _rescale(self, a):
        data = a.data
        for _ in self.chain.q_moduli[a.level]:
            data = self.chain.drop_top_word(data)
        return RawCiphertext(data, a.level - 1)

    def _drop_level(self, a, levels):
        level = a.level - levels
        return RawCiphertext(a.data[:, : self._rows(level)].contiguous(), level)

    def _automorphism(self, a, galois: int, gk: RawGaloisKeys):
        return self._rotate_hoisted_elements(a, [galois], gk)[0]

    def _rotate(self, a, step, gk):
        return self._automorphism(a, self.galois_element(step), gk)

    def _conjugate(self, a, gk):
        return self._automorphism(a, self.conjugation_element, gk)

    def _rotate_hoisted(self, a, steps, gk):
        return self._rotate_hoisted_elements(a, [self.galois_element(s) for s in steps], gk)

    def _rotate_hoisted_elements(self, a, elements: list[int], gk: RawGaloisKeys):
        """Raise c1 once, then per element permute the raised digits and switch (hoisting)."""
        q32 = self._q(a.data.shape[1])[0]
        digits = self.chain.mod_up(a.data[1], a.level)
        out = []
        for g in elements:
            c0, switched = self._switched_automorphism(a, digits, g, gk)
            k = self.chain.mod_down(switched, a.level)
            out.append(RawCiphertext(torch.stack((self.chain.add(c0, k[0], q32), k[1])), a.level))
        return out

    def _switched_automorphism(self, a, digits, galois: int, gk: RawGaloisKeys):
        """A rotation before its ModDown: (c0 permuted, the key product of the permuted raised digits of c1,
        over Q*P)."""
        key = gk.keys.get(galois)
        if key is None:
            raise InputError(f"the Galois keys hold no key for element {galois}")
        perm = self._permutation(galois)
        return a.data[0][:, perm], self.chain.key_product(digits[:, :, perm], key.data, a.level)

    # ---- serialization ------------------------------------------------------------------------
    def _raw_kinds(self, raw):
        kinds = {
            RawSecretKey: "secret_key",
            RawCiphertext: "ciphertext",
            RawPlaintext: "plaintext",
            RawPublicKey: "public_key",
            RawSwitchKey: "relin_key",
            RawGaloisKeys: "galois_keys",
            RawBootstrapKeys: "bootstrap_keys",
        }
        kind = kinds.get(type(raw))
        return frozenset({kind} if kind else ())

    def _serialize(self, kind, raw):
        from henn.ckks.backends.gpu import wire

        return wire.write(kind, raw)

    def _deserialize(self, kind, payload, meta):
        from henn.ckks.backends.gpu import wire

        if kind == "bootstrap_keys":
            return wire.read_bootstrap_keys(payload, self._circuit().steps, self._circuit().inner)
        return wire.read(kind, payload, meta, self)


class _SwitchedSum:
    """A sum of rotations whose key switches stay in Q*P until the end: each part adds its permuted c0 and its
    key product, and one ModDown brings the sum down (Lattigo's lazy giant steps)."""

    def __init__(self, backend: GpuBackend, gk: RawGaloisKeys):
        self._be, self._gk = backend, gk
        self._lock = threading.Lock()
        self._c0: Any = None
        self._c1: Any = None  # unrotated parts' c1 (Q)
        self._switched: Any = None  # key products (Q*P)
        self._level = 0

    def add(self, a: RawCiphertext, step: int) -> None:
        be, chain = self._be, self._be.chain
        rows = a.data.shape[1]
        q32 = be._q(rows)[0]
        if not step:
            c0, c1, switched = a.data[0], a.data[1], None
        else:
            c1 = None
            c0, switched = be._switched_automorphism(
                a, chain.mod_up(a.data[1], a.level), be.galois_element(step), self._gk
            )
        with self._lock:
            self._level = a.level
            self._c0 = c0 if self._c0 is None else chain.add(self._c0, c0, q32)
            if c1 is not None:
                self._c1 = c1 if self._c1 is None else chain.add(self._c1, c1, q32)
            if switched is not None:
                self._switched = (
                    switched if self._switched is None else chain.add(self._switched, switched, chain.qp_q32(a.level))
                )

    def result(self) -> RawCiphertext:
        chain = self._be.chain
        q32 = self._be._q(self._c0.shape[0])[0]
        c0, c1 = self._c0, self._c1
        if self._switched is not None:  # the rotated parts' key switches, brought down once
            down = chain.mod_down(self._switched, self._level)
            c0 = chain.add(c0, down[0], q32)
            c1 = down[1] if c1 is None else chain.add(c1, down[1], q32)
        return RawCiphertext(torch.stack((c0, c1)), self._level)


def _load_torch() -> None:
    global torch
    if torch is None:
        try:
            torch = importlib.import_module("torch")
        except ImportError:
            raise BackendError(f"the gpu backend needs torch: {INSTALL_HINT}") from None


BACKEND = GpuBackend
