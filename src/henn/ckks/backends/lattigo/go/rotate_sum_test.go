package main

import (
	"math"
	"math/rand"
	"sync"
	"testing"

	"github.com/tuneinsight/lattigo/v6/ring"
)

// A rotation sum equals the sum of the separate rotations (and of the slots rotated in the clear):
// unrotated parts, repeated steps, more parts than the lazy reduction's margin, two special primes,
// parts added from several goroutines at once, on both rings.
func TestRotateSumMatchesRotations(t *testing.T) {
	for _, rt := range []ring.Type{ring.Standard, ring.ConjugateInvariant} {
		c, err := newContext(11, nil, nil, []int{55, 40, 40}, []int{61, 61}, 40, rt)
		if err != nil {
			t.Fatal(err)
		}
		sk := c.genSecretKey()
		pk := c.genPublicKey(sk)
		steps := []int64{0, 1, 3, 7, 0, 3, 100, 1, 5, 5, 64, 7, 1, 9, 3, 0, 11, 100, 13, 1}
		gk, err := c.genGaloisKeys(sk, []int64{1, 3, 5, 7, 9, 11, 13, 64, 100}, false)
		if err != nil {
			t.Fatal(err)
		}
		slots := c.params.MaxSlots()
		rng := rand.New(rand.NewSource(int64(rt) + 11))
		want := make([]float64, slots)
		parts := make([]*ctObj, len(steps))
		for i, s := range steps {
			re, im := make([]float64, slots), make([]float64, slots)
			for j := range re {
				re[j] = rng.Float64()*2 - 1
			}
			for j := range want {
				want[j] += re[(j+int(s))%slots]
			}
			pt, err := c.encode(re, im, 1, math.Exp2(40))
			if err != nil {
				t.Fatal(err)
			}
			if parts[i], err = c.encrypt(pt, pk); err != nil {
				t.Fatal(err)
			}
		}
		sum := c.newRotateSum(gk)
		var wg sync.WaitGroup
		errs := make([]error, len(parts))
		for i := range parts {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				errs[i] = sum.add(parts[i], steps[i])
			}(i)
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		got, err := sum.result()
		if err != nil {
			t.Fatal(err)
		}
		// the separate rotations, summed
		sep := parts[0]
		for i := 1; i < len(parts); i++ {
			r := parts[i]
			if steps[i] != 0 {
				if r, err = c.rotate(parts[i], steps[i], gk); err != nil {
					t.Fatal(err)
				}
			}
			if sep, err = c.add(sep, r); err != nil {
				t.Fatal(err)
			}
		}
		for name, ct := range map[string]*ctObj{"rotation sum": got, "separate rotations": sep} {
			re, im := make([]float64, slots), make([]float64, slots)
			if err := c.decode(c.decrypt(ct, sk), re, im); err != nil {
				t.Fatal(err)
			}
			worst := 0.0
			for j := range want {
				worst = math.Max(worst, math.Abs(re[j]-want[j]))
			}
			if worst > 1e-5 {
				t.Fatalf("ring %v, %s: max error %.3g against the slots rotated in the clear", rt, name, worst)
			}
		}
		if got.ct.Level() != 1 || got.ct.Scale.Cmp(parts[0].ct.Scale) != 0 {
			t.Fatalf("level %d scale %v, expected the parts' level 1 and scale", got.ct.Level(), got.ct.Scale)
		}
		if _, err := sum.result(); err == nil {
			t.Fatal("a rotation sum read twice")
		}
		if err := sum.add(parts[0], 1); err == nil {
			t.Fatal("a part added to a rotation sum already read")
		}
	}
}

// Parts of different levels, a missing key and an empty sum are refused with an error.
func TestRotateSumRefusesBadParts(t *testing.T) {
	c := testCtx(t)
	k := testKeys(t, c)
	a := encryptConst(t, c, k, 1, math.Exp2(36))
	low, err := c.dropLevel(a, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.newRotateSum(k.gk).result(); err == nil {
		t.Fatal("an empty rotation sum gave a value")
	}
	sum := c.newRotateSum(k.gk)
	if err := sum.add(a, 1); err != nil {
		t.Fatal(err)
	}
	if err := sum.add(low, 5); err == nil {
		t.Fatal("parts of two levels accepted")
	}
	if err := sum.add(a, 2); err == nil {
		t.Fatal("a rotation without its Galois key accepted")
	}
	if err := sum.add(a, int64(c.params.MaxSlots())); err == nil {
		t.Fatal("an unnormalized step accepted")
	}
	got, err := sum.result()
	if err != nil {
		t.Fatal(err)
	}
	if v := decryptFirst(t, c, k, got); !near(v, 1) {
		t.Fatalf("the sum of the accepted part is %v, expected 1", v)
	}
}

// go test -run XXX -bench Rotations: 8 rotations at N = 2^16 on boot-n16's chain (60 + 40 x 13, P 61 x 14) at
// level 9: summed by separate rotations and additions, and by one rotation sum; hoisted by Lattigo's
// RotateHoisted (one goroutine) and by the bridge's (GOMAXPROCS goroutines).
func BenchmarkRotations(b *testing.B) {
	logQ := append([]int{60}, make([]int, 13)...)
	for i := 1; i < len(logQ); i++ {
		logQ[i] = 40
	}
	logP := make([]int, 14)
	for i := range logP {
		logP[i] = 61
	}
	c, err := newContext(16, nil, nil, logQ, logP, 40, ring.Standard)
	if err != nil {
		b.Fatal(err)
	}
	sk := c.genSecretKey()
	steps := []int64{64, 128, 192, 256, 320, 384, 448, 512}
	gk, err := c.genGaloisKeys(sk, steps, false)
	if err != nil {
		b.Fatal(err)
	}
	slots := c.params.MaxSlots()
	re, im := make([]float64, slots), make([]float64, slots)
	for i := range re {
		re[i] = float64(i%17)/17 - 0.5
	}
	pt, err := c.encode(re, im, 9, math.Exp2(40))
	if err != nil {
		b.Fatal(err)
	}
	ct, err := c.encryptSymmetric(pt, sk)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("sum/separate", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			acc := ct
			for _, s := range steps {
				r, err := c.rotate(ct, s, gk)
				if err != nil {
					b.Fatal(err)
				}
				if acc, err = c.add(acc, r); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	rots := make([]int, len(steps))
	for i, s := range steps {
		rots[i] = int(s)
	}
	b.Run("hoisted/lattigo", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := gk.eval.RotateHoistedNew(ct.ct, rots); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("hoisted/bridge", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := c.rotateHoisted(ct, steps, gk); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sum/lazy", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			sum := c.newRotateSum(gk)
			_ = sum.add(ct, 0)
			for _, s := range steps {
				if err := sum.add(ct, s); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := sum.result(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
