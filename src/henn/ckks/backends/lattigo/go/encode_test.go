package main

import (
	"math"
	"math/rand"
	"testing"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// henn's embed must write exactly the plaintext Lattigo's Encoder writes: every coefficient, every
// prime, on both rings, at every level, for small, large, negative, zero and huge (>= 2^64) values.
func TestEmbedMatchesLattigo(t *testing.T) {
	for _, rt := range []ring.Type{ring.Standard, ring.ConjugateInvariant} {
		c, err := newContext(11, nil, nil, []int{50, 36, 36, 36, 36}, []int{50}, 36, rt)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewSource(int64(rt) + 1))
		slots := c.params.MaxSlots()
		re, im := make([]float64, slots), make([]float64, slots)
		for i := range re {
			re[i], im[i] = rng.NormFloat64()*math.Pow(10, float64(rng.Intn(7)-3)), rng.Float64()*2-1
		}
		re[0], im[0], re[1], im[1] = 0, 0, -1e-14, 1e-14
		re[2] = 3e9 // * 2^36 >= 2^64: Lattigo's big-integer path
		re[3] = -5e9
		for _, level := range []int{0, 2, c.params.MaxLevel()} {
			for _, scale := range []float64{math.Exp2(36), math.Exp2(50), 12345.5} {
				got, err := c.encode(re, im, level, scale)
				if err != nil {
					t.Fatal(err)
				}
				want := ckks.NewPlaintext(c.params, level)
				want.Scale = rlwe.NewScale(scale)
				values := make([]complex128, slots)
				for i := range values {
					values[i] = complex(re[i], im[i])
				}
				if err := c.ecd.Encode(values, want); err != nil {
					t.Fatal(err)
				}
				if !got.pt.Value.Equal(&want.Value) || got.pt.IsNTT != want.IsNTT || got.pt.IsMontgomery != want.IsMontgomery {
					t.Fatalf("ring %v level %d scale %v: henn's encoding differs from Lattigo's", rt, level, scale)
				}
			}
		}
	}
}
