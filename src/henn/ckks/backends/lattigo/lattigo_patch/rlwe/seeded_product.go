package rlwe

// henn: a seeded key's a halves regenerated prime by prime where a gadget product reads them.
//
// seededView regenerates every a half a key switch reads before the product: at N = 2^16 that is tens of
// MiB written and read back from memory for each key switch (each a half's row is 512 KiB), and a
// bootstrapped network makes thousands of them. The multiple-prime gadget products (the plain one's digit
// halves and the hoisted one) instead regenerate one prime's row at a time into a pooled row, which stays in
// the core's cache for the product that follows. The values, and so the products and every ciphertext, are
// the same.

import (
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/ring/ringqp"
)

// gadgetKey reads a gadget ciphertext's degree-0 elements for a product: the b halves as stored, the a
// halves as stored or, for a seeded key, from its streams.
type gadgetKey struct {
	ct      *GadgetCiphertext
	streams *seedStreams // nil: the a halves are stored
}

func newGadgetKey(ct *GadgetCiphertext) gadgetKey {
	if ct.Seed == nil {
		return gadgetKey{ct: ct}
	}
	st := newSeedStreams(ct.Seed)
	return gadgetKey{ct: ct, streams: &st}
}

// mulAccumulate writes (acc0, acc1) = (b_i, a_i) * c, or adds it where add, over ringQP's primes: Lattigo's
// lazy Montgomery products (MulCoeffsMontgomeryLazy, ...ThenAddLazy), the key's operand first.
func (k gadgetKey) mulAccumulate(ringQP ringqp.Ring, i int, c, acc0, acc1 ringqp.Poly, add bool) {
	el := k.ct.Value[i][0]
	if add {
		ringQP.MulCoeffsMontgomeryLazyThenAddLazy(el[0], c, acc0)
	} else {
		ringQP.MulCoeffsMontgomeryLazy(el[0], c, acc0)
	}
	if k.streams == nil {
		if add {
			ringQP.MulCoeffsMontgomeryLazyThenAddLazy(el[1], c, acc1)
		} else {
			ringQP.MulCoeffsMontgomeryLazy(el[1], c, acc1)
		}
		return
	}
	// each prime's row on its own: in two halves where a key switch may use both cores (a network's key
	// switches often have one digit, and the hoisted product runs on one goroutine)
	type primeRow struct {
		s        *ring.SubRing
		basis, j int
		c, acc   []uint64
	}
	var primes []primeRow
	for j, s := range ringQP.RingQ.SubRings[:ringQP.RingQ.Level()+1] {
		primes = append(primes, primeRow{s, 0, j, c.Q.Coeffs[j], acc1.Q.Coeffs[j]})
	}
	if ringQP.RingP != nil {
		for j, s := range ringQP.RingP.SubRings[:ringQP.RingP.Level()+1] {
			primes = append(primes, primeRow{s, 1, j, c.P.Coeffs[j], acc1.P.Coeffs[j]})
		}
	}
	halves(len(primes), func(from, to int) {
		row := getRows(1, len(c.Q.Coeffs[0]))[0]
		defer rows.Put(row)
		for _, p := range primes[from:to] {
			k.streams.fill(i, 0, p.basis, p.j, p.s, row)
			if add {
				p.s.MulCoeffsMontgomeryLazyThenAddLazy(row, p.c, p.acc)
			} else {
				p.s.MulCoeffsMontgomeryLazy(row, p.c, p.acc)
			}
		}
	})
}

// accumulateDigits sums (b_i, a_i) * digit(i) over the digits [from, to) into (acc0, acc1), reduced as often
// as Lattigo's gadget products reduce and fully reduced at the end.
func (eval Evaluator) accumulateDigits(levelQ, levelP, from, to int, key gadgetKey, digit func(i int) ringqp.Poly,
	acc0, acc1 ringqp.Poly) {
	ringQP := eval.params.RingQP().AtLevel(levelQ, levelP)
	qiOverF := eval.params.QiOverflowMargin(levelQ) >> 1
	piOverF := eval.params.PiOverflowMargin(levelP) >> 1
	reduce := 0
	for i := from; i < to; i++ {
		key.mulAccumulate(ringQP, i, digit(i), acc0, acc1, i > from)
		if reduce%qiOverF == qiOverF-1 {
			ringQP.RingQ.Reduce(acc0.Q, acc0.Q)
			ringQP.RingQ.Reduce(acc1.Q, acc1.Q)
		}
		if reduce%piOverF == piOverF-1 {
			ringQP.RingP.Reduce(acc0.P, acc0.P)
			ringQP.RingP.Reduce(acc1.P, acc1.P)
		}
		reduce++
	}
	if reduce%qiOverF != 0 {
		ringQP.RingQ.Reduce(acc0.Q, acc0.Q)
		ringQP.RingQ.Reduce(acc1.Q, acc1.Q)
	}
	if reduce%piOverF != 0 {
		ringQP.RingP.Reduce(acc0.P, acc0.P)
		ringQP.RingP.Reduce(acc1.P, acc1.P)
	}
}

// gadgetProductHoistedSeeded is gadgetProductMultiplePLazyHoisted for a seeded key.
func (eval Evaluator) gadgetProductHoistedSeeded(levelQ int, decompQP []ringqp.Poly, gadgetCt *GadgetCiphertext,
	ct *Element[ringqp.Poly]) {
	levelP := gadgetCt.LevelP()
	digits := eval.params.BaseRNSDecompositionVectorSize(levelQ, levelP)
	eval.accumulateDigits(levelQ, levelP, 0, digits, newGadgetKey(gadgetCt),
		func(i int) ringqp.Poly { return decompQP[i] }, ct.Value[0], ct.Value[1])
}
