package main

import (
	"fmt"
	"math"
	"runtime/debug"
	"sync"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/bootstrapping"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

const lattigoModule = "github.com/tuneinsight/lattigo/v6"

// ctxObj is one Lattigo context: parameters and the objects every operation shares.
// Since v6.2.0 Lattigo's Encoder, Evaluator, KeyGenerator, Encryptor and Decryptor may be
// used concurrently (their scratch buffers come from sync pools; ShallowCopy was removed),
// so one of each is shared by all callers.
type ctxObj struct {
	params ckks.Parameters
	ecd    *ckks.Encoder
	eval   *ckks.Evaluator // no keys: additions, plaintext products, rescale
	kgen   *rlwe.KeyGenerator

	btpMu          sync.Mutex                // guards btp, set once by enableBootstrapping
	btp            *bootstrapping.Parameters // nil until bootstrapping is enabled
	btpKeysAtUsage bool                      // make bootstrapping keys at the level where they are used
	btpStreamDFT   bool                      // encode the DFT matrices when a bootstrap runs (bootstrap_stream.go)

	recycled      []sync.Pool    // per level: the plaintexts of released encodings (plaintext_pool.go)
	plaintextMeta *rlwe.MetaData // the metadata ckks.NewPlaintext gives (recycled plaintexts get a copy)
}

type skObj struct {
	c   *ctxObj
	sk  *rlwe.SecretKey
	dec *rlwe.Decryptor
}

type pkObj struct {
	c   *ctxObj
	pk  *rlwe.PublicKey
	enc *rlwe.Encryptor
}

type rlkObj struct {
	c    *ctxObj
	rlk  *rlwe.RelinearizationKey
	eval *ckks.Evaluator
}

type gkObj struct {
	c    *ctxObj
	set  *rlwe.MemEvaluationKeySet
	eval *ckks.Evaluator
}

type ctObj struct {
	c            *ctxObj
	ct           *rlwe.Ciphertext
	seed         []byte // a fresh secret-key encryption: the seed of its c1 (wire.go), else nil
	seedEncoding int    // how the seed expands into c1: encodingSeeded or encodingSeededAES
	seedLevel    int
	seedDigest   uint64 // of c1 when the seed was drawn (wire.go seeded)
}

type ptObj struct {
	c       *ctxObj
	pt      *rlwe.Plaintext
	encoded bool // made by encode: its buffers go back to c.recycled when its handle is released
}

func (o *ctxObj) owner() *ctxObj { return o }
func (o *skObj) owner() *ctxObj  { return o.c }
func (o *pkObj) owner() *ctxObj  { return o.c }
func (o *rlkObj) owner() *ctxObj { return o.c }
func (o *gkObj) owner() *ctxObj  { return o.c }
func (o *ctObj) owner() *ctxObj  { return o.c }
func (o *ptObj) owner() *ctxObj  { return o.c }

// lattigoVersion reads the Lattigo module version this library was built with.
func lattigoVersion() string {
	version := "unknown"
	goVersion := "go?"
	if info, ok := debug.ReadBuildInfo(); ok {
		goVersion = info.GoVersion
		for _, dep := range info.Deps {
			if dep.Path == lattigoModule {
				version = dep.Version
			}
		}
	}
	return fmt.Sprintf("lattigo %s (%s)", version, goVersion)
}

// downstreamPrimes returns, for each requested bit size, a distinct NTT-friendly prime
// 2^k - j*2N + 1 (so of exactly k bits), taken in order from Lattigo's own generator.
// Lattigo's GenModuli alternates above and below 2^k for k < 61, which yields (k+1)-bit
// primes; henn's parameter contract (and its security check) counts bits exactly.
// nthRoot is 2N on the standard ring and 4N on the conjugate-invariant one.
func downstreamPrimes(logN int, nthRoot uint64, sizes []int, gens map[int]*ring.NTTFriendlyPrimesGenerator) ([]uint64, error) {
	out := make([]uint64, len(sizes))
	for i, k := range sizes {
		g, ok := gens[k]
		if !ok {
			gen := ring.NewNTTFriendlyPrimesGenerator(uint64(k), nthRoot)
			g = &gen
			gens[k] = g
		}
		p, err := g.NextDownstreamPrime()
		if err != nil {
			return nil, fmt.Errorf("cannot find enough %d-bit NTT-friendly primes for N = 2^%d (%v): use fewer "+
				"primes of that size or larger ones", k, logN, err)
		}
		out[i] = p
	}
	return out, nil
}

// newContext builds the Lattigo parameters: pinned primes q/p when given, else primes of the
// requested bit sizes; uniform ternary secret (henn's security table assumes it). ringType
// ring.ConjugateInvariant gives N real slots on ring degree N (primes = 1 mod 4N).
func newContext(logN int, q, p []uint64, logQ, logP []int, logScale int, ringType ring.Type) (*ctxObj, error) {
	if logN < 10 || logN > 17 {
		return nil, fmt.Errorf("log_n = %d outside 10..17", logN)
	}
	if logScale < 1 || logScale > 60 {
		return nil, fmt.Errorf("log_scale = %d outside 1..60: henn uses one prime per rescale (Lattigo's "+
			"PREC64 mode)", logScale)
	}
	if ringType != ring.Standard && ringType != ring.ConjugateInvariant {
		return nil, fmt.Errorf("unknown ring type %d", ringType)
	}
	if len(q) == 0 {
		nthRoot := uint64(2) << logN
		if ringType == ring.ConjugateInvariant {
			nthRoot <<= 1
		}
		gens := map[int]*ring.NTTFriendlyPrimesGenerator{}
		var err error
		if q, err = downstreamPrimes(logN, nthRoot, logQ, gens); err != nil {
			return nil, err
		}
		if p, err = downstreamPrimes(logN, nthRoot, logP, gens); err != nil {
			return nil, err
		}
	} else if len(p) == 0 {
		return nil, fmt.Errorf("pinned q primes need pinned p primes as well")
	}
	params, err := ckks.NewParametersFromLiteral(ckks.ParametersLiteral{
		LogN:            logN,
		Q:               q,
		P:               p,
		Xs:              ring.Ternary{P: 2.0 / 3.0},
		RingType:        ringType,
		LogDefaultScale: logScale,
	})
	if err != nil {
		return nil, fmt.Errorf("Lattigo rejected the parameters: %w", err)
	}
	if n := params.LevelsConsumedPerRescaling(); n != 1 {
		return nil, fmt.Errorf("Lattigo would divide by %d primes per rescale at log_scale %d; henn needs 1", n, logScale)
	}
	return &ctxObj{
		params: params,
		ecd:    ckks.NewEncoder(params),
		eval:   ckks.NewEvaluator(params, nil),
		kgen:   rlwe.NewKeyGenerator(params),

		recycled:      make([]sync.Pool, params.MaxLevel()+1),
		plaintextMeta: ckks.NewPlaintext(params, 0).MetaData,
	}, nil
}

// ---- keys ------------------------------------------------------------------------------------

func (c *ctxObj) genSecretKey() *skObj {
	return c.wrapSecretKey(c.kgen.GenSecretKeyNew())
}

func (c *ctxObj) wrapSecretKey(sk *rlwe.SecretKey) *skObj {
	return &skObj{c: c, sk: sk, dec: rlwe.NewDecryptor(c.params, sk)}
}

func (c *ctxObj) genPublicKey(sk *skObj) *pkObj {
	return c.wrapPublicKey(c.kgen.GenPublicKeyNew(sk.sk))
}

func (c *ctxObj) wrapPublicKey(pk *rlwe.PublicKey) *pkObj {
	return &pkObj{c: c, pk: pk, enc: rlwe.NewEncryptor(c.params, pk)}
}

func (c *ctxObj) genRelinKey(sk *skObj) *rlkObj {
	return c.wrapRelinKey(c.kgen.GenRelinearizationKeyNew(sk.sk))
}

func (c *ctxObj) wrapRelinKey(rlk *rlwe.RelinearizationKey) *rlkObj {
	return &rlkObj{c: c, rlk: rlk, eval: c.eval.WithKey(rlwe.NewMemEvaluationKeySet(rlk))}
}

// galoisElements maps left-rotation steps (and conjugation) to Lattigo's Galois elements.
func (c *ctxObj) galoisElements(steps []int64, conjugate bool) ([]uint64, error) {
	slots := int64(c.params.MaxSlots())
	els := make([]uint64, 0, len(steps)+1)
	for _, s := range steps {
		if s <= 0 || s >= slots {
			return nil, fmt.Errorf("rotation step %d outside 1..%d: normalize steps modulo the slot count", s, slots-1)
		}
		els = append(els, c.params.GaloisElement(int(s)))
	}
	if conjugate && !c.realSlots() { // real slots are their own conjugates: no key
		els = append(els, c.params.GaloisElementOrderTwoOrthogonalSubgroup())
	}
	return els, nil
}

func (c *ctxObj) genGaloisKeys(sk *skObj, steps []int64, conjugate bool) (*gkObj, error) {
	els, err := c.galoisElements(steps, conjugate)
	if err != nil {
		return nil, err
	}
	keys := make([]*rlwe.GaloisKey, len(els))
	generateKeys(c.params, len(els), func(kgen *rlwe.KeyGenerator, i int) {
		keys[i] = kgen.GenGaloisKeyNew(els[i], sk.sk, keyAt(c.params.MaxLevelQ(), c.params.MaxLevelP()))
	})
	return c.wrapGaloisKeys(keys...), nil
}

func (c *ctxObj) wrapGaloisKeys(keys ...*rlwe.GaloisKey) *gkObj {
	set := rlwe.NewMemEvaluationKeySet(nil, keys...)
	return &gkObj{c: c, set: set, eval: c.eval.WithKey(set)}
}

// realSlots reports the conjugate-invariant ring (N real slots).
func (c *ctxObj) realSlots() bool { return c.params.RingType() == ring.ConjugateInvariant }

// missingGalois reports the steps (0 standing for conjugation) whose keys are missing from gk.
func (c *ctxObj) missingGalois(gk *gkObj, steps []int64, conjugate bool) ([]int64, error) {
	els, err := c.galoisElements(steps, conjugate)
	if err != nil {
		return nil, err
	}
	var missing []int64
	for i, el := range els {
		if _, ok := gk.set.GaloisKeys[el]; !ok {
			if i < len(steps) {
				missing = append(missing, steps[i])
			} else {
				missing = append(missing, 0)
			}
		}
	}
	return missing, nil
}

// ---- encoding, encryption ------------------------------------------------------------------------

func (c *ctxObj) checkLevel(level int) error {
	if level < 0 || level > c.params.MaxLevel() {
		return fmt.Errorf("level %d outside 0..%d", level, c.params.MaxLevel())
	}
	return nil
}

func checkScale(scale float64) error {
	if math.IsNaN(scale) || math.IsInf(scale, 0) || scale < 1 {
		return fmt.Errorf("scale %v must be a finite number >= 1", scale)
	}
	return nil
}

// encode encodes complex values (re[i] + i*im[i]) at the given level and scale: every slot's, or one period
// (a power of two dividing the slots) of a vector repeating over them (encodePeriodic).
func (c *ctxObj) encode(re, im []float64, level int, scale float64) (*ptObj, error) {
	return c.encodePeriodic(re, im, level, scale)
}

// decode writes the slots of pt into re and im.
func (c *ctxObj) decode(pt *ptObj, re, im []float64) error {
	slots := c.params.MaxSlots()
	if len(re) != slots || len(im) != slots {
		return fmt.Errorf("decode needs room for %d values", slots)
	}
	values := make([]complex128, slots)
	if err := c.ecd.Decode(pt.pt, values); err != nil {
		return err
	}
	for i, v := range values {
		re[i], im[i] = real(v), imag(v)
	}
	return nil
}

func (c *ctxObj) encrypt(pt *ptObj, pk *pkObj) (*ctObj, error) {
	ct, err := pk.enc.EncryptNew(pt.pt)
	if err != nil {
		return nil, err
	}
	return &ctObj{c: c, ct: ct}, nil
}

// encryptSymmetric encrypts under the secret key: (-a*s + m + e, a) with a uniform, one product and no
// public-key terms, so about half the work of encrypt; the result is an ordinary ciphertext whose a
// comes from a seed (wire.go), so that it travels as c0 and the seed.
func (c *ctxObj) encryptSymmetric(pt *ptObj, sk *skObj) (*ctObj, error) {
	return c.encryptSeeded(pt, sk)
}

func (c *ctxObj) decrypt(ct *ctObj, sk *skObj) *ptObj {
	return &ptObj{c: c, pt: sk.dec.DecryptNew(ct.ct)}
}
