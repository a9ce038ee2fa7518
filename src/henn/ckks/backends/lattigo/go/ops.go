package main

import (
	"errors"
	"fmt"
	"math"
	"math/big"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/ring/ringqp"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
	"github.com/tuneinsight/lattigo/v6/utils/bignum"
)

// scaleRTol: scales closer than this count as equal (henn's evaluator checks 1e-9 first).
const scaleRTol = 1e-8

func (c *ctxObj) wrap(ct *rlwe.Ciphertext, err error) (*ctObj, error) {
	if err != nil {
		return nil, err
	}
	return &ctObj{c: c, ct: ct}, nil
}

// withScale returns el itself when its scale already equals target, else a shallow copy whose
// metadata carries target. henn has checked that the scales agree; without this,
// Lattigo's Add would multiply by the rounded scale ratio (1) to "align" float rounding noise.
func withScale(el *rlwe.Element[ring.Poly], target rlwe.Scale) (*rlwe.Element[ring.Poly], error) {
	if el.Scale.Cmp(target) == 0 {
		return el, nil
	}
	ratio, _ := new(big.Float).Quo(&el.Scale.Value, &target.Value).Float64()
	if math.Abs(ratio-1) > scaleRTol {
		return nil, fmt.Errorf("operand scales 2^%.4f and 2^%.4f differ: encode or rescale so they match",
			el.Scale.Log2(), target.Log2())
	}
	meta := *el.MetaData
	meta.Scale = target
	cp := *el
	cp.MetaData = &meta
	return &cp, nil
}

// addLike runs Add or Sub of a ciphertext and a ciphertext or plaintext operand.
func (c *ctxObj) addLike(a *ctObj, b *rlwe.Element[ring.Poly], sub bool) (*ctObj, error) {
	if a.ct.Level() != b.Level() {
		return nil, fmt.Errorf("operands are at levels %d and %d", a.ct.Level(), b.Level())
	}
	b, err := withScale(b, a.ct.Scale)
	if err != nil {
		return nil, err
	}
	if sub {
		return c.wrap(c.eval.SubNew(a.ct, b))
	}
	return c.wrap(c.eval.AddNew(a.ct, b))
}

func (c *ctxObj) add(a, b *ctObj) (*ctObj, error)             { return c.addLike(a, b.ct.El(), false) }
func (c *ctxObj) sub(a, b *ctObj) (*ctObj, error)             { return c.addLike(a, b.ct.El(), true) }
func (c *ctxObj) addPlain(a *ctObj, b *ptObj) (*ctObj, error) { return c.addLike(a, b.pt.El(), false) }
func (c *ctxObj) subPlain(a *ctObj, b *ptObj) (*ctObj, error) { return c.addLike(a, b.pt.El(), true) }

func (c *ctxObj) negate(a *ctObj) *ctObj {
	out := a.ct.CopyNew()
	ringQ := c.params.RingQ().AtLevel(a.ct.Level())
	for i := range out.Value {
		ringQ.Neg(out.Value[i], out.Value[i])
	}
	return &ctObj{c: c, ct: out}
}

// mul multiplies two degree-1 ciphertexts; relinearizes when rk is not nil.
func (c *ctxObj) mul(a, b *ctObj, rk *rlkObj) (*ctObj, error) {
	if a.ct.Degree() != 1 || b.ct.Degree() != 1 {
		return nil, fmt.Errorf("ciphertext products need degree-1 operands (relinearize first)")
	}
	if a.ct.Level() != b.ct.Level() {
		return nil, fmt.Errorf("operands are at levels %d and %d", a.ct.Level(), b.ct.Level())
	}
	if rk != nil {
		return c.wrap(rk.eval.MulRelinNew(a.ct, b.ct))
	}
	return c.wrap(c.eval.MulNew(a.ct, b.ct))
}

func (c *ctxObj) mulPlain(a *ctObj, pt *ptObj) (*ctObj, error) {
	if a.ct.Level() != pt.pt.Level() {
		return nil, fmt.Errorf("operands are at levels %d and %d", a.ct.Level(), pt.pt.Level())
	}
	return c.wrap(c.eval.MulNew(a.ct, pt.pt))
}

func (c *ctxObj) relinearize(a *ctObj, rk *rlkObj) (*ctObj, error) {
	return c.wrap(rk.eval.RelinearizeNew(a.ct))
}

// rescale divides by exactly one prime, q_level: Evaluator.Rescale divides by
// LevelsConsumedPerRescaling() primes, which newContext has checked to be 1 (PREC64).
func (c *ctxObj) rescale(a *ctObj) (*ctObj, error) {
	level := a.ct.Level()
	if level == 0 {
		return nil, fmt.Errorf("cannot rescale at level 0")
	}
	out := rlwe.NewCiphertext(c.params, a.ct.Degree(), level-1)
	if err := c.eval.Rescale(a.ct, out); err != nil {
		return nil, err
	}
	if out.Level() != level-1 {
		return nil, fmt.Errorf("Lattigo's Rescale went from level %d to %d, expected one prime", level, out.Level())
	}
	return &ctObj{c: c, ct: out}, nil
}

func (c *ctxObj) dropLevel(a *ctObj, levels int) (*ctObj, error) {
	if levels < 0 || levels > a.ct.Level() {
		return nil, fmt.Errorf("cannot drop %d levels from level %d", levels, a.ct.Level())
	}
	return &ctObj{c: c, ct: c.eval.DropLevelNew(a.ct, levels)}, nil
}

