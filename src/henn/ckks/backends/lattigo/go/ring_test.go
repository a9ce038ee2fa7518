package main

import (
	"math"
	"math/bits"
	"testing"

	"github.com/tuneinsight/lattigo/v6/ring"
)

// The conjugate-invariant ring: N real slots on ring degree N, primes = 1 mod 4N, rotations over
// N slots, conjugation the identity (no key).
func TestConjugateInvariantRing(t *testing.T) {
	const logN = 11
	c, err := newContext(logN, nil, nil, []int{50, 36, 36}, []int{50}, 36, ring.ConjugateInvariant)
	if err != nil {
		t.Fatal(err)
	}
	n := c.params.MaxSlots()
	if n != 1<<logN || !c.realSlots() {
		t.Fatalf("%d slots (real: %v), want %d real slots", n, c.realSlots(), 1<<logN)
	}
	for _, p := range append(append([]uint64{}, c.params.Q()...), c.params.P()...) {
		if p%(uint64(4)<<logN) != 1 || bits.Len64(p) < 36 {
			t.Fatalf("prime %d is not = 1 mod 4N", p)
		}
	}
	sk := c.genSecretKey()
	pk := c.genPublicKey(sk)
	gk, err := c.genGaloisKeys(sk, []int64{3}, true)
	if err != nil {
		t.Fatal(err)
	}
	if miss, err := c.missingGalois(gk, []int64{3}, true); err != nil || len(miss) != 0 {
		t.Fatalf("missing keys %v (%v)", miss, err)
	}
	re, im := make([]float64, n), make([]float64, n)
	for i := range re {
		re[i] = float64(i%97)/97 - 0.5
	}
	pt, err := c.encode(re, im, c.params.MaxLevel(), math.Exp2(36))
	if err != nil {
		t.Fatal(err)
	}
	ct, err := c.encrypt(pt, pk)
	if err != nil {
		t.Fatal(err)
	}
	rot, err := c.rotate(ct, 3, gk)
	if err != nil {
		t.Fatal(err)
	}
	conj, err := c.conjugate(rot, gk)
	if err != nil {
		t.Fatal(err)
	}
	gotRe, gotIm := make([]float64, n), make([]float64, n)
	if err := c.decode(c.decrypt(conj, sk), gotRe, gotIm); err != nil {
		t.Fatal(err)
	}
	for i := range gotRe {
		if math.Abs(gotRe[i]-re[(i+3)%n]) > 1e-5 || math.Abs(gotIm[i]) > 1e-9 {
			t.Fatalf("slot %d: got %v%+vi, want %v", i, gotRe[i], gotIm[i], re[(i+3)%n])
		}
	}
}
