// The number-theoretic transform of ntt_ifma.go, written once for two word sizes: included with
// HENN_FN(name) (the instance's function names), HENN_MULSHOUP(y, w, ws, q) (Shoup's product of 8
// lanes in [0, 2q)) and HENN_MULSHOUP1 (of one value) defined, for 52-bit IFMA (primes < 2^50) and
// for 64-bit AVX-512 DQ arithmetic (primes < 2^61). Harvey's lazy butterflies keep every value
// below 4q, and henn_csub's unsigned-minimum trick needs x + 2q < 2^64: both hold in each range.

// Harvey's lazy butterflies: forward (Cooley-Tukey) A, B = X + WY, X - WY with X, Y below 4q and
// A, B below 4q; inverse (Gentleman-Sande) A, B = X + Y, (X - Y)W with everything below 2q.
HENN_TGT static inline void HENN_FN(henn_butterfly)(__m512i X, __m512i Y, __m512i W, __m512i WS, __m512i q, __m512i q2,
                                                    int forward, __m512i *A, __m512i *B) {
	if (forward) {
		X = henn_csub(X, q2);
		__m512i T = HENN_MULSHOUP(Y, W, WS, q);
		*A = _mm512_add_epi64(X, T);
		*B = _mm512_sub_epi64(_mm512_add_epi64(X, q2), T);
	} else {
		*A = henn_csub(_mm512_add_epi64(X, Y), q2);
		*B = HENN_MULSHOUP(_mm512_sub_epi64(_mm512_add_epi64(X, q2), Y), W, WS, q);
	}
}

// One Cooley-Tukey (forward) or Gentleman-Sande (inverse) stage of blocks with partner distance
// t, m blocks, twiddles w[m + i] (Shoup constants ws), from in to out (may alias).
// Forward keeps values below 4q (inputs below 4q), inverse below 2q (inputs below 2q).
HENN_TGT static void HENN_FN(henn_stage)(const uint64_t *in, uint64_t *out, size_t n, size_t t, const uint64_t *w,
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
				HENN_FN(henn_butterfly)(X, Y, W, WS, q, q2, forward, &A, &B);
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
		HENN_FN(henn_butterfly)(X, Y, W, WS, q, q2, forward, &A, &B);
		_mm512_storeu_si512((void *)(out + 16 * g), _mm512_permutex2var_epi64(A, plo, B));
		_mm512_storeu_si512((void *)(out + 16 * g + 8), _mm512_permutex2var_epi64(A, phi, B));
	}
}

// The conjugate-invariant ring's extra stage, pairing coefficient j with n - j:
// out[j] = in[j] + 2q - f*in[n-j] (j = 1..n-1), out[n/2] likewise with itself, out[0] = in[0].
// Inputs below 2q give outputs below 4q.
HENN_TGT static void HENN_FN(henn_ci_fold)(const uint64_t *in, uint64_t *out, size_t n, uint64_t fs, uint64_t fss, uint64_t qs) {
	const __m512i q = _mm512_set1_epi64((long long)qs), q2 = _mm512_set1_epi64((long long)(2 * qs));
	const __m512i F = _mm512_set1_epi64((long long)fs), FS = _mm512_set1_epi64((long long)fss);
	const __m512i rev = _mm512_set_epi64(0, 1, 2, 3, 4, 5, 6, 7);
	size_t j = 1;
	for (; j + 7 < n - j - 7; j += 8) {  // X = in[j .. j+7], Y = in[n-j .. n-j-7]: disjoint blocks
		__m512i X = _mm512_loadu_si512((const void *)(in + j));
		__m512i Y = _mm512_permutexvar_epi64(rev, _mm512_loadu_si512((const void *)(in + n - j - 7)));
		__m512i A = _mm512_sub_epi64(_mm512_add_epi64(X, q2), HENN_MULSHOUP(Y, F, FS, q));
		__m512i B = _mm512_sub_epi64(_mm512_add_epi64(Y, q2), HENN_MULSHOUP(X, F, FS, q));
		_mm512_storeu_si512((void *)(out + j), A);
		_mm512_storeu_si512((void *)(out + n - j - 7), _mm512_permutexvar_epi64(rev, B));
	}
	for (; j < n / 2; j++) {
		uint64_t x = in[j], y = in[n - j];
		out[j] = x + 2 * qs - HENN_MULSHOUP1(y, fs, fss, qs);
		out[n - j] = y + 2 * qs - HENN_MULSHOUP1(x, fs, fss, qs);
	}
	out[n / 2] = in[n / 2] + 2 * qs - HENN_MULSHOUP1(in[n / 2], fs, fss, qs);
	out[0] = in[0];
}