func (c *ctxObj) rotate(a *ctObj, step int64, gk *gkObj) (*ctObj, error) {
	if _, err := c.galoisElements([]int64{step}, false); err != nil {
		return nil, err
	}
	return c.wrap(gk.eval.RotateNew(a.ct, int(step)))
}

// rotateHoisted rotates a by every step, sharing one decomposition of its c1 (Lattigo's RotateHoisted),
// the rotations on GOMAXPROCS goroutines: Lattigo runs them one after the other, and henn's BSGS hoists
// one input at a time (ResNet-20: 762 baby steps per image, each a ModDown, while the other core waited).
func (c *ctxObj) rotateHoisted(a *ctObj, steps []int64, gk *gkObj) ([]*ctObj, error) {
	els, err := c.galoisElements(steps, false)
	if err != nil {
		return nil, err
	}
	if a.ct.Degree() != 1 {
		return nil, fmt.Errorf("cannot rotate a ciphertext of degree %d (relinearize first)", a.ct.Degree())
	}
	if len(steps) == 0 {
		return nil, nil
	}
	level, levelP := a.ct.Level(), c.params.MaxLevelP()
	ringQP := c.params.RingQP().AtLevel(level, levelP)
	decomposed := make([]ringqp.Poly, c.params.BaseRNSDecompositionVectorSize(level, levelP))
	for i := range decomposed {
		decomposed[i] = ringQP.NewPoly()
	}
	gk.eval.DecomposeNTT(level, levelP, c.params.PCount(), a.ct.Value[1], a.ct.IsNTT, decomposed)
	out := make([]*ctObj, len(steps))
	errs := make([]error, len(steps))
	parallelFor(len(steps), func(i int) {
		ct := ckks.NewCiphertext(c.params, 1, level)
		errs[i] = gk.eval.AutomorphismHoisted(level, a.ct, decomposed, els[i], ct)
		out[i] = &ctObj{c: c, ct: ct}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *ctxObj) conjugate(a *ctObj, gk *gkObj) (*ctObj, error) {
	if c.realSlots() { // the conjugate of real slots is the ciphertext itself (Lattigo refuses the automorphism)
		return &ctObj{c: c, ct: a.ct.CopyNew()}, nil
	}
	return c.wrap(gk.eval.ConjugateNew(a.ct))
}

// addScalar adds re + i*im to every slot; Lattigo scales the constant by a's own scale.
// In place on a copy: v6.2.0's AddNew(ct, constant) leaves the new ciphertext at the default
// scale instead of a's (its scalar branch does not copy the scale to a distinct output).
func (c *ctxObj) addScalar(a *ctObj, re, im float64) (*ctObj, error) {
	out := a.ct.CopyNew()
	if err := c.eval.Add(out, complex(re, im), out); err != nil {
		return nil, err
	}
	return &ctObj{c: c, ct: out}, nil
}

// mulScalar multiplies every slot by re + i*im encoded at `scale`; the result's scale is
// a.Scale * scale.
//
// Lattigo's native Mul(ct, constant) scales a non-integer constant by q_level (the prime the
// next rescale divides by) and a Gaussian-integer constant by 1. So: scale == q_level and a
// non-integer constant use the native call as is; every other case multiplies by the Gaussian
// integer round(c * scale), which Lattigo applies unscaled (at its encoding precision, 53 bits
// for scales <= 2^53: a relative error <= 2^-53), and sets the scale itself.
func (c *ctxObj) mulScalar(a *ctObj, re, im, scale float64) (*ctObj, error) {
	if err := checkScale(scale); err != nil {
		return nil, err
	}
	level := a.ct.Level()
	q := c.params.Q()[level]
	cst := complex(re, im)
	isGaussianInt := re == math.Trunc(re) && im == math.Trunc(im)
	if !isGaussianInt && math.Abs(scale/float64(q)-1) < 1e-15 {
		return c.wrap(c.eval.MulNew(a.ct, cst))
	}
	var s *big.Float
	if math.Abs(scale/float64(q)-1) < 1e-15 {
		s = new(big.Float).SetUint64(q) // exact prime, as Lattigo's own path uses
	} else {
		s = new(big.Float).SetFloat64(scale)
	}
	scaled := bignum.Complex{roundScaled(re, s), roundScaled(im, s)}
	out, err := c.eval.MulNew(a.ct, &scaled)
	if err != nil {
		return nil, err
	}
	out.Scale = a.ct.Scale.Mul(rlwe.NewScale(s))
	return &ctObj{c: c, ct: out}, nil
}

// roundScaled returns round(x * s) as an integer-valued big.Float.
func roundScaled(x float64, s *big.Float) *big.Float {
	v := new(big.Float).SetPrec(256).SetFloat64(x)
	v.Mul(v, s)
	half := big.NewFloat(0.5)
	if v.Sign() >= 0 {
		v.Add(v, half)
	} else {
		v.Sub(v, half)
	}
	i, _ := v.Int(nil)
	return new(big.Float).SetPrec(256).SetInt(i)
}

// metadata reports Lattigo's own level, scale and degree of a ciphertext or plaintext.
func metadata(v any) (level int, scale float64, logScale float64, degree int, err error) {
	switch o := v.(type) {
	case *ctObj:
		return o.ct.Level(), o.ct.Scale.Float64(), o.ct.Scale.Log2(), o.ct.Degree(), nil
	case *ptObj:
		return o.pt.Level(), o.pt.Scale.Float64(), o.pt.Scale.Log2(), 0, nil
	default:
		return 0, 0, 0, 0, handleErr("metadata needs a ciphertext or plaintext, got a %s", kindName(v))
	}
}
