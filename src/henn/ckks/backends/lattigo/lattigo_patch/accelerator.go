package ring

// This file is henn's addition to Lattigo v6.2.0 (Apache-2.0). henn's patch_lattigo.py copies the
// pinned module, adds this file and the calls to it that it lists.
// It lets faster code take over the ring's transforms and the one-prime digit decomposition of key
// switching, prime by prime.

// NTTAccelerator writes p2 = NTT(p1) (forward) or INTT(p1) for the prime Q, with Lattigo's
// tables as they are (roots in Montgomery form, bit-reversed; NInv in Montgomery form), and
// reports whether it did. Its outputs are fully reduced, which every lazy variant accepts too.
// It returns false, with p2 untouched, for any case it does not handle; Lattigo then computes.
type NTTAccelerator func(forward, conjugateInvariant bool, p1, p2 []uint64, N int, Q, MRedConstant, NInv uint64, roots []uint64) bool

var nttAccelerator NTTAccelerator

// SetNTTAccelerator installs f (nil restores Lattigo's own transforms). Call it before any ring
// is used: it is not synchronised with running transforms.
func SetNTTAccelerator(f NTTAccelerator) { nttAccelerator = f }

// accelerated runs the installed accelerator, if any.
func accelerated(forward, conjugateInvariant bool, p1, p2 []uint64, N int, Q, MRedConstant, NInv uint64, roots []uint64) bool {
	return nttAccelerator != nil && nttAccelerator(forward, conjugateInvariant, p1, p2, N, Q, MRedConstant, NInv, roots)
}

// LiftAccelerator writes out[i][j] = the centred lift of in[j] (a residue modulo qIn) reduced modulo
// moduli[i], for j < len(in), as Lattigo's Decomposer does for a key-switching digit of one prime
// (its outputs are the same: q - r for a negative lift, which is q itself when r = 0). It returns
// false, having written nothing it is answerable for, for any case it does not handle.
type LiftAccelerator func(in []uint64, qIn uint64, moduli []uint64, out [][]uint64) bool

var liftAccelerator LiftAccelerator

// SetLiftAccelerator installs f (nil restores Lattigo's own code), before any ring is used.
func SetLiftAccelerator(f LiftAccelerator) { liftAccelerator = f }

func liftAccelerated(in []uint64, qIn uint64, moduli []uint64, out [][]uint64) bool {
	return liftAccelerator != nil && liftAccelerator(in, qIn, moduli, out)
}

// BasisExtensionAccelerator writes Lattigo's exact basis extension: for every coefficient x,
// y_i = [(in[i][x] + offsets[i]) * (Q/q_i)^-1]_{q_i}, v = floor(sum_i y_i / q_i) in float64 (as
// Lattigo sums it) and out[j][x] = (sum_i y_i * (Q/q_i) - v * Q) mod moduliOut[j], fully reduced,
// from Lattigo's constants: qOverQiInvQi[i] (Montgomery form mod q_i), qOverQiModP[j][i]
// (Montgomery form mod moduliOut[j]) and vTimesQModP[j][v] (-vQ mod moduliOut[j]). offsets nil
// means zeros. It returns false, having written nothing it is answerable for, where it declines.
type BasisExtensionAccelerator func(in [][]uint64, offsets, moduliIn, mredIn, qOverQiInvQi []uint64,
	out [][]uint64, moduliOut, mredOut []uint64, qOverQiModP, vTimesQModP [][]uint64) bool

var basisExtensionAccelerator BasisExtensionAccelerator

// SetBasisExtensionAccelerator installs f (nil restores Lattigo's own code), before any ring is used.
func SetBasisExtensionAccelerator(f BasisExtensionAccelerator) { basisExtensionAccelerator = f }

func extensionAccelerated(in [][]uint64, offsets, moduliIn, mredIn, qOverQiInvQi []uint64,
	out [][]uint64, moduliOut, mredOut []uint64, qOverQiModP, vTimesQModP [][]uint64) bool {
	return basisExtensionAccelerator != nil &&
		basisExtensionAccelerator(in, offsets, moduliIn, mredIn, qOverQiInvQi, out, moduliOut, mredOut, qOverQiModP, vTimesQModP)
}

