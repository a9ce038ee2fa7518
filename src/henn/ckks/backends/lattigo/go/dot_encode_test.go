package main

import (
	"math"
	"math/cmplx"
	"math/rand"
	"testing"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
)

// dotEncode against encode + dotPlain, bit for bit: both rings, two levels, 1 to 17 terms (past a
// chunk), weights with zeros and runs as diagonals have, and one value beyond 2^64 (the fallback).
func TestDotEncodeMatchesDotPlain(t *testing.T) {
	for _, rt := range []ring.Type{ring.Standard, ring.ConjugateInvariant} {
		c, err := newContext(11, nil, nil, []int{50, 36, 36, 36}, []int{50}, 36, rt)
		if err != nil {
			t.Fatal(err)
		}
		k := testKeys(t, c)
		rng := rand.New(rand.NewSource(5))
		slots, top := c.params.MaxSlots(), c.params.MaxLevel()
		for _, terms := range []int{1, 3, 17} {
			for _, level := range []int{top, 1} {
				in := make([]*ctObj, terms)
				vals := make([][]float64, terms)
				pts := make([]*ptObj, terms)
				scale := float64(c.params.Q()[level])
				for i := range in {
					a := encryptConst(t, c, k, rng.Float64()*2-1, math.Exp2(36))
					if in[i], err = c.dropLevel(a, top-level); err != nil {
						t.Fatal(err)
					}
					vals[i] = make([]float64, slots)
					for x := range vals[i] {
						if x%5 != 0 {
							vals[i][x] = float64(x/64%7) * (rng.Float64() - 0.5)
						}
					}
					if terms == 3 && i == 1 {
						vals[i][7] = 1e9 // |value * scale| > 2^64: Lattigo's big-integer path
					}
					if pts[i], err = c.encode(vals[i], make([]float64, slots), level, scale); err != nil {
						t.Fatal(err)
					}
				}
				sameAsDotPlain(t, c, in, vals, pts, level, scale)
			}
		}
		if _, err := c.dotEncode(nil, nil, top, 1<<36); err == nil {
			t.Fatal("no terms accepted")
		}
		if _, err := c.dotEncode([]*ctObj{encryptConst(t, c, k, 0.5, 1<<36)}, [][]float64{make([]float64, 3)}, top, 1<<36); err == nil {
			t.Fatal("short vector accepted")
		}
	}
}

// go test -run '^$' -bench DotEncode: 16 diagonals at N = 2^16 and 14 primes, encoded and summed
// in one call, against encode + dotPlain.
func BenchmarkDotEncode(b *testing.B) {
	const terms = 16
	logQ := []int{60, 40, 40, 40, 40, 40, 40, 40, 40, 40, 40, 40, 40, 40}
	c, in, _ := benchInputs(b, 16, logQ, []int{61, 61}, terms)
	slots, level := c.params.MaxSlots(), c.params.MaxLevel()
	scale := float64(c.params.Q()[level])
	vals := make([][]float64, terms)
	for t := range vals {
		vals[t] = make([]float64, slots)
		for x := 0; x < slots; x += 3 {
			vals[t][x] = rand.Float64() - 0.5
		}
	}
	zeros := make([]float64, slots)
	b.Run("fused", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := c.dotEncode(in, vals, level, scale); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*terms)/1e3, "us/term")
	})
	b.Run("encode+dot", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			pts := make([]*ptObj, terms)
			for t := range pts {
				pts[t], _ = c.encode(vals[t], zeros, level, scale)
			}
			if _, err := c.dotPlain(in, pts); err != nil {
				b.Fatal(err)
			}
			for _, p := range pts {
				p.recycle()
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*terms)/1e3, "us/term")
	})
}

