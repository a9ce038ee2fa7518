package main

import (
	"fmt"
	"math"
	"testing"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
)

// Seeded Galois keys (lattigo_patch/rlwe/seeded.go) against their own expansion: the same b halves with
// the a halves written out by Lattigo's Expand, which the patch routes to the per-prime streams. A key
// switch regenerates only the primes and digits it reads, so rotations at every level, single and
// hoisted, must equal those of the expanded key bit for bit; and the seeded key must still be one.

func seededTestCtxs(t *testing.T) map[string]*ctxObj {
	t.Helper()
	out := map[string]*ctxObj{}
	for name, logP := range map[string][]int{"two special primes": {61, 61}, "one special prime": {61}} {
		c, err := newContext(11, nil, nil, []int{55, 40, 40, 40}, logP, 40, ring.Standard)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = c
	}
	return out
}

// expanded: gk's keys with their a halves written out (Lattigo's Expand) and no seed.
func expanded(t *testing.T, c *ctxObj, gk *gkObj) *gkObj {
	t.Helper()
	var keys []*rlwe.GaloisKey
	for _, key := range gk.set.GaloisKeys {
		if key.Seed == nil || len(key.Value[0][0]) != 1 {
			t.Fatalf("key %d is not seeded: %d polynomials an element", key.GaloisElement, len(key.Value[0][0]))
		}
		full := key.CopyNew()
		if err := full.EvaluationKey.Expand(c.params, nil); err != nil {
			t.Fatal(err)
		}
		full.GadgetCiphertext.Seed = nil
		keys = append(keys, full)
	}
	return c.wrapGaloisKeys(keys...)
}

func TestSeededKeysRotateAsTheirExpansion(t *testing.T) {
	if !seededKeys {
		t.Fatal("keys are made seeded by default")
	}
	steps := []int64{1, 3, 8}
	for name, c := range seededTestCtxs(t) {
		sk := c.genSecretKey()
		gk, err := c.genGaloisKeys(sk, steps, true)
		if err != nil {
			t.Fatal(err)
		}
		full := expanded(t, c, gk)
		slots := c.params.MaxSlots()
		re, im := make([]float64, slots), make([]float64, slots)
		for i := range re {
			re[i], im[i] = math.Sin(float64(i)), math.Cos(float64(2*i))
		}
		for level := c.params.MaxLevel(); level >= 0; level-- {
			pt, err := c.encode(re, im, level, math.Exp2(40))
			if err != nil {
				t.Fatal(err)
			}
			a, err := c.encryptSymmetric(pt, sk)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range steps {
				got, err1 := c.rotate(a, s, gk)
				want, err2 := c.rotate(a, s, full)
				if err1 != nil || err2 != nil {
					t.Fatal(err1, err2)
				}
				sameCiphertext(t, fmt.Sprintf("%s, level %d, rotation by %d", name, level, s), got.ct, want.ct)
				out := c.decrypt(got, sk)
				gr, gi := make([]float64, slots), make([]float64, slots)
				if err := c.decode(out, gr, gi); err != nil {
					t.Fatal(err)
				}
				for i := 0; i < slots; i += 97 {
					j := (i + int(s)) % slots
					if math.Abs(gr[i]-re[j]) > 1e-5 || math.Abs(gi[i]-im[j]) > 1e-5 {
						t.Fatalf("%s, level %d: slot %d of the rotation by %d is %g%+gi, not %g%+gi", name, level,
							i, s, gr[i], gi[i], re[j], im[j])
					}
				}
			}
			got, err1 := c.rotateHoisted(a, steps, gk)
			want, err2 := c.rotateHoisted(a, steps, full)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			for i := range steps {
				sameCiphertext(t, fmt.Sprintf("%s, level %d, hoisted rotation by %d", name, level, steps[i]),
					got[i].ct, want[i].ct)
			}
		}
	}
}

func TestSeededKeysTravelSeeded(t *testing.T) {
	c := seededTestCtxs(t)["two special primes"]
	sk := c.genSecretKey()
	gk, err := c.genGaloisKeys(sk, []int64{1, 5}, false)
	if err != nil {
		t.Fatal(err)
	}
	seededBytes, err := marshal(gk)
	if err != nil {
		t.Fatal(err)
	}
	full := expanded(t, c, gk)
	fullBytes, err := marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	if ratio := float64(len(seededBytes)) / float64(len(fullBytes)); ratio > 0.51 {
		t.Fatalf("seeded keys take %d bytes, %.2f of the full keys' %d", len(seededBytes), ratio, len(fullBytes))
	}
	for _, data := range [][]byte{seededBytes, fullBytes} { // both forms are read
		back, err := c.unmarshal(kindGaloisKeys, data, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		pt, err := c.encode([]float64{1, 2, 3, 4}, []float64{0, 0, 0, 0}, c.params.MaxLevel(), math.Exp2(40))
		if err != nil {
			t.Fatal(err)
		}
		a, err := c.encryptSymmetric(pt, sk)
		if err != nil {
			t.Fatal(err)
		}
		got, err1 := c.rotate(a, 5, back.(*gkObj))
		want, err2 := c.rotate(a, 5, gk)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		sameCiphertext(t, "keys read back against the keys written", got.ct, want.ct)
	}
	// a seeded key without its seed, or with a cut one, is refused before Lattigo reads it
	for _, bad := range [][]byte{seededBytes[:len(seededBytes)-1], seededBytes[:len(seededBytes)-32]} {
		if _, err := c.unmarshal(kindGaloisKeys, bad, 0, 0); err == nil {
			t.Fatal("a truncated seeded key set was accepted")
		}
	}
}
