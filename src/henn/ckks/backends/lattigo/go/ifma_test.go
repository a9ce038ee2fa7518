package main

import (
	"fmt"
	"math/bits"
	"math/rand"
	"runtime"
	"testing"
	"unsafe"

	"github.com/tuneinsight/lattigo/v6/ring"
)

// lattigoNTT runs Lattigo's own transform of one prime (the accelerator switched off meanwhile).
func lattigoNTT(forward, lazy bool, ringType ring.Type, s *ring.SubRing, p1, p2 []uint64) {
	ring.SetNTTAccelerator(nil)
	defer ring.SetNTTAccelerator(acceleratedNTT)
	n, q, mred := s.N, s.Modulus, s.MRedConstant
	switch {
	case ringType == ring.Standard && forward && !lazy:
		ring.NTTStandard(p1, p2, n, q, mred, s.BRedConstant, s.RootsForward)
	case ringType == ring.Standard && forward:
		ring.NTTStandardLazy(p1, p2, n, q, mred, s.RootsForward)
	case ringType == ring.Standard && !lazy:
		ring.INTTStandard(p1, p2, n, s.NInv, q, mred, s.RootsBackward)
	case ringType == ring.Standard:
		ring.INTTStandardLazy(p1, p2, n, s.NInv, q, mred, s.RootsBackward)
	case forward && !lazy:
		ring.NTTConjugateInvariant(p1, p2, n, q, mred, s.BRedConstant, s.RootsForward)
	case forward:
		ring.NTTConjugateInvariantLazy(p1, p2, n, q, mred, s.RootsForward)
	case !lazy:
		ring.INTTConjugateInvariant(p1, p2, n, s.NInv, q, mred, s.RootsBackward)
	default:
		ring.INTTConjugateInvariantLazy(p1, p2, n, s.NInv, q, mred, s.RootsBackward)
	}
}

// nttKernelsHere lists the transforms this CPU runs (AVX2, and IFMA's where it has it), skipping the
// test where it runs none.
func nttKernelsHere(t testing.TB) []simdLevel {
	var levels []simdLevel
	for l := simdAVX2; l <= cpuSIMD; l++ {
		levels = append(levels, l)
	}
	if len(levels) == 0 {
		t.Skip("this CPU has no AVX2: Lattigo's own code runs unchanged")
	}
	return levels
}

// HENN_LATTIGO_NTT lowers the level, never raises it.
func TestSIMDLevelSetting(t *testing.T) {
	for _, tc := range []struct {
		setting   string
		cpu, want simdLevel
	}{{"", simdIFMA, simdIFMA}, {"", simdAVX2, simdAVX2}, {"", simdNone, simdNone}, {"go", simdIFMA, simdNone},
		{"avx2", simdIFMA, simdAVX2}, {"avx2", simdAVX2, simdAVX2}, {"avx2", simdNone, simdNone}} {
		if got := simdFor(tc.setting, tc.cpu); got != tc.want {
			t.Errorf("HENN_LATTIGO_NTT=%q on level %d: level %d, want %d", tc.setting, tc.cpu, got, tc.want)
		}
	}
}

// skipWithoutIFMA skips a kernel test on CPUs without AVX-512 IFMA, where Lattigo's own code runs.
func skipWithoutIFMA(t *testing.T) {
	if !hasIFMA() {
		t.Skip("this CPU has no AVX-512 IFMA: Lattigo's own code runs unchanged")
	}
}

func rootsOf(s *ring.SubRing, forward bool) []uint64 {
	if forward {
		return s.RootsForward
	}
	return s.RootsBackward
}

func primesFor(t testing.TB, bitSize int, nthRoot uint64, k int) []uint64 {
	g := ring.NewNTTFriendlyPrimesGenerator(uint64(bitSize), nthRoot)
	primes, err := g.NextDownstreamPrimes(k)
	if err != nil {
		t.Fatal(err)
	}
	return primes
}

// Each transform (AVX2, and IFMA's) gives Lattigo's values exactly (fully reduced; the lazy variants'
// values modulo q), for both rings, both directions, degrees 2^6..2^16, primes of 30 to 49 bits (IFMA)
// and of 55 to 61 bits (64-bit lanes, 61 bits: above 2^61), inputs
// below q and below 2q (lazy producers), below 4q (what Lattigo's key switching hands the forward
// transform) and any 64-bit value (a rescale's, an unreduced encoding's), in place and out of place.
func TestNTTKernelsMatchLattigo(t *testing.T) {
	for _, simd := range nttKernelsHere(t) {
		checkNTTKernel(t, simd)
	}
}

