package main

import (
	"math"
	"math/rand"
	"testing"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// genericLC is the generic fallback: one mulScalar and one add per nonzero term.
func genericLC(t *testing.T, c *ctxObj, in []*ctObj, w []float64, scale float64) *ctObj {
	t.Helper()
	var acc *ctObj
	for i, a := range in {
		if w[i] == 0 {
			continue
		}
		term, err := c.mulScalar(a, w[i], 0, scale)
		if err != nil {
			t.Fatal(err)
		}
		if acc == nil {
			acc = term
		} else if acc, err = c.add(acc, term); err != nil {
			t.Fatal(err)
		}
	}
	if acc == nil {
		var err error
		if acc, err = c.mulScalar(in[0], 0, 0, scale); err != nil {
			t.Fatal(err)
		}
	}
	return acc
}

func sameCiphertext(t *testing.T, what string, got, want *rlwe.Ciphertext) {
	t.Helper()
	if got.Level() != want.Level() || got.Degree() != want.Degree() || got.IsNTT != want.IsNTT {
		t.Fatalf("%s: level/degree/domain %d/%d/%v, want %d/%d/%v", what, got.Level(), got.Degree(), got.IsNTT,
			want.Level(), want.Degree(), want.IsNTT)
	}
	if got.Scale.Cmp(want.Scale) != 0 {
		t.Fatalf("%s: scale 2^%.6f, want 2^%.6f", what, got.Scale.Log2(), want.Scale.Log2())
	}
	for d := range want.Value {
		for j := range want.Value[d].Coeffs {
			for x, v := range want.Value[d].Coeffs[j] {
				if got.Value[d].Coeffs[j][x] != v {
					t.Fatalf("%s: poly %d limb %d coeff %d = %d, want %d", what, d, j, x, got.Value[d].Coeffs[j][x], v)
				}
			}
		}
	}
}

func TestLinearCombinationsMatchGeneric(t *testing.T) {
	c := testCtx(t)
	k := testKeys(t, c)
	rng := rand.New(rand.NewSource(7))
	s := math.Exp2(36)
	top := c.params.MaxLevel()
	base := make([]*ctObj, 6)
	for i := range base {
		base[i] = encryptConst(t, c, k, rng.Float64()*2-1, s)
	}
	for _, level := range []int{top, 2, 0} {
		in := make([]*ctObj, len(base))
		for i, a := range base {
			var err error
			if in[i], err = c.dropLevel(a, top-level); err != nil {
				t.Fatal(err)
			}
		}
		q := float64(c.params.Q()[level])
		for _, scale := range []float64{q, 3.0e9, 1, 12345.678} {
			m, kk := 4, len(in)
			w := make([]float64, m*kk)
			for i := range w {
				switch rng.Intn(4) {
				case 0: // zero: skipped
				case 1:
					w[i] = float64(rng.Intn(7) - 3) // integers, incl. negative
				default:
					w[i] = rng.NormFloat64()
				}
			}
			for i := range w[3*kk:] { // the last row: all zero
				w[3*kk+i] = 0
			}
			outs, err := c.linearCombinations(in, w, m, level, scale)
			if err != nil {
				t.Fatal(err)
			}
			for o := 0; o < m; o++ {
				want := genericLC(t, c, in, w[o*kk:(o+1)*kk], scale)
				sameCiphertext(t, "row", outs[o].ct, want.ct)
			}
			// The 128-bit accumulator's intermediate reductions, forced.
			plan, err := c.newLCPlan(w, m, kk, level, scale)
			if err != nil {
				t.Fatal(err)
			}
			for j := range plan.chunk {
				plan.chunk[j] = 1 + j%2
			}
			for _, ifma := range []bool{false, hasIFMA()} { // the portable Go kernel, and IFMA where the CPU has it
				c.accumulate(plan, in, outs, ifma)
				for o := 0; o < m; o++ {
					sameCiphertext(t, "chunked row", outs[o].ct, genericLC(t, c, in, w[o*kk:(o+1)*kk], scale).ct)
				}
			}
			plan.chunk = append([]int(nil), plan.chunk...)
			for j := range plan.chunk {
				plan.chunk[j] = math.MaxInt32
			}
			c.accumulate(plan, in, outs, false)
			for o := 0; o < m; o++ {
				sameCiphertext(t, "go kernel row", outs[o].ct, genericLC(t, c, in, w[o*kk:(o+1)*kk], scale).ct)
			}
		}
	}
}

func TestLinearCombinationsRejects(t *testing.T) {
	c := testCtx(t)
	k := testKeys(t, c)
	s := math.Exp2(36)
	a := encryptConst(t, c, k, 0.5, s)
	low, _ := c.dropLevel(a, 1)
	if _, err := c.linearCombinations([]*ctObj{a, low}, []float64{1, 1}, 1, a.ct.Level(), s); err == nil {
		t.Fatal("mixed levels accepted")
	}
	if _, err := c.linearCombinations([]*ctObj{a}, []float64{1, 1}, 1, a.ct.Level(), s); err == nil {
		t.Fatal("wrong weight count accepted")
	}
	if _, err := c.linearCombinations([]*ctObj{a}, []float64{math.NaN()}, 1, a.ct.Level(), s); err == nil {
		t.Fatal("NaN weight accepted")
	}
	if _, err := c.linearCombinations([]*ctObj{a}, []float64{1}, 1, a.ct.Level(), 0.5); err == nil {
		t.Fatal("scale < 1 accepted")
	}
	sq, err := c.mul(a, a, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.linearCombinations([]*ctObj{sq, a}, []float64{1, 1}, 1, a.ct.Level(), s); err == nil {
		t.Fatal("inputs of degrees 2 and 1 accepted")
	}
}

// Degree-2 inputs (squares not relinearized): every one of the three polynomials is combined, bit for
// bit the generic path, and the outputs decrypt to the weighted sums of the squares.
func TestLinearCombinationsOfDegreeTwo(t *testing.T) {
	c := testCtx(t)
	k := testKeys(t, c)
	rng := rand.New(rand.NewSource(11))
	s := math.Exp2(36)
	level := c.params.MaxLevel()
	values := make([]float64, 5)
	in := make([]*ctObj, len(values))
	for i := range in {
		values[i] = rng.Float64()*2 - 1
		a := encryptConst(t, c, k, values[i], s)
		var err error
		if in[i], err = c.mul(a, a, nil); err != nil {
			t.Fatal(err)
		}
	}
	m := 3
	w := make([]float64, m*len(in))
	for i := range w {
		w[i] = rng.NormFloat64()
	}
	q := float64(c.params.Q()[level])
	outs, err := c.linearCombinations(in, w, m, level, q)
	if err != nil {
		t.Fatal(err)
	}
	for o := 0; o < m; o++ {
		if outs[o].ct.Degree() != 2 {
			t.Fatalf("output %d has degree %d, want 2", o, outs[o].ct.Degree())
		}
		sameCiphertext(t, "degree-2 row", outs[o].ct, genericLC(t, c, in, w[o*len(in):(o+1)*len(in)], q).ct)
		want := 0.0
		for i, v := range values {
			want += w[o*len(in)+i] * v * v
		}
		relin, err := c.relinearize(outs[o], k.rk)
		if err != nil {
			t.Fatal(err)
		}
		if got := real(decryptFirst(t, c, k, relin)); math.Abs(got-want) > 1e-6 {
			t.Fatalf("output %d decrypts to %g, want %g", o, got, want)
		}
	}
}

// benchInputs: a context and k fresh encryptions of one random plaintext (encoded at scale q_top).
func benchInputs(b *testing.B, logN int, logQ, logP []int, k int) (*ctxObj, []*ctObj, *ptObj) {
	c, err := newContext(logN, nil, nil, logQ, logP, 45, ring.Standard)
	if err != nil {
		b.Fatal(err)
	}
	pk := c.genPublicKey(c.genSecretKey())
	re, im := make([]float64, c.params.MaxSlots()), make([]float64, c.params.MaxSlots())
	for i := range re {
		re[i] = rand.NormFloat64()
	}
	level := c.params.MaxLevel()
	pt, err := c.encode(re, im, level, float64(c.params.Q()[level]))
	if err != nil {
		b.Fatal(err)
	}
	in := make([]*ctObj, k)
	for i := range in {
		if in[i], err = c.encrypt(pt, pk); err != nil {
			b.Fatal(err)
		}
	}
	return c, in, pt
}

func BenchmarkLinearCombinations(b *testing.B) {
	const kk, m = 125, 32
	c, in, _ := benchInputs(b, 14, []int{55, 45, 45, 45}, []int{61}, kk)
	w := make([]float64, m*kk)
	for i := range w {
		w[i] = rand.NormFloat64()
	}
	level := c.params.MaxLevel()
	plan, err := c.newLCPlan(w, m, kk, level, float64(c.params.Q()[level]))
	if err != nil {
		b.Fatal(err)
	}
	outs, _ := c.linearCombinations(in, w, m, level, float64(c.params.Q()[level]))
	for _, ifma := range []bool{false, true} {
		if ifma && !hasIFMA() {
			continue
		}
		b.Run(map[bool]string{false: "go", true: "ifma"}[ifma], func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				c.accumulate(plan, in, outs, ifma)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*m*kk)/1e3, "us/term")
		})
	}
}

