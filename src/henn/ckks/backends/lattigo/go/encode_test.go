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
		for _, huge := range []bool{false, true} {
			if huge { // * 2^36 >= 2^64: Lattigo's big-integer path (without them the AVX-512 quantization runs)
				re[2], re[3] = 3e9, -5e9
			}
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
						t.Fatalf("ring %v level %d scale %v huge %v: henn's encoding differs from Lattigo's", rt, level, scale, huge)
					}
				}
			}
		}
	}
}

// The AVX-512 quantization writes the Go path's rows, magnitudes from 2^61 and negative values
// above a prime included (1e4, 1e7 * 2^36), and declines from 2^64 (5e8 * 2^36): big integers.
func TestQuantizeRowsMatchesGoPath(t *testing.T) {
	skipWithoutIFMA(t)
	c, err := newContext(10, nil, nil, []int{50, 36, 36}, []int{50}, 36, ring.Standard)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(7))
	n := c.params.N()
	rq := c.params.RingQ()
	for _, tc := range []struct {
		magnitude float64
		kernel    bool
	}{{1e-3, true}, {0.1, true}, {-1, true}, {1e4, true}, {1e7, true}, {5e8, false}} {
		values := make([]complex128, n/2)
		for i := range values {
			values[i] = complex(rng.NormFloat64()*tc.magnitude, rng.NormFloat64()*tc.magnitude)
			if tc.magnitude < 0 { // every coefficient negative and small
				values[i] = complex(-1e-6*float64(i%7+1), -2e-6)
			}
		}
		if tc.magnitude > 0 {
			values[0] = complex(tc.magnitude, -tc.magnitude)
		}
		scale := math.Exp2(36)
		s, pool := scratchFor(n)
		got, want := rq.NewPoly(), rq.NewPoly()
		for _, row := range got.Coeffs { // garbage the kernel must overwrite
			for i := range row {
				row[i] = uint64(rng.Int63())
			}
		}
		ok := quantizeRows(values, n, scale, []*ring.Ring{rq}, []ring.Poly{got}, s)
		s.quantizeAndReduce(values, n, scale, []*ring.Ring{rq}, []ring.Poly{want})
		pool.Put(s)
		if ok != tc.kernel {
			t.Fatalf("magnitude %g: kernel took it: %v, want %v", tc.magnitude, ok, tc.kernel)
		}
		if ok && !got.Equal(&want) {
			t.Fatalf("magnitude %g: the kernel's rows differ from the Go path's", tc.magnitude)
		}
	}
}
