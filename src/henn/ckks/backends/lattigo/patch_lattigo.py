"""The patched Lattigo module the bridge builds against: v6.2.0 plus henn's NTT hook.

go.mod replaces github.com/tuneinsight/lattigo/v6 with go/lattigo-v6.2.0-henn (not in git). This module makes
that directory: it downloads the pinned release through the Go module proxy (its checksum checked by Go
against the public sum database), copies it, adds lattigo_patch/accelerator.go to its ring package and calls
to it (at the top of each exported NTT function and of ModUpExact, in both branches of the key-switching
decomposition, in the lazy Montgomery products and in five element-wise loops), so that the bridge can install
its vector kernels (go/ntt_ifma.go, go/extend_ifma.go, go/montgomery_ifma.go, go/vec_ifma.go); and
lattigo_patch/dft/shapes.go to its DFT package with switches in NewMatrixFromLiteral and GenMatrices, so that
a bootstrapping evaluator whose DFT factors the bridge encodes as they run is built without encoding them all
first, their values generated in complex128 (lattigo_patch/dft/diagonals128.go), and what keeping them encoded
takes is known from the parameters; and lattigo_patch/sampling/drbg.go to its sampling package, so that key
generation and encryption draw their randomness from AES-256-CTR seeded by crypto/rand (18x faster here)
rather than from crypto/rand for every KiB; and lattigo_patch/rlwe/seeded.go to its rlwe package, with the
seed of a compressed evaluation key moved to its GadgetCiphertext and calls at the top of the gadget products,
key generation and Expand, so that a seeded key stays seeded while it is used: each key switch regenerates the
a halves it reads from per-prime AES-256-CTR streams (half the key memory), prime by prime as it multiplies
(lattigo_patch/rlwe/seeded_product.go). Everything else is Lattigo's code, unchanged (Apache-2.0: its LICENSE
is copied with it).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from henn.errors import BackendError

log = logging.getLogger(__name__)

MODULE = "github.com/tuneinsight/lattigo/v6"
VERSION = "v6.2.0"
PACKAGE_DIR = Path(__file__).resolve().parent
PATCH_DIR = PACKAGE_DIR / "lattigo_patch"
PATCHED_DIR = PACKAGE_DIR / "go" / f"lattigo-{VERSION}-henn"
STAMP = PATCHED_DIR / ".henn-patch"
DOWNLOAD_TIMEOUT_S = 600

# the hook call opening each exported NTT function of ring/ntt.go: (signature, forward, ring, 1/n argument)
_NTT_FUNCTIONS = (
    (
        "NTTStandard(p1, p2 []uint64, N int, Q, MRedConstant uint64, BRedConstant [2]uint64, roots []uint64)",
        "true, false",
        "0",
    ),
    ("NTTStandardLazy(p1, p2 []uint64, N int, Q, MRedConstant uint64, roots []uint64)", "true, false", "0"),
    ("INTTStandard(p1, p2 []uint64, N int, NInv, Q, MRedConstant uint64, roots []uint64)", "false, false", "NInv"),
    ("INTTStandardLazy(p1, p2 []uint64, N int, NInv, Q, MRedConstant uint64, roots []uint64)", "false, false", "NInv"),
    (
        "NTTConjugateInvariant(p1, p2 []uint64, N int, Q, MRedConstant uint64, BRedConstant [2]uint64, roots []uint64)",
        "true, true",
        "0",
    ),
    ("NTTConjugateInvariantLazy(p1, p2 []uint64, N int, Q, MRedConstant uint64, roots []uint64)", "true, true", "0"),
    (
        "INTTConjugateInvariant(p1, p2 []uint64, N int, NInv, Q, MRedConstant uint64, roots []uint64)",
        "false, true",
        "NInv",
    ),
    (
        "INTTConjugateInvariantLazy(p1, p2 []uint64, N int, NInv, Q, MRedConstant uint64, roots []uint64)",
        "false, true",
        "NInv",
    ),
)
_NTT_HOOKS = tuple(
    (f"func {sig} {{\n", f"\tif accelerated({kind}, p1, p2, N, Q, MRedConstant, {ninv}, roots) {{\n\t\treturn\n\t}}\n")
    for sig, kind, ninv in _NTT_FUNCTIONS
)


def patch_sources() -> list[Path]:
    """The files that define the patch (a change rebuilds the patched module and the bridge)."""
    return sorted(PATCH_DIR.rglob("*.go")) + [Path(__file__).resolve()]


# this module as this process loaded it: a process started before an edit applies its own hooks, so it
# stamps what it applied, and a newer process sees a different stamp and prepares again
_THIS_MODULE = Path(__file__).resolve().read_bytes()


def _fingerprint() -> str:
    digest = hashlib.sha256(VERSION.encode())
    for path in patch_sources():
        digest.update(_THIS_MODULE if path == Path(__file__).resolve() else path.read_bytes())
    return digest.hexdigest()


def is_prepared() -> bool:
    return STAMP.exists() and STAMP.read_text() == _fingerprint()


# (anchor, code inserted after it) in ring/basis_extension.go: the lift of a one-prime digit, the exact
# basis extension (ModUpExact: ModUp and ModDown), the extension of a multi-prime digit
_EXTENSION_HOOKS = (
    (
        "\tif decompLvl < 0 {\n",
        """\t\tin, qIn := p0Q.Coeffs[lvlQStart][:N], ringQ.ModuliChain()[lvlQStart]
