package main

/*
#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include "ifma.h"

// (hi, lo)[x] += sum_t src_t[off + x] * mult[t] for the 64 coefficients x of one tile, with
// 52-bit multiply-accumulate: every src value and multiplier must be < 2^52 (limbs of primes
// below 2^52), and nterms <= 4096 so that the 52-bit halves summed in 64 bits cannot overflow.
// Accumulators stay in 16 zmm registers; the caller reduces (hi, lo) modulo the prime.
__attribute__((target("avx512f,avx512ifma")))
static void henn_lc_macc52(const uintptr_t *bases, size_t off, const uint64_t *mult, int nterms,
                           uint64_t *lo, uint64_t *hi) {
	__m512i L0 = _mm512_setzero_si512(), L1 = L0, L2 = L0, L3 = L0, L4 = L0, L5 = L0, L6 = L0, L7 = L0;
	__m512i H0 = L0, H1 = L0, H2 = L0, H3 = L0, H4 = L0, H5 = L0, H6 = L0, H7 = L0;
	for (int t = 0; t < nterms; t++) {
		const uint64_t *s = (const uint64_t *)bases[t] + off;
		__m512i m = _mm512_set1_epi64((long long)mult[t]);
		__m512i x;
#define HENN_STEP(k) \
		x = _mm512_loadu_si512((const void *)(s + 8 * k)); \
		L##k = _mm512_madd52lo_epu64(L##k, x, m); \
		H##k = _mm512_madd52hi_epu64(H##k, x, m);
		HENN_STEP(0) HENN_STEP(1) HENN_STEP(2) HENN_STEP(3)
		HENN_STEP(4) HENN_STEP(5) HENN_STEP(6) HENN_STEP(7)
#undef HENN_STEP
	}
	uint64_t l[64], h[64];
	_mm512_storeu_si512((void *)(l + 0), L0); _mm512_storeu_si512((void *)(h + 0), H0);
	_mm512_storeu_si512((void *)(l + 8), L1); _mm512_storeu_si512((void *)(h + 8), H1);
	_mm512_storeu_si512((void *)(l + 16), L2); _mm512_storeu_si512((void *)(h + 16), H2);
	_mm512_storeu_si512((void *)(l + 24), L3); _mm512_storeu_si512((void *)(h + 24), H3);
	_mm512_storeu_si512((void *)(l + 32), L4); _mm512_storeu_si512((void *)(h + 32), H4);
	_mm512_storeu_si512((void *)(l + 40), L5); _mm512_storeu_si512((void *)(h + 40), H5);
	_mm512_storeu_si512((void *)(l + 48), L6); _mm512_storeu_si512((void *)(h + 48), H6);
	_mm512_storeu_si512((void *)(l + 56), L7); _mm512_storeu_si512((void *)(h + 56), H7);
	for (int x = 0; x < 64; x++) {
		unsigned __int128 a = ((unsigned __int128)hi[x] << 64) | lo[x];
		a += ((unsigned __int128)h[x] << 52) + l[x];
		lo[x] = (uint64_t)a;
		hi[x] = (uint64_t)(a >> 64);
	}
}
#else
static void henn_lc_macc52(const uintptr_t *bases, size_t off, const uint64_t *mult, int nterms,
                           uint64_t *lo, uint64_t *hi) {}
#endif
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// ifmaMaxTerms: terms per henn_lc_macc52 call (its 64-bit sums of 52-bit halves).
const ifmaMaxTerms = 4096

// ifmaMaxModulus: the 52-bit multiply-accumulate needs limbs and multipliers below 2^52. Primes
// below 2^51 keep even a lazily reduced limb (below 2q) within that; larger ones take the Go path.
const ifmaMaxModulus = uint64(1) << 51

// macc52 adds sum_t limb_t[off:off+64] * mult[t] into the 128-bit accumulators (hi, lo) of one
// tile. bases[t] is the address of term t's limb, pinned by the caller; len(mult) <= ifmaMaxTerms.
func macc52(bases []uintptr, off int, mult []uint64, hi, lo *[lcBlock]uint64) {
	if len(mult) == 0 {
		return
	}
	C.henn_lc_macc52((*C.uintptr_t)(unsafe.Pointer(&bases[0])), C.size_t(off), (*C.uint64_t)(unsafe.Pointer(&mult[0])),
		C.int(len(mult)), (*C.uint64_t)(unsafe.Pointer(&lo[0])), (*C.uint64_t)(unsafe.Pointer(&hi[0])))
}

// pinLimbs pins every limb of the inputs for the C kernel (Go does not move heap objects, but
// cgo's rules ask for pinning memory that C reads through addresses it was given indirectly).
func pinLimbs(in []*ctObj, polys, primes int) *runtime.Pinner {
	p := new(runtime.Pinner)
	for _, a := range in {
		for d := 0; d < polys; d++ {
			for j := 0; j < primes; j++ {
				p.Pin(&a.ct.Value[d].Coeffs[j][0])
			}
		}
	}
	return p
}
