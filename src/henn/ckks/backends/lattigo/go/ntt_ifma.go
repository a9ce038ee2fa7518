package main

/*
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define HENN_TGT __attribute__((target("avx512f,avx512ifma")))

// Shoup's modular product y*w mod q in [0, 2q) with 52-bit IFMA: y < 2^52, w < q < 2^50 and
// ws = floor(w * 2^52 / q). y*w/q - floor(y*ws/2^52) lies in [0, 2), so the product minus the
// quotient's multiple of q is below 2q < 2^52 and exact in the low 52 bits.
HENN_TGT static inline __m512i henn_mulshoup(__m512i y, __m512i w, __m512i ws, __m512i q) {
	const __m512i zero = _mm512_setzero_si512();
	__m512i quot = _mm512_madd52hi_epu64(zero, y, ws);
	__m512i a = _mm512_madd52lo_epu64(zero, y, w);
	__m512i b = _mm512_madd52lo_epu64(zero, quot, q);
	return _mm512_and_si512(_mm512_sub_epi64(a, b), _mm512_set1_epi64((1LL << 52) - 1));
}

// The same for one value.
static inline uint64_t henn_mulshoup1(uint64_t y, uint64_t w, uint64_t ws, uint64_t q) {
	uint64_t quot = (uint64_t)(((unsigned __int128)y * ws) >> 52);
	return (y * w - quot * q) & ((1ULL << 52) - 1);
}

// x mod c for x < 2c: x - c wraps above x when x < c, so the unsigned minimum picks the reduced one.
HENN_TGT static inline __m512i henn_csub(__m512i x, __m512i c) {
	return _mm512_min_epu64(x, _mm512_sub_epi64(x, c));
}

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

// One Cooley-Tukey (forward) or Gentleman-Sande (inverse) stage of blocks with partner distance
// t, m blocks, twiddles w[m + i] (Shoup constants ws), from in to out (may alias).
// Forward keeps values below 4q (inputs below 4q), inverse below 2q (inputs below 2q): Harvey's
// lazy butterflies, every intermediate below 2^52 since q < 2^50.
HENN_TGT static void henn_stage(const uint64_t *in, uint64_t *out, size_t n, size_t t, const uint64_t *w,
                                const uint64_t *ws, uint64_t qs, int forward) {
	const __m512i q = _mm512_set1_epi64((long long)qs), q2 = _mm512_set1_epi64((long long)(2 * qs));
	size_t m = n / (2 * t);
	if (t >= 8) {
		for (size_t i = 0; i < m; i++) {
			const __m512i W = _mm512_set1_epi64((long long)w[m + i]), WS = _mm512_set1_epi64((long long)ws[m + i]);
			const uint64_t *ix = in + 2 * i * t, *iy = ix + t;
			uint64_t *ox = out + 2 * i * t, *oy = ox + t;
			for (size_t k = 0; k < t; k += 8) {
				__m512i X = _mm512_loadu_si512((const void *)(ix + k)), Y = _mm512_loadu_si512((const void *)(iy + k));
				__m512i A, B;
				if (forward) {
					X = henn_csub(X, q2);
					__m512i T = henn_mulshoup(Y, W, WS, q);
					A = _mm512_add_epi64(X, T);
					B = _mm512_sub_epi64(_mm512_add_epi64(X, q2), T);
				} else {
					A = henn_csub(_mm512_add_epi64(X, Y), q2);
					B = henn_mulshoup(_mm512_sub_epi64(_mm512_add_epi64(X, q2), Y), W, WS, q);
				}
				_mm512_storeu_si512((void *)(ox + k), A);
				_mm512_storeu_si512((void *)(oy + k), B);
			}
		}
		return;
	}
	const henn_lanes *L = t == 4 ? &henn_lanes_t4 : t == 2 ? &henn_lanes_t2 : &henn_lanes_t1;
	const __m512i px = _mm512_loadu_si512((const void *)L->x), py = _mm512_loadu_si512((const void *)L->y);
	const __m512i plo = _mm512_loadu_si512((const void *)L->lo), phi = _mm512_loadu_si512((const void *)L->hi);
	const __m512i pw = _mm512_loadu_si512((const void *)L->w);
	const size_t roots_per_group = 16 / (2 * t);
	for (size_t g = 0; g < n / 16; g++) {
		__m512i a = _mm512_loadu_si512((const void *)(in + 16 * g)), b = _mm512_loadu_si512((const void *)(in + 16 * g + 8));
		__m512i X = _mm512_permutex2var_epi64(a, px, b), Y = _mm512_permutex2var_epi64(a, py, b);
		const uint64_t *wg = w + m + g * roots_per_group, *wsg = ws + m + g * roots_per_group;
		__m512i W = _mm512_permutexvar_epi64(pw, _mm512_maskz_loadu_epi64(L->wmask, (const void *)wg));
		__m512i WS = _mm512_permutexvar_epi64(pw, _mm512_maskz_loadu_epi64(L->wmask, (const void *)wsg));
		__m512i A, B;
		if (forward) {
			X = henn_csub(X, q2);
			__m512i T = henn_mulshoup(Y, W, WS, q);
			A = _mm512_add_epi64(X, T);
			B = _mm512_sub_epi64(_mm512_add_epi64(X, q2), T);
		} else {
			A = henn_csub(_mm512_add_epi64(X, Y), q2);
			B = henn_mulshoup(_mm512_sub_epi64(_mm512_add_epi64(X, q2), Y), W, WS, q);
		}
		_mm512_storeu_si512((void *)(out + 16 * g), _mm512_permutex2var_epi64(A, plo, B));
		_mm512_storeu_si512((void *)(out + 16 * g + 8), _mm512_permutex2var_epi64(A, phi, B));
	}
}

// The conjugate-invariant ring's extra stage, pairing coefficient j with n - j:
// out[j] = in[j] + 2q - f*in[n-j] (j = 1..n-1), out[n/2] likewise with itself, out[0] = in[0].
// Inputs below 2q give outputs below 4q.
HENN_TGT static void henn_ci_fold(const uint64_t *in, uint64_t *out, size_t n, uint64_t fs, uint64_t fss, uint64_t qs) {
	const __m512i q = _mm512_set1_epi64((long long)qs), q2 = _mm512_set1_epi64((long long)(2 * qs));
	const __m512i F = _mm512_set1_epi64((long long)fs), FS = _mm512_set1_epi64((long long)fss);
	const __m512i rev = _mm512_set_epi64(0, 1, 2, 3, 4, 5, 6, 7);
	size_t j = 1;
	for (; j + 7 < n - j - 7; j += 8) {  // X = in[j .. j+7], Y = in[n-j .. n-j-7]: disjoint blocks
		__m512i X = _mm512_loadu_si512((const void *)(in + j));
		__m512i Y = _mm512_permutexvar_epi64(rev, _mm512_loadu_si512((const void *)(in + n - j - 7)));
		__m512i A = _mm512_sub_epi64(_mm512_add_epi64(X, q2), henn_mulshoup(Y, F, FS, q));
		__m512i B = _mm512_sub_epi64(_mm512_add_epi64(Y, q2), henn_mulshoup(X, F, FS, q));
		_mm512_storeu_si512((void *)(out + j), A);
		_mm512_storeu_si512((void *)(out + n - j - 7), _mm512_permutexvar_epi64(rev, B));
	}
	for (; j < n / 2; j++) {
		uint64_t x = in[j], y = in[n - j];
		out[j] = x + 2 * qs - henn_mulshoup1(y, fs, fss, qs);
		out[n - j] = y + 2 * qs - henn_mulshoup1(x, fs, fss, qs);
	}
	out[n / 2] = in[n / 2] + 2 * qs - henn_mulshoup1(in[n / 2], fs, fss, qs);
	out[0] = in[0];
}

// out = x * s mod q, fully reduced (x < 2^52): the inverse transform's 1/n.
HENN_TGT static void henn_scale(uint64_t *a, size_t n, uint64_t s, uint64_t ss, uint64_t qs) {
	const __m512i q = _mm512_set1_epi64((long long)qs), S = _mm512_set1_epi64((long long)s), SS = _mm512_set1_epi64((long long)ss);
	for (size_t k = 0; k < n; k += 8) {
		__m512i X = henn_mulshoup(_mm512_loadu_si512((const void *)(a + k)), S, SS, q);
		_mm512_storeu_si512((void *)(a + k), henn_csub(X, q));
	}
}

// a mod q for a < 4q.
HENN_TGT static void henn_reduce4(uint64_t *a, size_t n, uint64_t qs) {
	const __m512i q = _mm512_set1_epi64((long long)qs), q2 = _mm512_set1_epi64((long long)(2 * qs));
	for (size_t k = 0; k < n; k += 8) {
		__m512i X = _mm512_loadu_si512((const void *)(a + k));
		_mm512_storeu_si512((void *)(a + k), henn_csub(henn_csub(X, q2), q));
	}
}

// The transform of one prime: w/ws hold the n stage twiddles (index m + i for block i of a stage
// with m blocks), f/fs the conjugate-invariant stage's root (ci), s/ss the inverse's 1/n.
// Returns 0 (out untouched) when an input is not below 2q.
HENN_TGT static int henn_ntt(const uint64_t *in, uint64_t *out, size_t n, uint64_t q, const uint64_t *w,
                             const uint64_t *ws, int forward, int ci, uint64_t f, uint64_t fs, uint64_t s, uint64_t ss) {
	if (!henn_ntt_below(in, n, 2 * q)) return 0;
	if (forward) {
		const uint64_t *src = in;
		if (ci) {
			henn_ci_fold(in, out, n, f, fs, q);
			src = out;
		}
		for (size_t t = n / 2; t >= 1; t /= 2) {
			henn_stage(src, out, n, t, w, ws, q, 1);
			src = out;
		}
		henn_reduce4(out, n, q);
	} else {
		const uint64_t *src = in;
		for (size_t t = 1; t <= n / 2; t *= 2) {
			henn_stage(src, out, n, t, w, ws, q, 0);
			src = out;
		}
		if (ci) {
			henn_ci_fold(out, out, n, f, fs, q);
			out[0] = 2 * out[0];  // below 4q: henn_scale takes any input below 2^52
		}
		henn_scale(out, n, s, ss, q);
	}
	return 1;
}

static int henn_ntt_has_ifma(void) {
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512ifma");
}
#else
static int henn_ntt(const uint64_t *in, uint64_t *out, size_t n, uint64_t q, const uint64_t *w,
                    const uint64_t *ws, int forward, int ci, uint64_t f, uint64_t fs, uint64_t s, uint64_t ss) { return 0; }
static int henn_ntt_has_ifma(void) { return 0; }
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

// nttMaxModulus: Harvey's lazy butterflies keep values below 4q, which IFMA's 52-bit lanes hold
// for primes below 2^50. Larger primes stay with Lattigo's transform.
const nttMaxModulus = uint64(1) << 50

// nttMinDegree: below this the cgo call costs more than it saves (and the kernel wants n % 16 == 0).
const nttMinDegree = 64

// nttTable holds one prime's twiddles for the C kernel, in standard (not Montgomery) form with
// their Shoup constants: w[m+i] is block i's root in a stage of m blocks. C memory: never moved.
type nttTable struct {
	w, ws  *C.uint64_t
	f, fs  uint64 // the conjugate-invariant stage's root
	s, ss  uint64 // 1/n (inverse only)
	n      int
	q      uint64
	ci     bool
	fwd    bool
	tables []uint64 // w and ws as one Go view of the C allocation
}

type nttKey struct {
	q, root1 uint64
	n        int
	fwd, ci  bool
}

// nttTables caches one table per (prime, degree, direction, ring, root): a handful per parameter set.
var nttTables sync.Map

// hasNTTAcceleration reports whether this CPU runs the IFMA kernels (AVX-512 F, DQ and IFMA).
func hasNTTAcceleration() bool { return C.henn_ntt_has_ifma() != 0 }

func init() {
	// HENN_LATTIGO_NTT=go keeps Lattigo's own transform (for comparison and diagnosis).
	if os.Getenv("HENN_LATTIGO_NTT") != "go" && hasNTTAcceleration() {
		ring.SetNTTAccelerator(acceleratedNTT)
	}
}

// shoup is floor(w * 2^52 / q) for w < q < 2^52.
func shoup(w, q uint64) uint64 {
	quo, _ := bits.Div64(w>>12, w<<52, q)
	return quo
}

// newNTTTable converts Lattigo's Montgomery-form, bit-reversed roots into the kernel's layout.
// The conjugate-invariant ring's stage with m blocks reads roots[2m + i]; the standard ring's roots[m + i].
func newNTTTable(fwd, ci bool, n int, q, mred, nInv uint64, roots []uint64) *nttTable {
	need := n
	if ci {
		need = n + n/2
	}
	if len(roots) < need {
		return nil
	}
	mem := C.malloc(C.size_t(2 * n * 8))
	t := &nttTable{n: n, q: q, ci: ci, fwd: fwd}
	t.tables = unsafe.Slice((*uint64)(mem), 2*n)
	t.w = (*C.uint64_t)(mem)
	t.ws = (*C.uint64_t)(unsafe.Pointer(&t.tables[n]))
	w, ws := t.tables[:n], t.tables[n:]
	w[0], ws[0] = 0, 0
	for m := 1; m < n; m <<= 1 {
		for i := 0; i < m; i++ {
			src := m + i
			if ci {
				src = 2*m + i
			}
			r := ring.MRed(roots[src], 1, q, mred)
			w[m+i], ws[m+i] = r, shoup(r, q)
		}
	}
	t.f = ring.MRed(roots[1], 1, q, mred)
	t.fs = shoup(t.f, q)
	if !fwd {
		t.s = ring.MRed(nInv, 1, q, mred)
		t.ss = shoup(t.s, q)
	}
	return t
}

// acceleratedNTT is the ring.NTTAccelerator: the AVX-512 IFMA transform for primes below 2^50.
func acceleratedNTT(forward, ci bool, p1, p2 []uint64, n int, q, mred, nInv uint64, roots []uint64) bool {
	if q >= nttMaxModulus || n < nttMinDegree || n&(n-1) != 0 || len(p1) < n || len(p2) < n || len(roots) < 2 {
		return false
	}
	key := nttKey{q: q, root1: roots[1], n: n, fwd: forward, ci: ci}
	var t *nttTable
	if v, ok := nttTables.Load(key); ok {
		t = v.(*nttTable)
	} else {
		if t = newNTTTable(forward, ci, n, q, mred, nInv, roots); t == nil {
			return false
		}
		if v, loaded := nttTables.LoadOrStore(key, t); loaded { // another goroutine built it first
			C.free(unsafe.Pointer(t.w))
			t = v.(*nttTable)
		}
	}
	if !forward && ring.MRed(nInv, 1, q, mred) != t.s {
		return false // a table built for another 1/n
	}
	ok := C.henn_ntt((*C.uint64_t)(unsafe.Pointer(&p1[0])), (*C.uint64_t)(unsafe.Pointer(&p2[0])), C.size_t(n), C.uint64_t(q),
		t.w, t.ws, cbool(forward), cbool(ci), C.uint64_t(t.f), C.uint64_t(t.fs), C.uint64_t(t.s), C.uint64_t(t.ss))
	return ok != 0
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
