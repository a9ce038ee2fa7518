package main

/*
#include <stdint.h>
#include <stddef.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include "ifma.h"
// Go (GOAMD64=v1) fuses no multiply-add; nor may GCC here (its GNU-mode default contracts a*b + c).
#pragma GCC optimize("fp-contract=off")

// a, b <- a + b, (a - b) * w for four complex128 values in each of a, b (re, im interleaved). The
// product is Go's: re = dr*wr - di*wi, im = dr*wi + di*wr (the two sums' terms commute exactly), with
// no fused multiply-add: the kernel's output is Lattigo's SpecialiFFTDoubleUnrolled8's, bit for bit.
HENN_TGT static inline void henn_bfly(__m512d *a, __m512d *b, __m512d w) {
	__m512d d = _mm512_sub_pd(*a, *b);
	*a = _mm512_add_pd(*a, *b);
	__m512d p1 = _mm512_mul_pd(d, _mm512_movedup_pd(w));                               // dr*wr, di*wr
	__m512d p2 = _mm512_mul_pd(_mm512_permute_pd(d, 0x55), _mm512_permute_pd(w, 0xFF)); // di*wi, dr*wi
	*b = _mm512_mask_sub_pd(_mm512_add_pd(p1, p2), 0x55, p1, p2);
}

#define HENN_LD(p) _mm512_loadu_pd(p)
#define HENN_ST(p, x) _mm512_storeu_pd(p, x)

// The inverse special FFT of n complex values in place: the stages of len = n, n/2, ..., 2, each with
// its lenh = len/2 twiddles read in order from tw, then the division by n and the bit-reversal
// permutation rev (pairs i < rev[i] swapped). Two stages run per pass over the values while lenh/2 >= 4
// (the same butterflies, half the memory traffic); the last two, of 2 and 1 butterflies per block, in
// registers. n % 16 == 0.
HENN_TGT static void henn_ifft(double *v, size_t n, const double *tw, const uint32_t *rev) {
	const double *w = tw;
	size_t len = n;
	for (; (len >> 2) >= 4; len >>= 2) {
		size_t lenh = len >> 1, lenq = len >> 2;
		const double *w2 = w + 2 * lenh;  // the next stage's twiddles
		for (size_t i = 0; i < n; i += len) {
			for (size_t j = 0; j < lenq; j += 4) {
				double *pa = v + 2 * (i + j), *pb = pa + 2 * lenq, *pc = pa + 2 * lenh, *pd = pc + 2 * lenq;
				__m512d a = HENN_LD(pa), b = HENN_LD(pb), c = HENN_LD(pc), d = HENN_LD(pd);
				henn_bfly(&a, &c, HENN_LD(w + 2 * j));
				henn_bfly(&b, &d, HENN_LD(w + 2 * (j + lenq)));
				__m512d t = HENN_LD(w2 + 2 * j);
				henn_bfly(&a, &b, t);
				henn_bfly(&c, &d, t);
				HENN_ST(pa, a); HENN_ST(pb, b); HENN_ST(pc, c); HENN_ST(pd, d);
			}
		}
		w = w2 + 2 * lenq;
	}
	for (; len >= 8; len >>= 1) {  // a stage left over from the pairs
		size_t lenh = len >> 1;
		for (size_t i = 0; i < n; i += len) {
			for (size_t j = 0; j < lenh; j += 4) {
				__m512d a = HENN_LD(v + 2 * (i + j)), b = HENN_LD(v + 2 * (i + j + lenh));
				henn_bfly(&a, &b, HENN_LD(w + 2 * j));
				HENN_ST(v + 2 * (i + j), a); HENN_ST(v + 2 * (i + j + lenh), b);
			}
		}
		w += 2 * lenh;
	}
	// len = 4 (twiddles w0 w1) then len = 2 (w0'), on 8 values x0..x7 (two registers) at a time
	__m128d w0 = _mm_loadu_pd(w), w1 = _mm_loadu_pd(w + 2), w0b = _mm_loadu_pd(w + 4);
	__m512d tw4 = _mm512_insertf64x2(_mm512_insertf64x2(_mm512_insertf64x2(_mm512_castpd128_pd512(w0), w1, 1), w0, 2), w1, 3);
	__m512d tw2 = _mm512_broadcast_f64x2(w0b);
	const __m512d nn = _mm512_set1_pd((double)n);
	for (size_t i = 0; i < n; i += 8) {
		__m512d A = HENN_LD(v + 2 * i), B = HENN_LD(v + 2 * i + 8);   // x0 x1 x2 x3 | x4 x5 x6 x7
		__m512d u = _mm512_shuffle_f64x2(A, B, 0x44), x = _mm512_shuffle_f64x2(A, B, 0xEE);  // x0 x1 x4 x5 | x2 x3 x6 x7
		henn_bfly(&u, &x, tw4);
		// the len-2 stage pairs (x0, x1), (x2, x3), ...: u holds x0 x1 x4 x5, x holds x2 x3 x6 x7
		__m512d e = _mm512_shuffle_f64x2(u, x, 0x88), o = _mm512_shuffle_f64x2(u, x, 0xDD);  // x0 x4 x2 x6 | x1 x5 x3 x7
		henn_bfly(&e, &o, tw2);
		e = _mm512_div_pd(e, nn);
		o = _mm512_div_pd(o, nn);
		// back in order: A = x0 x1 x2 x3 = e0 o0 e2 o2, B = x4 x5 x6 x7 = e1 o1 e3 o3
		__m512d lo = _mm512_shuffle_f64x2(e, o, 0x88), hi = _mm512_shuffle_f64x2(e, o, 0xDD);  // e0 e2 o0 o2 | e1 e3 o1 o3
		HENN_ST(v + 2 * i, _mm512_shuffle_f64x2(lo, lo, 0xD8));
		HENN_ST(v + 2 * i + 8, _mm512_shuffle_f64x2(hi, hi, 0xD8));
	}
	for (size_t i = 0; i < n; i++) {
		size_t r = rev[i];
		if (i < r) {
			__m128d t = _mm_loadu_pd(v + 2 * i);
			_mm_storeu_pd(v + 2 * i, _mm_loadu_pd(v + 2 * r));
			_mm_storeu_pd(v + 2 * r, t);
		}
	}
}
#else
static void henn_ifft(double *v, size_t n, const double *tw, const uint32_t *rev) {}
#endif
*/
import "C"