func checkNTTKernel(t *testing.T, simd simdLevel) {
	rng := rand.New(rand.NewSource(7))
	for _, ringType := range []ring.Type{ring.Standard, ring.ConjugateInvariant} {
		for _, logN := range []int{6, 7, 10, 11, 13, 14, 16} {
			n := 1 << logN
			nthRoot := uint64(2 * n)
			if ringType == ring.ConjugateInvariant {
				nthRoot = uint64(4 * n)
			}
			for _, bitSize := range []int{30, 40, 49, 55, 60, 61} {
				var r *ring.Ring
				var err error
				moduli := primesFor(t, bitSize, nthRoot, 2)
				if bitSize == 61 { // Lattigo's 61-bit primes include some above 2^61
					g := ring.NewNTTFriendlyPrimesGenerator(61, nthRoot)
					if moduli, err = g.NextUpstreamPrimes(2); err != nil {
						t.Fatal(err)
					}
				}
				r, err = ring.NewRingFromType(n, moduli, ringType)
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range r.SubRings {
					q := s.Modulus
					for _, bound := range []uint64{q, 2 * q, 4 * q, 0} { // 0: any 64-bit input
						in := make([]uint64, n)
						for i := range in {
							in[i] = rng.Uint64()
							if bound != 0 {
								in[i] %= bound
							}
						}
						reduced := make([]uint64, n)
						for i := range in {
							reduced[i] = in[i] % q
						}
						for _, forward := range []bool{true, false} {
							for _, lazy := range []bool{false, true} {
								want, got := make([]uint64, n), append([]uint64{}, in...)
								if bound == 4*q || bound == 0 { // the transform of the value itself: Lattigo's takes less
									lattigoNTT(forward, lazy, ringType, s, reduced, want)
								} else {
									lattigoNTT(forward, lazy, ringType, s, in, want)
								}
								nInv := s.NInv
								if forward {
									nInv = 0
								}
								if !nttWith(simd, forward, ringType == ring.ConjugateInvariant, got, got, n, q, s.MRedConstant, nInv, rootsOf(s, forward)) {
									t.Fatalf("kernel %d ring %v n=%d q=%d: the accelerator declined", simd, ringType, n, q)
								}
								for i := range want {
									if got[i] >= q || (lazy && got[i] != want[i]%q) || (!lazy && got[i] != want[i]) {
										t.Fatalf("kernel %d ring %v n=%d q=%d (%d bits) forward=%v lazy=%v input<%dq: coefficient %d = %d, Lattigo %d",
											simd, ringType, n, q, bitSize, forward, lazy, bound/q, i, got[i], want[i])
									}
								}
							}
						}
					}
				}
			}
		}
	}
}

// Primes from 2^61.4 are left to Lattigo, with the output untouched, by every kernel.
func TestNTTKernelsDecline(t *testing.T) {
	for _, simd := range nttKernelsHere(t) {
		checkNTTKernelDeclines(t, simd)
	}
}

func checkNTTKernelDeclines(t *testing.T, simd simdLevel) {
	n := 1 << 10
	for _, tc := range []struct {
		bits    int
		forward bool
	}{{62, true}, {63, true}, {62, false}} {
		g := ring.NewNTTFriendlyPrimesGenerator(uint64(tc.bits), uint64(2*n))
		q, err := g.NextUpstreamPrime() // from 2^bits up
		if err != nil {
			t.Fatal(err)
		}
		r, err := ring.NewRing(n, []uint64{q})
		if err != nil {
			t.Fatal(err)
		}
		s := r.SubRings[0]
		in := make([]uint64, n)
		for i := range in {
			in[i] = uint64(i) % s.Modulus
		}
		out := make([]uint64, n)
		nInv := uint64(0)
		if !tc.forward {
			nInv = s.NInv
		}
		if nttWith(simd, tc.forward, false, in, out, n, s.Modulus, s.MRedConstant, nInv, rootsOf(s, tc.forward)) {
			t.Fatalf("%d-bit prime, forward %v: accelerated, want declined", tc.bits, tc.forward)
		}
		for _, v := range out {
			if v != 0 {
				t.Fatal("a declined transform wrote its output")
			}
		}
	}
}