// out = x * s mod q, fully reduced (x < 2^52): the inverse transform's 1/n.
HENN_TGT static void HENN_FN(henn_scale)(uint64_t *a, size_t n, uint64_t s, uint64_t ss, uint64_t qs) {
	const __m512i q = _mm512_set1_epi64((long long)qs), S = _mm512_set1_epi64((long long)s), SS = _mm512_set1_epi64((long long)ss);
	for (size_t k = 0; k < n; k += 8) {
		__m512i X = HENN_MULSHOUP(_mm512_loadu_si512((const void *)(a + k)), S, SS, q);
		_mm512_storeu_si512((void *)(a + k), henn_csub(X, q));
	}
}

// a mod q for a < 4q.
HENN_TGT static void HENN_FN(henn_reduce4)(uint64_t *a, size_t n, uint64_t qs) {
	const __m512i q = _mm512_set1_epi64((long long)qs), q2 = _mm512_set1_epi64((long long)(2 * qs));
	for (size_t k = 0; k < n; k += 8) {
		__m512i X = _mm512_loadu_si512((const void *)(a + k));
		_mm512_storeu_si512((void *)(a + k), henn_csub(henn_csub(X, q2), q));
	}
}

// The transform of one prime: w/ws hold the n stage twiddles (index m + i for block i of a stage
// with m blocks), f/fs the conjugate-invariant stage's root (ci), s/ss the inverse's 1/n.
// Inputs below 4q go straight in for the standard ring's forward transform (its butterflies take
// them: Lattigo's key switching hands its NTT values up to 3q), below 2q otherwise (the
// conjugate-invariant fold adds 2q); larger ones (a rescale's values of another prime, unreduced
// encodings) are first reduced into out (r64 = floor(2^64 / q)).
HENN_TGT static void HENN_FN(henn_ntt)(const uint64_t *in, uint64_t *out, size_t n, uint64_t q, const uint64_t *w,
                             const uint64_t *ws, int forward, int ci, uint64_t f, uint64_t fs, uint64_t s, uint64_t ss,
                             uint64_t r64) {
	if (!henn_ntt_below(in, n, (forward && !ci ? 4 : 2) * q)) {
		const __m512i Q = _mm512_set1_epi64((long long)q), R = _mm512_set1_epi64((long long)r64);
		for (size_t k = 0; k < n; k += 8)
			_mm512_storeu_si512((void *)(out + k), henn_reduce64(_mm512_loadu_si512((const void *)(in + k)), Q, R));
		in = out;
	}
	if (forward) {
		const uint64_t *src = in;
		if (ci) {
			HENN_FN(henn_ci_fold)(in, out, n, f, fs, q);
			src = out;
		}
		for (size_t t = n / 2; t >= 1; t /= 2) {
			HENN_FN(henn_stage)(src, out, n, t, w, ws, q, 1);
			src = out;
		}
		HENN_FN(henn_reduce4)(out, n, q);
	} else {
		const uint64_t *src = in;
		for (size_t t = 1; t <= n / 2; t *= 2) {
			HENN_FN(henn_stage)(src, out, n, t, w, ws, q, 0);
			src = out;
		}
		if (ci) {
			HENN_FN(henn_ci_fold)(out, out, n, f, fs, q);
			out[0] = 2 * out[0];  // below 4q: henn_scale takes any input below 2^52
		}
		HENN_FN(henn_scale)(out, n, s, ss, q);
	}
}

