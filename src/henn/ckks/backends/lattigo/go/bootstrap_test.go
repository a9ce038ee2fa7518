package main

import (
	"math"
	"math/rand"
	"testing"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
)

// henn's insecure_boot_n12 preset: bootstrapping in a small ring, for tests only.
func testBootCtx(t *testing.T, keysAtUsage bool) (*ctxObj, *skObj, *pkObj, *btpKeyObj) {
	t.Helper()
	c, err := newContext(12, nil, nil, []int{60, 40, 40, 40}, []int{61, 61}, 40, ring.Standard)
	if err != nil {
		t.Fatal(err)
	}
	lit := `{"log_message_ratio": 12, "keys_at_usage_levels": ` + map[bool]string{true: "true", false: "false"}[keysAtUsage] + `}`
	info, err := c.enableBootstrapping([]byte(lit))
	if err != nil {
		t.Fatal(err)
	}
	if info.OutputLevel != 3 || info.Depth != 15 || info.LogQP <= 0 {
		t.Fatalf("unexpected bootstrapping parameters %+v", info)
	}
	if _, err := c.enableBootstrapping([]byte(lit)); err == nil {
		t.Fatal("bootstrapping enabled twice on one context")
	}
	sk := c.genSecretKey()
	btp, err := c.genBootstrapKeys(sk)
	if err != nil {
		t.Fatal(err)
	}
	return c, sk, c.genPublicKey(sk), btp
}

func encryptRandom(t *testing.T, c *ctxObj, pk *pkObj, bound float64, level int) ([]float64, *ctObj) {
	t.Helper()
	n := c.params.MaxSlots()
	rng := rand.New(rand.NewSource(3))
	re, im := make([]float64, n), make([]float64, n)
	for i := range re {
		re[i] = bound * (2*rng.Float64() - 1)
	}
	pt, err := c.encode(re, im, level, math.Exp2(40))
	if err != nil {
		t.Fatal(err)
	}
	ct, err := c.encrypt(pt, pk)
	if err != nil {
		t.Fatal(err)
	}
	return re, ct
}

func maxError(t *testing.T, c *ctxObj, sk *skObj, ct *ctObj, want []float64) float64 {
	t.Helper()
	n := c.params.MaxSlots()
	re, im := make([]float64, n), make([]float64, n)
	if err := c.decode(c.decrypt(ct, sk), re, im); err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for i := range re {
		worst = math.Max(worst, math.Hypot(re[i]-want[i], im[i]))
	}
	return worst
}

func TestBootstrapPrecisionAndParallelHalves(t *testing.T) {
	c, sk, pk, btp := testBootCtx(t, true)
	want, ct := encryptRandom(t, c, pk, 4, 1)
	seq, err := btp.bootstrap(ct, 4, false)
	if err != nil {
		t.Fatal(err)
	}
	par, err := btp.bootstrap(ct, 4, true)
	if err != nil {
		t.Fatal(err)
	}
	if seq.ct.Level() != 3 || par.ct.Level() != 3 {
		t.Fatalf("bootstrapped to levels %d and %d, want 3", seq.ct.Level(), par.ct.Level())
	}
	if got := seq.ct.Scale.Float64(); math.Abs(got/math.Exp2(38)-1) > 1e-12 {
		t.Fatalf("output scale %g, want 2^40 / 4", got)
	}
	for name, out := range map[string]*ctObj{"sequential": seq, "parallel": par} {
		if bits := -math.Log2(maxError(t, c, sk, out, want) / 4); bits < 19 {
			t.Errorf("%s bootstrap: %.1f bits of precision, want >= 19", name, bits)
		}
	}
	for i := range seq.ct.Value {
		for j := range seq.ct.Value[i].Coeffs {
			for k, v := range seq.ct.Value[i].Coeffs[j] {
				if par.ct.Value[i].Coeffs[j][k] != v {
					t.Fatal("parallel and sequential bootstraps differ")
				}
			}
		}
	}
}

func TestBootstrapRefusesBadInput(t *testing.T) {
	c, _, pk, btp := testBootCtx(t, true)
	_, ct := encryptRandom(t, c, pk, 1, 0)
	if _, err := btp.bootstrap(ct, 1, true); err == nil {
		t.Error("a level-0 ciphertext was bootstrapped")
	}
	_, ct = encryptRandom(t, c, pk, 1, 2)
	for _, bad := range []float64{0, -1, math.Inf(1), math.NaN()} {
		if _, err := btp.bootstrap(ct, bad, true); err == nil {
			t.Errorf("range %v accepted", bad)
		}
	}
	deg2 := &ctObj{c: c, ct: rlwe.NewCiphertext(c.params, 2, 2)}
	if _, err := btp.bootstrap(deg2, 1, true); err == nil {
		t.Error("a degree-2 ciphertext was bootstrapped")
	}
	plain := testCtx(t)
	if _, err := plain.bootstrapParams(); err == nil {
		t.Error("a context without bootstrapping reported parameters")
	}
	if _, err := plain.enableBootstrapping([]byte("{not json")); err == nil {
		t.Error("malformed literal accepted")
	}
}

func TestBootstrapKeysAtUsageLevelsAreSmaller(t *testing.T) {
	_, _, _, low := testBootCtx(t, true)
	_, _, _, top := testBootCtx(t, false)
	if a, b := low.bootstrapKeyBytes(), top.bootstrapKeyBytes(); a >= b {
		t.Fatalf("keys at usage levels take %d bytes, at the top %d", a, b)
	}
}