\t\tif liftAccelerated(in, qIn, ringQ.ModuliChain(), p1Q.Coeffs[:levelQ+1]) &&
\t\t\t(ringP == nil || liftAccelerated(in, qIn, ringP.ModuliChain(), p1P.Coeffs[:levelP+1])) {
\t\t\treturn
\t\t}
""",
    ),
    (
        "func ModUpExact(p1, p2 [][]uint64, ringQ, ringP *Ring, MUC ModUpConstants) {\n",
        """\tif extensionAccelerated(p1, nil, ringQ.ModuliChain()[:len(p1)], ringQ.MRedConstants(), MUC.qoverqiinvqi,
\t\tp2, ringP.ModuliChain()[:len(p2)], ringP.MRedConstants(), MUC.qoverqimodp[:len(p2)], MUC.vtimesqmodp[:len(p2)]) {
\t\treturn
\t}
""",
    ),
    (
        "\t\tQHalfModqi := make([]uint64, p0idxed-p0idxst)\n\t\ttmp := bignum.NewInt(0)\n"
        "\t\tfor i, j := 0, p0idxst; j < p0idxed; i, j = i+1, j+1 {\n"
        "\t\t\tQHalfModqi[i] = tmp.Mod(QHalf, bignum.NewInt(Q[j])).Uint64()\n\t\t}\n",
        """\t\tif decomposeExtensionAccelerated(p0idxst, p0idxed, levelQ, levelP, p0Q, p1Q, p1P, Q, P, mredQ, mredP,
\t\t\tQHalfModqi, MUC) {
\t\t\tringQ.SubScalarBigint(p1Q, QHalf, p1Q)
\t\t\tringP.SubScalarBigint(p1P, QHalf, p1P)
\t\t\treturn
\t\t}
""",
    ),
)


# (anchor, code inserted after it) in ring/vec_ops.go: the lazy Montgomery products of key switching, and
# the element-wise loops of VecAccelerator
_VEC_HOOKS = (
    (
        "func reducevec(p1, p2 []uint64, modulus uint64, bredconstant [2]uint64) {\n",
        "\tif vecAccelerator.Reduce != nil && vecAccelerator.Reduce(p1, p2, modulus) {\n\t\treturn\n\t}\n",
    ),
    (
        "func addvec(p1, p2, p3 []uint64, modulus uint64) {\n",
        "\tif vecAccelerator.Add != nil && vecAccelerator.Add(p1, p2, p3, modulus) {\n\t\treturn\n\t}\n",
    ),
    (
        "func addscalarvec(p1 []uint64, scalar uint64, p2 []uint64, modulus uint64) {\n",
        "\tif vecAccelerator.AddScalar != nil && vecAccelerator.AddScalar(p1, scalar, p2, modulus) {\n"
        "\t\treturn\n\t}\n",
    ),
    (
        "func subscalarvec(p1 []uint64, scalar uint64, p2 []uint64, modulus uint64) {\n",
        "\tif vecAccelerator.AddScalar != nil && vecAccelerator.AddScalar(p1, modulus-scalar, p2, modulus) {\n"
        "\t\treturn\n\t}\n",
    ),
    (
        "func subthenmulscalarmontgomeryTwoModulusvec(p1, p2 []uint64, scalarMont uint64, p3 []uint64, modulus, "
        "mredconstant uint64) {\n",
        "\tif f := vecAccelerator.SubThenMulScalarMontgomeryTwoModulus; f != nil && "
        "f(p1, p2, scalarMont, p3, modulus, mredconstant) {\n\t\treturn\n\t}\n",
    ),
    (
        "func mulcoeffsmontgomerylazyvec(p1, p2, p3 []uint64, modulus, mredconstant uint64) {\n",
        "\tif mulCoeffsAccelerated(p1, p2, p3, modulus, mredconstant, false) {\n\t\treturn\n\t}\n",
    ),
    (
        "func mulcoeffsmontgomerylazythenaddlazyvec(p1, p2, p3 []uint64, modulus, mredconstant uint64) {\n",
        "\tif mulCoeffsAccelerated(p1, p2, p3, modulus, mredconstant, true) {\n\t\treturn\n\t}\n",
    ),
)


def _insert(source: str, name: str, hooks: tuple[tuple[str, str], ...]) -> str:
    """Lattigo's file `name` with each hook's code after its anchor, which must occur exactly once."""
    for anchor, code in hooks:
        if source.count(anchor) != 1:
            raise BackendError(f"Lattigo {VERSION}'s {name} has changed: the patch needs {VERSION} exactly")
        source = source.replace(anchor, anchor + code)
    return source


def _replace(source: str, name: str, replacements: tuple[tuple[str, str], ...]) -> str:
    """Lattigo's file `name` with each text replaced; each must occur exactly once."""
    for text, replacement in replacements:
        if source.count(text) != 1:
            raise BackendError(f"Lattigo {VERSION}'s {name} has changed: the patch needs {VERSION} exactly")
        source = source.replace(text, replacement)
    return source