// A vector repeating with period P is encoded as the sparse packing of its P slots: inside the dot
// product bit for bit as encodePeriodic + dotPlain, and that plaintext holds the repeated vector.
func TestDotEncodeOfPeriodicVectors(t *testing.T) {
	for _, rt := range []ring.Type{ring.Standard, ring.ConjugateInvariant} {
		c, err := newContext(11, nil, nil, []int{50, 36, 36, 36}, []int{50}, 36, rt)
		if err != nil {
			t.Fatal(err)
		}
		k := testKeys(t, c)
		rng := rand.New(rand.NewSource(7))
		slots, top := c.params.MaxSlots(), c.params.MaxLevel()
		for _, period := range []int{slots / 2, slots / 8, 16} {
			for _, terms := range []int{1, 3, 17} {
				level := []int{top, 1}[terms%2]
				scale := float64(c.params.Q()[level])
				in, vals, pts := make([]*ctObj, terms), make([][]float64, terms), make([]*ptObj, terms)
				zeros := make([]float64, period)
				for i := range in {
					a := encryptConst(t, c, k, rng.Float64()*2-1, math.Exp2(36))
					if in[i], err = c.dropLevel(a, top-level); err != nil {
						t.Fatal(err)
					}
					vals[i] = make([]float64, period)
					for x := range vals[i] {
						vals[i][x] = rng.Float64() - 0.5
					}
					if pts[i], err = c.encodePeriodic(vals[i], zeros, level, scale); err != nil {
						t.Fatal(err)
					}
				}
				sameAsDotPlain(t, c, in, vals, pts, level, scale)
				repeatsItsVector(t, c, pts[0].pt, vals[0])
			}
		}
		wide := [][]float64{make([]float64, slots/2), make([]float64, slots)}
		two := []*ctObj{encryptConst(t, c, k, 0.5, 1<<36), encryptConst(t, c, k, 0.5, 1<<36)}
		if _, err := c.dotEncode(two, wide, top, 1<<36); err == nil {
			t.Fatal("vectors of different periods accepted")
		}
	}
}

// sameAsDotPlain: dotEncode(in, vals) is dotPlain(in, pts) bit for bit, scale included.
func sameAsDotPlain(t *testing.T, c *ctxObj, in []*ctObj, vals [][]float64, pts []*ptObj, level int, scale float64) {
	t.Helper()
	want, err := c.dotPlain(in, pts)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.dotEncode(in, vals, level, scale)
	if err != nil {
		t.Fatal(err)
	}
	sameCiphertext(t, "dot_encode", got.ct, want.ct)
	if !got.ct.Scale.Equal(want.ct.Scale) {
		t.Fatalf("scale %v, want %v", got.ct.Scale.Float64(), want.ct.Scale.Float64())
	}
}

// repeatsItsVector: the plaintext decoded over every slot is v repeated.
func repeatsItsVector(t *testing.T, c *ctxObj, pt *rlwe.Plaintext, v []float64) {
	t.Helper()
	full := *pt
	md := *pt.MetaData
	md.LogDimensions = c.plaintextMeta.LogDimensions
	full.MetaData = &md
	values := make([]complex128, c.params.MaxSlots())
	if err := c.ecd.Decode(&full, values); err != nil {
		t.Fatal(err)
	}
	for i, x := range values {
		if cmplx.Abs(x-complex(v[i%len(v)], 0)) > 1e-6 {
			t.Fatalf("slot %d holds %v, want %v", i, x, v[i%len(v)])
		}
	}
}

// go test -run '^$' -bench DotEncodePeriodic: 16 diagonals at N = 2^16 and 14 primes repeating every
// slots/r slots (ResNet-20's stages: r = 2, 4, 8), encoded inside the dot product as the sparse
// packing of one period, against the same vectors written out over every slot.
func BenchmarkDotEncodePeriodic(b *testing.B) {
	const terms = 16
	logQ := []int{60, 40, 40, 40, 40, 40, 40, 40, 40, 40, 40, 40, 40, 40}
	c, in, _ := benchInputs(b, 16, logQ, []int{61, 61}, terms)
	slots, level := c.params.MaxSlots(), c.params.MaxLevel()
	scale := float64(c.params.Q()[level])
	for _, r := range []int{1, 2, 8} {
		short, long := make([][]float64, terms), make([][]float64, terms)
		for t := range short {
			short[t], long[t] = make([]float64, slots/r), make([]float64, slots)
			for x := range short[t] {
				short[t][x] = rand.Float64() - 0.5
			}
			for x := range long[t] {
				long[t][x] = short[t][x%(slots/r)]
			}
		}
		for name, vals := range map[string][][]float64{"period": short, "repeated": long} {
			b.Run(name+"/r="+string(rune('0'+r)), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if _, err := c.dotEncode(in, vals, level, scale); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*terms)/1e3, "us/term")
			})
		}
	}
}
