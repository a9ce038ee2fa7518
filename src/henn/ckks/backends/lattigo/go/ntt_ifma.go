package main

/*
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>

// The kernels' levels (simdLevel in Go): Lattigo's code, the AVX2 transform, every AVX-512 kernel.
enum { HENN_SIMD_NONE = 0, HENN_SIMD_AVX2 = 1, HENN_SIMD_IFMA = 2 };

#if defined(__x86_64__) && defined(__GNUC__)
#include "ifma.h"
#include "ntt_avx2.h"

// 1 when every a[0..n) < bound (n a multiple of 8).
HENN_TGT static int henn_ntt_below(const uint64_t *a, size_t n, uint64_t bound) {
	__m512i m = _mm512_setzero_si512();
	for (size_t k = 0; k < n; k += 8) m = _mm512_max_epu64(m, _mm512_loadu_si512((const void *)(a + k)));
	return _mm512_reduce_max_epu64(m) < bound;
}

// Lane patterns of the three last forward (first inverse) stages, where a butterfly's partner is
// 4, 2 or 1 slot away: 16 coefficients in two registers, X gathers the first of each pair, Y the
// second, and the twiddle of each lane comes from the pattern's index into the stage's roots.
typedef struct { long long x[8], y[8], lo[8], hi[8], w[8]; unsigned char wmask; } henn_lanes;
static const henn_lanes henn_lanes_t4 = {{0, 1, 2, 3, 8, 9, 10, 11}, {4, 5, 6, 7, 12, 13, 14, 15},
	{0, 1, 2, 3, 8, 9, 10, 11}, {4, 5, 6, 7, 12, 13, 14, 15}, {0, 0, 0, 0, 1, 1, 1, 1}, 0x3};
static const henn_lanes henn_lanes_t2 = {{0, 1, 4, 5, 8, 9, 12, 13}, {2, 3, 6, 7, 10, 11, 14, 15},
	{0, 1, 8, 9, 2, 3, 10, 11}, {4, 5, 12, 13, 6, 7, 14, 15}, {0, 0, 1, 1, 2, 2, 3, 3}, 0xF};
static const henn_lanes henn_lanes_t1 = {{0, 2, 4, 6, 8, 10, 12, 14}, {1, 3, 5, 7, 9, 11, 13, 15},
	{0, 8, 1, 9, 2, 10, 3, 11}, {4, 12, 5, 13, 6, 14, 7, 15}, {0, 1, 2, 3, 4, 5, 6, 7}, 0xFF};

#define HENN_CAT(a, b) a##b
#define HENN_FN_(name, w) HENN_CAT(name, w)

#define HENN_FN(name) HENN_FN_(name, _52)
#define HENN_MULSHOUP henn_mulshoup52
#define HENN_MULSHOUP1 henn_mulshoup1_52
#include "ntt_kernels.h"
#undef HENN_FN
#undef HENN_MULSHOUP
#undef HENN_MULSHOUP1

#define HENN_FN(name) HENN_FN_(name, _64)
#define HENN_MULSHOUP henn_mulshoup64
#define HENN_MULSHOUP1 henn_mulshoup1_64
#include "ntt_kernels.h"

// The transform of one prime: the AVX2 kernel (64-bit Shoup constants) or the AVX-512 ones, 52-bit
// lanes (wide = 0, q < 2^50) or 64-bit lanes (q < 2^61); any input below 2^64.
static void henn_ntt(const uint64_t *in, uint64_t *out, size_t n, uint64_t q, const uint64_t *w,
                     const uint64_t *ws, int forward, int ci, uint64_t f, uint64_t fs, uint64_t s, uint64_t ss,
                     uint64_t r64, int wide, int simd) {
	if (simd == HENN_SIMD_AVX2) henn_ntt_avx2(in, out, n, q, w, ws, forward, ci, f, fs, s, ss, r64);
	else if (wide) henn_ntt_64(in, out, n, q, w, ws, forward, ci, f, fs, s, ss, r64);
	else henn_ntt_52(in, out, n, q, w, ws, forward, ci, f, fs, s, ss, r64);
}

// The best level the CPU runs.
static int henn_cpu_simd(void) {
	return henn_has_avx512_ifma() ? HENN_SIMD_IFMA : henn_has_avx2() ? HENN_SIMD_AVX2 : HENN_SIMD_NONE;
}
#else
static void henn_ntt(const uint64_t *in, uint64_t *out, size_t n, uint64_t q, const uint64_t *w,
                     const uint64_t *ws, int forward, int ci, uint64_t f, uint64_t fs, uint64_t s, uint64_t ss,
                     uint64_t r64, int wide, int simd) {}
static int henn_cpu_simd(void) { return HENN_SIMD_NONE; }
#endif
*/
import "C"

