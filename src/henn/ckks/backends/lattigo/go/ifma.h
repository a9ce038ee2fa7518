// Modular arithmetic shared by the bridge's AVX-512 kernels (each cgo file is its own C unit and
// includes this header): Shoup's products in 52-bit IFMA lanes and in 64-bit lanes, the conditional
// subtraction, the CPU checks (AVX-512 IFMA, AVX2). Include it inside
// `#if defined(__x86_64__) && defined(__GNUC__)`.
#ifndef HENN_IFMA_H
#define HENN_IFMA_H
#include <stdint.h>
#include <immintrin.h>

#define HENN_TGT __attribute__((target("avx512f,avx512dq,avx512ifma")))

// Shoup's modular product y*w mod q in [0, 2q) with 52-bit IFMA: y < 2^52, w < q < 2^50 and
// ws = floor(w * 2^52 / q). y*w/q - floor(y*ws/2^52) lies in [0, 2), so the product minus the
// quotient's multiple of q is below 2q < 2^52 and exact in the low 52 bits.
HENN_TGT static inline __m512i henn_mulshoup52(__m512i y, __m512i w, __m512i ws, __m512i q) {
	const __m512i zero = _mm512_setzero_si512();
	__m512i quot = _mm512_madd52hi_epu64(zero, y, ws);
	__m512i a = _mm512_madd52lo_epu64(zero, y, w);
	__m512i b = _mm512_madd52lo_epu64(zero, quot, q);
	return _mm512_and_si512(_mm512_sub_epi64(a, b), _mm512_set1_epi64((1LL << 52) - 1));
}

// The same for one value.
static inline uint64_t henn_mulshoup1_52(uint64_t y, uint64_t w, uint64_t ws, uint64_t q) {
	uint64_t quot = (uint64_t)(((unsigned __int128)y * ws) >> 52);
	return (y * w - quot * q) & ((1ULL << 52) - 1);
}

// The high 64 bits of a * b in 8 lanes, from four 32x32-bit products (AVX-512 has no 64-bit mulhi).
HENN_TGT static inline __m512i henn_mulhi64(__m512i a, __m512i b) {
	const __m512i lo32 = _mm512_set1_epi64(0xffffffffLL);
	__m512i ah = _mm512_srli_epi64(a, 32), bh = _mm512_srli_epi64(b, 32);
	__m512i ll = _mm512_mul_epu32(a, b), lh = _mm512_mul_epu32(a, bh);
	__m512i hl = _mm512_mul_epu32(ah, b), hh = _mm512_mul_epu32(ah, bh);
	__m512i mid = _mm512_add_epi64(_mm512_srli_epi64(ll, 32), _mm512_and_si512(lh, lo32));
	mid = _mm512_add_epi64(mid, _mm512_and_si512(hl, lo32));  // below 3 * 2^32: no carry lost
	return _mm512_add_epi64(_mm512_add_epi64(hh, _mm512_srli_epi64(lh, 32)),
	                        _mm512_add_epi64(_mm512_srli_epi64(hl, 32), _mm512_srli_epi64(mid, 32)));
}

// Shoup's product for primes below 2^61 in 64-bit lanes: ws = floor(w * 2^64 / q), any y < 2^64;
// the result, below 2q, is exact modulo 2^64.
HENN_TGT static inline __m512i henn_mulshoup64(__m512i y, __m512i w, __m512i ws, __m512i q) {
	return _mm512_sub_epi64(_mm512_mullo_epi64(y, w), _mm512_mullo_epi64(henn_mulhi64(y, ws), q));
}

static inline uint64_t henn_mulshoup1_64(uint64_t y, uint64_t w, uint64_t ws, uint64_t q) {
	uint64_t quot = (uint64_t)(((unsigned __int128)y * ws) >> 64);
	return y * w - quot * q;
}

// x mod c for x < 2c: x - c wraps above x when x < c, so the unsigned minimum picks the reduced one.
HENN_TGT static inline __m512i henn_csub(__m512i x, __m512i c) {
	return _mm512_min_epu64(x, _mm512_sub_epi64(x, c));
}

// x mod q, fully reduced, for any x < 2^64 and q < 2^61.4: Shoup's product by 1 with r64 =
// floor(2^64 / q) leaves x - floor(x * r64 / 2^64) * q in [0, 2q).
HENN_TGT static inline __m512i henn_reduce64(__m512i x, __m512i q, __m512i r64) {
	return henn_csub(henn_mulshoup64(x, _mm512_set1_epi64(1), r64, q), q);
}

// The same Shoup product (52-bit lanes) with broadcast scalars.
HENN_TGT static inline __m512i henn_mulshoup52s(__m512i y, uint64_t w, uint64_t ws, __m512i q) {
	return henn_mulshoup52(y, _mm512_set1_epi64((long long)w), _mm512_set1_epi64((long long)ws), q);
}

// 1 when the CPU (and the OS) run AVX-512 F, DQ and IFMA: GCC's check includes the OS's XSAVE support.
static inline int henn_has_avx512_ifma(void) {
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512ifma");
}

// 1 when the CPU (and the OS) run AVX2.
static inline int henn_has_avx2(void) {
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2");
}
#endif
