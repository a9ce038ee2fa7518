// The number-theoretic transform of ntt_ifma.go for CPUs with AVX2 but without AVX-512 IFMA (AMD
// Zen 2 and 3, Intel before Ice Lake): four 64-bit lanes, Shoup's products from 32x32-bit
// multiplications, primes below 2^61.4 as the AVX-512 64-bit instance, the same stage layout and
// Harvey's lazy butterflies (forward values below 4q, inverse below 2q). Lattigo's portable Go
// transform does one 64x128-bit product per butterfly in scalar code; this kernel does four at
// once, which halves a transform on a Zen 3 core. Include it inside
// `#if defined(__x86_64__) && defined(__GNUC__)`.
#ifndef HENN_NTT_AVX2_H
#define HENN_NTT_AVX2_H
#include <stdint.h>
#include <stddef.h>
#include <immintrin.h>
#include "ifma.h"  // henn_mulshoup1_64, the scalar Shoup product (plain C: no AVX-512 needed)

#define HENN_AVX2 __attribute__((target("avx2")))
// the helpers, inlined whatever the optimisation level (GCC at -O2 called the butterfly: 2x slower)
#define HENN_AVX2_INLINE __attribute__((target("avx2"), always_inline)) static inline

// The high 64 bits of a * b in 4 lanes, from four 32x32-bit products.
HENN_AVX2_INLINE __m256i henn_mulhi64_4(__m256i a, __m256i b) {
	const __m256i lo32 = _mm256_set1_epi64x(0xffffffffLL);
	__m256i ah = _mm256_srli_epi64(a, 32), bh = _mm256_srli_epi64(b, 32);
	__m256i ll = _mm256_mul_epu32(a, b), lh = _mm256_mul_epu32(a, bh);
	__m256i hl = _mm256_mul_epu32(ah, b), hh = _mm256_mul_epu32(ah, bh);
	__m256i mid = _mm256_add_epi64(_mm256_srli_epi64(ll, 32), _mm256_and_si256(lh, lo32));
	mid = _mm256_add_epi64(mid, _mm256_and_si256(hl, lo32));  // below 3 * 2^32: no carry lost
	return _mm256_add_epi64(_mm256_add_epi64(hh, _mm256_srli_epi64(lh, 32)),
	                        _mm256_add_epi64(_mm256_srli_epi64(hl, 32), _mm256_srli_epi64(mid, 32)));
}

// The low 64 bits of a * b in 4 lanes (AVX2 has no 64-bit multiply), from three 32x32-bit products.
HENN_AVX2_INLINE __m256i henn_mullo64_4(__m256i a, __m256i b) {
	__m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), b),
	                                 _mm256_mul_epu32(a, _mm256_srli_epi64(b, 32)));
	return _mm256_add_epi64(_mm256_mul_epu32(a, b), _mm256_slli_epi64(cross, 32));
}

// Shoup's product y*w mod q in [0, 2q) for q < 2^61.4: ws = floor(w * 2^64 / q), any y < 2^64.
HENN_AVX2_INLINE __m256i henn_mulshoup64_4(__m256i y, __m256i w, __m256i ws, __m256i q) {
	return _mm256_sub_epi64(henn_mullo64_4(y, w), henn_mullo64_4(henn_mulhi64_4(y, ws), q));
}

// x mod c for x < 2c: x - c wraps above x when x < c, so the unsigned minimum picks the reduced
// one (AVX2 compares signed only: both sides are flipped at the sign bit first).
HENN_AVX2_INLINE __m256i henn_csub4(__m256i x, __m256i c) {
	const __m256i sign = _mm256_set1_epi64x((long long)0x8000000000000000ULL);
	__m256i d = _mm256_sub_epi64(x, c);
	__m256i x_above = _mm256_cmpgt_epi64(_mm256_xor_si256(x, sign), _mm256_xor_si256(d, sign));
	return _mm256_blendv_epi8(x, d, x_above);
}

#define HENN_LD(p) _mm256_loadu_si256((const __m256i *)(p))
#define HENN_ST(p, v) _mm256_storeu_si256((__m256i *)(p), (v))