# dft: while dft.WithShapesOnly runs, GenMatrices generates in complex128 where that gives its values
# (lattigo_patch/dft/diagonals128.go), NewMatrixFromLiteral keeps the values (converted from big floats
# otherwise) and makes each factor's shape only (lattigo_patch/dft/shapes.go)
_DFT_HOOKS = (
    (
        "func (d MatrixLiteral) GenMatrices(LogN int, prec uint) "
        "(plainVector []ltcommon.Diagonals[*bignum.Complex]) {\n",
        "\tif shapesOnly.on {\n\t\tif indices, ok := d.generateShapesOnly(LogN, prec); ok {\n\t\t\treturn indices\n"
        "\t\t}\n\t}\n",
    ),
    (
        "\tpVecDFT := d.GenMatrices(params.LogN(), params.EncodingPrecision())\n",
        "\tif shapesOnly.on {\n\t\tkeepGenerated(params.EncodingPrecision(), pVecDFT)\n\t}\n",
    ),
    (
        "\t\t\t\tLogBabyStepGiantStepRatio: d.LogBSGSRatio,\n\t\t\t}\n",
        "\n\t\t\tif shapesOnly.on {\n\t\t\t\tmatrices = append(matrices, shapeOnly(ltparams))\n\t\t\t\tidx++\n"
        "\t\t\t\tcontinue\n\t\t\t}\n",
    ),
)

# sampling.ThreadSafePRNG (every Encryptor's and KeyGenerator's randomness) reads an AES-CTR generator seeded
# from crypto/rand instead of crypto/rand itself (lattigo_patch/sampling/drbg.go); the original return stays,
# unreachable
_PRNG_HOOKS = (
    ("type ThreadSafePRNG struct {\n", "\tdrbg\n"),
    ("func (prng *ThreadSafePRNG) Read(sum []byte) (n int, err error) {\n", "\treturn prng.drbg.read(sum)\n"),
)

# the samplers' faster loops (lattigo_patch/samplers.go), same outputs
_SAMPLER_HOOKS_UNIFORM = (("func (u *UniformSampler) Read(pol Poly) {\n", "\tif u.fastRead(pol) {\n\t\treturn\n\t}\n"),)
_SAMPLER_HOOKS_GAUSSIAN = (
    # Read writes each coefficient without reading it first (nil f): a fresh polynomial's pages are then
    # faulted in once, not mapped to the zero page by the read and faulted again, with a TLB shootdown
    # across the process's threads, by the write (that was 40% of key generation's time in the kernel)
    ("func (g *GaussianSampler) Read(pol Poly) {\n", "\tif g.fastRead(pol, nil) {\n\t\treturn\n\t}\n"),
    (
        "func (g *GaussianSampler) read(pol Poly, f func(a, b, c uint64) uint64) {\n",
        "\tif g.fastRead(pol, f) {\n\t\treturn\n\t}\n",
    ),
)

