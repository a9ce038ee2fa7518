package main

import (
	"fmt"
	"sync"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/ring/ringqp"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// Sums of rotated ciphertexts, sum_i rot(ct_i, step_i), with one ModDown for the whole sum: the giant
// steps of a baby-step giant-step product (Lattigo's own linear transformations do the same).
//
// A rotation is rot(ct) = (σ(c0 + ModDown(k0)), σ(ModDown(k1))) with (k0, k1) the key switch of c1 in
// the extended basis QP. The automorphism σ commutes with ModDown, so the sum is
//     (Σ σ(c0_i) + ModDown(Σ σ(k0_i)), ModDown(Σ σ(k1_i))):
// the key switches are summed in QP, lazily reduced, and brought down to Q once at the end. A ModDown
// (at N = 2^16 with 14 special primes: 2 x 14 inverse NTTs on P, 2 x (level+1) forward NTTs on Q and
// two basis extensions) was about two thirds of a rotation's cost. The result differs from the sum of
// separate rotations by the rounding of one ModDown instead of several: noise, not value.
//
// Parts may arrive from several threads (henn's BSGS runs giant steps in a thread pool): the key
// switch runs outside the lock, only the additions inside it.

type rotSumObj struct {
	c  *ctxObj
	gk *gkObj

	mu       sync.Mutex
	meta     *rlwe.MetaData // the first part's: level, scale and domain of every part
	q        [2]ring.Poly   // Σ σ(c0_i), and the unrotated parts, lazily reduced
	qp       *rlwe.Element[ringqp.Poly]
	levelP   int
	lazyQ    int                          // additions into q since its last reduction
	lazyQP   int                          // the same for qp
	spare    []*rlwe.Element[ringqp.Poly] // key-switch buffers of finished additions (one per thread)
	finished bool
}

func (o *rotSumObj) owner() *ctxObj { return o.c }

func (c *ctxObj) newRotateSum(gk *gkObj) *rotSumObj { return &rotSumObj{c: c, gk: gk} }

// add adds rot(a, step) (0 < step < slots; 0: a itself).
func (o *rotSumObj) add(a *ctObj, step int64) error {
	ct := a.ct
	if ct.Degree() != 1 {
		return fmt.Errorf("a rotation sum takes ciphertexts of degree 1, got degree %d (relinearize first)", ct.Degree())
	}
	if !ct.IsNTT {
		return fmt.Errorf("a rotation sum takes ciphertexts in the NTT domain")
	}
	level := ct.Level()
	if step == 0 {
		return o.locked(ct, func(ringQ *ring.Ring) error {
			ringQ.AddLazy(o.q[0], ct.Value[0], o.q[0])
			ringQ.AddLazy(o.q[1], ct.Value[1], o.q[1])
			return nil
		})
	}
	els, err := o.c.galoisElements([]int64{step}, false)
	if err != nil {
		return err
	}
	evk, err := o.gk.eval.CheckAndGetGaloisKey(els[0])
	if err != nil {
		return fmt.Errorf("rotation by %d: %w", step, err)
	}
	levelP := evk.LevelP()
	ks := o.buffer(level, levelP)
	defer o.recycle(ks)
	if err := o.gk.eval.GadgetProductLazy(level, ct.Value[1], &evk.GadgetCiphertext, ks); err != nil {
		return err
	}
	index := o.gk.eval.AutomorphismIndex(els[0])
	return o.locked(ct, func(ringQ *ring.Ring) error {
		ringQ.AutomorphismNTTWithIndexThenAddLazy(ct.Value[0], index, o.q[0])
		if o.qp == nil {
			o.levelP = levelP
			o.qp = rlwe.NewElementExtended(o.c.params, 1, level, levelP)
			o.qp.IsNTT = true
		} else if levelP != o.levelP {
			return fmt.Errorf("the Galois keys of one rotation sum have different special primes")
		}
		ringQP := o.c.params.RingQP().AtLevel(level, levelP)
		if o.lazyQP >= min(o.c.params.QiOverflowMargin(level), o.c.params.PiOverflowMargin(levelP))-1 {
			ringQP.Reduce(o.qp.Value[0], o.qp.Value[0])
			ringQP.Reduce(o.qp.Value[1], o.qp.Value[1])
			o.lazyQP = 0
		}
		ringQP.AutomorphismNTTWithIndexThenAddLazy(ks.Value[0], index, o.qp.Value[0])
		ringQP.AutomorphismNTTWithIndexThenAddLazy(ks.Value[1], index, o.qp.Value[1])
		o.lazyQP++
		return nil
	})
}

// locked runs f, which adds one value below q into each of o.q, under the lock, once ct has been
// checked against the first part and o.q reduced if one more addition could overflow.
func (o *rotSumObj) locked(ct *rlwe.Ciphertext, f func(ringQ *ring.Ring) error) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.finished {
		return fmt.Errorf("this rotation sum was already read: start another")
	}
	ringQ := o.c.params.RingQ().AtLevel(ct.Level())
	if o.meta == nil {
		meta := *ct.MetaData
		o.meta = &meta
		o.q = [2]ring.Poly{ringQ.NewPoly(), ringQ.NewPoly()}
	} else if ct.Level() != o.q[0].Level() {
		return fmt.Errorf("a rotation sum's parts are at levels %d and %d", o.q[0].Level(), ct.Level())
	} else if _, err := withScale(ct.El(), o.meta.Scale); err != nil {
		return fmt.Errorf("a rotation sum's parts: %w", err)
	}
	if o.lazyQ >= o.c.params.QiOverflowMargin(ct.Level())-1 {
		ringQ.Reduce(o.q[0], o.q[0])
		ringQ.Reduce(o.q[1], o.q[1])
		o.lazyQ = 0
	}
	o.lazyQ++
	return f(ringQ)
}

