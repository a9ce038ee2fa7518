package main

import (
	"encoding/binary"
	"math"
	"math/big"
	"math/bits"
	"math/rand"
	"sync"
	"testing"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
)

// A small insecure context (N = 2^11) like henn's insecure_short_d4 preset: fast tests only.
func testCtx(t *testing.T) *ctxObj {
	t.Helper()
	c, err := newContext(11, nil, nil, []int{50, 36, 36, 36, 36}, []int{50}, 36, ring.Standard)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type keys struct {
	sk *skObj
	pk *pkObj
	rk *rlkObj
	gk *gkObj
}

func testKeys(t *testing.T, c *ctxObj) keys {
	t.Helper()
	sk := c.genSecretKey()
	gk, err := c.genGaloisKeys(sk, []int64{1, 5}, true)
	if err != nil {
		t.Fatal(err)
	}
	return keys{sk, c.genPublicKey(sk), c.genRelinKey(sk), gk}
}

func encryptConst(t *testing.T, c *ctxObj, k keys, v float64, scale float64) *ctObj {
	t.Helper()
	n := c.params.MaxSlots()
	re, im := make([]float64, n), make([]float64, n)
	for i := range re {
		re[i] = v
	}
	pt, err := c.encode(re, im, c.params.MaxLevel(), scale)
	if err != nil {
		t.Fatal(err)
	}
	ct, err := c.encrypt(pt, k.pk)
	if err != nil {
		t.Fatal(err)
	}
	return ct
}

func decryptFirst(t *testing.T, c *ctxObj, k keys, ct *ctObj) complex128 {
	t.Helper()
	n := c.params.MaxSlots()
	re, im := make([]float64, n), make([]float64, n)
	if err := c.decode(c.decrypt(ct, k.sk), re, im); err != nil {
		t.Fatal(err)
	}
	return complex(re[0], im[0])
}

func near(a, b complex128) bool {
	return math.Abs(real(a)-real(b)) < 1e-4 && math.Abs(imag(a)-imag(b)) < 1e-4
}

func TestRunRecoversPanics(t *testing.T) {
	code, msg := run(func() error { panic("boom") })
	if code != statusPanic || msg == "" {
		t.Fatalf("got %d %q", code, msg)
	}
	code, _ = run(func() error {
		var p *ctObj
		_ = p.ct.Level() // nil dereference: a runtime panic, recovered as well
		return nil
	})
	if code != statusPanic {
		t.Fatalf("nil dereference gave status %d", code)
	}
	if code, _ = run(func() error { return nil }); code != statusOK {
		t.Fatalf("ok gave %d", code)
	}
}

func TestHandles(t *testing.T) {
	c := testCtx(t)
	k := testKeys(t, c)
	h := newHandle(k.pk)
	if _, err := get[*pkObj](c, h, "public key"); err != nil {
		t.Fatal(err)
	}
	if _, err := get[*skObj](c, h, "secret key"); err == nil {
		t.Fatal("a public key handle was accepted as a secret key")
	}
	other := testCtx(t)
	if _, err := get[*pkObj](other, h, "public key"); err == nil {
		t.Fatal("a key of another context was accepted")
	}
	if err := release(h); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []uintptr{h, 0, 1 << 40} {
		code, _ := run(func() error { _, err := get[*pkObj](c, bad, "public key"); return err })
		if code != statusHandle {
			t.Fatalf("handle %d gave status %d", bad, code)
		}
	}
	if code, _ := run(func() error { return release(h) }); code != statusHandle {
		t.Fatalf("double release gave status %d", code)
	}
}

func TestPrimesHaveExactBitSizes(t *testing.T) {
	c := testCtx(t)
	want := []int{50, 36, 36, 36, 36, 50}
	primes := append(append([]uint64{}, c.params.Q()...), c.params.P()...)
	seen := map[uint64]bool{}
	for i, p := range primes {
		if bits.Len64(p) != want[i] || p%(uint64(2)<<11) != 1 || seen[p] {
			t.Fatalf("prime %d = %d is not a distinct %d-bit NTT prime", i, p, want[i])
		}
		seen[p] = true
	}
}

// Lattigo's Rescale divides by LevelsConsumedPerRescaling() primes: one here (PREC64).
func TestRescaleDividesByOnePrime(t *testing.T) {
	c := testCtx(t)
	k := testKeys(t, c)
	s := math.Exp2(36)
	a, b := encryptConst(t, c, k, 0.5, s), encryptConst(t, c, k, -0.75, s)
	m, err := c.mul(a, b, k.rk)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.rescale(m)
	if err != nil {
		t.Fatal(err)
	}
	top := c.params.MaxLevel()
	want := new(big.Float).SetPrec(256).SetFloat64(s * s)
	want.Quo(want, new(big.Float).SetUint64(c.params.Q()[top]))
	diff := new(big.Float).Sub(&r.ct.Scale.Value, want)
	diff.Quo(diff, want)
	if rel, _ := diff.Float64(); r.ct.Level() != top-1 || math.Abs(rel) > 1e-30 { // 128-bit scales
		t.Fatalf("rescale gave level %d scale %v, want %d and %v", r.ct.Level(), &r.ct.Scale.Value, top-1, want)
	}
	if got := decryptFirst(t, c, k, r); !near(got, -0.375) {
		t.Fatalf("0.5 * -0.75 decrypted to %v", got)
	}
}

func TestMulScalarScale(t *testing.T) {
	c := testCtx(t)
	k := testKeys(t, c)
	s := math.Exp2(36)
	top := c.params.MaxLevel()
	q := float64(c.params.Q()[top])
	a := encryptConst(t, c, k, 0.5, s)
	for _, tc := range []struct {
		re, im, scale float64
	}{{0.25, 0, q}, {-3, 0, q}, {0.5, -0.5, q}, {0.3, 0, math.Exp2(30)}, {2, 1, 12345.5}} {
		m, err := c.mulScalar(a, tc.re, tc.im, tc.scale)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := m.ct.Scale.Float64(), s*tc.scale; math.Abs(got/want-1) > 1e-12 {
			t.Fatalf("c=%v: scale %v, want %v", tc, got, want)
		}
		if got := decryptFirst(t, c, k, m); !near(got, complex(0.5*tc.re, 0.5*tc.im)) {
			t.Fatalf("c=%v: decrypted %v", tc, got)
		}
	}
}

// Adding a constant keeps the ciphertext's scale (also when it is not the default one).
func TestAddScalarKeepsScale(t *testing.T) {
	c := testCtx(t)
	k := testKeys(t, c)
	a := encryptConst(t, c, k, 0.5, math.Exp2(36))
	sq, err := c.mul(a, a, nil) // degree 2, scale 2^72
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []*ctObj{a, sq} {
		out, err := c.addScalar(x, 0.25, -1)
		if err != nil {
			t.Fatal(err)
		}
		if out.ct.Scale.Cmp(x.ct.Scale) != 0 || out.ct.Degree() != x.ct.Degree() {
			t.Fatalf("scale %v -> %v", x.ct.Scale.Float64(), out.ct.Scale.Float64())
		}
		if x == a {
			if got := decryptFirst(t, c, k, out); !near(got, complex(0.75, -1)) {
				t.Fatalf("0.5 + 0.25 - i decrypted to %v", got)
			}
		}
	}
}

// Since v6.2.0 Lattigo's encoder, encryptor, decryptor and evaluators may be shared by goroutines
// (run `go test -race` to check).
func TestConcurrentMultiplications(t *testing.T) {
	c := testCtx(t)
	k := testKeys(t, c)
	s := math.Exp2(36)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			x := 0.1 * float64(g+1)
			a := encryptConst(t, c, k, x, s)
			for i := 0; i < 3; i++ {
				m, err := c.mul(a, a, k.rk)
				if err == nil {
					m, err = c.rescale(m)
				}
				if err != nil {
					errs <- err.Error()
					return
				}
				if got := decryptFirst(t, c, k, m); !near(got, complex(x*x, 0)) {
					errs <- "wrong product"
				}
				rots, err := c.rotateHoisted(a, []int64{1, 5}, k.gk)
				if err == nil {
					_, err = c.rotate(a, 1, k.gk)
				}
				if err != nil {
					errs <- err.Error()
					return
				}
				if got := decryptFirst(t, c, k, rots[1]); !near(got, complex(x, 0)) {
					errs <- "wrong rotation"
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

func TestUnmarshalRejectsBadData(t *testing.T) {
	c := testCtx(t)
	k := testKeys(t, c)
	ct := encryptConst(t, c, k, 0.5, math.Exp2(36))
	good, err := marshal(ct)
	if err != nil {
		t.Fatal(err)
	}
	top := c.params.MaxLevel()
	if _, err := c.unmarshal(kindCiphertext, good, top, 1); err != nil {
		t.Fatalf("round trip failed: %v", err)
	}
	forged := append([]byte{}, good...)
	// the polynomial count sits right after the flag and the metadata: announce 2^40 of them
	off := 1 + new(rlwe.MetaData).BinarySize()
	binary.LittleEndian.PutUint64(forged[off:], 1<<40)
	rng := rand.New(rand.NewSource(1))
	cases := [][]byte{nil, {1}, good[:len(good)/2], forged, append(append([]byte{}, good...), 0)}
	for i := 0; i < 20; i++ {
		junk := make([]byte, rng.Intn(4096))
		rng.Read(junk)
		cases = append(cases, junk)
	}
	for kind := kindCiphertext; kind <= kindGaloisKeys; kind++ {
		for i, data := range cases {
			code, _ := run(func() error { _, err := c.unmarshal(kind, data, top, 1); return err })
			if code != statusData {
				t.Fatalf("kind %d case %d: status %d, want %d", kind, i, code, statusData)
			}
		}
	}
	// a valid ciphertext announced at another level or degree is refused too
	if _, err := c.unmarshal(kindCiphertext, good, top-1, 1); err == nil {
		t.Fatal("level mismatch accepted")
	}
	for kind, obj := range map[int]any{kindPublicKey: k.pk, kindRelinKey: k.rk, kindGaloisKeys: k.gk} {
		data, err := marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.unmarshal(kind, data, 0, 0); err != nil {
			t.Fatalf("kind %d round trip: %v", kind, err)
		}
	}
}

// The hoisted rotations, on several goroutines, write exactly what Lattigo's RotateHoisted writes.
func TestRotateHoistedMatchesLattigo(t *testing.T) {
	c, err := newContext(11, nil, nil, []int{55, 40, 40}, []int{61, 61}, 40, ring.Standard)
	if err != nil {
		t.Fatal(err)
	}
	sk := c.genSecretKey()
	steps := []int64{1, 2, 3, 5, 8, 13, 21, 34, 55}
	gk, err := c.genGaloisKeys(sk, steps, false)
	if err != nil {
		t.Fatal(err)
	}
	slots := c.params.MaxSlots()
	re, im := make([]float64, slots), make([]float64, slots)
	for i := range re {
		re[i], im[i] = math.Sin(float64(i)), math.Cos(float64(3*i))
	}
	pt, err := c.encode(re, im, 1, math.Exp2(40))
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.encryptSymmetric(pt, sk)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.rotateHoisted(a, steps, gk)
	if err != nil {
		t.Fatal(err)
	}
	rots := make([]int, len(steps))
	for i, s := range steps {
		rots[i] = int(s)
	}
	want, err := gk.eval.RotateHoistedNew(a.ct, rots)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rots {
		if !got[i].ct.Value[0].Equal(&want[r].Value[0]) || !got[i].ct.Value[1].Equal(&want[r].Value[1]) ||
			!got[i].ct.MetaData.Equal(want[r].MetaData) {
			t.Fatalf("rotation by %d differs from Lattigo's RotateHoisted", r)
		}
	}
	if _, err := c.rotateHoisted(a, []int64{4}, gk); err == nil {
		t.Fatal("a rotation without its key was accepted")
	}
}
