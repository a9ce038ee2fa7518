package main

import (
	"fmt"
	"math"
	"runtime"
	"testing"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
)

// A key switch on two goroutines (lattigo_patch/rlwe/parallel.go) gives Lattigo's one-goroutine ciphertext bit
// for bit: rotations, relinearizations, hoisted rotations and the sums of rotations, at levels with an even
// and an odd number of digits, one digit (where it stays on one goroutine), full and seeded keys.
func TestParallelKeySwitchIsLattigos(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	defer rlwe.SetParallelKeySwitch(true)
	defer func(was bool) { seededKeys = was }(seededKeys)
	logQ := []int{50, 36, 36, 36, 36, 36, 36, 36, 36}
	for _, seeded := range []bool{false, true} {
		c, err := newContext(12, nil, nil, logQ, []int{50, 50}, 36, ring.Standard)
		if err != nil {
			t.Fatal(err)
		}
		seededKeys = seeded
		sk := c.genSecretKey()
		steps := []int64{1, 5, 100}
		gk, err := c.genGaloisKeys(sk, steps, false)
		if err != nil {
			t.Fatal(err)
		}
		rk := c.genRelinKey(sk)
		slots := c.params.MaxSlots()
		re, im := make([]float64, slots), make([]float64, slots)
		for i := range re {
			re[i] = math.Sin(float64(i)) / 2
		}
		// 9, 8, 5, 2 and 1 primes: 5, 4, 3, 1 and 1 digits of two primes
		for _, level := range []int{8, 7, 4, 1, 0} {
			pt, err := c.encode(re, im, level, math.Exp2(36))
			if err != nil {
				t.Fatal(err)
			}
			ct, err := c.encryptSymmetric(pt, sk)
			if err != nil {
				t.Fatal(err)
			}
			run := func() []*ctObj {
				rot, err := c.rotate(ct, 5, gk)
				if err != nil {
					t.Fatal(err)
				}
				prod, err := c.mul(ct, rot, rk)
				if err != nil {
					t.Fatal(err)
				}
				hoisted, err := c.rotateHoisted(ct, steps, gk)
				if err != nil {
					t.Fatal(err)
				}
				acc := c.newRotateSum(gk)
				for i, x := range []*ctObj{ct, rot, hoisted[0]} {
					if err := acc.add(x, steps[i]); err != nil {
						t.Fatal(err)
					}
				}
				sum, err := acc.result()
				if err != nil {
					t.Fatal(err)
				}
				return append([]*ctObj{rot, prod, sum}, hoisted...)
			}
			rlwe.SetParallelKeySwitch(false)
			want := run()
			rlwe.SetParallelKeySwitch(true)
			got := run()
			for i := range want {
				what := fmt.Sprintf("seeded keys %v, level %d, result %d", seeded, level, i)
				for k := range want[i].ct.Value {
					if !want[i].ct.Value[k].Equal(&got[i].ct.Value[k]) {
						t.Fatalf("%s: polynomial %d differs from the one-goroutine key switch", what, k)
					}
				}
			}
		}
	}
}