# seeded evaluation keys that stay seeded while used (lattigo_patch/rlwe/seeded.go): the seed moves from
# EvaluationKey to its GadgetCiphertext, where the gadget products find it; compressed keys are generated
# and expanded from per-prime streams; each gadget product regenerates the a halves it reads
_SEED_FIELD = (
    (
        "\tValue                structs.Matrix[VectorQP]\n",
        "\tSeed                 *[32]byte // henn: a halves from this seed (seeded.go)\n",
    ),
    (
        "func (ct GadgetCiphertext) CopyNew() (ctCopy *GadgetCiphertext) {\n",
        "\tdefer func() { ctCopy.Seed = ct.Seed }()\n",
    ),
)
_SEED_EXPAND = (
    (
        "func (evk EvaluationKey) Expand(params ParameterProvider, buffer *GadgetCiphertext) error {\n",
        "\tif evk.IsCompressed() && evk.Seed != nil {\n\t\treturn evk.expandSeeded(params, buffer)\n\t}\n",
    ),
)
_SEED_KEYGEN = (
    (
        "func (kgen KeyGenerator) genEvaluationKey(skIn ring.Poly, skOut ringqp.Poly, evk *EvaluationKey) {\n",
        "\tif evk.IsCompressed() {\n\t\tkgen.genSeededEvaluationKey(skIn, skOut, evk)\n\t\treturn\n\t}\n",
    ),
)
_SEEDED_VIEW = (
    "\tif gadgetCt.Seed != nil {\n\t\tview, release := eval.seededView(levelQ, gadgetCt)\n"
    "\t\tdefer release()\n\t\tgadgetCt = view\n\t}\n"
)
# one key switch on two cores (lattigo_patch/rlwe/parallel.go): the gadget product's digits in two halves,
# the hoisted decomposition's too (_REPLACEMENTS), ModDown's two polynomials at once. The gadget products'
# hooks: that split first in the plain product, then the seeded view where it runs on one goroutine and in the
# single-prime product; the hoisted product's own loop for seeded keys (seeded_product.go). The split and the
# hoisted loop regenerate a seeded key's a halves prime by prime as they multiply.
_PARALLEL_PRODUCT = "\tif eval.gadgetProductMultiplePLazyParallel(levelQ, cx, gadgetCt, ctQP) {\n\t\treturn\n\t}\n"
_HOISTED_SEEDED = (
    "\tif gadgetCt.Seed != nil {\n\t\teval.gadgetProductHoistedSeeded(levelQ, BuffQPDecompQP, gadgetCt, ct)\n"
    "\t\treturn\n\t}\n"
)
_GADGET_PRODUCT_HOOKS = tuple(
    (f"func (eval Evaluator) {name}(levelQ int, {arg}, gadgetCt *GadgetCiphertext, {out}) {{\n", hook)
    for name, arg, out, hook in (
        ("gadgetProductMultiplePLazy", "cx ring.Poly", "ctQP *Element[ringqp.Poly]", _PARALLEL_PRODUCT + _SEEDED_VIEW),
        ("gadgetProductSinglePAndBitDecompLazy", "cx ring.Poly", "ctQP *Element[ringqp.Poly]", _SEEDED_VIEW),
        (
            "gadgetProductMultiplePLazyHoisted",
            "BuffQPDecompQP []ringqp.Poly",
            "ct *Element[ringqp.Poly]",
            _HOISTED_SEEDED,
        ),
    )
) + (
    (
        "func (eval Evaluator) ModDown(levelQ, levelP int, ctQP *Element[ringqp.Poly], ct *Ciphertext) {\n",
        "\tif eval.modDownParallel(levelQ, levelP, ctQP, ct) {\n\t\treturn\n\t}\n",
    ),
)
# (text, replacement) in a patched file; the text must occur exactly once
_REPLACEMENTS = {
    "core/rlwe/keys.go": (
        (
            "\tSeed *[32]byte // Must be != nil iff EvaluationKey.IsCompressed() = true\n",
            "\t// Seed: in GadgetCiphertext (henn: lattigo_patch/rlwe/seeded.go)\n",
        ),
    ),
    "core/rlwe/evaluator_gadget_product.go": (
        (
            "\tBaseRNSDecompositionVectorSize := eval.params.BaseRNSDecompositionVectorSize(levelQ, levelP)\n"
            "\tfor i := 0; i < BaseRNSDecompositionVectorSize; i++ {\n"
            "\t\teval.DecomposeSingleNTT(levelQ, levelP, nbPi, i, polyNTT, polyInvNTT, decompQP[i].Q, decompQP[i].P)\n"
            "\t}\n",
            "\teval.decomposeDigits(levelQ, levelP, nbPi, polyNTT, polyInvNTT, decompQP) // henn: parallel.go\n",
        ),
    ),
}

