package main

import (
	"math"
	"math/rand"
	"reflect"
	"testing"

	"github.com/tuneinsight/lattigo/v6/ring"
)

// dotEncodeParts against one dotEncode per part, bit for bit: both rings, a prime from 2^50 (the 128-bit
// kernel) and primes below it (IFMA), full and periodic vectors, parts sharing and skipping ciphertexts.
func TestDotEncodePartsMatchesDotEncode(t *testing.T) {
	for _, rt := range []ring.Type{ring.Standard, ring.ConjugateInvariant} {
		c, err := newContext(11, nil, nil, []int{55, 36, 36, 36}, []int{55}, 36, rt)
		if err != nil {
			t.Fatal(err)
		}
		k := testKeys(t, c)
		rng := rand.New(rand.NewSource(11))
		slots, top := c.params.MaxSlots(), c.params.MaxLevel()
		in := make([]*ctObj, 5)
		for i := range in {
			in[i] = encryptConst(t, c, k, rng.Float64()*2-1, math.Exp2(36))
		}
		periods := []int{slots}
		if rt == ring.Standard {
			periods = append(periods, slots/2, slots/8, 16)
		}
		for _, period := range periods {
			bounds := []int{0, 3, 4, 11}
			baby := []int{0, 1, 4, 2, 0, 1, 2, 3, 4, 0, 3}
			vec := []int{0, 1, 2, 3, 4, 5, 6, 0, 7, 8, 3} // vectors 0 and 3 serve two terms each
			vals := make([][]float64, 9)
			for i := range vals {
				vals[i] = make([]float64, period)
				for x := range vals[i] {
					if x%3 != 0 {
						vals[i][x] = rng.Float64() - 0.5
					}
				}
			}
			scale := float64(c.params.Q()[top])
			got, err := c.dotEncodeParts(in, baby, vec, bounds, vals, top, scale)
			if err != nil {
				t.Fatal(err)
			}
			for p := 0; p+1 < len(bounds); p++ {
				terms, rows := []*ctObj{}, [][]float64{}
				for t := bounds[p]; t < bounds[p+1]; t++ {
					terms, rows = append(terms, in[baby[t]]), append(rows, vals[vec[t]])
				}
				want, err := c.dotEncode(terms, rows, top, scale)
				if err != nil {
					t.Fatal(err)
				}
				sameCiphertext(t, "dot_encode_parts", got[p].ct, want.ct)
				if !got[p].ct.Scale.Equal(want.ct.Scale) {
					t.Fatalf("scale %v, want %v", got[p].ct.Scale.Float64(), want.ct.Scale.Float64())
				}
			}
		}
		for name, args := range map[string]struct{ baby, vec, bounds []int }{
			"empty part":        {[]int{0, 1}, []int{0, 1}, []int{0, 2, 2}},
			"ciphertext past":   {[]int{0, 5}, []int{0, 1}, []int{0, 2}},
			"vector past":       {[]int{0, 1}, []int{0, 2}, []int{0, 2}},
			"bounds short":      {[]int{0, 1}, []int{0, 1}, []int{0, 1}},
			"negative index":    {[]int{-1, 0}, []int{0, 1}, []int{0, 2}},
			"negative vector":   {[]int{0, 0}, []int{0, -1}, []int{0, 2}},
			"vector indices":    {[]int{0, 1, 2}, []int{0, 1}, []int{0, 3}},
			"ciphertext counts": {[]int{0, 1, 2}, []int{0, 1, 1}, []int{0, 2}},
		} {
			vals := [][]float64{make([]float64, slots), make([]float64, slots)}
			if _, err := c.dotEncodeParts(in, args.baby, args.vec, args.bounds, vals, top, 1<<36); err == nil {
				t.Fatalf("%s accepted", name)
			}
		}
	}
}

// Groups of parts stay within the rows' budget, a vector counted once per group; a part over it is a
// group of its own.
func TestPartGroups(t *testing.T) {
	bounds := []int{0, 2, 4, 10, 11, 12}
	vec := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 10}
	got := partGroups(bounds, vec, 10, 40)
	want := [][2]int{{0, 2}, {2, 3}, {3, 5}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("groups %v, want %v", got, want)
	}
	shared := []int{0, 1, 0, 1, 2, 3, 4, 5, 6, 7, 7, 7} // parts 0 and 1 read the same two vectors
	if got := partGroups(bounds, shared, 10, 20); !reflect.DeepEqual(got, [][2]int{{0, 2}, {2, 3}, {3, 5}}) {
		t.Fatalf("groups %v with shared vectors", got)
	}
	if got := partGroups(bounds, vec, 1, 1<<20); !reflect.DeepEqual(got, [][2]int{{0, 5}}) {
		t.Fatalf("groups %v, want one", got)
	}
}

// go test -run '^$' -bench DotEncodeParts: a BSGS layer's inner sums at N = 2^16 and 14 primes, 24 baby
// steps read by 8 giant steps (192 terms) at period slots/r (ResNet-20's stages: r = 2, 4, 8), in one
// call against one dotEncode per giant step.
func BenchmarkDotEncodeParts(b *testing.B) {
	const babies, giants = 24, 8
	logQ := []int{60, 40, 40, 40, 40, 40, 40, 40, 40, 40, 40, 40, 40, 40}
	c, in, _ := benchInputs(b, 16, logQ, []int{61, 61}, babies)
	slots, level := c.params.MaxSlots(), c.params.MaxLevel()
	scale := float64(c.params.Q()[level])
	baby, vec, bounds := make([]int, 0, babies*giants), make([]int, 0, babies*giants), []int{0}
	for g := 0; g < giants; g++ {
		for j := 0; j < babies; j++ {
			baby, vec = append(baby, j), append(vec, len(vec))
		}
		bounds = append(bounds, len(baby))
	}
	for _, r := range []int{2, 8} {
		vals := make([][]float64, len(baby))
		for t := range vals {
			vals[t] = make([]float64, slots/r)
			for x := range vals[t] {
				vals[t][x] = rand.Float64() - 0.5
			}
		}
		b.Run("parts/r="+string(rune('0'+r)), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := c.dotEncodeParts(in, baby, vec, bounds, vals, level, scale); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(baby))/1e3, "us/term")
		})
		b.Run("per-giant/r="+string(rune('0'+r)), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				for g := 0; g < giants; g++ {
					if _, err := c.dotEncode(in, vals[g*babies:(g+1)*babies], level, scale); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(baby))/1e3, "us/term")
		})
	}
}
