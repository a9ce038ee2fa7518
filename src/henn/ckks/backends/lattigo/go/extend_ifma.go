package main

/*
#include <stdint.h>
#include <stddef.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include "ifma.h"

// out[j] = the centred lift of in[j] (mod qin) modulo q, Lattigo's way: c = in[j], negated to
// qin - c when c >= qin/2; r = c mod q (Shoup's product by 1: ws = floor(2^52 / q), c < 2^52);
// out = r, or q - r for a negated c (q itself when r = 0, as Lattigo writes it). n % 8 == 0.
HENN_TGT static void henn_lift(const uint64_t *in, size_t n, uint64_t qin, uint64_t qs, uint64_t wss, uint64_t *out) {
	const __m512i Qin = _mm512_set1_epi64((long long)qin), half = _mm512_set1_epi64((long long)(qin >> 1));
	const __m512i q = _mm512_set1_epi64((long long)qs);
	for (size_t j = 0; j < n; j += 8) {
		__m512i c = _mm512_loadu_si512((const void *)(in + j));
		__mmask8 neg = _mm512_cmpge_epu64_mask(c, half);
		c = _mm512_mask_sub_epi64(c, neg, Qin, c);
		__m512i r = henn_csub(henn_mulshoup52s(c, 1, wss, q), q);
		_mm512_storeu_si512((void *)(out + j), _mm512_mask_sub_epi64(r, neg, q, r));
	}
}

// Lattigo's reconstructRNS for 8 coefficients from x: y[i] = (in_i + offset_i) * (Q/q_i)^-1 mod q_i
// by Shoup's product in 52-bit lanes (wide = 0: inputs below 2^52, sinvs = floor(sinv * 2^52 / q_i))
// or 64-bit lanes (wide = 1: any input, sinvs = floor(sinv * 2^64 / q_i)); returns v = floor(sum_i
// y_i / q_i), summed in double in Lattigo's order, so it is Lattigo's v. seen collects the OR of the inputs.
HENN_TGT static inline __m512i henn_reconstruct(const uintptr_t *in, size_t x, const uint64_t *offsets, const uint64_t *qin,
                                                const uint64_t *sinv, const uint64_t *sinvs, int k, int wide, __m512i *y,
                                                __m512i *seen) {
	__m512d acc = _mm512_setzero_pd();
	for (int i = 0; i < k; i++) {
		const __m512i q = _mm512_set1_epi64((long long)qin[i]);
		__m512i a = _mm512_add_epi64(_mm512_loadu_si512((const void *)((const uint64_t *)in[i] + x)),
		                             _mm512_set1_epi64((long long)offsets[i]));
		*seen = _mm512_or_si512(*seen, a);
		__m512i w = _mm512_set1_epi64((long long)sinv[i]), ws = _mm512_set1_epi64((long long)sinvs[i]);
		y[i] = henn_csub(wide ? henn_mulshoup64(a, w, ws, q) : henn_mulshoup52(a, w, ws, q), q);
		acc = _mm512_add_pd(acc, _mm512_div_pd(_mm512_cvtepu64_pd(y[i]), _mm512_set1_pd((double)qin[i])));
	}
	return _mm512_cvttpd_epu64(acc);
}

// Exact basis extension of 8 coefficients at a time (Lattigo's ModUpExact, fully reduced): k input
// primes qin (k <= 15, see extendMaxPrimes; offsets added first), nout output primes. Constants in standard form with
// their Shoup companions: sinv/sinvs[i] = (Q/q_i)^-1 mod q_i; c[j*k + i] = (Q/q_i) mod p_j;
// r52/r52s[j] = 2^52 mod p_j; one/ones[j]: 1 and floor(2^52/p_j); vq[j*(k+1) + v] = -vQ mod p_j.
// v = floor(sum_i y_i/q_i) summed in double in Lattigo's order, so it is Lattigo's v. Returns 0 when
// an input (plus its offset) was not below 2^52: the outputs are then void.
HENN_TGT static int henn_extend(const uintptr_t *in, const uint64_t *offsets, const uint64_t *qin, const uint64_t *sinv,
                                 const uint64_t *sinvs, int k, const uintptr_t *out, const uint64_t *pout, const uint64_t *c,
                                 const uint64_t *r52, const uint64_t *r52s, const uint64_t *ones, const uint64_t *vq,
                                 int nout, size_t n) {
	const __m512i zero = _mm512_setzero_si512(), mask52 = _mm512_set1_epi64((1LL << 52) - 1);
	__m512i y[32], seen = zero;  // the OR of the inputs: bits from 52 up void the results
	for (size_t x = 0; x < n; x += 8) {
		__m512i v = henn_reconstruct(in, x, offsets, qin, sinv, sinvs, k, 0, y, &seen);
		for (int j = 0; j < nout; j++) {
			const __m512i p = _mm512_set1_epi64((long long)pout[j]);
			const uint64_t *cj = c + (size_t)j * k;
			__m512i lo = zero, hi = zero;
			for (int i = 0; i < k; i++) {
				__m512i cc = _mm512_set1_epi64((long long)cj[i]);
				lo = _mm512_madd52lo_epu64(lo, y[i], cc);
				hi = _mm512_madd52hi_epu64(hi, y[i], cc);
			}
			hi = _mm512_add_epi64(hi, _mm512_srli_epi64(lo, 52));  // value = hi * 2^52 + lo, both < 2^52
			lo = _mm512_and_si512(lo, mask52);
			__m512i s = _mm512_add_epi64(henn_mulshoup52s(hi, r52[j], r52s[j], p), henn_mulshoup52s(lo, 1, ones[j], p));
			s = henn_csub(henn_csub(s, _mm512_add_epi64(p, p)), p);  // < 4p, then < p
			s = _mm512_add_epi64(s, _mm512_i64gather_epi64(v, (const void *)(vq + (size_t)j * (k + 1)), 8));
			_mm512_storeu_si512((void *)((uint64_t *)out[j] + x), henn_csub(s, p));
		}
	}
	return _mm512_test_epi64_mask(seen, _mm512_set1_epi64(~((1LL << 52) - 1))) == 0;
}

// The same extension in 64-bit lanes, for primes below 2^61.4 on either side (ResNet-20's 60-bit q0
// and 61-bit special primes): y_i by Shoup's product with sinvs[i] = floor(sinv[i] * 2^64 / q_i), any
// input (plus offset) below 2^64; each y_i * c_ij mod p_j by Shoup's product (cs = floor(c * 2^64 /
// p_j)), summed below 2p; v as in henn_extend. k <= 32. Outputs fully reduced.
HENN_TGT static void henn_extend64(const uintptr_t *in, const uint64_t *offsets, const uint64_t *qin, const uint64_t *sinv,
                                   const uint64_t *sinvs, int k, const uintptr_t *out, const uint64_t *pout,
                                   const uint64_t *c, const uint64_t *cs, const uint64_t *vq, int nout, size_t n) {
	__m512i y[32], seen = _mm512_setzero_si512();
	for (size_t x = 0; x < n; x += 8) {
		__m512i v = henn_reconstruct(in, x, offsets, qin, sinv, sinvs, k, 1, y, &seen);
		for (int j = 0; j < nout; j++) {
			const __m512i p = _mm512_set1_epi64((long long)pout[j]), p2 = _mm512_add_epi64(p, p);
			const uint64_t *cj = c + (size_t)j * k, *csj = cs + (size_t)j * k;
			__m512i s = _mm512_setzero_si512();
			for (int i = 0; i < k; i++) {
				__m512i t = henn_mulshoup64(y[i], _mm512_set1_epi64((long long)cj[i]), _mm512_set1_epi64((long long)csj[i]), p);
				s = henn_csub(_mm512_add_epi64(s, t), p2);  // below 4p before, 2p after
			}
			s = _mm512_add_epi64(henn_csub(s, p), _mm512_i64gather_epi64(v, (const void *)(vq + (size_t)j * (k + 1)), 8));
			_mm512_storeu_si512((void *)((uint64_t *)out[j] + x), henn_csub(s, p));
		}
	}
}
#else
static int henn_extend(const uintptr_t *in, const uint64_t *offsets, const uint64_t *qin, const uint64_t *sinv,
                       const uint64_t *sinvs, int k, const uintptr_t *out, const uint64_t *pout, const uint64_t *c,
                       const uint64_t *r52, const uint64_t *r52s, const uint64_t *ones, const uint64_t *vq,
                       int nout, size_t n) { return 0; }
static void henn_lift(const uint64_t *in, size_t n, uint64_t qin, uint64_t qs, uint64_t wss, uint64_t *out) {}
static void henn_extend64(const uintptr_t *in, const uint64_t *offsets, const uint64_t *qin, const uint64_t *sinv,
                          const uint64_t *sinvs, int k, const uintptr_t *out, const uint64_t *pout,
                          const uint64_t *c, const uint64_t *cs, const uint64_t *vq, int nout, size_t n) {}
#endif
*/
import "C"