# the hooks of each patched file, by its path in the module
_HOOKS = {
    "core/rlwe/gadgetciphertext.go": _SEED_FIELD,
    "core/rlwe/keys.go": _SEED_EXPAND,
    "core/rlwe/keygenerator.go": _SEED_KEYGEN,
    "core/rlwe/evaluator_gadget_product.go": _GADGET_PRODUCT_HOOKS,
    "ring/ntt.go": _NTT_HOOKS,
    "ring/basis_extension.go": _EXTENSION_HOOKS,
    "ring/vec_ops.go": _VEC_HOOKS,
    "circuits/ckks/dft/dft.go": _DFT_HOOKS,
    "utils/sampling/prng.go": _PRNG_HOOKS,
    "ring/sampler_uniform.go": _SAMPLER_HOOKS_UNIFORM,
    "ring/sampler_gaussian.go": _SAMPLER_HOOKS_GAUSSIAN,
}
# the package each folder of lattigo_patch adds its files to
_PATCH_PACKAGES = {".": "ring", "dft": "circuits/ckks/dft", "sampling": "utils/sampling", "rlwe": "core/rlwe"}


def _download(go: str) -> Path:
    """The pristine module's directory in Go's module cache (downloaded when missing)."""
    with tempfile.TemporaryDirectory(prefix="henn-lattigo-dl-") as work:  # outside any go.mod
        try:
            proc = subprocess.run(
                [go, "mod", "download", "-json", f"{MODULE}@{VERSION}"],
                cwd=work,
                capture_output=True,
                text=True,
                timeout=DOWNLOAD_TIMEOUT_S,
                env=dict(os.environ, GOFLAGS="-mod=mod"),
            )
        except subprocess.TimeoutExpired:
            raise BackendError(
                f"downloading {MODULE}@{VERSION} took over {DOWNLOAD_TIMEOUT_S} s: check the access "
                "to the Go module proxy (GOPROXY) and retry"
            ) from None
    if proc.returncode != 0:
        raise BackendError(
            f"`go mod download {MODULE}@{VERSION}` failed:\n{proc.stderr.strip()[-2000:]}\n"
            "check the access to the Go module proxy (GOPROXY) and retry"
        )
    return Path(json.loads(proc.stdout)["Dir"])


def prepare(go: str) -> Path:
    """Make (or refresh) the patched module directory; the caller holds the build lock."""
    if is_prepared():
        return PATCHED_DIR
    pristine = _download(go)
    staging = PATCHED_DIR.with_name(PATCHED_DIR.name + f".tmp-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(pristine, staging, ignore=shutil.ignore_patterns("*_test.go", "examples", ".github"))
    for root, dirs, files in os.walk(staging):  # the module cache is read-only
        for name in dirs + files:
            path = Path(root) / name
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
    for name, replacements in _REPLACEMENTS.items():
        path = staging / name
        path.write_text(_replace(path.read_text(), name, replacements))
    for name, hooks in _HOOKS.items():
        path = staging / name
        path.write_text(_insert(path.read_text(), name, hooks))
    for folder, package in _PATCH_PACKAGES.items():
        for path in sorted((PATCH_DIR / folder).glob("*.go")):
            shutil.copyfile(path, staging / package / path.name)
    (staging / ".henn-patch").write_text(_fingerprint())
    shutil.rmtree(PATCHED_DIR, ignore_errors=True)
    os.replace(staging, PATCHED_DIR)
    log.info("patched %s@%s into %s", MODULE, VERSION, PATCHED_DIR)
    return PATCHED_DIR
