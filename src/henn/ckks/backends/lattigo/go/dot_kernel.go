package main

/*
#include <stddef.h>
#include <stdint.h>

#if defined(__SIZEOF_INT128__)
typedef unsigned __int128 henn_u128;

// Lattigo's BRedAdd: a mod q (Barrett, u0 = the high word of floor(2^128 / q)).
static inline uint64_t henn_bred_add(uint64_t a, uint64_t q, uint64_t u0) {
	uint64_t r = a - (uint64_t)(((henn_u128)a * u0) >> 64) * q;
	return r >= q ? r - q : r;
}

// Lattigo's BRed: x * y mod q, with x * y < q^2 (Barrett, u = floor(2^128 / q) = u0 * 2^64 + u1).
static inline uint64_t henn_bred(uint64_t x, uint64_t y, uint64_t q, uint64_t u0, uint64_t u1) {
	henn_u128 m = (henn_u128)x * y;
	uint64_t mhi = (uint64_t)(m >> 64), mlo = (uint64_t)m;
	uint64_t r = mhi * u0;
	henn_u128 h = (henn_u128)mlo * u0;
	r += (uint64_t)(h >> 64);
	henn_u128 s = (henn_u128)(uint64_t)h + (uint64_t)(((henn_u128)mlo * u1) >> 64);
	r += (uint64_t)(s >> 64);
	henn_u128 h2 = (henn_u128)mhi * u1;
	r += (uint64_t)(h2 >> 64);
	r += (uint64_t)(((henn_u128)(uint64_t)h2 + (uint64_t)s) >> 64);
	r = mlo - r * q;
	return r >= q ? r - q : r;
}

// (hi * 2^64 + lo) mod q, as reduce128 in fused.go (r64 = 2^64 mod q).
static inline uint64_t henn_reduce128(henn_u128 v, uint64_t q, uint64_t r64, uint64_t u0, uint64_t u1) {
	uint64_t a = henn_bred(henn_bred_add((uint64_t)(v >> 64), q, u0), r64, q, u0, u1) + henn_bred_add((uint64_t)v, q, u0);
	return a >= q ? a - q : a;
}

// One prime's limbs of sum_t (c0_t, c1_t) * p_t: dst0[x] = sum_t c0_t[x] * p_t[x] mod q and
// dst1 likewise, for x < n. The data streams from memory once (the plaintext limb is read once for
// both polynomials) in tiles of HENN_DOT_TILE coefficients whose 128-bit sums stay in L1, folded
// modulo q every `chunk` terms and at the end. (Measured on a 2-core Xeon VM, N = 2^15: 2-3 ns per
// product against 7-8 for 64-coefficient tiles, which defeat the hardware prefetchers.)
#define HENN_DOT_TILE 1024
static void henn_dot_prime(const uintptr_t *c0s, const uintptr_t *c1s, const uintptr_t *ps, int nterms, size_t n,
                           uint64_t q, uint64_t r64, uint64_t u0, uint64_t u1, int chunk, uint64_t *dst0,
                           uint64_t *dst1) {
	henn_u128 acc0[HENN_DOT_TILE], acc1[HENN_DOT_TILE];
	for (size_t s = 0; s < n; s += HENN_DOT_TILE) {
		size_t w = n - s < HENN_DOT_TILE ? n - s : HENN_DOT_TILE;
		for (size_t x = 0; x < w; x++) acc0[x] = acc1[x] = 0;
		for (int t = 0; t < nterms; t++) {
			if (t > 0 && t % chunk == 0)
				for (size_t x = 0; x < w; x++) {
					acc0[x] = henn_reduce128(acc0[x], q, r64, u0, u1);
					acc1[x] = henn_reduce128(acc1[x], q, r64, u0, u1);
				}
			const uint64_t *a = (const uint64_t *)c0s[t] + s, *b = (const uint64_t *)c1s[t] + s;
			const uint64_t *p = (const uint64_t *)ps[t] + s;
			for (size_t x = 0; x < w; x++) {
				uint64_t m = p[x];
				acc0[x] += (henn_u128)a[x] * m;
				acc1[x] += (henn_u128)b[x] * m;
			}
		}
		for (size_t x = 0; x < w; x++) {
			dst0[s + x] = henn_reduce128(acc0[x], q, r64, u0, u1);
			dst1[s + x] = henn_reduce128(acc1[x], q, r64, u0, u1);
		}
	}
}
static int henn_dot_native(void) { return 1; }

// henn_dot_prime for many parts that read the same ciphertexts and vectors: part p's limbs are the sum
// over its terms t in [bounds[p], bounds[p + 1]) of (c0s, c1s)[baby[t]] * r, where row r (at rows +
// vec[t] * stride) holds the term's plaintext limb with each value repeated 2^g times (r[x >> g] is
// coefficient x: a sparse encoding's transform). Tile by tile, every part reads the tile of the ciphertexts from cache.
static void henn_dot_parts(const uintptr_t *c0s, const uintptr_t *c1s, const uint64_t *rows, size_t stride,
                           const int32_t *baby, const int32_t *vec, const int32_t *bounds, int nparts, size_t n,
                           int g, uint64_t q, uint64_t r64, uint64_t u0, uint64_t u1, int chunk,
                           const uintptr_t *dst0s, const uintptr_t *dst1s) {
	henn_u128 acc0[HENN_DOT_TILE], acc1[HENN_DOT_TILE];
	for (size_t s = 0; s < n; s += HENN_DOT_TILE) {
		size_t w = n - s < HENN_DOT_TILE ? n - s : HENN_DOT_TILE;
		for (int p = 0; p < nparts; p++) {
			for (size_t x = 0; x < w; x++) acc0[x] = acc1[x] = 0;
			for (int t = bounds[p]; t < bounds[p + 1]; t++) {
				if (t > bounds[p] && (t - bounds[p]) % chunk == 0)
					for (size_t x = 0; x < w; x++) {
						acc0[x] = henn_reduce128(acc0[x], q, r64, u0, u1);
						acc1[x] = henn_reduce128(acc1[x], q, r64, u0, u1);
					}
				const uint64_t *a = (const uint64_t *)c0s[baby[t]] + s, *b = (const uint64_t *)c1s[baby[t]] + s;
				const uint64_t *r = rows + (size_t)vec[t] * stride;
				for (size_t x = 0; x < w; x++) {
					uint64_t m = r[(s + x) >> g];
					acc0[x] += (henn_u128)a[x] * m;
					acc1[x] += (henn_u128)b[x] * m;
				}
			}
			uint64_t *d0 = (uint64_t *)dst0s[p] + s, *d1 = (uint64_t *)dst1s[p] + s;
			for (size_t x = 0; x < w; x++) {
				d0[x] = henn_reduce128(acc0[x], q, r64, u0, u1);
				d1[x] = henn_reduce128(acc1[x], q, r64, u0, u1);
			}
		}
	}
}

#if defined(__x86_64__) && defined(__GNUC__)
#include "ifma.h"
#define HENN_DOT52_TILE 256
#define HENN_DOT52_TERMS 4095  // 52-bit halves summed in 64-bit lanes: at most 4095 before a fold

// (hi * 2^52 + lo) mod q, fully reduced; k = {1's Shoup, 2^52 mod q and its Shoup, 2^104 mod q and its Shoup}.
HENN_TGT static inline __m512i henn_dot52_fold(__m512i lo, __m512i hi, __m512i q, const uint64_t *k) {
	const __m512i mask = _mm512_set1_epi64((1LL << 52) - 1);
	hi = _mm512_add_epi64(hi, _mm512_srli_epi64(lo, 52));
	lo = _mm512_and_si512(lo, mask);
	__m512i r = _mm512_add_epi64(henn_mulshoup52s(lo, 1, k[0], q), henn_mulshoup52s(_mm512_and_si512(hi, mask), k[1], k[2], q));
	r = _mm512_add_epi64(r, henn_mulshoup52s(_mm512_srli_epi64(hi, 52), k[3], k[4], q));  // < 6q
	__m512i q2 = _mm512_add_epi64(q, q);
	return henn_csub(henn_csub(henn_csub(r, _mm512_add_epi64(q2, q2)), q2), q);
}

// One term's 8 lanes of both polynomials (at a and b) times the plaintext lanes m into the 52-bit
// halves; seen collects every limb's bits (henn_dot_prime52's check).
HENN_TGT static inline void henn_dot52_term(const uint64_t *a, const uint64_t *b, __m512i m, __m512i *l0, __m512i *h0,
                                            __m512i *l1, __m512i *h1, __m512i *seen) {
	__m512i x = _mm512_loadu_si512((const void *)a), y = _mm512_loadu_si512((const void *)b);
	*seen = _mm512_or_si512(*seen, _mm512_or_si512(m, _mm512_or_si512(x, y)));
	*l0 = _mm512_madd52lo_epu64(*l0, x, m);
	*h0 = _mm512_madd52hi_epu64(*h0, x, m);
	*l1 = _mm512_madd52lo_epu64(*l1, y, m);
	*h1 = _mm512_madd52hi_epu64(*h1, y, m);
}

// henn_dot_prime for primes below 2^50 with AVX-512 IFMA: products summed as 52-bit halves in
// 64-bit lanes, folded modulo q every HENN_DOT52_TERMS terms. Every limb must be below 2^52 (reduced
// limbs are): it returns 0 when one was not (its results then void; dst must not alias an input).
HENN_TGT static int henn_dot_prime52(const uintptr_t *c0s, const uintptr_t *c1s, const uintptr_t *ps, int nterms, size_t n,
                             uint64_t qs, const uint64_t *k, uint64_t *dst0, uint64_t *dst1) {
	__m512i L0[HENN_DOT52_TILE / 8], H0[HENN_DOT52_TILE / 8], L1[HENN_DOT52_TILE / 8], H1[HENN_DOT52_TILE / 8];
	const __m512i q = _mm512_set1_epi64((long long)qs), zero = _mm512_setzero_si512();
	__m512i seen = zero;  // the OR of every limb: bits from 52 up mean a limb the lanes would truncate
	for (size_t s = 0; s < n; s += HENN_DOT52_TILE) {
		size_t w = (n - s < HENN_DOT52_TILE ? n - s : HENN_DOT52_TILE) / 8;
		for (size_t v = 0; v < w; v++) L0[v] = H0[v] = L1[v] = H1[v] = zero;
		for (int t = 0; t < nterms; t++) {
			if (t > 0 && t % HENN_DOT52_TERMS == 0)
				for (size_t v = 0; v < w; v++) {
					L0[v] = henn_dot52_fold(L0[v], H0[v], q, k);
					L1[v] = henn_dot52_fold(L1[v], H1[v], q, k);
					H0[v] = H1[v] = zero;
				}
			const uint64_t *a = (const uint64_t *)c0s[t] + s, *b = (const uint64_t *)c1s[t] + s;
			const uint64_t *p = (const uint64_t *)ps[t] + s;
			for (size_t v = 0; v < w; v++)
				henn_dot52_term(a + 8 * v, b + 8 * v, _mm512_loadu_si512((const void *)(p + 8 * v)), &L0[v], &H0[v],
				                &L1[v], &H1[v], &seen);
		}
		for (size_t v = 0; v < w; v++) {
			_mm512_storeu_si512((void *)(dst0 + s + 8 * v), henn_dot52_fold(L0[v], H0[v], q, k));
			_mm512_storeu_si512((void *)(dst1 + s + 8 * v), henn_dot52_fold(L1[v], H1[v], q, k));
		}
	}
	return _mm512_test_epi64_mask(seen, _mm512_set1_epi64(~((1LL << 52) - 1))) == 0;
}

// henn_dot_parts with IFMA (henn_dot_prime52's lanes and fold); a row's 8 values for lanes l read
// r_t[(x + l) >> g], one permutation of one load. Rows hold 8 values past their last (the loads'
// reach). Returns 0, results void, where a limb was not below 2^52.
HENN_TGT static int henn_dot_parts52(const uintptr_t *c0s, const uintptr_t *c1s, const uint64_t *rows, size_t stride,
                                     const int32_t *baby, const int32_t *vec, const int32_t *bounds, int nparts,
                                     size_t n, int g, uint64_t qs, const uint64_t *k, const uintptr_t *dst0s,
                                     const uintptr_t *dst1s) {
	__m512i L0[HENN_DOT52_TILE / 8], H0[HENN_DOT52_TILE / 8], L1[HENN_DOT52_TILE / 8], H1[HENN_DOT52_TILE / 8];
	const __m512i q = _mm512_set1_epi64((long long)qs), zero = _mm512_setzero_si512();
	const __m512i lanes = _mm512_srli_epi64(_mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0), g);
	__m512i seen = zero;
	for (size_t s = 0; s < n; s += HENN_DOT52_TILE) {
		size_t w = (n - s < HENN_DOT52_TILE ? n - s : HENN_DOT52_TILE) / 8;
		for (int p = 0; p < nparts; p++) {
			for (size_t v = 0; v < w; v++) L0[v] = H0[v] = L1[v] = H1[v] = zero;
			for (int t = bounds[p]; t < bounds[p + 1]; t++) {
				if (t > bounds[p] && (t - bounds[p]) % HENN_DOT52_TERMS == 0)
					for (size_t v = 0; v < w; v++) {
						L0[v] = henn_dot52_fold(L0[v], H0[v], q, k);
						L1[v] = henn_dot52_fold(L1[v], H1[v], q, k);
						H0[v] = H1[v] = zero;
					}
				const uint64_t *a = (const uint64_t *)c0s[baby[t]] + s, *b = (const uint64_t *)c1s[baby[t]] + s;
				const uint64_t *r = rows + (size_t)vec[t] * stride;
				for (size_t v = 0; v < w; v++)
					henn_dot52_term(a + 8 * v, b + 8 * v,
					                _mm512_permutexvar_epi64(lanes, _mm512_loadu_si512((const void *)(r + ((s + 8 * v) >> g)))),
					                &L0[v], &H0[v], &L1[v], &H1[v], &seen);
			}
			uint64_t *d0 = (uint64_t *)dst0s[p] + s, *d1 = (uint64_t *)dst1s[p] + s;
			for (size_t v = 0; v < w; v++) {
				_mm512_storeu_si512((void *)(d0 + 8 * v), henn_dot52_fold(L0[v], H0[v], q, k));
				_mm512_storeu_si512((void *)(d1 + 8 * v), henn_dot52_fold(L1[v], H1[v], q, k));
			}
		}
	}
	return _mm512_test_epi64_mask(seen, _mm512_set1_epi64(~((1LL << 52) - 1))) == 0;
}
#else
static int henn_dot_parts52(const uintptr_t *c0s, const uintptr_t *c1s, const uint64_t *rows, size_t stride,
                            const int32_t *baby, const int32_t *vec, const int32_t *bounds, int nparts, size_t n,
                            int g, uint64_t qs, const uint64_t *k, const uintptr_t *dst0s, const uintptr_t *dst1s) {
	return 0;
}
static int henn_dot_prime52(const uintptr_t *c0s, const uintptr_t *c1s, const uintptr_t *ps, int nterms, size_t n,
                            uint64_t qs, const uint64_t *k, uint64_t *dst0, uint64_t *dst1) { return 0; }
#endif
#else
static void henn_dot_prime(const uintptr_t *c0s, const uintptr_t *c1s, const uintptr_t *ps, int nterms, size_t n,
                           uint64_t q, uint64_t r64, uint64_t u0, uint64_t u1, int chunk, uint64_t *dst0,
                           uint64_t *dst1) {}
static void henn_dot_parts(const uintptr_t *c0s, const uintptr_t *c1s, const uint64_t *rows, size_t stride,
                           const int32_t *baby, const int32_t *vec, const int32_t *bounds, int nparts, size_t n,
                           int g, uint64_t q, uint64_t r64, uint64_t u0, uint64_t u1, int chunk,
                           const uintptr_t *dst0s, const uintptr_t *dst1s) {}
static int henn_dot_parts52(const uintptr_t *c0s, const uintptr_t *c1s, const uint64_t *rows, size_t stride,
                            const int32_t *baby, const int32_t *vec, const int32_t *bounds, int nparts, size_t n,
                            int g, uint64_t qs, const uint64_t *k, const uintptr_t *dst0s, const uintptr_t *dst1s) {
	return 0;
}
static int henn_dot_native(void) { return 0; }
#endif
*/
import "C"