// One forward transform of 2^13 and 2^16 points, Lattigo's and each of henn's kernels, for a 36-bit
// (IFMA) and a 60-bit prime (64-bit lanes): go test -run '^$' -bench NTT (docs/benchmarks.md).
func BenchmarkNTT(b *testing.B) {
	for _, logN := range []int{13, 16} {
		benchNTT(b, 1<<logN, nttKernelsHere(b))
	}
}

func benchNTT(b *testing.B, n int, kernels []simdLevel) {
	for _, bitSize := range []int{36, 60} {
		r, err := ring.NewRing(n, primesFor(b, bitSize, uint64(2*n), 1))
		if err != nil {
			b.Fatal(err)
		}
		s := r.SubRings[0]
		a := make([]uint64, n)
		for i := range a {
			a[i] = uint64(i*7919) % s.Modulus
		}
		b.Run(fmt.Sprintf("n%d/%dbit/lattigo", n, bitSize), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				lattigoNTT(true, false, ring.Standard, s, a, a)
			}
		})
		for _, simd := range kernels {
			b.Run(fmt.Sprintf("n%d/%dbit/%s", n, bitSize, []string{"", "avx2", "ifma"}[simd]), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					nttWith(simd, true, false, a, a, n, s.Modulus, s.MRedConstant, 0, s.RootsForward)
				}
			})
		}
	}
}

// The IFMA lift gives Lattigo's decomposition of a one-prime digit exactly, into primes smaller
// and larger than the digit's (the reference restates the branch's arithmetic in Go).
func TestIFMALiftMatchesLattigo(t *testing.T) {
	skipWithoutIFMA(t)
	rng := rand.New(rand.NewSource(11))
	n := 1 << 12
	moduli := append(primesFor(t, 36, uint64(2*n), 2), primesFor(t, 25, uint64(2*n), 3)...)
	moduli = append(moduli, primesFor(t, 49, uint64(2*n), 1)...)
	for _, qIn := range moduli {
		in := make([]uint64, n)
		for j := range in {
			in[j] = rng.Uint64() % qIn
		}
		in[0], in[1], in[2] = 0, qIn>>1, qIn-1 // the edges of the centring
		in[3] = qIn - moduli[len(moduli)-2]    // a negated value that one output prime divides
		want, got := make([][]uint64, len(moduli)), make([][]uint64, len(moduli))
		for i := range moduli {
			want[i], got[i] = make([]uint64, n), make([]uint64, n)
			for j, c := range in {
				neg := c >= qIn>>1
				if neg {
					c = qIn - c
				}
				r := c % moduli[i]
				if neg {
					r = moduli[i] - r
				}
				want[i][j] = r
			}
		}
		if !acceleratedLift(in, qIn, moduli, got) {
			t.Fatal("the accelerator declined")
		}
		for i := range want {
			for j := range want[i] {
				if got[i][j] != want[i][j] {
					t.Fatalf("q_in %d -> %d, coefficient %d (%d): %d, want %d", qIn, moduli[i], j, in[j], got[i][j], want[i][j])
				}
			}
		}
	}
}

// withoutAccelerators runs f with Lattigo's own basis extension and lift.
func withoutAccelerators(f func()) {
	ring.SetBasisExtensionAccelerator(nil)
	ring.SetLiftAccelerator(nil)
	defer ring.SetBasisExtensionAccelerator(acceleratedExtension)
	defer ring.SetLiftAccelerator(acceleratedLift)
	f()
}

func sameModulo(t *testing.T, what string, moduli []uint64, got, want [][]uint64) {
	t.Helper()
	for i := range want {
		q := moduli[i]
		for x := range want[i] {
			if got[i][x]%q != want[i][x]%q {
				t.Fatalf("%s: prime %d (%d), coefficient %d: %d, Lattigo %d", what, i, q, x, got[i][x], want[i][x])
			}
		}
	}
}

func randomPoly(rng *rand.Rand, r *ring.Ring) ring.Poly {
	p := r.NewPoly()
	for i := range p.Coeffs {
		q := r.ModuliChain()[i]
		for x := range p.Coeffs[i] {
			p.Coeffs[i][x] = rng.Uint64() % q
		}
	}
	return p
}