import (
	"math/bits"
	"os"
	"sync"
	"unsafe"

	"github.com/tuneinsight/lattigo/v6/ring"
)

// simdLevel: the instruction set of the bridge's C kernels.
type simdLevel int

const (
	simdNone = simdLevel(C.HENN_SIMD_NONE) // Lattigo's own Go code and henn's portable C
	simdAVX2 = simdLevel(C.HENN_SIMD_AVX2) // the AVX2 transform; Lattigo's code elsewhere
	simdIFMA = simdLevel(C.HENN_SIMD_IFMA) // every AVX-512 kernel
)

// bridgeSIMD is what this process runs: the CPU's best, or less by HENN_LATTIGO_NTT ("go": no vector
// kernel, Lattigo's own code; "avx2": what a CPU without IFMA runs), for comparison and diagnosis.
var bridgeSIMD = simdFor(os.Getenv("HENN_LATTIGO_NTT"), cpuSIMD)

// cpuSIMD: the best level this CPU (and its OS) runs.
var cpuSIMD = simdLevel(C.henn_cpu_simd())

func simdFor(setting string, cpu simdLevel) simdLevel {
	switch setting {
	case "go":
		return simdNone
	case "avx2":
		return min(cpu, simdAVX2)
	}
	return cpu
}

// hasIFMA reports whether this process runs the AVX-512 IFMA kernels (the CPU has AVX-512 F, DQ and
// IFMA, and HENN_LATTIGO_NTT does not lower the level).
func hasIFMA() bool { return bridgeSIMD == simdIFMA }

// nttMaxModulus: Harvey's lazy butterflies keep values below 4q, which IFMA's 52-bit lanes hold
// for primes below 2^50 (the IFMA kernels of this package share this bound).
const nttMaxModulus = uint64(1) << 50

// nttMaxWideModulus: primes from 2^50 take the transform's 64-bit instance (four 32-bit products
// per high half, about half the IFMA speed), up to 2^64/6 = 2^61.4 (henn_csub needs 6q < 2^64), so
// Lattigo's 61-bit primes, which lie on both sides of 2^61. Larger primes stay with Lattigo's transform.
const nttMaxWideModulus = ^uint64(0) / 6

// nttMinDegree: below this the cgo call costs more than it saves (and the kernel wants n % 16 == 0).
const nttMinDegree = 64

// nttTable holds one prime's twiddles for the C kernel, in standard (not Montgomery) form with
// their Shoup constants: w[m+i] is block i's root in a stage of m blocks. C memory: never moved.
type nttTable struct {
	w, ws *C.uint64_t
	f, fs uint64 // the conjugate-invariant stage's root
	s, ss uint64 // 1/n (inverse only)
	r64   uint64 // floor(2^64 / q): inputs from 2q (4q) are reduced first
	wide  bool   // 64-bit lanes: Shoup constants floor(w * 2^64 / q)
}

type nttKey struct {
	q, root1 uint64
	n        int
	fwd, ci  bool
	simd     simdLevel
}

// nttTables caches one table per (prime, degree, direction, ring, root), which fix 1/n too: a handful
// per parameter set.
var nttTables sync.Map

func init() {
	if bridgeSIMD != simdNone {
		ring.SetNTTAccelerator(acceleratedNTT)
	}
}

