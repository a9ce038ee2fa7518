package main

/*
#include <stdint.h>
#include <stddef.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

// out[j] = the centred lift of in[j] (mod qin) modulo q, Lattigo's way: c = in[j], negated to
// qin - c when c >= qin/2; r = c mod q (Shoup's product by 1: ws = floor(2^52 / q), c < 2^52);
// out = r, or q - r for a negated c (q itself when r = 0, as Lattigo writes it). n % 8 == 0.
__attribute__((target("avx512f,avx512ifma")))
static void henn_lift(const uint64_t *in, size_t n, uint64_t qin, uint64_t qs, uint64_t wss, uint64_t *out) {
	const __m512i zero = _mm512_setzero_si512(), mask52 = _mm512_set1_epi64((1LL << 52) - 1);
	const __m512i Qin = _mm512_set1_epi64((long long)qin), half = _mm512_set1_epi64((long long)(qin >> 1));
	const __m512i q = _mm512_set1_epi64((long long)qs), ws = _mm512_set1_epi64((long long)wss);
	for (size_t j = 0; j < n; j += 8) {
		__m512i c = _mm512_loadu_si512((const void *)(in + j));
		__mmask8 neg = _mm512_cmpge_epu64_mask(c, half);
		c = _mm512_mask_sub_epi64(c, neg, Qin, c);
		__m512i quot = _mm512_madd52hi_epu64(zero, c, ws);
		__m512i r = _mm512_and_si512(_mm512_sub_epi64(c, _mm512_madd52lo_epu64(zero, quot, q)), mask52);
		r = _mm512_min_epu64(r, _mm512_sub_epi64(r, q));
		r = _mm512_mask_sub_epi64(r, neg, q, r);
		_mm512_storeu_si512((void *)(out + j), r);
	}
}
#else
static void henn_lift(const uint64_t *in, size_t n, uint64_t qin, uint64_t qs, uint64_t wss, uint64_t *out) {}
#endif
*/
import "C"

import (
	"os"
	"unsafe"

	"github.com/tuneinsight/lattigo/v6/ring"
)

func init() {
	// HENN_LATTIGO_NTT=go keeps Lattigo's own code here too.
	if os.Getenv("HENN_LATTIGO_NTT") != "go" && hasNTTAcceleration() {
		ring.SetLiftAccelerator(acceleratedLift)
	}
}

// acceleratedLift is the ring.LiftAccelerator: 8 coefficients at a time for primes below 2^50.
func acceleratedLift(in []uint64, qIn uint64, moduli []uint64, out [][]uint64) bool {
	n := len(in)
	if n == 0 || n%8 != 0 || qIn >= nttMaxModulus || len(moduli) < len(out) {
		return false
	}
	for i := range out {
		if moduli[i] >= nttMaxModulus || len(out[i]) < n {
			return false
		}
	}
	for i := range out {
		C.henn_lift((*C.uint64_t)(unsafe.Pointer(&in[0])), C.size_t(n), C.uint64_t(qIn), C.uint64_t(moduli[i]),
			C.uint64_t(shoup(1, moduli[i])), (*C.uint64_t)(unsafe.Pointer(&out[i][0])))
	}
	return true
}