import (
	"runtime"
	"unsafe"

	"github.com/tuneinsight/lattigo/v6/ring"
)

// hasNativeDot reports whether the C compiler has 128-bit integers for the dot product kernel
// (GCC and Clang on every 64-bit target); elsewhere dotPlain runs its Go kernel.
func hasNativeDot() bool { return C.henn_dot_native() != 0 }

// dotPrimeNative computes one prime's limbs of sum_t (c0_t, c1_t) * p_t in C into dst0, dst1. c0,
// c1 and p hold each term's limb addresses; the caller has pinned the limbs. Primes below 2^50
// take the AVX-512 IFMA kernel where the CPU has it (reduced limbs are below 2^52; it checks).
func dotPrimeNative(c0, c1, p []uintptr, q, r64 uint64, bred [2]uint64, chunk int, dst0, dst1 []uint64) {
	if q < nttMaxModulus && len(dst0)%8 == 0 && hasIFMA() {
		k := dot52Constants(q, bred)
		if C.henn_dot_prime52((*C.uintptr_t)(unsafe.Pointer(&c0[0])), (*C.uintptr_t)(unsafe.Pointer(&c1[0])),
			(*C.uintptr_t)(unsafe.Pointer(&p[0])), C.int(len(p)), C.size_t(len(dst0)), C.uint64_t(q),
			(*C.uint64_t)(unsafe.Pointer(&k[0])), (*C.uint64_t)(unsafe.Pointer(&dst0[0])), (*C.uint64_t)(unsafe.Pointer(&dst1[0]))) != 0 {
			return
		} // a limb from 2^52 (not reduced): the 128-bit kernel below recomputes everything
	}
	C.henn_dot_prime((*C.uintptr_t)(unsafe.Pointer(&c0[0])), (*C.uintptr_t)(unsafe.Pointer(&c1[0])),
		(*C.uintptr_t)(unsafe.Pointer(&p[0])), C.int(len(p)), C.size_t(len(dst0)), C.uint64_t(q), C.uint64_t(r64),
		C.uint64_t(bred[0]), C.uint64_t(bred[1]), C.int(chunk), (*C.uint64_t)(unsafe.Pointer(&dst0[0])),
		(*C.uint64_t)(unsafe.Pointer(&dst1[0])))
}

