package main

/*
#include <stdint.h>
#include <stddef.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include "ifma.h"

// z = x mod q, fully reduced, for any x < 2^64 and 2^14 <= q < 2^62. The quotient comes from
// doubles: x/q in float64 is within 3 * 2^-53 of its value relatively, so within 0.4 of it for
// quotients below 2^50, and its truncation k is floor(x/q) - 1, itself or + 1. x - k*q (modulo
// 2^64) then lies in [-q, 2q): q is added where it is negative and subtracted where it is >= q.
HENN_TGT static void henn_reduce(const uint64_t *x, uint64_t *z, size_t n, uint64_t qs) {
	const __m512i q = _mm512_set1_epi64((long long)qs);
	const __m512d qinv = _mm512_set1_pd(1.0 / (double)qs);
	for (size_t j = 0; j < n; j += 8) {
		__m512i X = _mm512_loadu_si512((const void *)(x + j));
		__m512i k = _mm512_cvttpd_epu64(_mm512_mul_pd(_mm512_cvtepu64_pd(X), qinv));
		__m512i r = _mm512_sub_epi64(X, _mm512_mullo_epi64(k, q));
		r = _mm512_mask_add_epi64(r, _mm512_movepi64_mask(r), r, q);
		_mm512_storeu_si512((void *)(z + j), henn_csub(r, q));
	}
}

// z = x + y (y nil: + s), then q subtracted once where the sum is >= q, with 64-bit wrap-around:
// Lattigo's CRed of the sum, bit for bit.
HENN_TGT static void henn_add(const uint64_t *x, const uint64_t *y, uint64_t s, uint64_t *z, size_t n, uint64_t qs) {
	const __m512i q = _mm512_set1_epi64((long long)qs), S = _mm512_set1_epi64((long long)s);
	for (size_t j = 0; j < n; j += 8) {
		__m512i X = _mm512_loadu_si512((const void *)(x + j));
		__m512i Y = y ? _mm512_loadu_si512((const void *)(y + j)) : S;
		_mm512_storeu_si512((void *)(z + j), henn_csub(_mm512_add_epi64(X, Y), q));
	}
}

// z = (2q - y + x) * w mod q, fully reduced, for q < 2^61.4 (ws = floor(w * 2^64 / q)): Lattigo's
// MRed by w's Montgomery form, which is the one reduced value too.
HENN_TGT static void henn_sub_mulscalar(const uint64_t *x, const uint64_t *y, uint64_t *z, size_t n, uint64_t qs,
                                        uint64_t w, uint64_t ws) {
	const __m512i q = _mm512_set1_epi64((long long)qs), q2 = _mm512_set1_epi64((long long)(2 * qs));
	const __m512i W = _mm512_set1_epi64((long long)w), WS = _mm512_set1_epi64((long long)ws);
	for (size_t j = 0; j < n; j += 8) {
		__m512i X = _mm512_loadu_si512((const void *)(x + j)), Y = _mm512_loadu_si512((const void *)(y + j));
		__m512i a = _mm512_add_epi64(_mm512_sub_epi64(q2, Y), X);
		_mm512_storeu_si512((void *)(z + j), henn_csub(henn_mulshoup64(a, W, WS, q), q));
	}
}

// z (+)= x*y*2^-64 mod q in [0, 2q] with Lattigo's MRedLazy formula in 64-bit lanes, bit for bit: for
// the primes from 2^50 that the 52-bit kernel (montgomery_ifma.go) does not take.
HENN_TGT static void henn_mulcoeffs64(const uint64_t *x, const uint64_t *y, uint64_t *z, size_t n, uint64_t qs,
                                      uint64_t qinv, int add) {
	const __m512i q = _mm512_set1_epi64((long long)qs), qi = _mm512_set1_epi64((long long)qinv);
	for (size_t j = 0; j < n; j += 8) {
		__m512i X = _mm512_loadu_si512((const void *)(x + j)), Y = _mm512_loadu_si512((const void *)(y + j));
		__m512i m = _mm512_mullo_epi64(_mm512_mullo_epi64(X, Y), qi);
		__m512i r = _mm512_add_epi64(_mm512_sub_epi64(henn_mulhi64(X, Y), henn_mulhi64(m, q)), q);
		if (add) r = _mm512_add_epi64(r, _mm512_loadu_si512((const void *)(z + j)));
		_mm512_storeu_si512((void *)(z + j), r);
	}
}
#else
static void henn_reduce(const uint64_t *x, uint64_t *z, size_t n, uint64_t qs) {}
static void henn_add(const uint64_t *x, const uint64_t *y, uint64_t s, uint64_t *z, size_t n, uint64_t qs) {}
static void henn_sub_mulscalar(const uint64_t *x, const uint64_t *y, uint64_t *z, size_t n, uint64_t qs,
                               uint64_t w, uint64_t ws) {}
static void henn_mulcoeffs64(const uint64_t *x, const uint64_t *y, uint64_t *z, size_t n, uint64_t qs,
                             uint64_t qinv, int add) {}
#endif
*/
import "C"

