package main

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"math/big"
	"math/rand"
	"slices"
	"testing"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
)

// The in-place sampler draws what Lattigo's uniform sampler draws from the same AES stream, word for word,
// into new limbs or over old values, at henn's primes and at a prime just above a power of two (about half
// of the words rejected).
// (With the VAES kernel where the CPU has it, and without.)
func TestSampleUniformAESMatchesLattigo(t *testing.T) {
	const n = 1 << 10
	low := uint64(1<<20 + 1)
	for !new(big.Int).SetUint64(low).ProbablyPrime(20) {
		low += 2 * n
	}
	for _, qs := range [][]uint64{{low}, testCtx(t).params.Q()} {
		r, err := ring.NewRing(n, qs)
		if err != nil {
			t.Fatal(err)
		}
		for s := range 4 {
			seed := make([]byte, seedSize)
			seed[0], seed[31] = byte(s), byte(len(qs))
			want := r.NewPoly()
			ref, err := newSeedStream(seed)
			if err != nil {
				t.Fatal(err)
			}
			ring.NewUniformSampler(ref, r).Read(want)
			// limbs allocated by the sampler, and limbs that hold other values
			dirty := r.NewPoly()
			for _, row := range dirty.Coeffs {
				for i := range row {
					row[i] = ^uint64(i)
				}
			}
			for _, vaes := range vaesSettings() {
				for _, got := range []ring.Poly{{Coeffs: make([][]uint64, len(qs))}, *dirty.CopyNew()} {
					withVAES(vaes, func() {
						if err := sampleUniformAES(seed, r.SubRings, got); err != nil {
							t.Fatal(err)
						}
					})
					if !got.Equal(&want) {
						t.Fatalf("primes %v, seed %d, VAES %v: the in-place sampler drew another polynomial", qs, s, vaes)
					}
				}
			}
		}
	}
}

// vaesSettings: Go's stream, and the VAES kernel where this CPU runs it.
func vaesSettings() []bool {
	if hasVAES {
		return []bool{false, true}
	}
	return []bool{false}
}

// withVAES runs f with the VAES kernel on or off (off: Go's stream everywhere).
func withVAES(on bool, f func()) {
	saved := hasVAES
	hasVAES = on
	if on {
		rlwe.SetUniformAccelerator(aesUniformRow)
	} else {
		rlwe.SetUniformAccelerator(nil)
	}
	defer func() {
		hasVAES = saved
		if saved {
			rlwe.SetUniformAccelerator(aesUniformRow)
		} else {
			rlwe.SetUniformAccelerator(nil)
		}
	}()
	f()
}

// The VAES kernel writes the rows Go's AES-CTR stream and filter write, bit for bit: a seeded key's rows
// (little-endian words, per-row counter blocks) and c1's stream (big-endian words, continued across limbs
// from any word, odd or even), for primes of 20 to 61 bits, where up to half the words are rejected.
func TestVAESUniformMatchesGo(t *testing.T) {
	if !hasVAES {
		t.Skip("this CPU has no AVX-512 VAES: Go's AES-CTR runs")
	}
	rng := rand.New(rand.NewSource(29))
	for _, bits := range []int{20, 40, 50, 61} {
		for _, q := range []uint64{primesFor(t, bits, 1<<11, 1)[0], uint64(1)<<(bits-1) + 1} { // ~none, ~half rejected
			mask := uint64(1)<<bits - 1
			var key [32]byte
			var iv [16]byte
			rng.Read(key[:])
			rng.Read(iv[:8])
			for _, n := range []int{8, 1000, 1 << 12} {
				// Go: the row from the stream of a counter block (fillUniform's reading: native words)
				block, _ := aes.NewCipher(key[:])
				ks := make([]byte, 8*4*n)
				cipher.NewCTR(block, iv[:]).XORKeyStream(ks, make([]byte, len(ks)))
				var want []uint64
				for i := 0; len(want) < n; i++ {
					if v := binary.LittleEndian.Uint64(ks[8*i:]) & mask; v < q {
						want = append(want, v)
					}
				}
				got := make([]uint64, n)
				if !aesUniformRow(&key, &iv, got, q, mask) {
					t.Fatal("declined")
				}
				if !slices.Equal(got, want) {
					t.Fatalf("q %d, %d words: the key row differs from Go's", q, n)
				}
				// c1's reading: big-endian words from word `from` of the stream at counter zero
				zero := make([]byte, 16)
				cipher.NewCTR(block, zero).XORKeyStream(ks, make([]byte, len(ks)))
				for _, from := range []uint64{0, 1, 7, 10} {
					want, read := want[:0], uint64(0)
					for i := from; len(want) < n; i++ {
						if v := binary.BigEndian.Uint64(ks[8*i:]) & mask; v < q {
							want = append(want, v)
						}
						read = i + 1 - from
					}
					if r := aesUniform(key[:], zero, from, got, q, mask, true); r != read || !slices.Equal(got, want) {
						t.Fatalf("q %d, %d words from word %d: read %d (Go %d), equal %v", q, n, from, r, read,
							slices.Equal(got, want))
					}
				}
			}
		}
	}
}

// One row of 2^16 words (a 49-bit prime) from a seed's stream, as a server expands c1 (the key rows differ
// only in reading native words): Go's AES-CTR stream and filter against the VAES kernel.
func BenchmarkUniformRow(b *testing.B) {
	q := primesFor(b, 49, 1<<17, 1)[0]
	r, err := ring.NewRing(1<<16, []uint64{q})
	if err != nil {
		b.Fatal(err)
	}
	seed, row := make([]byte, seedSize), r.NewPoly()
	for _, vaes := range vaesSettings() {
		b.Run(fmt.Sprintf("vaes=%v", vaes), func(b *testing.B) {
			b.SetBytes(8 << 16)
			withVAES(vaes, func() {
				for range b.N {
					if err := sampleUniformAES(seed, r.SubRings, row); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
