package main

/*
#include <stdint.h>
#include <stddef.h>

// Lattigo's MRedLazy: x*y*2^-64 mod q in [0, 2q] for x*y < q*2^64 (qinv = q^-1 mod 2^64).
static inline uint64_t henn_mred_lazy(uint64_t x, uint64_t y, uint64_t q, uint64_t qinv) {
	unsigned __int128 a = (unsigned __int128)x * y;
	uint64_t h = (uint64_t)(((unsigned __int128)((uint64_t)a * qinv) * q) >> 64);
	return (uint64_t)(a >> 64) - h + q;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include "ifma.h"

// z[j] (+)= x*y*2^-64 mod q, each product below 2q, for q < 2^50: a Montgomery product with
// R = 2^52 in IFMA (m = lo * q^-1 mod 2^52; hi - hi52(m*q) + q lies in (0, 2q) for x*y < q*2^52),
// then Shoup's product by c = 2^-12 mod q (cs its constant). Blocks of 8 with x >= 2^52 or y >= q
// take Lattigo's scalar formula instead. n % 8 == 0.
HENN_TGT static void henn_mulcoeffs(const uint64_t *x, const uint64_t *y, uint64_t *z, size_t n, uint64_t qs, uint64_t qinv52,
                           uint64_t qinv64, uint64_t c, uint64_t cs, int add) {
	const __m512i zero = _mm512_setzero_si512(), q = _mm512_set1_epi64((long long)qs);
	const __m512i qi = _mm512_set1_epi64((long long)qinv52);
	const __m512i lim = _mm512_set1_epi64(1LL << 52);
	for (size_t j = 0; j < n; j += 8) {
		__m512i X = _mm512_loadu_si512((const void *)(x + j)), Y = _mm512_loadu_si512((const void *)(y + j));
		if (_mm512_cmpge_epu64_mask(X, lim) | _mm512_cmpge_epu64_mask(Y, q)) {
			for (size_t k = j; k < j + 8; k++) {
				uint64_t r = henn_mred_lazy(x[k], y[k], qs, qinv64);
				z[k] = add ? z[k] + r : r;
			}
			continue;
		}
		__m512i lo = _mm512_madd52lo_epu64(zero, X, Y), hi = _mm512_madd52hi_epu64(zero, X, Y);
		__m512i m = _mm512_madd52lo_epu64(zero, lo, qi);
		__m512i t = _mm512_add_epi64(_mm512_sub_epi64(hi, _mm512_madd52hi_epu64(zero, m, q)), q);
		__m512i r = henn_mulshoup52s(t, c, cs, q);
		if (add) r = _mm512_add_epi64(r, _mm512_loadu_si512((const void *)(z + j)));
		_mm512_storeu_si512((void *)(z + j), r);
	}
}
#else
static void henn_mulcoeffs(const uint64_t *x, const uint64_t *y, uint64_t *z, size_t n, uint64_t qs, uint64_t qinv52,
                           uint64_t qinv64, uint64_t c, uint64_t cs, int add) {}
#endif
*/
import "C"

import (
	"unsafe"

	"github.com/tuneinsight/lattigo/v6/ring"
)

func init() {
	if hasIFMA() {
		ring.SetMulCoeffsAccelerator(acceleratedMulCoeffs)
	}
}

// mulCoeffsMinLength: shorter vectors are not worth the cgo call and the constants' set-up.
const mulCoeffsMinLength = 1024

// acceleratedMulCoeffs is the ring.MulCoeffsAccelerator: 52-bit lanes for primes below 2^50, 64-bit
// lanes (vec_ifma.go) for the others.
func acceleratedMulCoeffs(p1, p2, p3 []uint64, q, mredConstant uint64, add bool) bool {
	n := len(p1)
	if n < mulCoeffsMinLength || n%8 != 0 || len(p2) < n || len(p3) < n {
		return false
	}
	if q >= nttMaxModulus {
		mulCoeffs64(p1, p2, p3, q, mredConstant, add)
		return true
	}
	qinv64 := mredConstant // Lattigo's MRedConstant is q^-1 mod 2^64
	qinv52 := qinv64 & (1<<52 - 1)
	c := uint64(1) // 2^-12 mod q: halve 12 times (q is odd)
	for i := 0; i < 12; i++ {
		if c&1 == 1 {
			c += q
		}
		c >>= 1
	}
	C.henn_mulcoeffs((*C.uint64_t)(unsafe.Pointer(&p1[0])), (*C.uint64_t)(unsafe.Pointer(&p2[0])),
		(*C.uint64_t)(unsafe.Pointer(&p3[0])), C.size_t(n), C.uint64_t(q), C.uint64_t(qinv52), C.uint64_t(qinv64),
		C.uint64_t(c), C.uint64_t(shoup(c, q)), cbool(add))
	return true
}
