package ring

// This file is henn's addition to Lattigo v6.2.0 (Apache-2.0; see henn's build.py, which copies
// the pinned module, adds this file and one call at the top of each exported NTT function).
// It lets a faster number-theoretic transform take over the ring's transforms, prime by prime.

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