// pinPlaintexts pins every limb of the plaintexts for the C kernel (see pinLimbs).
func pinPlaintexts(p *runtime.Pinner, pts []*ptObj, primes int) {
	for _, pt := range pts {
		for j := 0; j < primes; j++ {
			p.Pin(&pt.pt.Value.Coeffs[j][0])
		}
	}
}

// dot52Constants: henn_dot52_fold's constants for q (1's Shoup, 2^52 mod q and 2^104 mod q with theirs).
func dot52Constants(q uint64, bred [2]uint64) [5]uint64 {
	r52 := (uint64(1) << 52) % q
	r104 := ring.BRed(r52, r52, q, bred)
	return [5]uint64{shoup(1, q), r52, shoup(r52, q), r104, shoup(r104, q)}
}

// dotPartsNative computes one prime's limbs of every part (henn_dot_parts): c0, c1 the ciphertexts'
// limb addresses, rows the vectors' rows (stride apart, each value repeated 2^g times), baby and vec each
// term's ciphertext and row, bounds the parts' first terms and the end, dst0, dst1 each part's output limbs. The caller
// has pinned every limb. Primes below 2^50 take the IFMA kernel where the CPU has it.
func dotPartsNative(c0, c1 []uintptr, rows []uint64, stride int, baby, vec, bounds []int32, n, g int, q uint64,
	bred [2]uint64, dst0, dst1 []uintptr) {
	parts := C.int(len(bounds) - 1)
	if q < nttMaxModulus && n%8 == 0 && hasIFMA() {
		k := dot52Constants(q, bred)
		if C.henn_dot_parts52((*C.uintptr_t)(unsafe.Pointer(&c0[0])), (*C.uintptr_t)(unsafe.Pointer(&c1[0])),
			(*C.uint64_t)(unsafe.Pointer(&rows[0])), C.size_t(stride), (*C.int32_t)(unsafe.Pointer(&baby[0])),
			(*C.int32_t)(unsafe.Pointer(&vec[0])), (*C.int32_t)(unsafe.Pointer(&bounds[0])), parts, C.size_t(n), C.int(g), C.uint64_t(q),
			(*C.uint64_t)(unsafe.Pointer(&k[0])), (*C.uintptr_t)(unsafe.Pointer(&dst0[0])),
			(*C.uintptr_t)(unsafe.Pointer(&dst1[0]))) != 0 {
			return
		}
	}
	C.henn_dot_parts((*C.uintptr_t)(unsafe.Pointer(&c0[0])), (*C.uintptr_t)(unsafe.Pointer(&c1[0])),
		(*C.uint64_t)(unsafe.Pointer(&rows[0])), C.size_t(stride), (*C.int32_t)(unsafe.Pointer(&baby[0])),
		(*C.int32_t)(unsafe.Pointer(&vec[0])), (*C.int32_t)(unsafe.Pointer(&bounds[0])), parts, C.size_t(n), C.int(g), C.uint64_t(q),
		C.uint64_t(pow64Mod(q, bred)), C.uint64_t(bred[0]), C.uint64_t(bred[1]), C.int(productChunk(q)),
		(*C.uintptr_t)(unsafe.Pointer(&dst0[0])), (*C.uintptr_t)(unsafe.Pointer(&dst1[0])))
}