// buffer: a QP element for one key switch (GadgetProductLazy writes all of it: not zeroed).
func (o *rotSumObj) buffer(level, levelP int) *rlwe.Element[ringqp.Poly] {
	o.mu.Lock()
	defer o.mu.Unlock()
	for len(o.spare) > 0 {
		b := o.spare[len(o.spare)-1]
		o.spare = o.spare[:len(o.spare)-1]
		if b.LevelQ() == level && b.LevelP() == levelP {
			return b
		}
	}
	b := rlwe.NewElementExtended(o.c.params, 1, level, levelP)
	b.IsNTT = true
	return b
}

func (o *rotSumObj) recycle(b *rlwe.Element[ringqp.Poly]) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.finished {
		o.spare = append(o.spare, b)
	}
}

// result returns the sum (once: the accumulators are handed over).
func (o *rotSumObj) result() (*ctObj, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.finished {
		return nil, fmt.Errorf("this rotation sum was already read: start another")
	}
	if o.meta == nil {
		return nil, fmt.Errorf("an empty rotation sum has no value: add at least one ciphertext")
	}
	o.finished = true
	level := o.q[0].Level()
	ringQ := o.c.params.RingQ().AtLevel(level)
	out := ckks.NewCiphertext(o.c.params, 1, level)
	*out.MetaData = *o.meta
	if o.qp != nil {
		ringQP := o.c.params.RingQP().AtLevel(level, o.levelP)
		ringQP.Reduce(o.qp.Value[0], o.qp.Value[0])
		ringQP.Reduce(o.qp.Value[1], o.qp.Value[1])
		o.c.eval.ModDown(level, o.levelP, o.qp, out)
	}
	ringQ.Reduce(o.q[0], o.q[0])
	ringQ.Reduce(o.q[1], o.q[1])
	ringQ.Add(out.Value[0], o.q[0], out.Value[0])
	ringQ.Add(out.Value[1], o.q[1], out.Value[1])
	o.q, o.qp, o.spare = [2]ring.Poly{}, nil, nil
	return &ctObj{c: o.c, ct: out}, nil
}
