"""The OpenFHE worker: runs under the CPython 3.10 that install.py set up, holds one CryptoContext and every
object made under it, and answers henn's requests (protocol.py frames) on the two file descriptors it is given.

    python3.10 -I -S worker.py SITE_DIR REQUEST_FD REPLY_FD

Objects live here as integer handles; requests name them. Its stdout is redirected to stderr at start, so that
nothing OpenFHE prints can reach the protocol. Every OpenFHE exception becomes an error reply; the process exits
when its request pipe closes.

Scales: henn keeps every value's exact scale itself. OpenFHE's own bookkeeping (noise-scale degree, scaling
factor) is reset after each operation to degree 1 and 2^p (p: the scaling-mod size), so that OpenFHE never
rescales or re-scales an operand on its own; values are scaled by scale / D(level) before OpenFHE encodes them
at its factor D(level), and decrypted values, decoded by OpenFHE at 2^p, are scaled back by 2^p / scale.
"""

import json
import math
import os
import struct
import sys
from typing import Any

SITE, REQ_FD, REP_FD = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sys.path.insert(0, SITE)
sys.path.append(os.path.dirname(os.path.abspath(__file__)))  # protocol.py (-I leaves the script's folder out)
os.dup2(2, 1)  # whatever the library prints goes to stderr, never into the protocol

import numpy as np  # noqa: E402
import openfhe as o  # noqa: E402
import protocol  # noqa: E402

TECHNIQUES = {
    "FIXEDMANUAL": o.FIXEDMANUAL,
    "FIXEDAUTO": o.FIXEDAUTO,
    "FLEXIBLEAUTO": o.FLEXIBLEAUTO,
    "FLEXIBLEAUTOEXT": o.FLEXIBLEAUTOEXT,
}
PT_MAGIC = b"HOFP"
PT_HEAD = struct.Struct("<4sIId")  # magic, OpenFHE level, slots, factor the stored values are divided by
MAX_CORRECTION = 40  # the largest correction factor a bootstrap sets (values at most 2^31 times the range)
BK_HEAD = struct.Struct("<Q")  # bootstrapping keys: bytes of the rotation key map, then the relinearization key


