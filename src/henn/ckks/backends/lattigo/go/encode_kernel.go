package main

/*
#include <stdint.h>
#include <stddef.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include "ifma.h"
// Go (GOAMD64=v1) rounds |v| * scale before adding 0.5; GCC would fuse the two (GNU-mode default).
#pragma GCC optimize("fp-contract=off")

// The quantization of embedSlots in 8 lanes: coefficient i < slots is the real part of values[i]
// (complex128: doubles 2i and 2i+1), coefficient slots + i its imaginary part (standard ring, n =
// 2 * slots; n = slots on the conjugate-invariant ring). mag[i] = floor(|v| * scale + 0.5) (Go's
// uint64(x + 0.5), with no fused multiply-add), negs[i / 8] the lanes with v < 0. Returns 0, having
// written nothing that counts, when some |v| * scale + 0.5 reaches 2^64: Lattigo's big-integer path.
HENN_TGT static int henn_quantize(const double *values, size_t slots, size_t n, double scale, uint64_t *mag,
                                  uint8_t *negs) {
	const __m512d sc = _mm512_set1_pd(scale), half = _mm512_set1_pd(0.5), top = _mm512_set1_pd(18446744073709551616.0);
	const __m512i even = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0), odd = _mm512_set_epi64(15, 13, 11, 9, 7, 5, 3, 1);
	__mmask8 over = 0;
	for (size_t i = 0; i < n; i += 8) {
		size_t s = i < slots ? i : i - slots;
		__m512d a = _mm512_loadu_pd(values + 2 * s), b = _mm512_loadu_pd(values + 2 * s + 8);
		__m512d v = _mm512_permutex2var_pd(a, i < slots ? even : odd, b);
		__m512d x = _mm512_add_pd(_mm512_mul_pd(_mm512_abs_pd(v), sc), half);
		over |= _mm512_cmp_pd_mask(x, top, _CMP_GE_OQ);
		negs[i / 8] = (uint8_t)_mm512_cmp_pd_mask(v, _mm512_setzero_pd(), _CMP_LT_OQ);
		_mm512_storeu_si512((void *)(mag + i), _mm512_cvttpd_epu64(x));
	}
	return over == 0;
}

// One prime's row from henn_quantize's output, exactly as encodeScratch.reduce writes it (Lattigo's
// conventions): for v >= 0, c below 2^61 as it is, else c mod q; for v < 0, q - c for c <= q, else
// q - (c mod q). r64 = floor(2^64 / q). n % 8 == 0.
HENN_TGT static void henn_signed_row(const uint64_t *mag, const uint8_t *negs, size_t n, uint64_t q, uint64_t r64,
                                     uint64_t *row) {
	const __m512i Q = _mm512_set1_epi64((long long)q), R = _mm512_set1_epi64((long long)r64);
	const __m512i top = _mm512_set1_epi64(0x1fffffffffffffffLL);
	for (size_t i = 0; i < n; i += 8) {
		__m512i c = _mm512_loadu_si512((const void *)(mag + i));
		__mmask8 neg = negs[i / 8];
		__mmask8 big = (__mmask8)(~neg & _mm512_cmpgt_epu64_mask(c, top)) | (neg & _mm512_cmpgt_epu64_mask(c, Q));
		__m512i v = big ? _mm512_mask_mov_epi64(c, big, henn_reduce64(c, Q, R)) : c;  // reduced: rare
		_mm512_storeu_si512((void *)(row + i), _mm512_mask_sub_epi64(v, neg, Q, v));
	}
}
#else
static int henn_quantize(const double *values, size_t slots, size_t n, double scale, uint64_t *mag, uint8_t *negs) {
	return 0;
}
static void henn_signed_row(const uint64_t *mag, const uint8_t *negs, size_t n, uint64_t q, uint64_t r64, uint64_t *row) {}
#endif
*/
import "C"

import (
	"unsafe"

	"github.com/tuneinsight/lattigo/v6/ring"
)

// quantizeKernel: the AVX-512 quantization of slot encodings (every IFMA CPU has the F and DQ
// instructions it needs); HENN_LATTIGO_NTT=go keeps the Go path, as for the other kernels.
var quantizeKernel = hasIFMA()

// quantizeRows writes the first n coefficients of each of polys' rows (their rings' primes) from the
// inverse-FFT'd slots, with encodeScratch's exact conventions, and zeroes the rest. It declines
// (false, rows then void) where a value needs Lattigo's big-integer path: |value * scale| from 2^64.
// At N = 2^16 the Go loop was 44% of an encode (3.8 of 8.5 ms).
func quantizeRows(values []complex128, n int, scale float64, rings []*ring.Ring, polys []ring.Poly, s *encodeScratch) bool {
	slots := len(values)
	if !quantizeKernel || n == 0 || n%8 != 0 || slots%8 != 0 || (n != slots && n != 2*slots) || len(s.mag) < n {
		return false
	}
	negs := s.negMasks(n / 8)
	if !quantizeMagnitudes(values, n, scale, s.mag, negs) {
		return false
	}
	for k, r := range rings {
		for j, q := range r.ModuliChain()[:r.Level()+1] {
			signedRow(s.mag, negs, n, q, polys[k].Coeffs[j])
		}
	}
	return true
}

// quantizeMagnitudes is henn_quantize: mag[:n] and negs[:n/8] from the inverse-FFT'd slots; false
// where a value needs Lattigo's big-integer path. The caller has checked the kernel and the sizes.
func quantizeMagnitudes(values []complex128, n int, scale float64, mag []uint64, negs []uint8) bool {
	return C.henn_quantize((*C.double)(unsafe.Pointer(&values[0])), C.size_t(len(values)), C.size_t(n), C.double(scale),
		(*C.uint64_t)(unsafe.Pointer(&mag[0])), (*C.uint8_t)(unsafe.Pointer(&negs[0]))) != 0
}

// signedRow writes one prime's row (its first n coefficients from quantizeMagnitudes, the rest zero).
func signedRow(mag []uint64, negs []uint8, n int, q uint64, row []uint64) {
	r64 := shoupFor(1, q, true) // floor(2^64 / q), henn_reduce64's constant
	C.henn_signed_row((*C.uint64_t)(unsafe.Pointer(&mag[0])), (*C.uint8_t)(unsafe.Pointer(&negs[0])),
		C.size_t(n), C.uint64_t(q), C.uint64_t(r64), (*C.uint64_t)(unsafe.Pointer(&row[0])))
	clear(row[n:])
}