import (
	"math/bits"
	"sync"
	"unsafe"

	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
	"github.com/tuneinsight/lattigo/v6/utils"
)

// The inverse FFT of slot encoding in AVX-512: Lattigo's SpecialiFFTDoubleUnrolled8 (scalar Go, a
// gathered twiddle per butterfly) was 11% of a ResNet-20 image's CPU time, every weight diagonal
// encoded on the fly going through it. The kernel reads the twiddles of each stage from a table
// made once per (slots, 2N) and gives Lattigo's output bit for bit (TestIFFTMatchesLattigo).

// ifftKernel: on wherever the other AVX-512 kernels are (HENN_LATTIGO_NTT=go keeps Lattigo's Go).
var ifftKernel = hasIFMA()

var ifftTables sync.Map // [2]int{slots, m} -> *ifftTable

// ifftTable: the twiddles SpecialiFFTDoubleUnrolled8 multiplies by, stage after stage (lenh of them for
// the stage of length len = 2 lenh), from the Encoder's roots and rotation group; and the bit reversal.
type ifftTable struct {
	twiddles []complex128
	reversal []uint32
}

func ifftTableFor(slots, m int) *ifftTable {
	key := [2]int{slots, m}
	if t, ok := ifftTables.Load(key); ok {
		return t.(*ifftTable)
	}
	roots := ckks.GetRootsComplex128(m)
	rotGroup := make([]int, slots)
	for i, five := 0, 1; i < slots; i, five = i+1, (five*int(ckks.GaloisGen))&(m-1) {
		rotGroup[i] = five
	}
	logN, logM := bits.Len64(uint64(slots-1)), bits.Len64(uint64(m-1))
	tw := make([]complex128, 0, slots)
	for loglen := logN; loglen > 0; loglen-- {
		lenh, lenq := 1<<(loglen-1), 1<<(loglen+2)
		for j := 0; j < lenh; j++ {
			tw = append(tw, roots[(lenq-(rotGroup[j]&(lenq-1)))<<(logM-2-loglen)])
		}
	}
	rev := make([]uint32, slots)
	for i := range rev {
		rev[i] = uint32(utils.BitReverse64(uint64(i), logN))
	}
	t, _ := ifftTables.LoadOrStore(key, &ifftTable{twiddles: tw, reversal: rev})
	return t.(*ifftTable)
}

// inverseFFT is ecd.IFFT(values, log2(len(values))) for complex128 slots; m: the ring's 2N or 4N.
func inverseFFT(ecd *ckks.Encoder, m int, values []complex128) error {
	slots := len(values)
	if !ifftKernel || slots < 16 || slots&(slots-1) != 0 || slots > m/4 {
		return ecd.IFFT(values, bits.Len64(uint64(slots-1)))
	}
	t := ifftTableFor(slots, m)
	C.henn_ifft((*C.double)(unsafe.Pointer(&values[0])), C.size_t(slots), (*C.double)(unsafe.Pointer(&t.twiddles[0])),
		(*C.uint32_t)(unsafe.Pointer(&t.reversal[0])))
	return nil
}