// shoup is floor(w * 2^52 / q) for w < q < 2^52.
func shoup(w, q uint64) uint64 {
	quo, _ := bits.Div64(w>>12, w<<52, q)
	return quo
}

// shoupFor is the Shoup constant for the kernel's lane width: floor(w * 2^64 / q) when wide.
func shoupFor(w, q uint64, wide bool) uint64 {
	if !wide {
		return shoup(w, q)
	}
	quo, _ := bits.Div64(w, 0, q)
	return quo
}

// newNTTTable converts Lattigo's Montgomery-form, bit-reversed roots into the kernel's layout.
// The conjugate-invariant ring's stage with m blocks reads roots[2m + i]; the standard ring's roots[m + i].
// The AVX2 kernel takes 64-bit Shoup constants for every prime.
func newNTTTable(fwd, ci bool, n int, q, mred, nInv uint64, roots []uint64, simd simdLevel) *nttTable {
	need := n
	if ci {
		need = n + n/2
	}
	if len(roots) < need {
		return nil
	}
	mem := C.malloc(C.size_t(2 * n * 8))
	both := unsafe.Slice((*uint64)(mem), 2*n) // w and ws as one Go view of the C allocation
	t := &nttTable{w: (*C.uint64_t)(mem), ws: (*C.uint64_t)(unsafe.Pointer(&both[n])), wide: q >= nttMaxModulus || simd == simdAVX2}
	w, ws := both[:n], both[n:]
	w[0], ws[0] = 0, 0
	for m := 1; m < n; m <<= 1 {
		for i := 0; i < m; i++ {
			src := m + i
			if ci {
				src = 2*m + i
			}
			r := ring.MRed(roots[src], 1, q, mred)
			w[m+i], ws[m+i] = r, shoupFor(r, q, t.wide)
		}
	}
	t.r64 = shoupFor(1, q, true) // floor(2^64 / q)
	t.f = ring.MRed(roots[1], 1, q, mred)
	t.fs = shoupFor(t.f, q, t.wide)
	if !fwd {
		t.s = ring.MRed(nInv, 1, q, mred)
		t.ss = shoupFor(t.s, q, t.wide)
	}
	return t
}

// acceleratedNTT is the ring.NTTAccelerator: the AVX-512 transform, IFMA for primes below 2^50 and
// 64-bit lanes for primes below 2^61, or on CPUs without IFMA the AVX2 transform.
func acceleratedNTT(forward, ci bool, p1, p2 []uint64, n int, q, mred, nInv uint64, roots []uint64) bool {
	return nttWith(bridgeSIMD, forward, ci, p1, p2, n, q, mred, nInv, roots)
}

// nttWith runs the kernel of the given level (AVX2 or IFMA; the tests run each one the CPU has).
func nttWith(simd simdLevel, forward, ci bool, p1, p2 []uint64, n int, q, mred, nInv uint64, roots []uint64) bool {
	if simd == simdNone || q >= nttMaxWideModulus || n < nttMinDegree || n&(n-1) != 0 || len(p1) < n || len(p2) < n || len(roots) < 2 {
		return false
	}
	key := nttKey{q: q, root1: roots[1], n: n, fwd: forward, ci: ci, simd: simd}
	var t *nttTable
	if v, ok := nttTables.Load(key); ok {
		t = v.(*nttTable)
	} else {
		if t = newNTTTable(forward, ci, n, q, mred, nInv, roots, simd); t == nil {
			return false
		}
		if v, loaded := nttTables.LoadOrStore(key, t); loaded { // another goroutine built it first
			C.free(unsafe.Pointer(t.w))
			t = v.(*nttTable)
		}
	}
	C.henn_ntt((*C.uint64_t)(unsafe.Pointer(&p1[0])), (*C.uint64_t)(unsafe.Pointer(&p2[0])), C.size_t(n), C.uint64_t(q),
		t.w, t.ws, cbool(forward), cbool(ci), C.uint64_t(t.f), C.uint64_t(t.fs), C.uint64_t(t.s), C.uint64_t(t.ss),
		C.uint64_t(t.r64), cbool(t.wide), C.int(simd))
	return true
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