// decomposeExtensionAccelerated is DecomposeAndSplit's multi-prime branch through the accelerator:
// the digit's primes [start, end) extended to the other primes of Q and to P, centred by qHalf.
func decomposeExtensionAccelerated(start, end, levelQ, levelP int, p0Q, p1Q, p1P Poly, Q, P, mredQ, mredP,
	qHalfModQi []uint64, MUC ModUpConstants) bool {
	if basisExtensionAccelerator == nil {
		return false
	}
	n := levelQ + 1 - (end - start) + levelP + 1
	out, moduli, mred := make([][]uint64, 0, n), make([]uint64, 0, n), make([]uint64, 0, n)
	qOverQiModP, vTimesQModP := make([][]uint64, 0, n), make([][]uint64, 0, n)
	for j := 0; j < levelQ+1; j++ {
		if j < start || j >= end {
			out, moduli, mred = append(out, p1Q.Coeffs[j]), append(moduli, Q[j]), append(mred, mredQ[j])
			qOverQiModP, vTimesQModP = append(qOverQiModP, MUC.qoverqimodp[j]), append(vTimesQModP, MUC.vtimesqmodp[j])
		}
	}
	for j, u := 0, len(Q); j < levelP+1; j, u = j+1, u+1 {
		out, moduli, mred = append(out, p1P.Coeffs[j]), append(moduli, P[j]), append(mred, mredP[j])
		qOverQiModP, vTimesQModP = append(qOverQiModP, MUC.qoverqimodp[u]), append(vTimesQModP, MUC.vtimesqmodp[u])
	}
	return basisExtensionAccelerator(p0Q.Coeffs[start:end], qHalfModQi, Q[start:end], mredQ[start:end], MUC.qoverqiinvqi,
		out, moduli, mred, qOverQiModP, vTimesQModP)
}

// MulCoeffsAccelerator writes p3[j] (+)= x*y*2^-64 mod q for x = p1[j], y = p2[j] (Lattigo's lazy
// Montgomery products: each product below 2q, congruent to Lattigo's; add accumulates onto p3).
// It returns false, having written nothing, where it declines.
type MulCoeffsAccelerator func(p1, p2, p3 []uint64, q, mredConstant uint64, add bool) bool

var mulCoeffsAccelerator MulCoeffsAccelerator

// SetMulCoeffsAccelerator installs f (nil restores Lattigo's own code), before any ring is used.
func SetMulCoeffsAccelerator(f MulCoeffsAccelerator) { mulCoeffsAccelerator = f }

func mulCoeffsAccelerated(p1, p2, p3 []uint64, q, mredConstant uint64, add bool) bool {
	return mulCoeffsAccelerator != nil && mulCoeffsAccelerator(p1, p2, p3, q, mredConstant, add)
}

// VecAccelerator holds faster versions of element-wise loops of vec_ops.go. Each writes what Lattigo's
// loop writes, bit for bit, and reports whether it did; where it declines (false, nothing written) or
// is nil, Lattigo's loop runs.
type VecAccelerator struct {
	// Reduce: p2[j] = p1[j] mod q (reducevec).
	Reduce func(p1, p2 []uint64, q uint64) bool
	// Add: p3[j] = CRed(p1[j]+p2[j], q) (addvec).
	Add func(p1, p2, p3 []uint64, q uint64) bool
	// AddScalar: p2[j] = CRed(p1[j]+scalar, q) (addscalarvec; subscalarvec with q-scalar).
	AddScalar func(p1 []uint64, scalar uint64, p2 []uint64, q uint64) bool
	// SubThenMulScalarMontgomeryTwoModulus: p3[j] = MRed(2q-p2[j]+p1[j], scalarMont, q) (ModDown's last step).
	SubThenMulScalarMontgomeryTwoModulus func(p1, p2 []uint64, scalarMont uint64, p3 []uint64, q, mredConstant uint64) bool
}

var vecAccelerator VecAccelerator

// SetVecAccelerator installs v (the zero value restores Lattigo's own loops), before any ring is used.
func SetVecAccelerator(v VecAccelerator) { vecAccelerator = v }
