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