// Forward (Cooley-Tukey) A, B = X + WY, X - WY, values below 4q; inverse (Gentleman-Sande)
// A, B = X + Y, (X - Y)W, values below 2q.
HENN_AVX2_INLINE void henn_butterfly4(__m256i X, __m256i Y, __m256i W, __m256i WS, __m256i q, __m256i q2,
                                             int forward, __m256i *A, __m256i *B) {
	if (forward) {
		X = henn_csub4(X, q2);
		__m256i T = henn_mulshoup64_4(Y, W, WS, q);
		*A = _mm256_add_epi64(X, T);
		*B = _mm256_sub_epi64(_mm256_add_epi64(X, q2), T);
	} else {
		*A = henn_csub4(_mm256_add_epi64(X, Y), q2);
		*B = henn_mulshoup64_4(_mm256_sub_epi64(_mm256_add_epi64(X, q2), Y), W, WS, q);
	}
}

// One stage of m = n / 2t blocks with partner distance t, twiddles w[m + i], from in to out (may
// alias). Partners 2 or 1 apart are gathered from two registers of 8 coefficients: for t = 2 the
// 128-bit halves, for t = 1 the even and odd lanes (whose twiddles are those of blocks i, i+2, i+1, i+3).
HENN_AVX2 static void henn_stage_avx2(const uint64_t *in, uint64_t *out, size_t n, size_t t, const uint64_t *w,
                                      const uint64_t *ws, uint64_t qs, int forward) {
	const __m256i q = _mm256_set1_epi64x((long long)qs), q2 = _mm256_set1_epi64x((long long)(2 * qs));
	size_t m = n / (2 * t);
	__m256i A, B;
	if (t >= 4) {
		for (size_t i = 0; i < m; i++) {
			const __m256i W = _mm256_set1_epi64x((long long)w[m + i]), WS = _mm256_set1_epi64x((long long)ws[m + i]);
			const uint64_t *ix = in + 2 * i * t, *iy = ix + t;
			uint64_t *ox = out + 2 * i * t, *oy = ox + t;
			for (size_t k = 0; k < t; k += 4) {
				henn_butterfly4(HENN_LD(ix + k), HENN_LD(iy + k), W, WS, q, q2, forward, &A, &B);
				HENN_ST(ox + k, A);
				HENN_ST(oy + k, B);
			}
		}
		return;
	}
	for (size_t g = 0; g < n / 8; g++) {
		__m256i a = HENN_LD(in + 8 * g), b = HENN_LD(in + 8 * g + 4), W, WS;
		if (t == 2) {  // blocks (0 1 | 2 3) and (4 5 | 6 7): X = 0 1 4 5, Y = 2 3 6 7
			const uint64_t *wg = w + m + 2 * g, *wsg = ws + m + 2 * g;
			W = _mm256_setr_epi64x((long long)wg[0], (long long)wg[0], (long long)wg[1], (long long)wg[1]);
			WS = _mm256_setr_epi64x((long long)wsg[0], (long long)wsg[0], (long long)wsg[1], (long long)wsg[1]);
			henn_butterfly4(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31), W, WS, q, q2,
			                forward, &A, &B);
			HENN_ST(out + 8 * g, _mm256_permute2x128_si256(A, B, 0x20));
			HENN_ST(out + 8 * g + 4, _mm256_permute2x128_si256(A, B, 0x31));
		} else {  // pairs (0 1) (2 3) (4 5) (6 7): X = 0 4 2 6, Y = 1 5 3 7
			W = _mm256_permute4x64_epi64(HENN_LD(w + m + 4 * g), _MM_SHUFFLE(3, 1, 2, 0));
			WS = _mm256_permute4x64_epi64(HENN_LD(ws + m + 4 * g), _MM_SHUFFLE(3, 1, 2, 0));
			henn_butterfly4(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b), W, WS, q, q2, forward, &A, &B);
			HENN_ST(out + 8 * g, _mm256_unpacklo_epi64(A, B));
			HENN_ST(out + 8 * g + 4, _mm256_unpackhi_epi64(A, B));
		}
	}
}