def root_of_unity(q, m):
    """A primitive m-th root of unity mod the prime q (m | q - 1, m a power of two), the same in every worker (the
    first of x^((q-1)/m), x = 2, 3, ...): a client's and a server's contexts must agree on it."""
    x = 2
    while True:
        r = pow(x, (q - 1) // m, q)
        if pow(r, m // 2, q) == q - 1:
            return r
        x += 1


class Refused(Exception):
    """A request this worker will not run (bad handle, wrong kind, malformed): an input error for henn."""


class BadData(Exception):
    """Serialized data OpenFHE cannot load or that does not belong to this context."""


class Worker:
    def __init__(self):
        self.cc: Any = None  # the openfhe.CryptoContext (an untyped module) once op_open made it
        self.objs: dict[int, list[Any]] = {}  # id -> [kind, object, extra]
        self.next_id = 1
        self.active_rk = None  # handle whose relinearization key is in OpenFHE's global map
        self.active_gk = None  # (handle, tag) whose rotation keys are in the global map
        self.boot_slots = None  # slots of a bootstrapping context (setup_bootstrap)

    # ---- handles ---------------------------------------------------------------------------
    def put(self, kind, obj, extra=None):
        h = self.next_id
        self.next_id += 1
        self.objs[h] = [kind, obj, extra]
        return h

    def get(self, h, kind):
        entry = self.objs.get(h) if type(h) is int else None
        if entry is None:
            raise Refused(f"unknown handle {h!r}: the object was released or belongs to another context")
        if entry[0] != kind:
            raise Refused(f"handle {h} is a {entry[0]}, not a {kind}")
        return entry[1]

    def free(self, ids):
        for h in ids:
            self.objs.pop(h, None)
            if h == self.active_rk:
                o.ClearEvalMultKeys()
                self.active_rk = None
            if self.active_gk is not None and h == self.active_gk[0]:
                o.CryptoContext.ClearEvalAutomorphismKeys()
                self.active_gk = None

    def ct(self, c):
        """A result ciphertext with OpenFHE's scale bookkeeping reset (module docstring)."""
        c.SetNoiseScaleDeg(1)
        c.SetScalingFactor(self.two_p)
        return self.put("ct", c)

    # ---- context ---------------------------------------------------------------------------
    def op_hello(self, m, b):
        return {"openfhe": o.__version__, "python": sys.version.split()[0], "numpy": np.__version__}, []

    def op_open(self, m, b):
        if self.cc is not None:
            raise Refused("this worker has a context already")
        p = o.CCParamsCKKSRNS()
        p.SetMultiplicativeDepth(m["depth"])
        p.SetFirstModSize(m["first"])
        p.SetScalingModSize(m["scaling"])
        p.SetRingDim(1 << m["log_n"])
        p.SetBatchSize(1 << (m["log_n"] - 1))
        p.SetSecurityLevel(o.HEStd_NotSet)  # henn's security module checks the primes OpenFHE chose
        p.SetScalingTechnique(TECHNIQUES[m["technique"]])
        p.SetKeySwitchTechnique(o.HYBRID)
        p.SetNumLargeDigits(m["dnum"])
        p.SetCKKSDataType(o.COMPLEX)
        p.SetSecretKeyDist(o.UNIFORM_TERNARY)
        cc = o.GenCryptoContext(p)
        if m.get("pinned"):
            cc = self.pin_primes(cc, m["pinned"], 1 << m["log_n"])
        boot = m.get("boot")
        for feature in (o.PKE, o.KEYSWITCH, o.LEVELEDSHE) + ((o.ADVANCEDSHE, o.FHE) if boot else ()):
            cc.Enable(feature)
        self.cc, self.depth, self.n = cc, m["depth"], 1 << m["log_n"]
        # FLEXIBLEAUTOEXT puts an extra small prime above the chain: a fresh encryption is made at Delta * q_ext
        # and brought down by it at once (op_encrypt), so henn's levels sit one OpenFHE level lower
        self.ext = int(m["technique"] == "FLEXIBLEAUTOEXT")
        self.slots = self.n // 2
        self.two_p = 2.0 ** cc.GetPlaintextModulus()
        extra = {}
        if boot:
            extra = self.setup_bootstrap(boot, m["first"] - m["scaling"])
        data = json.loads(o.Serialize(cc, o.JSON))["value0"]["ptr_wrapper"]["data"]
        params = data["cc"]["ptr_wrapper"]["data"]["value0"]
        towers = params["value0"]["value0"]["elp"]["ptr_wrapper"]["data"]["p"]
        q = self.q = [int(t["ptr_wrapper"]["data"]["value0"]["cm"]["v"]) for t in towers]
        factors = [cc.GetScalingFactorReal(self.level(lv)) for lv in range(self.depth + 1)]
        return {
            "q": q,
            "factors": factors,
            "two_p": self.two_p,
            "dnum": params["dnum"],
            "aux_bits": params["ab"],
            **extra,
        }, []

    @staticmethod
    def pin_primes(cc, pinned, n):
        """The context `cc` with the ciphertext primes `pinned` (henn's fixed mode): its JSON serialization with
        each tower's modulus and 2N-th root of unity, and the product of the moduli, replaced, loaded again.
        OpenFHE recomputes its tables (and its special primes) from them when it loads a context."""
        data = json.loads(o.Serialize(cc, o.JSON))
        elp = data["value0"]["ptr_wrapper"]["data"]["cc"]["ptr_wrapper"]["data"]["value0"]["value0"]["value0"]
        elp = elp["elp"]["ptr_wrapper"]["data"]
        if len(elp["p"]) != len(pinned):
            raise Refused(f"OpenFHE made {len(elp['p'])} primes for the {len(pinned)} pinned ones")
        for tower, q in zip(elp["p"], pinned):
            if (q - 1) % (2 * n) or q.bit_length() > 60:
                raise Refused(f"pinned prime {q} is not 1 mod 2N or has more than 60 bits")
            tower["ptr_wrapper"]["data"]["value0"]["cm"]["v"] = q
            tower["ptr_wrapper"]["data"]["value0"]["ru"]["v"] = root_of_unity(q, 2 * n)
        big = math.prod(pinned)
        elp["value0"]["cm"]["v"] = [(big >> (64 * i)) & (2**64 - 1) for i in range(-(-big.bit_length() // 64))]
        elp["value0"]["cm"]["m"] = big.bit_length()
        return o.DeserializeCryptoContextString(json.dumps(data), o.JSON)

    def op_boot_depth(self, m, b):
        """Levels OpenFHE's bootstrapping takes for this level budget (asked before the context exists)."""
        return o.CryptoContext.GetBootstrapDepth(m["budget"], o.UNIFORM_TERNARY), []

    def setup_bootstrap(self, boot, ratio_bits):
        """EvalBootstrapSetup without its precomputed DFT plaintexts: they are made at the first bootstrap (a
        client that only makes keys never needs them; gigabytes at N = 2^16)."""
        self.boot_slots, self.boot_levels, self.boot_ready = boot["slots"], boot["levels"], False
        self.cc.EvalBootstrapSetup(boot["budget"], [0, 0], self.boot_slots, 0, False)
        factor = self.boot_correction = self.cc.GetCKKSBootCorrectionFactor()
        self.boot_ratio = max(0, ratio_bits)
        if ratio_bits > factor:
            raise Refused(
                f"OpenFHE's bootstrapping takes a first prime at most 2^{factor} times the scaling primes "
                f"(its correction factor), this one is 2^{ratio_bits} times: a smaller first prime or "
                "larger scaling primes"
            )
        return {"boot_correction": factor}

    def level(self, henn_level):
        return self.depth - henn_level + self.ext

    # ---- keys ------------------------------------------------------------------------------
    def op_keygen_sk(self, m, b):
        kp = self.cc.KeyGen()
        return self.put("sk", kp.secretKey, kp.publicKey), []

    def op_keygen_pk(self, m, b):
        self.get(m["sk"], "sk")
        return self.put("pk", self.objs[m["sk"]][2]), []

    def op_export_sk(self, m, b):
        self.get(m["sk"], "sk")
        _, sk, pk = self.objs[m["sk"]]
        return None, [o.Serialize(sk, o.BINARY), o.Serialize(pk, o.BINARY)]

    def op_import_sk(self, m, b):
        if len(b) != 2:
            raise BadData("a secret key file holds the secret and the public key")
        sk = self.load(o.DeserializePrivateKeyString, b[0], "secret key")
        pk = self.load(o.DeserializePublicKeyString, b[1], "public key")
        if sk.GetKeyTag() != pk.GetKeyTag():
            raise BadData("the secret and the public key of the file belong to different key sets")
        return self.put("sk", sk, pk), []

    def op_keygen_rk(self, m, b):
        sk = self.get(m["sk"], "sk")
        o.ClearEvalMultKeys()
        self.cc.EvalMultKeyGen(sk)
        rk = self.cc.GetEvalMultKeyVector(sk.GetKeyTag())[0]
        h = self.put("rk", rk)
        self.active_rk = h
        return h, []

    def op_keygen_gk(self, m, b):
        sk = self.get(m["sk"], "sk")
        index = [self.cc.FindAutomorphismIndex(s) for s in m["steps"]] + ([2 * self.n - 1] if m["conj"] else [])
        o.CryptoContext.ClearEvalAutomorphismKeys()
        keys = self.cc.EvalAutomorphismKeyGen(sk, index)  # now the global map of this tag, unchanged from here on
        h = self.put("gk", keys, {"index": sorted(set(index))})
        self.active_gk = (h, sk.GetKeyTag())
        return h, []

    def op_keygen_bk(self, m, b):
        """EvalBootstrapKeyGen's rotation keys and a relinearization key (its EvalMod multiplies), held as one
        object; OpenFHE's global maps are left empty of them."""
        sk = self.get(m["sk"], "sk")
        if self.boot_slots is None:
            raise Refused("this context was opened without bootstrap parameters")
        tag = sk.GetKeyTag()
        o.CryptoContext.ClearEvalAutomorphismKeys()
        self.active_gk = None
        self.cc.EvalBootstrapKeyGen(sk, self.boot_slots)
        keys = o.CryptoContext.GetEvalAutomorphismKeyMap(tag)
        count = len(self.cc.GetExistingEvalAutomorphismKeyIndices(tag))
        o.CryptoContext.ClearEvalAutomorphismKeys()
        o.ClearEvalMultKeys()
        self.active_rk = None
        self.cc.EvalMultKeyGen(sk)
        rk = self.cc.GetEvalMultKeyVector(tag)[0]
        o.ClearEvalMultKeys()
        return [self.put("bk", (keys, rk)), count + 1], []

    def use_rk(self, h):
        rk = self.get(h, "rk")
        if self.active_rk != h:
            o.ClearEvalMultKeys()
            self.active_rk = None
            o.CryptoContext.InsertEvalMultKey([rk])
            self.active_rk = h

    def use_gk(self, h, tag):
        """The rotation keys of handle h in OpenFHE's global map under `tag` (the hoisted rotations read it)."""
        keys = self.get(h, "gk")
        if self.active_gk != (h, tag):
            o.CryptoContext.ClearEvalAutomorphismKeys()
            self.active_gk = None
            o.CryptoContext.InsertEvalAutomorphismKey(keys, tag)
            self.active_gk = (h, tag)
        return keys

    # ---- encoding, encryption ------------------------------------------------------------------
    def op_encode(self, m, b):
        values = np.frombuffer(b[0], dtype="<f8" if m.get("real") else "<c16")
        lv = self.level(m["level"])
        factor = self.cc.GetScalingFactorReal(lv)
        pt = self.cc.MakeCKKSPackedPlaintext(values * (m["scale"] / factor), 1, lv, None, self.slots)
        return self.put("pt", pt, factor), []

    def op_decode(self, m, b):
        pt = self.get(m["pt"], "pt")
        factor = self.objs[m["pt"]][2]
        values = np.asarray(pt.GetCKKSPackedValueArray(), dtype=np.complex128)[: self.slots]
        return None, [(values * (factor / m["scale"])).astype("<c16").tobytes()]

    def op_encrypt(self, m, b):
        key = self.get(m["key"], "sk" if m["symmetric"] else "pk")
        pt = self.get(m["pt"], "pt")
        if self.ext and pt.GetLevel() == self.level(self.depth):
            # the same values at OpenFHE's extended level 0 (scale Delta * q_ext), encrypted, then divided by
            # q_ext: the encryption noise shrinks by q_ext (FLEXIBLEAUTOEXT's point)
            values = np.asarray(pt.GetCKKSPackedValue(), dtype=np.complex128)[: self.slots]
            c = self.cc.Encrypt(key, self.cc.MakeCKKSPackedPlaintext(values, 1, 0, None, self.slots))
            return self.ct(self.cc.Compress(c, self.towers(c) - 1, 1)), []
        return self.ct(self.cc.Encrypt(key, pt)), []

    def op_decrypt(self, m, b):
        c, sk = self.get(m["ct"], "ct"), self.get(m["sk"], "sk")
        c.SetScalingFactor(self.two_p)  # decoded at 2^p in every scaling technique
        return self.put("pt", self.cc.Decrypt(sk, c), self.two_p), []

    # ---- arithmetic ------------------------------------------------------------------------------
    def op_add(self, m, b):
        return self.ct(self.cc.EvalAdd(self.get(m["a"], "ct"), self.get(m["b"], "ct"))), []

    def op_sub(self, m, b):
        return self.ct(self.cc.EvalSub(self.get(m["a"], "ct"), self.get(m["b"], "ct"))), []

    def op_add_plain(self, m, b):
        return self.ct(self.cc.EvalAdd(self.get(m["a"], "ct"), self.get(m["pt"], "pt"))), []

    def op_sub_plain(self, m, b):
        return self.ct(self.cc.EvalSub(self.get(m["a"], "ct"), self.get(m["pt"], "pt"))), []

    def op_negate(self, m, b):
        return self.ct(self.cc.EvalNegate(self.get(m["a"], "ct"))), []

    def op_mul(self, m, b):
        a, c = self.get(m["a"], "ct"), self.get(m["b"], "ct")
        if m["rk"] is None:
            return self.ct(self.cc.EvalMultNoRelin(a, c)), []
        self.use_rk(m["rk"])
        return self.ct(self.cc.EvalMult(a, c)), []

    def op_mul_plain(self, m, b):
        return self.ct(self.cc.EvalMult(self.get(m["a"], "ct"), self.get(m["pt"], "pt"))), []

    def op_relinearize(self, m, b):
        a = self.get(m["a"], "ct")
        self.use_rk(m["rk"])
        return self.ct(self.cc.Relinearize(a)), []

    def op_rescale(self, m, b):
        a = self.get(m["a"], "ct")
        if self.cc.GetScalingTechnique() == o.FIXEDMANUAL:
            return self.ct(self.cc.Rescale(a)), []
        a.SetNoiseScaleDeg(2)  # Compress drops one prime per degree above the one asked for
        try:
            return self.ct(self.cc.Compress(a, self.towers(a) - 1, 1)), []
        finally:
            a.SetNoiseScaleDeg(1)

    def towers(self, a):
        return self.depth + 1 + self.ext - a.GetLevel()

    def op_drop_level(self, m, b):
        a = self.get(m["a"], "ct")
        return self.ct(self.cc.Compress(a, self.towers(a) - m["levels"], 1)), []

    def scalar_mul(self, a, re, im, scale):
        """round(c * scale) * a: OpenFHE multiplies by round(c' * D(level)), so c' = c * scale / D(level).

        OpenFHE rounds a negative constant as trunc(x + 0.5) (one unit toward zero: -1 at scale 1 becomes 0), so c
        is first turned into the closed first quadrant by quarter turns, undone exactly afterwards (i is the
        monomial X^(N/2), -1 a negation). A negative real turns by a half (a negation): a complex constant costs
        OpenFHE an encoded polynomial and a product, ~6x a real one (N = 2^15)."""
        d = self.cc.GetScalingFactorReal(a.GetLevel())
        f, c, turns = scale / d, complex(re, im), 0
        if c.imag == 0 and c.real < 0:
            c, turns = -c, 2
        while c.real < 0 or c.imag < 0:
            c, turns = c * -1j, turns + 1
        r = self.cc.EvalMult(a, complex(c.real * f, c.imag * f) if c.imag else c.real * f)
        if turns % 2:
            r = self.cc.EvalMult(r, complex(0.0, 1.0 / d))
        return self.cc.EvalNegate(r) if turns >= 2 else r

    def op_mul_scalar(self, m, b):
        return self.ct(self.scalar_mul(self.get(m["a"], "ct"), m["re"], m["im"], m["scale"])), []

    def op_add_scalar(self, m, b):
        a = self.get(m["a"], "ct")
        f = m["scale"] / self.cc.GetScalingFactorReal(a.GetLevel())
        re, im = m["re"] * f, m["im"] * f
        return self.ct(self.cc.EvalAdd(a, complex(re, im) if im else re)), []

    def op_linear_combinations(self, m, b):
        """One combination sum_j w_ij * ct_j per row of the weight matrix (blob: float64, rows x len(cts))."""
        cts = [self.get(h, "ct") for h in m["cts"]]
        w = np.frombuffer(b[0], dtype="<f8").reshape(-1, len(cts))
        # each term is |w| * ct added or subtracted in place: one real product and no new ciphertext per term
        # (scalar_mul's rule for negative reals), with the level's factor looked up once per input
        mult, add, sub = self.cc.EvalMult, self.cc.EvalAddInPlace, self.cc.EvalSubInPlace
        factors = [m["scale"] / self.cc.GetScalingFactorReal(c.GetLevel()) for c in cts]
        out = []
        for row in w:
            acc = None
            for j in np.flatnonzero(row).tolist():
                wj = float(row[j])
                term = mult(cts[j], abs(wj) * factors[j])
                if acc is None:
                    acc = term if wj > 0 else self.cc.EvalNegate(term)
                elif wj > 0:
                    add(acc, term)
                else:
                    sub(acc, term)
            out.append(self.ct(acc if acc is not None else self.scalar_mul(cts[0], 0.0, 0.0, m["scale"])))
        return out, []

    def op_dot_plain(self, m, b):
        acc = None
        for hc, hp in zip(m["cts"], m["pts"]):
            term = self.cc.EvalMult(self.get(hc, "ct"), self.get(hp, "pt"))
            acc = term if acc is None else self.cc.EvalAdd(acc, term)
        return self.ct(acc), []

    # ---- bootstrapping ---------------------------------------------------------------------------
    def op_bootstrap(self, m, b):
        """henn's bootstrap of ct a (x at henn scale `scale`, |x| <= `divide`, a power of two).

        OpenFHE's EvalBootstrap reads a at its scale 2^p (p: the scaling primes' bits, henn's log_scale), takes
        one level of it (a product by 2^-c, c its correction factor, then a rescale), and returns the same
        message: x at `scale` again, one level above henn's top (its FIXEDMANUAL output is at degree 2). Here
        c grows by log2(divide * scale / 2^p), so that x / divide, not x, is what its modular reduction sees
        (it undoes that factor itself), and the level above henn's top, which the context has for this,
        matches the scale: times round(k * q) / q with k = out_scale / scale."""
        a = self.get(m["a"], "ct")
        keys, rk = self.get(m["keys"], "bk")
        if a.GetLevel() >= self.depth:
            raise Refused("bootstrapping needs a ciphertext at level 1 or above")
        tag = a.GetKeyTag()
        if rk.GetKeyTag() != tag:
            raise Refused("the bootstrapping keys belong to another key set than the ciphertext")
        shift = round(math.log2(m["divide"] * m["scale"] / self.two_p))
        factor = self.boot_correction + shift
        if factor < self.boot_ratio or factor > MAX_CORRECTION:
            raise Refused(
                f"values up to {m['divide']:g} at scale 2^{math.log2(m['scale']):.1f} are outside what "
                f"OpenFHE's bootstrapping takes (its correction factor would be {factor}, it needs "
                f"{self.boot_ratio}..{MAX_CORRECTION}): bring the scale near 2^{math.log2(self.two_p):.0f}"
            )
        if not self.boot_ready:
            self.cc.EvalBootstrapPrecompute(self.boot_slots)
            self.boot_ready = True
        o.CryptoContext.ClearEvalAutomorphismKeys()
        o.ClearEvalMultKeys()
        self.active_gk = self.active_rk = None
        try:
            o.CryptoContext.InsertEvalAutomorphismKey(keys, tag)
            o.CryptoContext.InsertEvalMultKey([rk])
            self.cc.SetCKKSBootCorrectionFactor(factor)
            if self.boot_slots != self.slots:  # fewer slots: henn's vector repeats with their period
                a = a.Clone()
                a.SetSlots(self.boot_slots)
            out = self.cc.EvalBootstrap(a)
            out.SetSlots(self.slots)
        except Exception as exc:  # noqa: BLE001 - a key the map lacks, as OpenFHE reports it
            raise Refused(f"OpenFHE's EvalBootstrap failed with these keys ({exc})") from None
        finally:
            self.cc.SetCKKSBootCorrectionFactor(self.boot_correction)
            o.CryptoContext.ClearEvalAutomorphismKeys()
            o.ClearEvalMultKeys()
        while out.GetNoiseScaleDeg() > 1:
            out = self.cc.Rescale(out)
        if self.towers(out) != self.boot_levels + 2:
            raise Refused(
                f"OpenFHE's bootstrap returned {self.towers(out)} primes, henn's top level has "
                f"{self.boot_levels + 1} and one above it"
            )
        out.SetScalingFactor(self.two_p)
        prime = float(self.q[self.boot_levels + 1])
        return self.ct(self.cc.Rescale(self.scalar_mul(out, m["out_scale"] / m["scale"], 0.0, prime))), []

    # ---- rotations ------------------------------------------------------------------------------
    def automorphism(self, a, index, h):
        keys = self.get(h, "gk")
        if index not in self.objs[h][2]["index"]:
            raise Refused(f"the rotation keys of handle {h} hold no key of automorphism {index}")
        return self.cc.EvalAutomorphism(a, index, keys)

    def op_rotate(self, m, b):
        a = self.get(m["a"], "ct")
        return self.ct(self.automorphism(a, self.cc.FindAutomorphismIndex(m["step"]), m["gk"])), []

    def op_conjugate(self, m, b):
        return self.ct(self.automorphism(self.get(m["a"], "ct"), 2 * self.n - 1, m["gk"])), []

    def hoisted(self, a, steps, h):
        """Rotations of one ciphertext sharing one digit decomposition (EvalFastRotation)."""
        index = self.objs[h][2]["index"] if h in self.objs else ()
        missing = [s for s in steps if self.cc.FindAutomorphismIndex(s) not in index]
        if missing:
            self.get(h, "gk")
            raise Refused(f"the rotation keys of handle {h} hold no key of steps {missing}")
        if len(steps) == 1:
            return [self.automorphism(a, self.cc.FindAutomorphismIndex(steps[0]), h)]
        self.use_gk(h, a.GetKeyTag())
        digits = self.cc.EvalFastRotationPrecompute(a)
        return [self.cc.EvalFastRotation(a, s, 2 * self.n, digits) for s in steps]

    def op_rotate_hoisted(self, m, b):
        return [self.ct(r) for r in self.hoisted(self.get(m["a"], "ct"), m["steps"], m["gk"])], []

    def op_rotate_sum(self, m, b):
        """sum_i rotate(ct_i, step_i), the rotations of one ciphertext hoisted together."""
        groups: dict[int, list[int]] = {}
        for h, step in m["parts"]:
            self.get(h, "ct")
            groups.setdefault(h, []).append(step)
        acc = None
        for h, steps in groups.items():
            a = self.get(h, "ct")
            moved = sorted({s for s in steps if s})
            rotated = dict(zip(moved, self.hoisted(a, moved, m["gk"]))) if moved else {}
            for s in steps:
                part = rotated[s] if s else a
                acc = part if acc is None else self.cc.EvalAdd(acc, part)
        return self.ct(acc), []

    # ---- serialization --------------------------------------------------------------------------
    def op_serialize(self, m, b):
        kind = m["what"]
        obj = self.get(m["h"], kind)
        if kind == "pt":
            values = np.asarray(obj.GetCKKSPackedValueArray(), dtype=np.complex128)[: self.slots]
            head = PT_HEAD.pack(PT_MAGIC, obj.GetLevel(), self.slots, self.objs[m["h"]][2])
            return None, [head + values.astype("<c16").tobytes()]
        if kind == "bk":
            keys, rk = (o.Serialize(x, o.BINARY) for x in obj)
            return None, [BK_HEAD.pack(len(keys)) + keys + rk]
        return None, [o.Serialize(obj, o.BINARY)]

    def load(self, fn, data, what, whole=True):
        try:
            obj = fn(data, o.BINARY)
        except Exception as exc:  # noqa: BLE001 - OpenFHE reports bad data with assorted exceptions
            raise BadData(f"OpenFHE cannot load this {what}: {exc}") from None
        if obj is None:
            raise BadData(f"OpenFHE loaded no {what} from the data")
        if whole and self.loads(fn, data[:-1]):
            # OpenFHE reads what it needs and ignores the rest, so an object that is all of the data no longer
            # loads without its last byte (serializing it again is no test: a loaded object serializes longer)
            raise BadData(f"the payload holds more than one {what}: bytes follow it")
        return obj

    @staticmethod
    def loads(fn, data):
        try:
            return fn(data, o.BINARY) is not None
        except Exception:  # noqa: BLE001
            return False

    def own_context(self, obj, what):
        if obj.GetCryptoContext() is not self.cc:
            raise BadData(f"this {what} belongs to other OpenFHE parameters")
        return obj

    def op_deserialize(self, m, b):
        kind, data = m["what"], b[0]
        if kind == "pt":
            return self.load_plaintext(m, data), []
        if kind == "ct":
            c = self.own_context(self.load(o.DeserializeCiphertextString, data, "ciphertext"), "ciphertext")
            if c.GetLevel() != self.level(m["level"]) or c.NumberCiphertextElements() != m["degree"] + 1:
                raise BadData(
                    f"the ciphertext holds {self.towers(c)} primes and {c.NumberCiphertextElements()} "
                    f"parts, its header says level {m['level']} and degree {m['degree']}"
                )
            return self.ct(c), []
        if kind == "pk":
            return self.put(
                "pk", self.own_context(self.load(o.DeserializePublicKeyString, data, "public key"), "public key")
            ), []
        if kind == "rk":
            return self.put("rk", self.load(o.DeserializeEvalKeyString, data, "relinearization key")), []
        if kind == "bk":
            return self.load_bootstrap_keys(data), []
        keys = self.load(o.DeserializeEvalKeyMapString, data, "rotation key set")
        o.CryptoContext.ClearEvalAutomorphismKeys()
        self.active_gk = None
        o.CryptoContext.InsertEvalAutomorphismKey(keys, "")
        held = self.cc.GetAllEvalAutomorphismKeys()
        tag = next(iter(held), None)
        index = sorted(self.cc.GetExistingEvalAutomorphismKeyIndices(tag)) if tag is not None else []
        o.CryptoContext.ClearEvalAutomorphismKeys()
        want = [self.cc.FindAutomorphismIndex(s) for s in m["steps"]] + ([2 * self.n - 1] if m["conj"] else [])
        missing = [s for s, i in zip(m["steps"] + [0], want) if i not in index]
        if missing:
            raise BadData(
                f"the rotation key set lacks the keys of steps {missing} (0 = conjugation) that its header announces"
            )
        return self.put("gk", keys, {"index": index}), []

    def load_bootstrap_keys(self, data):
        """The rotation key map and relinearization key of op_keygen_bk; both of one key set."""
        n = BK_HEAD.unpack_from(data)[0] if len(data) >= BK_HEAD.size else -1
        if not 0 < n < len(data) - BK_HEAD.size:
            raise BadData("the bootstrapping keys' payload is not a rotation key map and a relinearization key")
        # gigabytes at N = 2^16: loaded once (bytes after it would be the relinearization key's, checked whole)
        keys = self.load(
            o.DeserializeEvalKeyMapString, data[BK_HEAD.size : BK_HEAD.size + n], "bootstrapping key map", whole=False
        )
        rk = self.load(o.DeserializeEvalKeyString, data[BK_HEAD.size + n :], "bootstrapping relinearization key")
        o.CryptoContext.ClearEvalAutomorphismKeys()
        self.active_gk = None
        try:
            o.CryptoContext.InsertEvalAutomorphismKey(keys, rk.GetKeyTag())
            held = self.cc.GetExistingEvalAutomorphismKeyIndices(rk.GetKeyTag())
        finally:
            o.CryptoContext.ClearEvalAutomorphismKeys()
        if not held or (2 * self.n - 1) not in held:
            raise BadData("the bootstrapping key map holds no conjugation key of this key set")
        return self.put("bk", (keys, rk))

    def load_plaintext(self, m, data):
        if len(data) != PT_HEAD.size + 16 * self.slots:
            raise BadData(
                f"a plaintext of {self.slots} slots is {PT_HEAD.size + 16 * self.slots} bytes, not {len(data)}"
            )
        magic, lv, slots, factor = PT_HEAD.unpack_from(data)
        if (
            magic != PT_MAGIC
            or slots != self.slots
            or lv != self.level(m["level"])
            or not (factor > 0 and np.isfinite(factor))
        ):
            raise BadData("the plaintext payload's own header is malformed or disagrees with henn's")
        values = np.frombuffer(data, dtype="<c16", offset=PT_HEAD.size)
        if not np.all(np.isfinite(values)):
            raise BadData("the plaintext payload holds NaN or infinite values")
        enc = self.cc.GetScalingFactorReal(lv)
        pt = self.cc.MakeCKKSPackedPlaintext(values * (factor / enc), 1, lv, None, self.slots)
        return self.put("pt", pt, enc)

    def op_kinds(self, m, b):
        return [self.objs[h][0] if h in self.objs else None for h in m["hs"]], []


def serve():
    w = Worker()
    while True:
        try:
            meta, blobs = protocol.read_frame(REQ_FD)
        except protocol.Closed:
            return
        w.free(meta.get("free", ()))
        op = meta.get("op")
        fn = getattr(w, f"op_{op}", None) if isinstance(op, str) else None
        try:
            if fn is None:
                raise Refused(f"unknown request {op!r}")
            if w.cc is None and op not in ("hello", "open", "boot_depth"):
                raise Refused("no context opened yet")
            result, out = fn(meta, blobs)
            reply = {"ok": True, "r": result}
        except Refused as exc:
            reply, out = {"ok": False, "kind": "refused", "msg": str(exc)}, []
        except BadData as exc:
            reply, out = {"ok": False, "kind": "data", "msg": str(exc)}, []
        except Exception as exc:  # noqa: BLE001 - every library failure becomes an error reply
            reply, out = {"ok": False, "kind": "library", "msg": f"{type(exc).__name__}: {exc}"}, []
        protocol.write_frame(REP_FD, reply, out)


if __name__ == "__main__":
    serve()