// The basis extension kernels give Lattigo's values modulo every prime: ModUpExact both ways (Q to
// P, P to Q), reduced and unreduced inputs, and the key-switching decomposition of every digit,
// one-prime and multi-prime digits; 52-bit lanes (primes below 2^50) and 64-bit lanes (a 60-bit q0,
// 61-bit special primes on both sides of 2^61, more than 15 inputs).
func TestIFMAExtensionMatchesLattigo(t *testing.T) {
	skipWithoutIFMA(t)
	rng := rand.New(rand.NewSource(5))
	n := 1 << 11
	upstream61 := func(k int) []uint64 { // Lattigo's 61-bit special primes lie on both sides of 2^61
		g := ring.NewNTTFriendlyPrimesGenerator(61, uint64(2*n))
		primes, err := g.NextUpstreamPrimes(k)
		if err != nil {
			t.Fatal(err)
		}
		return primes
	}
	for _, set := range []struct {
		name string
		Q    []uint64
		P    func(nbP int) []uint64
	}{
		{"52-bit lanes", append(primesFor(t, 42, uint64(2*n), 1), primesFor(t, 31, uint64(2*n), 6)...),
			func(nbP int) []uint64 { return primesFor(t, 44+nbP, uint64(2*n), nbP) }},
		{"64-bit lanes (boot-n16's sizes)", append(primesFor(t, 60, uint64(2*n), 1), primesFor(t, 40, uint64(2*n), 6)...), upstream61},
		{"64-bit lanes, 20 inputs", primesFor(t, 31, uint64(2*n), 20), upstream61},
	} {
		for _, nbP := range []int{1, 2, 3} {
			testExtension(t, rng, set.name, n, set.Q, set.P(nbP), nbP)
		}
	}
}

func testExtension(t *testing.T, rng *rand.Rand, name string, n int, Q, P []uint64, nbP int) {
	ringQ, err := ring.NewRing(n, Q)
	if err != nil {
		t.Fatal(err)
	}
	ringP, err := ring.NewRing(n, P)
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []struct {
		from, to *ring.Ring
	}{{ringQ, ringP}, {ringP, ringQ}} {
		muc := ring.GenModUpConstants(dir.from.ModuliChain(), dir.to.ModuliChain())
		in := randomPoly(rng, dir.from)
		want, got := dir.to.NewPoly(), dir.to.NewPoly()
		withoutAccelerators(func() { ring.ModUpExact(in.Coeffs, want.Coeffs, dir.from, dir.to, muc) })
		ring.ModUpExact(in.Coeffs, got.Coeffs, dir.from, dir.to, muc)
		what := fmt.Sprintf("%s: ModUpExact %d -> %d primes", name, dir.from.ModuliChain(), dir.to.ModuliChain())
		sameModulo(t, what, dir.to.ModuliChain(), got.Coeffs, want.Coeffs)
		// unreduced inputs: beyond the 52-bit lanes (the 64-bit kernel takes over), and up to 2q
		in.Coeffs[0][9] = 1<<52 + 3
		in.Coeffs[0][10] = 2*dir.from.ModuliChain()[0] - 1
		withoutAccelerators(func() { ring.ModUpExact(in.Coeffs, want.Coeffs, dir.from, dir.to, muc) })
		ring.ModUpExact(in.Coeffs, got.Coeffs, dir.from, dir.to, muc)
		sameModulo(t, what+", unreduced input", dir.to.ModuliChain(), got.Coeffs, want.Coeffs)
	}
	dec := ring.NewDecomposer(ringQ, ringP)
	for _, levelQ := range []int{len(Q) - 1, len(Q) - 2} {
		rq := ringQ.AtLevel(levelQ)
		in := randomPoly(rng, rq)
		for digit := 0; digit*nbP <= levelQ; digit++ {
			wantQ, wantP, gotQ, gotP := rq.NewPoly(), ringP.NewPoly(), rq.NewPoly(), ringP.NewPoly()
			withoutAccelerators(func() { dec.DecomposeAndSplit(levelQ, nbP-1, nbP, digit, in, wantQ, wantP) })
			dec.DecomposeAndSplit(levelQ, nbP-1, nbP, digit, in, gotQ, gotP)
			what := fmt.Sprintf("%s: digit %d of %d primes (level %d)", name, digit, nbP, levelQ)
			sameModulo(t, what, rq.ModuliChain(), gotQ.Coeffs, wantQ.Coeffs)
			sameModulo(t, what, P, gotP.Coeffs, wantP.Coeffs)
		}
	}
}