// The conjugate-invariant ring's extra stage, pairing coefficient j with n - j:
// out[j] = in[j] + 2q - f*in[n-j] (j = 1..n-1), out[n/2] likewise with itself, out[0] = in[0].
// Inputs below 2q give outputs below 4q.
HENN_AVX2 static void henn_ci_fold_avx2(const uint64_t *in, uint64_t *out, size_t n, uint64_t fs, uint64_t fss,
                                        uint64_t qs) {
	const __m256i q = _mm256_set1_epi64x((long long)qs), q2 = _mm256_set1_epi64x((long long)(2 * qs));
	const __m256i F = _mm256_set1_epi64x((long long)fs), FS = _mm256_set1_epi64x((long long)fss);
	const int rev = _MM_SHUFFLE(0, 1, 2, 3);
	size_t j = 1;
	for (; j + 3 < n - j - 3; j += 4) {  // X = in[j .. j+3], Y = in[n-j .. n-j-3]: disjoint blocks
		__m256i X = HENN_LD(in + j), Y = _mm256_permute4x64_epi64(HENN_LD(in + n - j - 3), rev);
		__m256i A = _mm256_sub_epi64(_mm256_add_epi64(X, q2), henn_mulshoup64_4(Y, F, FS, q));
		__m256i B = _mm256_sub_epi64(_mm256_add_epi64(Y, q2), henn_mulshoup64_4(X, F, FS, q));
		HENN_ST(out + j, A);
		HENN_ST(out + n - j - 3, _mm256_permute4x64_epi64(B, rev));
	}
	for (; j < n / 2; j++) {
		uint64_t x = in[j], y = in[n - j];
		out[j] = x + 2 * qs - henn_mulshoup1_64(y, fs, fss, qs);
		out[n - j] = y + 2 * qs - henn_mulshoup1_64(x, fs, fss, qs);
	}
	out[n / 2] = in[n / 2] + 2 * qs - henn_mulshoup1_64(in[n / 2], fs, fss, qs);
	out[0] = in[0];
}

// The transform of one prime, as henn_ntt of ntt_kernels.h (the same tables, with 64-bit Shoup
// constants; n a multiple of 16): inputs below 4q (standard forward) or 2q go straight in, larger
// ones are first reduced into out (r64 = floor(2^64 / q)); outputs fully reduced.
HENN_AVX2 static void henn_ntt_avx2(const uint64_t *in, uint64_t *out, size_t n, uint64_t qs, const uint64_t *w,
                                    const uint64_t *ws, int forward, int ci, uint64_t f, uint64_t fs, uint64_t s,
                                    uint64_t ss, uint64_t r64) {
	const __m256i q = _mm256_set1_epi64x((long long)qs), q2 = _mm256_set1_epi64x((long long)(2 * qs));
	const uint64_t bound = (forward && !ci ? 4 : 2) * qs;
	uint64_t above = 0;
	for (size_t k = 0; k < n; k++) above |= in[k] >= bound;
	if (above) {
		const __m256i one = _mm256_set1_epi64x(1), R = _mm256_set1_epi64x((long long)r64);
		for (size_t k = 0; k < n; k += 4)
			HENN_ST(out + k, henn_csub4(henn_mulshoup64_4(HENN_LD(in + k), one, R, q), q));
		in = out;
	}
	const uint64_t *src = in;
	if (forward) {
		if (ci) {
			henn_ci_fold_avx2(in, out, n, f, fs, qs);
			src = out;
		}
		for (size_t t = n / 2; t >= 1; t /= 2) {
			henn_stage_avx2(src, out, n, t, w, ws, qs, 1);
			src = out;
		}
		for (size_t k = 0; k < n; k += 4) HENN_ST(out + k, henn_csub4(henn_csub4(HENN_LD(out + k), q2), q));
		return;
	}
	for (size_t t = 1; t <= n / 2; t *= 2) {
		henn_stage_avx2(src, out, n, t, w, ws, qs, 0);
		src = out;
	}
	if (ci) {
		henn_ci_fold_avx2(out, out, n, f, fs, qs);
		out[0] = 2 * out[0];  // below 4q: the scaling below takes any input
	}
	const __m256i S = _mm256_set1_epi64x((long long)s), SS = _mm256_set1_epi64x((long long)ss);
	for (size_t k = 0; k < n; k += 4) HENN_ST(out + k, henn_csub4(henn_mulshoup64_4(HENN_LD(out + k), S, SS, q), q));
}

#undef HENN_LD
#undef HENN_ST
#endif
