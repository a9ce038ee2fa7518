package main

/*
#include <stdint.h>
#include <stddef.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define HENN_AES_TGT __attribute__((target("avx512f,avx512dq,avx512bw,vaes,aes")))

// One step of the AES-256 key schedule (FIPS-197 5.2): the previous two round keys and AESKEYGENASSIST's
// word (its fourth for even round keys, after RotWord and Rcon; its third, SubWord only, for odd ones).
__attribute__((target("aes"))) static inline __m128i henn_aes_step(__m128i prev2, __m128i assist, int word) {
	assist = word == 3 ? _mm_shuffle_epi32(assist, 0xff) : _mm_shuffle_epi32(assist, 0xaa);
	prev2 = _mm_xor_si128(prev2, _mm_slli_si128(prev2, 4));
	prev2 = _mm_xor_si128(prev2, _mm_slli_si128(prev2, 4));
	prev2 = _mm_xor_si128(prev2, _mm_slli_si128(prev2, 4));
	return _mm_xor_si128(prev2, assist);
}

#define HENN_AES_ROUNDS(i, rcon)                                                                   \
	rk[i] = henn_aes_step(rk[i - 2], _mm_aeskeygenassist_si128(rk[i - 1], rcon), 3);            \
	if (i + 1 < 15) rk[i + 1] = henn_aes_step(rk[i - 1], _mm_aeskeygenassist_si128(rk[i], 0), 2);

__attribute__((target("aes"))) static void henn_aes256_schedule(const uint8_t *key, __m128i rk[15]) {
	rk[0] = _mm_loadu_si128((const __m128i *)key);
	rk[1] = _mm_loadu_si128((const __m128i *)(key + 16));
	HENN_AES_ROUNDS(2, 0x01) HENN_AES_ROUNDS(4, 0x02) HENN_AES_ROUNDS(6, 0x04) HENN_AES_ROUNDS(8, 0x08)
	HENN_AES_ROUNDS(10, 0x10) HENN_AES_ROUNDS(12, 0x20) HENN_AES_ROUNDS(14, 0x40)
}

// row[0..n) = the 8-byte words of the AES-256-CTR keystream under key (counter block iv: bytes 0..7 as
// given, bytes 8..15 a big-endian counter that does not wrap), from the stream's word `from` on, read
// little-endian (big-endian where be), masked, keeping those below q. Returns the stream's words read
// from `from` on. Eight 512-bit VAES registers of four blocks each, 32 blocks a round: AES's latency
// needs that many independent blocks in flight (four registers ran 1.5x slower).
HENN_AES_TGT static uint64_t henn_aes_uniform(const uint8_t *key, const uint8_t *iv, uint64_t from, uint64_t *row,
                                              size_t n, uint64_t q, uint64_t mask, int be) {
	__m128i rk128[15];
	henn_aes256_schedule(key, rk128);
	__m512i rk[15];
	for (int r = 0; r < 15; r++) rk[r] = _mm512_broadcast_i32x4(rk128[r]);
	uint64_t hi, lo;
	memcpy(&hi, iv, 8);
	memcpy(&lo, iv + 8, 8);
	uint64_t ctr0 = __builtin_bswap64(lo) + from / 2;
	// each 128-bit lane: [iv's first 8 bytes, the counter]; counters kept as integers, byte-swapped when used
	__m512i ctr = _mm512_set_epi64((long long)(ctr0 + 3), (long long)hi, (long long)(ctr0 + 2), (long long)hi,
	                               (long long)(ctr0 + 1), (long long)hi, (long long)ctr0, (long long)hi);
	const __m512i inc = _mm512_set_epi64(4, 0, 4, 0, 4, 0, 4, 0);
	const __m512i toBlock = _mm512_broadcast_i32x4(_mm_set_epi8(8, 9, 10, 11, 12, 13, 14, 15, 7, 6, 5, 4, 3, 2, 1, 0));
	const __m512i swapWords = _mm512_broadcast_i32x4(_mm_set_epi8(8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7));
	const __m512i Q = _mm512_set1_epi64((long long)q), M = _mm512_set1_epi64((long long)mask);
	size_t k = 0;
	uint64_t read = 0, skip = from % 2; // an odd start drops the first block's first word
	while (k < n) {
		__m512i b[8];
		for (int u = 0; u < 8; u++) {
			b[u] = _mm512_xor_si512(_mm512_shuffle_epi8(ctr, toBlock), rk[0]);
			ctr = _mm512_add_epi64(ctr, inc);
		}
		for (int r = 1; r < 14; r++)
			for (int u = 0; u < 8; u++) b[u] = _mm512_aesenc_epi128(b[u], rk[r]);
		for (int u = 0; u < 8; u++) b[u] = _mm512_aesenclast_epi128(b[u], rk[14]);
		for (int u = 0; u < 8 && k < n; u++) {
			__m512i v = be ? _mm512_shuffle_epi8(b[u], swapWords) : b[u];
			v = _mm512_and_si512(v, M);
			__mmask8 keep = _mm512_cmplt_epu64_mask(v, Q) & (__mmask8)(0xff << skip);
			read += 8 - skip;
			skip = 0;
			if (k + 8 <= n) {
				_mm512_storeu_si512((void *)(row + k), _mm512_maskz_compress_epi64(keep, v));
				k += (size_t)__builtin_popcount(keep); // reaching n here takes all 8: the stream ends at the last
				continue;
			}
			uint64_t w[8]; // the last words: stop at the n-th kept one
			_mm512_storeu_si512((void *)w, v);
			for (int l = 0; l < 8; l++) {
				if (!(keep >> l & 1)) continue;
				row[k++] = w[l];
				if (k == n) {
					read -= 7 - l;
					break;
				}
			}
		}
	}
	return read;
}

static int henn_has_vaes(void) {
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	       __builtin_cpu_supports("vaes") && __builtin_cpu_supports("aes");
}
#else
static uint64_t henn_aes_uniform(const uint8_t *key, const uint8_t *iv, uint64_t from, uint64_t *row, size_t n,
                                 uint64_t q, uint64_t mask, int be) { return 0; }
static int henn_has_vaes(void) { return 0; }
#endif
*/
import "C"

