package main

import (
	"math/big"
	"testing"

	"github.com/tuneinsight/lattigo/v6/ring"
)

// The in-place sampler draws what Lattigo's uniform sampler draws from the same AES stream, word for word,
// into new limbs or over old values, at henn's primes and at a prime just above a power of two (about half
// of the words rejected).
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
			for _, got := range []ring.Poly{{Coeffs: make([][]uint64, len(qs))}, dirty} {
				stream, _ := newSeedStream(seed)
				sampleUniformAES(stream, r.SubRings, got)
				if !got.Equal(&want) {
					t.Fatalf("primes %v, seed %d: the in-place sampler drew another polynomial", qs, s)
				}
			}
		}
	}
}
