package rlwe

// henn: one key switch on two cores.
//
// Lattigo runs a key switch on one goroutine: the decomposition of c1 digit after digit (each a basis
// extension and L+K-alpha NTTs), the products with the key, then the ModDown of both halves of the result.
// A single-image network is a chain of such key switches (an activation's relinearizations, a convolution's
// block sums, EvalMod in a bootstrap), and the second core waited. Here, where GOMAXPROCS allows, the digits
// are split in two halves, each decomposed and multiplied into its own accumulator on its own goroutine and
// the two added; the hoisted decomposition splits its digits the same way; ModDown brings its two
// polynomials down at once. Every sum is the same modulo each prime and every value ends fully reduced, as
// Lattigo's own loop leaves it, so the ciphertexts are Lattigo's bit for bit (the bridge's tests compare).

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/ring/ringqp"
)

// keySwitchSerial: set, every key switch runs on one goroutine as in Lattigo (SetParallelKeySwitch).
var keySwitchSerial atomic.Bool

// SetParallelKeySwitch turns the two-goroutine key switch on (the default) or off.
func SetParallelKeySwitch(on bool) { keySwitchSerial.Store(!on) }

func parallelKeySwitch() bool { return !keySwitchSerial.Load() && runtime.GOMAXPROCS(0) > 1 }

// halves runs f over [0, n): as f(0, m) on a new goroutine and f(m, n) on this one (m = ceil(n/2)) where a
// key switch may use two cores and n >= 2, else as f(0, n); it returns when every part is done.
func halves(n int, f func(from, to int)) {
	if n < 2 || !parallelKeySwitch() {
		f(0, n)
		return
	}
	m := (n + 1) / 2
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		f(0, m)
	}()
	f(m, n)
	wg.Wait()
}

// gadgetProductMultiplePLazyParallel is gadgetProductMultiplePLazy's loop with the digits in two halves;
// false (nothing done) where it runs on one goroutine.
func (eval Evaluator) gadgetProductMultiplePLazyParallel(levelQ int, cx ring.Poly, gadgetCt *GadgetCiphertext, ctQP *Element[ringqp.Poly]) bool {
	levelP := gadgetCt.LevelP()
	digits := eval.params.BaseRNSDecompositionVectorSize(levelQ, levelP)
	if digits < 2 || !parallelKeySwitch() {
		return false
	}
	ringQP := eval.params.RingQP().AtLevel(levelQ, levelP)
	poolQP := eval.pool.AtLevel(levelQ, levelP)
	buffQ := poolQP.GetBuffPoly()
	defer poolQP.RecycleBuffPoly(buffQ)
	cxNTT, cxInvNTT := cx, *buffQ
	if ctQP.IsNTT {
		ringQP.RingQ.INTT(cxNTT, cxInvNTT)
	} else {
		cxNTT, cxInvNTT = *buffQ, cx
		ringQP.RingQ.NTT(cxInvNTT, cxNTT)
	}
	second := [2]*ringqp.Poly{poolQP.GetBuffPolyQP(), poolQP.GetBuffPolyQP()}
	defer poolQP.RecycleBuffPolyQP(second[0])
	defer poolQP.RecycleBuffPolyQP(second[1])
	split := false // set by the second half, which halves runs on this goroutine
	halves(digits, func(from, to int) {
		acc := [2]ringqp.Poly{ctQP.Value[0], ctQP.Value[1]}
		if from > 0 {
			acc, split = [2]ringqp.Poly{*second[0], *second[1]}, true
		}
		eval.sumDigits(levelQ, levelP, from, to, cxNTT, cxInvNTT, gadgetCt, acc[0], acc[1])
	})
	if split {
		ringQP.Add(ctQP.Value[0], *second[0], ctQP.Value[0])
		ringQP.Add(ctQP.Value[1], *second[1], ctQP.Value[1])
	}
	return true
}

// sumDigits is gadgetProductMultiplePLazy's loop over the digits [from, to): each decomposed and multiplied
// by the key's digit into (acc0, acc1) (seeded_product.go).
func (eval Evaluator) sumDigits(levelQ, levelP, from, to int, cxNTT, cxInvNTT ring.Poly, gadgetCt *GadgetCiphertext, acc0, acc1 ringqp.Poly) {
	poolQP := eval.pool.AtLevel(levelQ, levelP)
	buff := poolQP.GetBuffPolyQP()
	defer poolQP.RecycleBuffPolyQP(buff)
	c2QP := *buff
	eval.accumulateDigits(levelQ, levelP, from, to, newGadgetKey(gadgetCt), func(i int) ringqp.Poly {
		eval.DecomposeSingleNTT(levelQ, levelP, levelP+1, i, cxNTT, cxInvNTT, c2QP.Q, c2QP.P)
		return c2QP
	}, acc0, acc1)
}

// decomposeDigits is DecomposeNTT's loop over the digits, in two halves where a key switch may use both
// cores (each digit writes its own decompQP[i]).
func (eval Evaluator) decomposeDigits(levelQ, levelP, nbPi int, polyNTT, polyInvNTT ring.Poly, decompQP []ringqp.Poly) {
	halves(eval.params.BaseRNSDecompositionVectorSize(levelQ, levelP), func(from, to int) {
		for i := from; i < to; i++ {
			eval.DecomposeSingleNTT(levelQ, levelP, nbPi, i, polyNTT, polyInvNTT, decompQP[i].Q, decompQP[i].P)
		}
	})
}

// modDownParallel is ModDown's NTT-to-NTT case (every key switch's) with its two polynomials at once;
// false (nothing done) elsewhere.
func (eval Evaluator) modDownParallel(levelQ, levelP int, ctQP *Element[ringqp.Poly], ct *Ciphertext) bool {
	if levelP == -1 || !ctQP.IsNTT || !ct.IsNTT || len(ctQP.Value) < 2 || len(ct.Value) < 2 || !parallelKeySwitch() {
		return false
	}
	halves(2, func(from, to int) {
		for k := from; k < to; k++ {
			eval.BasisExtender.ModDownQPtoQNTT(levelQ, levelP, ctQP.Value[k].Q, ctQP.Value[k].P, ct.Value[k])
		}
	})
	return true
}