import (
	"unsafe"

	"github.com/tuneinsight/lattigo/v6/ring"
)

// The ring's element-wise loops in AVX-512 (ring.VecAccelerator): key switching reduces its lazy sums,
// adds and centres digits and ends with ModDown's scaled difference, prime by prime, over whole
// polynomials; Lattigo's Go loops spent about a seventh of a ResNet-20 evaluation there.
func init() {
	if hasIFMA() {
		ring.SetVecAccelerator(vecKernels)
	}
}

var vecKernels = ring.VecAccelerator{
	Reduce: acceleratedReduce, Add: acceleratedAdd, AddScalar: acceleratedAddScalar,
	SubThenMulScalarMontgomeryTwoModulus: acceleratedSubThenMulScalar,
}

// vecMinLength: shorter vectors are not worth the cgo call.
const vecMinLength = 1024

// reduceMinModulus: the float64 quotient of henn_reduce is off by at most one from 2^14 on.
const reduceMinModulus = uint64(1) << 14

// reduceMaxModulus: henn_reduce tells x - k*q in [-q, 2q) by its sign bit, so 2q < 2^63.
const reduceMaxModulus = uint64(1) << 62

func vecShape(n int, lens ...int) bool {
	if n < vecMinLength || n%8 != 0 {
		return false
	}
	for _, l := range lens {
		if l < n {
			return false
		}
	}
	return true
}

func ptr(p []uint64) *C.uint64_t { return (*C.uint64_t)(unsafe.Pointer(&p[0])) }

func acceleratedReduce(p1, p2 []uint64, q uint64) bool {
	if q < reduceMinModulus || q >= reduceMaxModulus || !vecShape(len(p1), len(p2)) {
		return false
	}
	C.henn_reduce(ptr(p1), ptr(p2), C.size_t(len(p1)), C.uint64_t(q))
	return true
}

func acceleratedAdd(p1, p2, p3 []uint64, q uint64) bool {
	if !vecShape(len(p1), len(p2), len(p3)) {
		return false
	}
	C.henn_add(ptr(p1), ptr(p2), 0, ptr(p3), C.size_t(len(p1)), C.uint64_t(q))
	return true
}

func acceleratedAddScalar(p1 []uint64, scalar uint64, p2 []uint64, q uint64) bool {
	if !vecShape(len(p1), len(p2)) {
		return false
	}
	C.henn_add(ptr(p1), nil, C.uint64_t(scalar), ptr(p2), C.size_t(len(p1)), C.uint64_t(q))
	return true
}

func acceleratedSubThenMulScalar(p1, p2 []uint64, scalarMont uint64, p3 []uint64, q, mredConstant uint64) bool {
	if q >= nttMaxWideModulus || !vecShape(len(p1), len(p2), len(p3)) {
		return false
	}
	w := ring.MRed(scalarMont, 1, q, mredConstant) // scalarMont * 2^-64 mod q, reduced
	C.henn_sub_mulscalar(ptr(p1), ptr(p2), ptr(p3), C.size_t(len(p1)), C.uint64_t(q), C.uint64_t(w),
		C.uint64_t(shoupFor(w, q, true)))
	return true
}

// mulCoeffs64 is acceleratedMulCoeffs for the primes from 2^50 (Lattigo's lazy Montgomery products,
// bit for bit).
func mulCoeffs64(p1, p2, p3 []uint64, q, mredConstant uint64, add bool) {
	C.henn_mulcoeffs64(ptr(p1), ptr(p2), ptr(p3), C.size_t(len(p1)), C.uint64_t(q), C.uint64_t(mredConstant), cbool(add))
}