import (
	"runtime"
	"unsafe"

	"github.com/tuneinsight/lattigo/v6/ring"
)

func init() {
	// HENN_LATTIGO_NTT=go keeps Lattigo's own code here too. The extension kernel's double sum
	// also needs AVX-512 DQ, which every IFMA CPU has.
	if hasIFMA() {
		ring.SetLiftAccelerator(acceleratedLift)
		ring.SetBasisExtensionAccelerator(acceleratedExtension)
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

// extendMaxPrimes: the high halves of k products below 2^100 sum below k * 2^48, which Shoup's
// product (inputs below 2^52) takes for k <= 15; henn_extend's y[] holds up to 32.
const extendMaxPrimes = 15

// extendWideMaxPrimes: henn_extend64's y[] (Lattigo's own extension holds 32 as well).
const extendWideMaxPrimes = 32

// acceleratedExtension is the ring.BasisExtensionAccelerator (see there): 52-bit IFMA lanes where
// every prime is below 2^50 (at most 15 inputs, each below 2^52), else 64-bit lanes for primes below
// 2^61.4 (ResNet-20's boot-n16: a 60-bit q0, 61-bit special primes).
func acceleratedExtension(in [][]uint64, offsets, moduliIn, mredIn, qOverQiInvQi []uint64,
	out [][]uint64, moduliOut, mredOut []uint64, qOverQiModP, vTimesQModP [][]uint64) bool {
	k, nout := len(in), len(out)
	if k == 0 || k > extendWideMaxPrimes || nout == 0 || len(moduliIn) < k || len(mredIn) < k || len(qOverQiInvQi) < k ||
		len(moduliOut) < nout || len(mredOut) < nout || len(qOverQiModP) < nout || len(vTimesQModP) < nout ||
		(offsets != nil && len(offsets) < k) {
		return false
	}
	n := len(in[0])
	if n == 0 || n%8 != 0 {
		return false
	}
	narrow := k <= extendMaxPrimes
	for i := 0; i < k; i++ {
		if len(in[i]) < n || (offsets != nil && offsets[i] >= moduliIn[i]) || moduliIn[i] >= nttMaxWideModulus {
			return false
		}
		narrow = narrow && moduliIn[i] < nttMaxModulus
	}
	for j := 0; j < nout; j++ {
		if len(out[j]) < n || len(qOverQiModP[j]) < k || len(vTimesQModP[j]) < k+1 || moduliOut[j] >= nttMaxWideModulus {
			return false
		}
		narrow = narrow && moduliOut[j] < nttMaxModulus
	}
	e := newExtension(in, offsets, moduliIn, mredIn, qOverQiInvQi, out, moduliOut, mredOut, qOverQiModP, vTimesQModP)
	defer e.pin.Unpin()
	if narrow && e.narrow() {
		return true
	}
	e.wide() // also where the narrow kernel met an input from 2^52
	return true
}

// extension holds one call's pinned addresses and constants (standard form) for either kernel.
type extension struct {
	pin                 *runtime.Pinner
	k, nout, n          int
	inAddr, outAddr     []uintptr
	offs, sinv, moduliQ []uint64
	moduliP, c, vq      []uint64
}

func newExtension(in [][]uint64, offsets, moduliIn, mredIn, qOverQiInvQi []uint64, out [][]uint64, moduliOut,
	mredOut []uint64, qOverQiModP, vTimesQModP [][]uint64) *extension {
	k, nout := len(in), len(out)
	e := &extension{pin: new(runtime.Pinner), k: k, nout: nout, n: len(in[0]), inAddr: make([]uintptr, k),
		outAddr: make([]uintptr, nout), offs: make([]uint64, k), sinv: make([]uint64, k), moduliQ: moduliIn[:k],
		moduliP: moduliOut[:nout], c: make([]uint64, nout*k), vq: make([]uint64, nout*(k+1))}
	for i := 0; i < k; i++ {
		e.pin.Pin(&in[i][0])
		e.inAddr[i] = uintptr(unsafe.Pointer(&in[i][0]))
		e.sinv[i] = ring.MRed(qOverQiInvQi[i], 1, moduliIn[i], mredIn[i])
		if offsets != nil {
			e.offs[i] = offsets[i]
		}
	}
	for j := 0; j < nout; j++ {
		e.pin.Pin(&out[j][0])
		e.outAddr[j] = uintptr(unsafe.Pointer(&out[j][0]))
		for i := 0; i < k; i++ {
			e.c[j*k+i] = ring.MRed(qOverQiModP[j][i], 1, moduliOut[j], mredOut[j])
		}
		copy(e.vq[j*(k+1):], vTimesQModP[j][:k+1])
	}
	return e
}

// narrow runs henn_extend (52-bit lanes); false when an input was not below 2^52 (outputs void).
func (e *extension) narrow() bool {
	sinvs, r52, r52s, ones := make([]uint64, e.k), make([]uint64, e.nout), make([]uint64, e.nout), make([]uint64, e.nout)
	for i, q := range e.moduliQ {
		sinvs[i] = shoup(e.sinv[i], q)
	}
	for j, p := range e.moduliP {
		r52[j] = (uint64(1) << 52) % p
		r52s[j], ones[j] = shoup(r52[j], p), shoup(1, p)
	}
	return C.henn_extend((*C.uintptr_t)(unsafe.Pointer(&e.inAddr[0])), (*C.uint64_t)(unsafe.Pointer(&e.offs[0])),
		(*C.uint64_t)(unsafe.Pointer(&e.moduliQ[0])), (*C.uint64_t)(unsafe.Pointer(&e.sinv[0])), (*C.uint64_t)(unsafe.Pointer(&sinvs[0])),
		C.int(e.k), (*C.uintptr_t)(unsafe.Pointer(&e.outAddr[0])), (*C.uint64_t)(unsafe.Pointer(&e.moduliP[0])),
		(*C.uint64_t)(unsafe.Pointer(&e.c[0])), (*C.uint64_t)(unsafe.Pointer(&r52[0])), (*C.uint64_t)(unsafe.Pointer(&r52s[0])),
		(*C.uint64_t)(unsafe.Pointer(&ones[0])), (*C.uint64_t)(unsafe.Pointer(&e.vq[0])), C.int(e.nout), C.size_t(e.n)) != 0
}

// wide runs henn_extend64 (64-bit lanes, any input below 2^64).
func (e *extension) wide() {
	sinvs, cs := make([]uint64, e.k), make([]uint64, len(e.c))
	for i, q := range e.moduliQ {
		sinvs[i] = shoupFor(e.sinv[i], q, true)
	}
	for j, p := range e.moduliP {
		for i := 0; i < e.k; i++ {
			cs[j*e.k+i] = shoupFor(e.c[j*e.k+i], p, true)
		}
	}
	C.henn_extend64((*C.uintptr_t)(unsafe.Pointer(&e.inAddr[0])), (*C.uint64_t)(unsafe.Pointer(&e.offs[0])),
		(*C.uint64_t)(unsafe.Pointer(&e.moduliQ[0])), (*C.uint64_t)(unsafe.Pointer(&e.sinv[0])), (*C.uint64_t)(unsafe.Pointer(&sinvs[0])),
		C.int(e.k), (*C.uintptr_t)(unsafe.Pointer(&e.outAddr[0])), (*C.uint64_t)(unsafe.Pointer(&e.moduliP[0])),
		(*C.uint64_t)(unsafe.Pointer(&e.c[0])), (*C.uint64_t)(unsafe.Pointer(&cs[0])), (*C.uint64_t)(unsafe.Pointer(&e.vq[0])),
		C.int(e.nout), C.size_t(e.n))
}
