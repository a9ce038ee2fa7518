package main

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
)

// henn's insecure_boot_n12 preset: bootstrapping in a small ring, for tests only.
func testBootCtx(t *testing.T, keysAtUsage bool) (*ctxObj, *skObj, *pkObj, *btpKeyObj) {
	t.Helper()
	return testBootCtxSlots(t, keysAtUsage, 0)
}

// testBootCtxSlots: testBootCtx bootstrapping 2^logSlots slots (0: all, 2^11).
func testBootCtxSlots(t *testing.T, keysAtUsage bool, logSlots int) (*ctxObj, *skObj, *pkObj, *btpKeyObj) {
	t.Helper()
	c, err := newContext(12, nil, nil, []int{60, 40, 40, 40}, []int{61, 61}, 40, ring.Standard)
	if err != nil {
		t.Fatal(err)
	}
	lit := fmt.Sprintf(`{"log_message_ratio": 12, "log_slots": %d, "keys_at_usage_levels": %v}`, logSlots, keysAtUsage)
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
		bits := -math.Log2(maxError(t, c, sk, out, want) / 4)
		t.Logf("%s bootstrap: %.1f bits", name, bits)
		if bits < 19 {
			t.Errorf("%s bootstrap: %.1f bits of precision, want >= 19", name, bits)
		}
	}
	// the two-core DFT rounds its two partial sums separately, which EvalMod amplifies: the same
	// values to within the bootstrap's own error (measured 2^-23.5 of the range, N = 2^12)
	n := c.params.MaxSlots()
	seqRe, seqIm := make([]float64, n), make([]float64, n)
	if err := c.decode(c.decrypt(seq, sk), seqRe, seqIm); err != nil {
		t.Fatal(err)
	}
	if diff := maxError(t, c, sk, par, seqRe); diff > 4*math.Exp2(-21) {
		t.Fatalf("parallel and sequential bootstraps differ by %g (2^%.1f)", diff, math.Log2(diff))
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

func TestBootstrapKeysRoundTripAndRefuseForeignData(t *testing.T) {
	for _, atUsage := range []bool{true, false} {
		c, sk, pk, btp := testBootCtx(t, atUsage)
		data, err := marshal(btp)
		if err != nil {
			t.Fatal(err)
		}
		back, err := c.unmarshal(kindBootstrapKeys, data, 0, 0)
		if err != nil {
			t.Fatalf("keys at usage levels %v: %v", atUsage, err)
		}
		want, ct := encryptRandom(t, c, pk, 2, 1)
		out, err := back.(*btpKeyObj).bootstrap(ct, 2, true)
		if err != nil {
			t.Fatal(err)
		}
		if bits := -math.Log2(maxError(t, c, sk, out, want) / 2); bits < 19 {
			t.Errorf("deserialized keys bootstrap to %.1f bits, want >= 19", bits)
		}
		for _, cut := range []int{0, 1, len(data) / 3, len(data) - 1} {
			if _, err := c.unmarshal(kindBootstrapKeys, data[:cut], 0, 0); err == nil {
				t.Errorf("keys truncated to %d of %d bytes accepted", cut, len(data))
			}
		}
		bad := append([]byte{}, data...)
		bad[0] = 1 // announces a ring-switching key that is not there
		if _, err := c.unmarshal(kindBootstrapKeys, bad, 0, 0); err == nil {
			t.Error("a forged presence flag was accepted")
		}
		// keys made at the other choice of levels have other shapes
		_, _, _, otherBtp := testBootCtx(t, !atUsage)
		foreign, err := marshal(otherBtp)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.unmarshal(kindBootstrapKeys, foreign, 0, 0); err == nil {
			t.Error("keys of other bootstrapping key levels accepted")
		}
	}
	plain := testCtx(t)
	_, _, _, btp := testBootCtx(t, true)
	data, _ := marshal(btp)
	if _, err := plain.unmarshal(kindBootstrapKeys, data, 0, 0); err == nil {
		t.Error("a context without bootstrapping accepted bootstrapping keys")
	}
}

// Streamed factors give the kept factors' ciphertext bit for bit (full slots: both run henn's circuit), and
// with sparse slots (Lattigo's own circuit for kept factors) the same ciphertext on one core and on two,
// at the precision wanted.
func TestStreamedDFTMatchesCached(t *testing.T) {
	for _, logSlots := range []int{0, 10} {
		streamedMatchesCached(t, logSlots)
	}
}

func streamedMatchesCached(t *testing.T, logSlots int) {
	c, sk, pk, kept := testBootCtxSlots(t, true, logSlots)
	streamed := streamedKeys(t, c, kept)
	for _, lt := range append(streamed.eval.C2SDFTMatrix.Matrices, streamed.eval.S2CDFTMatrix.Matrices...) {
		if lt.Vec != nil {
			t.Fatal("a streamed DFT factor is still held encoded")
		}
	}
	want, ct := encryptRandom(t, c, pk, 4, 1)
	if logSlots > 0 { // a vector repeating every 2^logSlots slots
		for i := range want {
			want[i] = want[i%(1<<logSlots)]
		}
		pt, err := c.encode(want, make([]float64, len(want)), 1, math.Exp2(40))
		if err != nil {
			t.Fatal(err)
		}
		if ct, err = c.encrypt(pt, pk); err != nil {
			t.Fatal(err)
		}
	}
	a, err := kept.bootstrap(ct, 4, true)
	if err != nil {
		t.Fatal(err)
	}
	var first *ctObj
	for _, parallel := range []bool{true, false} { // streamed factors always run henn's circuit
		b, err := streamed.bootstrap(ct, 4, parallel)
		if err != nil {
			t.Fatal(err)
		}
		if logSlots == 0 && !a.ct.Equal(b.ct) {
			t.Fatalf("streamed DFT factors (parallel %v) give another ciphertext than kept ones", parallel)
		}
		if first != nil && !first.ct.Equal(b.ct) {
			t.Fatal("a streamed bootstrap on two cores gives another ciphertext than on one")
		}
		first = b
		if bits := -math.Log2(maxError(t, c, sk, b, want) / 4); bits < 19 {
			t.Errorf("%.1f bits of precision (2^%d slots, parallel %v), want >= 19", bits, logSlots, parallel)
		}
	}
	if bits := -math.Log2(maxError(t, c, sk, a, want) / 4); bits < 19 {
		t.Errorf("%.1f bits of precision, want >= 19", bits)
	}
}

// streamedKeys is an evaluator on kept's keys that streams its DFT factors.
func streamedKeys(t *testing.T, c *ctxObj, kept *btpKeyObj) *btpKeyObj {
	t.Helper()
	p, err := c.bootstrapParams()
	if err != nil {
		t.Fatal(err)
	}
	c.btpStreamDFT = true
	streamed, err := c.wrapBootstrapKeys(p, kept.keys)
	if err != nil {
		t.Fatal(err)
	}
	return streamed
}
