package main

import (
	"bytes"
	"math"
	"reflect"
	"testing"

	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/utils/sampling"
)

// The patched module's ThreadSafePRNG draws from the AES-CTR generator (lattigo_patch/sampling/drbg.go).
func TestThreadSafePRNGIsPatched(t *testing.T) {
	if _, ok := reflect.TypeOf(sampling.ThreadSafePRNG{}).FieldByName("drbg"); !ok {
		t.Fatal("sampling.ThreadSafePRNG has no drbg: the Lattigo patch did not apply")
	}
}

// Two generators give different streams; a stream read in uneven pieces looks uniform byte by byte (a
// chi-square test on 4 MiB: 255 degrees of freedom, mean 255, sd 22.6; the bound is 8 sd above the mean).
func TestThreadSafePRNGStreamsAreUniformAndIndependent(t *testing.T) {
	a, _ := sampling.NewPRNG()
	b, _ := sampling.NewPRNG()
	const size = 4 << 20
	outA, outB := make([]byte, size), make([]byte, size)
	for lo, step := 0, 1; lo < size; lo, step = lo+step, step*3%40000+1 {
		hi := min(lo+step, size)
		if n, err := a.Read(outA[lo:hi]); err != nil || n != hi-lo {
			t.Fatalf("read %d of %d bytes: %v", n, hi-lo, err)
		}
	}
	if _, err := b.Read(outB); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(outA[:64], outB[:64]) {
		t.Fatal("two generators gave the same stream")
	}
	var counts [256]float64
	for _, v := range outA {
		counts[v]++
	}
	expected, chi2 := float64(size)/256, 0.0
	for _, c := range counts {
		chi2 += (c - expected) * (c - expected) / expected
	}
	if chi2 > 255+8*math.Sqrt(2*255) {
		t.Fatalf("byte frequencies far from uniform: chi-square %.0f on 255 degrees of freedom", chi2)
	}
}

// henn's sampling loops (lattigo_patch/samplers.go) give Lattigo's polynomials for the same PRNG stream:
// uniform at every level, Gaussian (Read, ReadAndAdd, Montgomery form; Read overwrites what the
// polynomial held) over primes on both sides of 2^k.
func TestSamplersMatchLattigosLoops(t *testing.T) {
	gen := ring.NewNTTFriendlyPrimesGenerator(40, 1<<13)
	primes, err := gen.NextAlternatingPrimes(5)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ring.NewRing(1<<12, primes)
	if err != nil {
		t.Fatal(err)
	}
	xe := ring.DiscreteGaussian{Sigma: 3.2, Bound: 19}
	draw := func(reference bool, level int) []ring.Poly {
		ring.UseReferenceSamplers(reference)
		defer ring.UseReferenceSamplers(false)
		prng, _ := sampling.NewKeyedPRNG([]byte("henn sampler test"))
		rl := r.AtLevel(level)
		polys := []ring.Poly{rl.NewPoly(), rl.NewPoly(), rl.NewPoly(), rl.NewPoly(), rl.NewPoly()}
		ring.NewUniformSampler(prng, rl).Read(polys[0])
		ring.NewGaussianSampler(prng, rl, xe, false).Read(polys[1])
		ring.NewGaussianSampler(prng, rl, xe, true).Read(polys[2])
		ring.NewUniformSampler(prng, rl).Read(polys[3])
		ring.NewGaussianSampler(prng, rl, xe, false).ReadAndAdd(polys[3])
		ring.NewUniformSampler(prng, rl).Read(polys[4])
		ring.NewGaussianSampler(prng, rl, xe, false).Read(polys[4])
		return polys
	}
	for _, level := range []int{4, 2, 0} {
		want, got := draw(true, level), draw(false, level)
		for i := range want {
			if !want[i].Equal(&got[i]) {
				t.Fatalf("level %d, polynomial %d differs from Lattigo's sampler", level, i)
			}
		}
	}
}

// Keystream writes the keystream whatever p held (it never reads p), across its zero source's length.
func TestKeystreamOverwritesWithoutReading(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	const size = 200<<10 + 5 // more than three of Keystream's 64 KiB pieces, and a ragged end
	want := make([]byte, size)
	ref, err := newSeedStream(key)
	if err != nil {
		t.Fatal(err)
	}
	ref.XORKeyStream(want, want)
	got := bytes.Repeat([]byte{0xa5}, size)
	stream, _ := newSeedStream(key)
	sampling.Keystream(stream.Stream, got[:1000])
	sampling.Keystream(stream.Stream, got[1000:])
	if !bytes.Equal(got, want) {
		t.Fatal("Keystream differs from the keystream XORed onto zeros")
	}
}
