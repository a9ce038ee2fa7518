package main

import (
	"math"
	"math/rand"
	"sync"
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
					want := lattigoEncoding(t, c, re, im, level, scale)
					if !got.pt.Value.Equal(&want.Value) || got.pt.IsNTT != want.IsNTT || got.pt.IsMontgomery != want.IsMontgomery {
						t.Fatalf("ring %v level %d scale %v huge %v: henn's encoding differs from Lattigo's", rt, level, scale, huge)
					}
				}
			}
		}
	}
}

// lattigoEncoding: what Lattigo's own Encoder writes for re + i*im.
func lattigoEncoding(t *testing.T, c *ctxObj, re, im []float64, level int, scale float64) *rlwe.Plaintext {
	t.Helper()
	want := ckks.NewPlaintext(c.params, level)
	want.Scale = rlwe.NewScale(scale)
	values := make([]complex128, len(re))
	for i := range values {
		values[i] = complex(re[i], im[i])
	}
	if err := c.ecd.Encode(values, want); err != nil {
		t.Fatal(err)
	}
	return want
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

// The AVX-512 inverse FFT gives Lattigo's SpecialiFFTDoubleUnrolled8 output bit for bit, at every
// slot count from 16 to N/2, on both rings (2N- and 4N-th roots), for values of mixed magnitudes.
func TestIFFTMatchesLattigo(t *testing.T) {
	skipWithoutIFMA(t)
	for _, rt := range []ring.Type{ring.Standard, ring.ConjugateInvariant} {
		c, err := newContext(16, nil, nil, []int{50, 40}, []int{50}, 40, rt)
		if err != nil {
			t.Fatal(err)
		}
		m := int(c.params.RingQ().NthRoot())
		rng := rand.New(rand.NewSource(int64(rt) + 7))
		for logSlots := 4; logSlots <= c.params.LogMaxSlots(); logSlots++ {
			slots := 1 << logSlots
			want, got := make([]complex128, slots), make([]complex128, slots)
			for i := range want {
				scale := math.Pow(10, float64(rng.Intn(9)-4))
				want[i] = complex(rng.NormFloat64()*scale, rng.NormFloat64()*scale)
				if rt == ring.ConjugateInvariant || i%5 == 0 {
					want[i] = complex(real(want[i]), 0)
				}
			}
			copy(got, want)
			if err := c.ecd.IFFT(want, logSlots); err != nil {
				t.Fatal(err)
			}
			if err := inverseFFT(c.ecd, m, got); err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if math.Float64bits(real(got[i])) != math.Float64bits(real(want[i])) ||
					math.Float64bits(imag(got[i])) != math.Float64bits(imag(want[i])) {
					t.Fatalf("ring %v, 2^%d slots: value %d is %v, Lattigo's %v", rt, logSlots, i, got[i], want[i])
				}
			}
		}
	}
}

// go test -run XXX -bench IFFT: the kernel against Lattigo's Go at N = 2^16's 2^15 slots.
func BenchmarkIFFT(b *testing.B) {
	c, err := newContext(16, nil, nil, []int{50, 40}, []int{50}, 40, ring.Standard)
	if err != nil {
		b.Fatal(err)
	}
	slots, m := c.params.MaxSlots(), int(c.params.RingQ().NthRoot())
	values := make([]complex128, slots)
	for i := range values {
		values[i] = complex(float64(i%7)-3, 0)
	}
	b.Run("kernel", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_ = inverseFFT(c.ecd, m, values)
		}
	})
	b.Run("lattigo", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_ = c.ecd.IFFT(values, c.params.LogMaxSlots())
		}
	})
}

// An encoding whose handle was released gives its buffers to the next encoding of its level, which
// must still write exactly Lattigo's plaintext (no coefficient of the old values left behind), and the
// released object can no longer be reached through its handle.
func TestRecycledPlaintextMatchesFresh(t *testing.T) {
	c, err := newContext(11, nil, nil, []int{50, 36, 36}, []int{50}, 36, ring.Standard)
	if err != nil {
		t.Fatal(err)
	}
	slots := c.params.MaxSlots()
	rng := rand.New(rand.NewSource(3))
	level, scale := 1, math.Exp2(36)
	recycled, reused := 0, 0
	var last *uint64
	for round := 0; round < 4; round++ {
		re, im := make([]float64, slots), make([]float64, slots)
		for i := range re {
			if round%2 == 0 || i%3 == 0 { // odd rounds: mostly zeros over the previous round's values
				re[i], im[i] = rng.NormFloat64(), rng.NormFloat64()
			}
		}
		pt, err := c.encode(re, im, level, scale)
		if err != nil {
			t.Fatal(err)
		}
		want := lattigoEncoding(t, c, re, im, level, scale)
		if !pt.pt.Value.Equal(&want.Value) || !pt.pt.MetaData.Equal(want.MetaData) {
			t.Fatalf("round %d: the encoding differs from Lattigo's", round)
		}
		if &pt.pt.Value.Coeffs[0][0] == last {
			reused++
		}
		last = &pt.pt.Value.Coeffs[0][0]
		h := newHandle(pt)
		if err := release(h); err != nil {
			t.Fatal(err)
		}
		if pt.pt == nil {
			recycled++
		}
		if _, err := lookup(h); err == nil {
			t.Fatal("a released plaintext is still reachable through its handle")
		}
	}
	if err := release(newHandle(&ptObj{c: c})); err != nil { // a plaintext that owns no buffers
		t.Fatal(err)
	}
	if recycled != 4 || reused == 0 { // (a garbage collection may empty the pool: not every round reuses)
		t.Fatalf("%d of 4 released encodings went back to the pool, %d of 3 encodings reused one", recycled, reused)
	}
}

// Two releases of one handle racing: exactly one succeeds in deleting it, and the encoding goes back to
// the pool once (twice would hand one buffer to two later encodings).
func TestConcurrentReleaseRecyclesOnce(t *testing.T) {
	c, err := newContext(11, nil, nil, []int{50, 36}, []int{50}, 36, ring.Standard)
	if err != nil {
		t.Fatal(err)
	}
	slots := c.params.MaxSlots()
	for round := 0; round < 50; round++ {
		pt, err := c.encode(make([]float64, slots), make([]float64, slots), 1, math.Exp2(36))
		if err != nil {
			t.Fatal(err)
		}
		h := newHandle(pt)
		var wg sync.WaitGroup
		for k := 0; k < 2; k++ {
			wg.Add(1)
			go func() { defer wg.Done(); _ = release(h) }()
		}
		wg.Wait()
		a, b := c.recycled[1].Get(), c.recycled[1].Get()
		if a != nil && a == b {
			t.Fatal("one released encoding went back to the pool twice")
		}
	}
}