import (
	"encoding/binary"
	"unsafe"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
)

// AES-256-CTR keystreams filtered into uniform rows, in AVX-512 VAES: a seeded key's a halves (every key
// switch with seeded keys regenerates them: a tenth of a ResNet-20 evaluation went to Go's AES-NI CTR and
// the filter) and a seeded ciphertext's c1 (what a server reads).
func init() {
	if hasVAES {
		rlwe.SetUniformAccelerator(aesUniformRow)
	}
}

// hasVAES: the AVX-512 kernels run (HENN_LATTIGO_NTT does not lower the level) and the CPU has VAES.
var hasVAES = hasIFMA() && C.henn_has_vaes() != 0

// aesUniformRow is the rlwe.UniformAccelerator: row as fillUniform writes it from the stream under key
// from counter block iv (native little-endian words).
func aesUniformRow(key *[32]byte, iv *[16]byte, row []uint64, q, mask uint64) bool {
	if binary.BigEndian.Uint64(iv[8:]) != 0 || len(row) == 0 {
		return false
	}
	aesUniform(key[:], iv[:], 0, row, q, mask, false)
	return true
}

// aesUniform writes row from the words of the stream under key from counter block iv, starting at its word
// `from`, and returns the words it read.
func aesUniform(key, iv []byte, from uint64, row []uint64, q, mask uint64, bigEndian bool) uint64 {
	return uint64(C.henn_aes_uniform((*C.uint8_t)(unsafe.Pointer(&key[0])), (*C.uint8_t)(unsafe.Pointer(&iv[0])),
		C.uint64_t(from), (*C.uint64_t)(unsafe.Pointer(&row[0])), C.size_t(len(row)), C.uint64_t(q),
		C.uint64_t(mask), cbool(bigEndian)))
}