// The IFMA dot kernel folds its 52-bit sums every 4095 terms: 5,000 terms of full-size limbs
// against 128-bit arithmetic, for primes just below 2^50 and of 30 bits; a limb from 2^52 sends
// the whole product to the 128-bit kernel.
func TestIFMADotFoldsLongSums(t *testing.T) {
	skipWithoutIFMA(t)
	rng := rand.New(rand.NewSource(13))
	const terms, n = 5000, 16
	for _, q := range []uint64{primesFor(t, 50, 64, 1)[0], primesFor(t, 30, 64, 1)[0]} {
		limbs := func() ([][]uint64, []uintptr) {
			ls, addr := make([][]uint64, terms), make([]uintptr, terms)
			for i := range ls {
				ls[i] = make([]uint64, n)
				for x := range ls[i] {
					ls[i][x] = q - 1 - rng.Uint64()%16 // near q: the largest sums
				}
				addr[i] = uintptr(unsafe.Pointer(&ls[i][0]))
			}
			return ls, addr
		}
		a, aAddr := limbs()
		b, bAddr := limbs()
		p, pAddr := limbs()
		dst0, dst1 := make([]uint64, n), make([]uint64, n)
		bred := ring.GenBRedConstant(q)
		dotPrimeNative(aAddr, bAddr, pAddr, q, pow64Mod(q, bred), bred, productChunk(q), dst0, dst1)
		for x := 0; x < n; x++ {
			var w0, w1 uint64
			for i := 0; i < terms; i++ {
				w0 = (w0 + mulMod(a[i][x], p[i][x], q)) % q
				w1 = (w1 + mulMod(b[i][x], p[i][x], q)) % q
			}
			if dst0[x] != w0 || dst1[x] != w1 {
				t.Fatalf("q=%d coefficient %d: (%d, %d), want (%d, %d)", q, x, dst0[x], dst1[x], w0, w1)
			}
		}
		a[3][5] = 1<<52 + 1 // a limb the 52-bit lanes would truncate: the 128-bit kernel takes over
		dotPrimeNative(aAddr, bAddr, pAddr, q, pow64Mod(q, bred), bred, productChunk(q), dst0, dst1)
		var w0 uint64
		for i := 0; i < terms; i++ {
			w0 = (w0 + mulMod(a[i][5], p[i][5], q)) % q
		}
		if dst0[5] != w0 {
			t.Fatalf("q=%d, an unreduced limb: %d, want %d", q, dst0[5], w0)
		}
		runtime.KeepAlive(a)
		runtime.KeepAlive(b)
		runtime.KeepAlive(p)
	}
}

func mulMod(a, b, q uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	_, r := bits.Div64(hi, lo, q)
	return r
}

// The IFMA lazy Montgomery products are congruent to Lattigo's and as small (below 2q each), with
// and without accumulation, including blocks that fall back to the scalar formula.
func TestIFMAMulCoeffsMatchesLattigo(t *testing.T) {
	skipWithoutIFMA(t)
	rng := rand.New(rand.NewSource(17))
	n := 1 << 12
	for _, bitSize := range []int{30, 45, 49} {
		q := primesFor(t, bitSize, uint64(2*n), 1)[0]
		mred := ring.GenMRedConstant(q)
		x, y, z0 := make([]uint64, n), make([]uint64, n), make([]uint64, n)
		for j := range x {
			x[j], y[j], z0[j] = rng.Uint64()%(2*q), rng.Uint64()%q, rng.Uint64()%q
		}
		x[8] = 1<<52 + 5 // a block past the 52-bit lanes
		y[17] = q        // and one past y < q
		for _, add := range []bool{false, true} {
			z := append([]uint64{}, z0...)
			if !acceleratedMulCoeffs(x, y, z, q, mred, add) {
				t.Fatal("declined")
			}
			for j := range z {
				want := ring.MRedLazy(x[j], y[j], q, mred)
				got := z[j]
				if add {
					want += z0[j]
					if got < z0[j] || got-z0[j] > 2*q {
						t.Fatalf("q %d, coefficient %d: product %d out of [0, 2q]", q, j, got-z0[j])
					}
				} else if got > 2*q {
					t.Fatalf("q %d, coefficient %d: product %d out of [0, 2q]", q, j, got)
				}
				if got%q != want%q {
					t.Fatalf("q %d add=%v coefficient %d: %d, Lattigo %d (mod q: %d, %d)", q, add, j, got, want, got%q, want%q)
				}
			}
		}
	}
}
