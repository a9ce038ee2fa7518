package main

import (
	"github.com/tuneinsight/lattigo/v6/circuits/ckks/bootstrapping"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
)

// Bootstrapping keys on the wire: Lattigo's EvaluationKeys format (circuits/ckks/bootstrapping,
// keys.go of v6.2.0): six optional evaluation keys (ring switching, real/complex, encapsulation),
// each a presence byte then the key, and an optional MemEvaluationKeySet (relinearization key and
// Galois keys). The layout is walked before Lattigo reads it, and the result must be exactly the key
// set genBootstrapKeys makes for this context: the same Galois elements, each key with the shape of
// its level, so that the evaluator built on it never indexes out of range.

// bootstrapKeys walks the layout (no allocation, every length bounded by the bytes left).
func (w *walker) bootstrapKeys() error {
	for i := 0; i < 6; i++ {
		if err := w.optional("bootstrapping evaluation key", w.evaluationKey); err != nil {
			return err
		}
	}
	return w.optional("bootstrapping key set", func() error { return w.memKeySet(true) })
}

// optional: a presence byte (0 or 1), then item when present.
func (w *walker) optional(what string, item func() error) error {
	has, err := w.u8()
	if err != nil {
		return err
	}
	switch has {
	case 0:
		return nil
	case 1:
		return item()
	default:
		return dataErr("%s has a bad presence flag %d", what, has)
	}
}

func (c *ctxObj) unmarshalBootstrapKeys(data []byte) (*btpKeyObj, error) {
	p, err := c.bootstrapParams()
	if err != nil {
		return nil, err
	}
	keys := new(bootstrapping.EvaluationKeys)
	if err = keys.UnmarshalBinary(data); err != nil {
		return nil, dataErr("Lattigo cannot read the bootstrapping keys: %v", err)
	}
	if err = c.checkBootstrapKeys(p, keys); err != nil {
		return nil, err
	}
	return c.wrapBootstrapKeys(p, keys)
}

// checkBootstrapKeys: exactly the keys genBootstrapKeys makes, each of the shape of its level.
func (c *ctxObj) checkBootstrapKeys(p *bootstrapping.Parameters, keys *bootstrapping.EvaluationKeys) error {
	if keys.EvkN1ToN2 != nil || keys.EvkN2ToN1 != nil || keys.EvkRealToCmplx != nil || keys.EvkCmplxToReal != nil {
		return dataErr("bootstrapping keys hold ring-switching keys these parameters never use")
	}
	paramsN2 := p.BootstrappingParameters
	rp := *paramsN2.GetRLWEParameters()
	levels := c.btpKeyLevels(p)
	set := keys.MemEvaluationKeySet
	if set == nil || set.RelinearizationKey == nil {
		return dataErr("bootstrapping keys lack the relinearization key")
	}
	if !gadgetShape(&set.RelinearizationKey.GadgetCiphertext, rp, levels.relin, paramsN2.MaxLevelP()) {
		return dataErr("bootstrapping relinearization key has the wrong shape for these parameters")
	}
	if len(set.GaloisKeys) != len(levels.galois) {
		return dataErr("bootstrapping keys hold %d Galois keys, these parameters need %d", len(set.GaloisKeys),
			len(levels.galois))
	}
	nthRoot := paramsN2.RingQ().NthRoot()
	for el, gk := range set.GaloisKeys {
		level, ok := levels.galois[el]
		if !ok || gk == nil || gk.GaloisElement != el || gk.NthRoot != nthRoot {
			return dataErr("bootstrapping Galois key for element %d is not one these parameters use", el)
		}
		if !gadgetShape(&gk.GadgetCiphertext, rp, level, paramsN2.MaxLevelP()) {
			return dataErr("bootstrapping Galois key for element %d has the wrong shape", el)
		}
	}
	if p.EphemeralSecretWeight == 0 {
		if keys.EvkDenseToSparse != nil || keys.EvkSparseToDense != nil {
			return dataErr("bootstrapping keys hold encapsulation keys these parameters never use")
		}
		return nil
	}
	if keys.EvkDenseToSparse == nil || keys.EvkSparseToDense == nil {
		return dataErr("bootstrapping keys lack the encapsulation keys of the ephemeral secret")
	}
	// dense -> sparse lives at the modulus q0*p0 only (encapsulationKeys), sparse -> dense at the top
	if !gadgetShape(&keys.EvkDenseToSparse.GadgetCiphertext, rp, 0, 0) ||
		!gadgetShape(&keys.EvkSparseToDense.GadgetCiphertext, rp, paramsN2.MaxLevelQ(), paramsN2.MaxLevelP()) {
		return dataErr("bootstrapping encapsulation keys have the wrong shape for these parameters")
	}
	return nil
}

// gadgetShape: g is shaped as rlwe.NewGadgetCiphertext(params, 1, levelQ, levelP, 0) would make it, or
// of degree 0 with a seed (a seeded key), checked without allocating one.
func gadgetShape(g *rlwe.GadgetCiphertext, params rlwe.Parameters, levelQ, levelP int) bool {
	if g.BaseTwoDecomposition != 0 {
		return false
	}
	rows := params.BaseRNSDecompositionVectorSize(levelQ, levelP)
	cols := params.BaseTwoDecompositionVectorSize(levelQ, levelP, 0)
	if len(g.Value) != rows {
		return false
	}
	n := params.N()
	for i := range g.Value {
		if len(g.Value[i]) != cols[i] {
			return false
		}
		for _, v := range g.Value[i] {
			if len(v) != 2 && (len(v) != 1 || g.Seed == nil) {
				return false
			}
			for _, pq := range v {
				if !samePoly(pq.Q, n, levelQ+1) || !samePoly(pq.P, n, levelP+1) {
					return false
				}
			}
		}
	}
	return true
}