// lattigoDot: Lattigo's own MulThenAdd chain, the reference for dotPlain.
func lattigoDot(t testing.TB, c *ctxObj, in []*ctObj, pts []*ptObj) *rlwe.Ciphertext {
	acc := ckks.NewCiphertext(c.params, 1, in[0].ct.Level())
	if err := c.eval.Mul(in[0].ct, pts[0].pt, acc); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(in); i++ {
		if err := c.eval.MulThenAdd(in[i].ct, pts[i].pt, acc); err != nil {
			t.Fatal(err)
		}
	}
	return acc
}

func TestDotPlainMatchesMulThenAdd(t *testing.T) {
	c := testCtx(t)
	k := testKeys(t, c)
	rng := rand.New(rand.NewSource(3))
	s := math.Exp2(36)
	top := c.params.MaxLevel()
	for _, terms := range []int{1, 2, 5} {
		for _, level := range []int{top, 0} {
			in := make([]*ctObj, terms)
			pts := make([]*ptObj, terms)
			for i := range in {
				a := encryptConst(t, c, k, rng.Float64()*2-1, s)
				var err error
				if in[i], err = c.dropLevel(a, top-level); err != nil {
					t.Fatal(err)
				}
				re, im := make([]float64, c.params.MaxSlots()), make([]float64, c.params.MaxSlots())
				for x := range re {
					re[x] = rng.NormFloat64()
				}
				if pts[i], err = c.encode(re, im, level, float64(c.params.Q()[level])); err != nil {
					t.Fatal(err)
				}
			}
			want := lattigoDot(t, c, in, pts)
			for _, native := range []bool{false, hasNativeDot()} { // the Go kernel, and C's where it builds
				for _, chunk := range []int{0, 1, 2} { // and the intermediate reductions, forced
					got, err := c.dotPlainWith(in, pts, native, chunk)
					if err != nil {
						t.Fatal(err)
					}
					sameCiphertext(t, "dot", got.ct, want)
				}
			}
		}
	}
	a := encryptConst(t, c, k, 0.5, s)
	low, _ := c.dropLevel(a, 1)
	pt, _ := c.encode(make([]float64, c.params.MaxSlots()), make([]float64, c.params.MaxSlots()), top, s)
	if _, err := c.dotPlain([]*ctObj{a, low}, []*ptObj{pt, pt}); err == nil {
		t.Fatal("mixed levels accepted")
	}
	if _, err := c.dotPlain([]*ctObj{a}, nil); err == nil {
		t.Fatal("missing plaintext accepted")
	}
}

func TestProductChunk(t *testing.T) {
	if got := productChunk(1<<61 - 1); got != 64 {
		t.Fatalf("61-bit prime: %d terms per reduction, want 64", got)
	}
	if got := productChunk(1<<45 + 1); got != 1<<38 && got != math.MaxInt32 {
		t.Fatalf("45-bit prime: %d", got)
	}
}

func benchDot(b *testing.B, own, native bool) {
	const terms = 16
	c, in, pt := benchInputs(b, 15, []int{55, 45, 45, 45, 45, 45, 45, 45}, []int{61, 61}, terms)
	pts := make([]*ptObj, terms)
	for i := range pts {
		pts[i] = pt
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if own {
			if _, err := c.dotPlainWith(in, pts, native, 0); err != nil {
				b.Fatal(err)
			}
		} else {
			lattigoDot(b, c, in, pts)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*terms)/1e3, "us/term")
}

func BenchmarkDotPlainC(b *testing.B)       { benchDot(b, true, true) }
func BenchmarkDotPlainGo(b *testing.B)      { benchDot(b, true, false) }
func BenchmarkDotPlainLattigo(b *testing.B) { benchDot(b, false, false) }
