package main

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/tuneinsight/lattigo/v6/ring"
)

// vecInputs: values of every size the loops meet (reduced, lazy below 2q and 4q, any 64-bit value), and
// the edges: 0, q-1, q, 2q-1, 2^64-1.
func vecInputs(rng *rand.Rand, n int, q uint64) []uint64 {
	x := make([]uint64, n)
	for j := range x {
		switch j % 4 {
		case 0:
			x[j] = rng.Uint64() % q
		case 1:
			x[j] = rng.Uint64() % (2 * q)
		case 2:
			x[j] = rng.Uint64() % (4 * q)
		default:
			x[j] = rng.Uint64()
		}
	}
	copy(x, []uint64{0, q - 1, q, 2*q - 1, ^uint64(0)})
	return x
}

// lattigoLoop runs f with Lattigo's own loops (the accelerator switched off meanwhile).
func lattigoLoop(f func()) {
	ring.SetVecAccelerator(ring.VecAccelerator{})
	defer ring.SetVecAccelerator(vecKernels)
	f()
}

// The AVX-512 element-wise loops write Lattigo's values bit for bit, for primes of 20 to 61 bits (below
// and above 2^61) and inputs of every size, in place and out of place; the 64-bit lazy Montgomery
// products too.
func TestVecKernelsMatchLattigo(t *testing.T) {
	skipWithoutIFMA(t)
	rng := rand.New(rand.NewSource(23))
	n := 1 << 12
	for _, bitSize := range []int{20, 36, 49, 50, 55, 61, 62} {
		q := primesFor(t, bitSize, uint64(2*n), 1)[0]
		r, err := ring.NewRing(n, []uint64{q})
		if err != nil {
			t.Fatal(err)
		}
		s := r.SubRings[0]
		scalar, scalarMont := rng.Uint64()%q, ring.MForm(rng.Uint64()%q, q, s.BRedConstant)
		for _, op := range []struct {
			name string
			// the operands' bounds (0: any 64-bit value) and the loop
			xBound, yBound uint64
			run            func(x, y, dst []uint64)
		}{
			{"Reduce", 0, 0, func(x, _, dst []uint64) { s.Reduce(x, dst) }},
			{"Add", 0, 0, func(x, y, dst []uint64) { s.Add(x, y, dst) }},
			{"AddScalar", 0, 0, func(x, _, dst []uint64) { s.AddScalar(x, scalar, dst) }},
			{"SubScalar", 0, 0, func(x, _, dst []uint64) { s.SubScalar(x, scalar, dst) }},
			// ModDown's operands are reduced
			{"SubThenMulScalarMontgomeryTwoModulus", q, q, func(x, y, dst []uint64) {
				s.SubThenMulScalarMontgomeryTwoModulus(x, y, scalarMont, dst)
			}},
			// Montgomery products need x*y < q*2^64; primes below 2^50 take the 52-bit kernel
			// (TestIFMAMulCoeffsMatchesLattigo)
			{"MulCoeffsMontgomeryLazy", 2 * q, q, func(x, y, dst []uint64) { s.MulCoeffsMontgomeryLazy(x, y, dst) }},
			{"MulCoeffsMontgomeryLazyThenAddLazy", 2 * q, q, func(x, y, dst []uint64) {
				s.MulCoeffsMontgomeryLazyThenAddLazy(x, y, dst)
			}},
		} {
			if strings.HasPrefix(op.name, "MulCoeffs") && q < nttMaxModulus {
				continue
			}
			x, y := vecInputs(rng, n, q), vecInputs(rng, n, q)
			for j := range x {
				if op.xBound > 0 {
					x[j] %= op.xBound
				}
				if op.yBound > 0 {
					y[j] %= op.yBound
				}
			}
			dst0 := vecInputs(rng, n, q)
			want, got := append([]uint64{}, dst0...), append([]uint64{}, dst0...)
			lattigoLoop(func() { op.run(x, y, want) })
			op.run(x, y, got)
			for j := range want {
				if got[j] != want[j] {
					t.Fatalf("%d-bit q %d, %s, coefficient %d: %d, Lattigo %d", bitSize, q, op.name, j, got[j], want[j])
				}
			}
		}
		x := vecInputs(rng, n, q)
		inPlace, want := append([]uint64{}, x...), append([]uint64{}, x...)
		lattigoLoop(func() { s.Reduce(want, want) })
		s.Reduce(inPlace, inPlace)
		for j := range want {
			if inPlace[j] != want[j] {
				t.Fatalf("%d-bit q, Reduce in place, coefficient %d: %d, Lattigo %d", bitSize, j, inPlace[j], want[j])
			}
		}
	}
}

// Short vectors and moduli out of the kernels' range are Lattigo's.
func TestVecKernelsDecline(t *testing.T) {
	skipWithoutIFMA(t)
	short := make([]uint64, vecMinLength/2)
	if acceleratedReduce(short, short, 1<<40+1) || acceleratedAdd(short, short, short, 1<<40+1) {
		t.Fatal("took a vector shorter than vecMinLength")
	}
	long := make([]uint64, vecMinLength)
	if acceleratedReduce(long, long, 1<<13+1) || acceleratedReduce(long, long, 1<<62+1) {
		t.Fatal("took a modulus out of henn_reduce's range")
	}
	if acceleratedSubThenMulScalar(long, long, 1, long, 1<<63+1, 1) {
		t.Fatal("took a modulus out of Shoup's 64-bit range")
	}
}
