package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"runtime/debug"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/bootstrapping"
	"github.com/tuneinsight/lattigo/v6/circuits/ckks/dft"
	ltckks "github.com/tuneinsight/lattigo/v6/circuits/ckks/lintrans"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
	"github.com/tuneinsight/lattigo/v6/utils"
)

// btpLiteral is henn's bootstrapping literal (henn.ckks.bootstrap_params.BootstrapParameters.to_bridge):
// plain numbers only, so that it crosses the bridge as JSON. Zero values take Lattigo's defaults.
type btpLiteral struct {
	LogSlots          int     `json:"log_slots"`
	LogP              []int   `json:"log_p"`
	CoeffsToSlots     [][]int `json:"cts_log_scales"`
	SlotsToCoeffs     [][]int `json:"stc_log_scales"`
	EvalModLogScale   int     `json:"evalmod_log_scale"`
	EphemeralWeight   int     `json:"ephemeral_weight"`
	LogMessageRatio   int     `json:"log_message_ratio"`
	K                 int     `json:"k"`
	Mod1Degree        int     `json:"mod1_degree"`
	DoubleAngle       int     `json:"double_angle"`
	Mod1InvDegree     int     `json:"mod1_inv_degree"`
	KeysAtUsageLevels bool    `json:"keys_at_usage_levels"`
	StreamDFT         bool    `json:"stream_dft"`
}

// btpInfo reports what the bootstrapping parameters came to (read by the Python backend,
// whose security module checks LogQP before any key exists).
type btpInfo struct {
	Q           []uint64 `json:"q"` // the whole chain: residual primes, then the circuit's
	P           []uint64 `json:"p"`
	LogQP       float64  `json:"log_qp"`
	Depth       int      `json:"depth"`
	OutputLevel int      `json:"output_level"`
	LogSlots    int      `json:"log_slots"`
	GaloisKeys  int      `json:"galois_keys"`
	LevelCtS    int      `json:"level_cts"`
	LevelEvMod  int      `json:"level_evalmod"`
	LevelStC    int      `json:"level_stc"`
	// the CoeffsToSlots and SlotsToCoeffs factors' bytes when kept once encoded (stream_dft; else 0)
	DFTFactorBytes int64 `json:"dft_factor_bytes"`
}

// btpKeyObj holds the bootstrapping evaluation keys (public: made under the client's secret, they
// cannot decrypt) and the evaluator built on them.
type btpKeyObj struct {
	c      *ctxObj
	keys   *bootstrapping.EvaluationKeys
	eval   *bootstrapping.Evaluator
	stream *dftDiagonals // nil: the evaluator keeps its encoded DFT matrices (bootstrap_stream.go)
	// streamed factors kept once encoded, within a budget (bootstrap_dft_cache.go)
	keptDFT dftCache
	ecd     *ckks.Encoder // over the bootstrapping parameters, for streamed DFT factors
}

func (o *btpKeyObj) owner() *ctxObj { return o.c }

func (l btpLiteral) lattigo(c *ctxObj) bootstrapping.ParametersLiteral {
	lit := bootstrapping.ParametersLiteral{
		LogN: utils.Pointy(c.params.LogN()),
		Xs:   c.params.Xs(), // the same (dense ternary) secret, extended to the bootstrapping modulus
	}
	if l.LogSlots > 0 {
		lit.LogSlots = utils.Pointy(l.LogSlots)
	}
	if len(l.LogP) > 0 {
		lit.LogP = l.LogP
	}
	if len(l.CoeffsToSlots) > 0 {
		lit.CoeffsToSlotsFactorizationDepthAndLogScales = l.CoeffsToSlots
	}
	if len(l.SlotsToCoeffs) > 0 {
		lit.SlotsToCoeffsFactorizationDepthAndLogScales = l.SlotsToCoeffs
	}
	for _, f := range []struct {
		v   int
		dst **int
	}{{l.EvalModLogScale, &lit.EvalModLogScale}, {l.EphemeralWeight, &lit.EphemeralSecretWeight},
		{l.LogMessageRatio, &lit.LogMessageRatio}, {l.K, &lit.K}, {l.Mod1Degree, &lit.Mod1Degree},
		{l.DoubleAngle, &lit.DoubleAngle}, {l.Mod1InvDegree, &lit.Mod1InvDegree}} {
		if f.v > 0 {
			*f.dst = utils.Pointy(f.v)
		}
	}
	return lit
}

// enableBootstrapping derives the bootstrapping parameters of context c (residual parameters =
// c's own) from a JSON btpLiteral; once per context, before any bootstrapping key exists.
func (c *ctxObj) enableBootstrapping(literal []byte) (*btpInfo, error) {
	var lit btpLiteral
	if err := json.Unmarshal(literal, &lit); err != nil {
		return nil, fmt.Errorf("bootstrapping literal is not valid JSON: %w", err)
	}
	if lit.EphemeralWeight < 0 || lit.LogSlots < 0 || lit.LogSlots > c.params.LogMaxSlots() {
		return nil, fmt.Errorf("bootstrapping literal out of range (log_slots %d, ephemeral weight %d)", lit.LogSlots,
			lit.EphemeralWeight)
	}
	params, err := bootstrapping.NewParametersFromLiteral(c.params, lit.lattigo(c))
	if err != nil {
		return nil, fmt.Errorf("Lattigo rejected the bootstrapping parameters: %w", err)
	}
	c.btpMu.Lock()
	defer c.btpMu.Unlock()
	if c.btp != nil {
		return nil, fmt.Errorf("bootstrapping is already enabled on this context")
	}
	c.btp, c.btpKeysAtUsage, c.btpStreamDFT = &params, lit.KeysAtUsageLevels, lit.StreamDFT
	return c.btpInfo(), nil
}

func (c *ctxObj) btpInfo() *btpInfo {
	p := c.btp
	b := p.BootstrappingParameters
	return &btpInfo{Q: b.Q(), P: b.P(), LogQP: b.LogQP(), Depth: p.Depth(), OutputLevel: p.ResidualParameters.MaxLevel(),
		LogSlots: p.LogMaxSlots(), GaloisKeys: len(p.GaloisElements(b)), LevelCtS: p.CoeffsToSlotsParameters.LevelQ,
		LevelEvMod: p.Mod1ParametersLiteral.LevelQ, LevelStC: p.SlotsToCoeffsParameters.LevelQ,
		DFTFactorBytes: dftFactorBytes(p, c.btpStreamDFT)}
}

// dftFactorBytes is what keeping every streamed factor takes, each at the top level of its transform
// (btpKeyObj.dftKeepBytes once the keys exist): 0 without stream_dft, where the evaluator keeps its
// own matrices.
func dftFactorBytes(p *bootstrapping.Parameters, stream bool) int64 {
	if !stream {
		return 0
	}
	logN, n := p.BootstrappingParameters.LogN(), int64(p.BootstrappingParameters.N())*8
	var total int64
	for _, lit := range []dft.MatrixLiteral{p.CoeffsToSlotsParameters, p.SlotsToCoeffsParameters} {
		for _, diags := range lit.FactorDiagonals(logN) {
			total += int64(diags) * int64(lit.LevelQ+1+lit.LevelP+1) * n
		}
	}
	return total
}

func (c *ctxObj) bootstrapParams() (*bootstrapping.Parameters, error) {
	c.btpMu.Lock()
	defer c.btpMu.Unlock()
	if c.btp == nil {
		return nil, fmt.Errorf("bootstrapping is not enabled on this context: open the backend with parameters " +
			"that carry bootstrap parameters")
	}
	return c.btp, nil
}

// genBootstrapKeys makes the bootstrapping keys under sk, as Lattigo's GenEvaluationKeys does for
// equal ring degrees (the secret extended to the whole modulus, encapsulation keys to an ephemeral
// sparse secret), except that each key can be made at the level where the circuit uses it: the
// relinearization key at EvalMod's top level, the Galois keys only SlotsToCoeffs needs at its top
// level. Fewer levels means fewer digits and primes per key: about half the key memory.
//
// The evaluator is built first, on a key set of placeholders (Lattigo only checks that every key is
// present): with the DFT matrices kept encoded (no stream_dft) they take 5.2 GiB for a moment at
// N = 2^16, 3.6 GiB of which stay, and that moment then comes before the 7 GiB of keys exist instead of
// on top of them (measured peak 12.3 GiB before). The keys then fill the same key set, which every part
// of the evaluator holds by pointer. They are made on every core (generateKeys).
func (c *ctxObj) genBootstrapKeys(sk *skObj) (*btpKeyObj, error) {
	p, err := c.bootstrapParams()
	if err != nil {
		return nil, err
	}
	levels := c.btpKeyLevels(p)
	set := &rlwe.MemEvaluationKeySet{RelinearizationKey: &rlwe.RelinearizationKey{}, GaloisKeys: map[uint64]*rlwe.GaloisKey{}}
	for el := range levels.galois {
		set.GaloisKeys[el] = &rlwe.GaloisKey{GaloisElement: el}
	}
	keys := &bootstrapping.EvaluationKeys{MemEvaluationKeySet: set}
	if p.EphemeralSecretWeight != 0 {
		keys.EvkDenseToSparse, keys.EvkSparseToDense = &rlwe.EvaluationKey{}, &rlwe.EvaluationKey{}
	}
	btp, err := c.wrapBootstrapKeys(p, keys)
	if err != nil {
		return nil, err
	}
	debug.FreeOSMemory() // the matrices' scratch, before the keys take its place

	paramsN2 := p.BootstrappingParameters
	skN2 := extendSecret(sk.sk, paramsN2)
	at := func(level int) rlwe.EvaluationKeyParameters { return keyAt(level, paramsN2.MaxLevelP()) }
	if keys.EvkDenseToSparse, keys.EvkSparseToDense, err = encapsulationKeys(p, skN2); err != nil {
		return nil, err
	}
	els := p.GaloisElements(paramsN2)
	galois := make([]*rlwe.GaloisKey, len(els))
	generateKeys(paramsN2, len(els)+1, func(kgen *rlwe.KeyGenerator, i int) {
		if i == len(els) {
			full := at(levels.relin) // one key, used by every product of EvalMod: kept full
			full.Compressed = false
			set.RelinearizationKey = kgen.GenRelinearizationKeyNew(skN2, full)
		} else {
			galois[i] = kgen.GenGaloisKeyNew(els[i], skN2, at(levels.galois[els[i]]))
		}
	})
	for i, el := range els { // the map is written by this goroutine only
		set.GaloisKeys[el] = galois[i]
	}
	// Key generation leaves scratch that the collector frees but the runtime keeps for reuse; with a
	// soft limit near the machine's memory it would stay in the resident set.
	debug.FreeOSMemory()
	return btp, nil
}

// btpKeyLevelSet: the ciphertext level of each bootstrapping key (all at the special primes' top).
type btpKeyLevelSet struct {
	relin  int
	galois map[uint64]int // by Galois element: exactly the elements the circuit uses
}

// btpKeyLevels: with keys at usage levels, the relinearization key at EvalMod's top level and the
// Galois keys only SlotsToCoeffs needs at its top level; all others (and every key otherwise) at the
// top of the bootstrapping modulus. Key generation and deserialization both follow it.
func (c *ctxObj) btpKeyLevels(p *bootstrapping.Parameters) btpKeyLevelSet {
	paramsN2 := p.BootstrappingParameters
	top := paramsN2.MaxLevelQ()
	out := btpKeyLevelSet{relin: top, galois: map[uint64]int{}}
	for _, el := range p.GaloisElements(paramsN2) {
		out.galois[el] = top
	}
	if !c.btpKeysAtUsage {
		return out
	}
	out.relin = p.Mod1ParametersLiteral.LevelQ
	high := map[uint64]bool{paramsN2.GaloisElementForComplexConjugation(): true}
	for _, el := range p.CoeffsToSlotsParameters.GaloisElements(paramsN2) {
		high[el] = true
	}
	for i := p.LogMaxSlots(); i < paramsN2.LogN()-1; i++ { // trace of sparse packings, at the top
		high[paramsN2.GaloisElement(1<<i)] = true
	}
	for _, el := range p.SlotsToCoeffsParameters.GaloisElements(paramsN2) {
		if !high[el] {
			out.galois[el] = p.SlotsToCoeffsParameters.LevelQ
		}
	}
	return out
}

// wrapBootstrapKeys builds the evaluator on keys. Lattigo's DFT generation in big floats, which only a
// streamed DFT at an encoding precision above dft.Precision128 runs, is allowed dftGarbageRoom of garbage.
func (c *ctxObj) wrapBootstrapKeys(p *bootstrapping.Parameters, keys *bootstrapping.EvaluationKeys) (*btpKeyObj, error) {
	var eval *bootstrapping.Evaluator
	build := func() (err error) {
		eval, err = bootstrapping.NewEvaluator(*p, keys)
		return err
	}
	if !c.btpStreamDFT {
		if err := build(); err != nil {
			return nil, fmt.Errorf("cannot build the bootstrapping evaluator: %w", err)
		}
		return &btpKeyObj{c: c, keys: keys, eval: eval}, nil
	}
	// each DFT factor is encoded where it runs: the evaluator needs the factors' shapes, the bridge their values
	var generated [][]ltckks.Diagonals[complex128]
	shapes := func() (err error) {
		generated, err = dft.WithShapesOnly(build)
		return err
	}
	var err error
	if p.BootstrappingParameters.EncodingPrecision() > dft.Precision128 {
		err = withGarbageRoom(dftGarbageRoom, shapes)
	} else {
		err = shapes()
	}
	if err != nil {
		return nil, fmt.Errorf("cannot build the bootstrapping evaluator: %w", err)
	}
	if len(generated) != 2 {
		return nil, fmt.Errorf("the bootstrapping evaluator generated %d DFT matrices, not 2 (CoeffsToSlots, SlotsToCoeffs)", len(generated))
	}
	btp := &btpKeyObj{c: c, keys: keys, eval: eval}
	btp.streamDFT(generated[0], generated[1])
	return btp, nil
}

// extendSecret lifts a secret key of the residual ring to the bootstrapping modulus (same N).
func extendSecret(sk *rlwe.SecretKey, paramsN2 ckks.Parameters) *rlwe.SecretKey {
	ringQ, ringP := paramsN2.RingQ(), paramsN2.RingP()
	out := rlwe.NewSecretKey(paramsN2)
	buff := ringQ.NewPoly()
	rlwe.ExtendBasisSmallNormAndCenterNTTMontgomery(ringQ, ringQ, sk.Value.Q, buff, out.Value.Q)
	rlwe.ExtendBasisSmallNormAndCenterNTTMontgomery(ringQ, ringP, sk.Value.Q, buff, out.Value.P)
	return out
}

// encapsulationKeys: dense -> sparse (at the modulus q0*p0 only) and sparse -> dense switching keys
// (https://eprint.iacr.org/2022/024), as Lattigo's genEncapsulationEvaluationKeysNew.
func encapsulationKeys(p *bootstrapping.Parameters, skDense *rlwe.SecretKey) (*rlwe.EvaluationKey, *rlwe.EvaluationKey, error) {
	if p.EphemeralSecretWeight == 0 {
		return nil, nil, nil
	}
	params := p.BootstrappingParameters
	paramsSparse, err := rlwe.NewParametersFromLiteral(rlwe.ParametersLiteral{
		LogN: params.LogN(),
		Q:    params.Q()[:1],
		P:    params.P()[:1],
	})
	if err != nil {
		return nil, nil, err
	}
	kgenSparse := rlwe.NewKeyGenerator(paramsSparse)
	kgenDense := rlwe.NewKeyGenerator(params)
	skSparse := kgenSparse.GenSecretKeyWithHammingWeightNew(p.EphemeralSecretWeight)
	return kgenSparse.GenEvaluationKeyNew(skDense, skSparse), kgenDense.GenEvaluationKeyNew(skSparse, skDense), nil
}

// bootstrap refreshes ct to the residual parameters' top level. The input is read as holding its
// values divided by `divide` (its scale multiplied by it, no operation on the data), so that
// values within [-divide, divide] land in the range [-1, 1] the modular reduction is made for;
// the output's scale is the default scale / divide, so it holds the input's values again.
// With full slots the real and imaginary halves go through EvalMod on two goroutines.
func (b *btpKeyObj) bootstrap(ct *ctObj, divide float64, parallel bool) (*ctObj, error) {
	if ct.ct.Degree() != 1 {
		return nil, fmt.Errorf("cannot bootstrap a ciphertext of degree %d: relinearize it first", ct.ct.Degree())
	}
	if ct.ct.Level() < 1 {
		return nil, fmt.Errorf("cannot bootstrap a ciphertext at level 0: bootstrap one level earlier")
	}
	if !(divide > 0) || math.IsInf(divide, 0) {
		return nil, fmt.Errorf("bootstrap range %v must be a positive finite number", divide)
	}
	in := ct.ct.CopyNew()
	in.Scale = in.Scale.Mul(rlwe.NewScale(divide))
	logSlots := in.LogDimensions.Cols
	if btpSlots := b.eval.LogMaxSlots(); btpSlots < logSlots {
		in.LogDimensions.Cols = btpSlots // a periodic vector: sparse bootstrapping of one period
	}
	var out *rlwe.Ciphertext
	var err error
	// streamed DFT matrices exist only in henn's circuit; Lattigo's own needs them kept
	if b.stream != nil || (parallel && b.eval.LogMaxSlots() == b.eval.BootstrappingParameters.LogMaxSlots()) {
		out, err = b.bootstrapInHalves(in, parallel)
	} else {
		out, err = b.eval.Bootstrap(in)
	}
	if err != nil {
		return nil, err
	}
	out.LogDimensions.Cols = logSlots
	def := b.c.params.DefaultScale()
	out.Scale = rlwe.NewScale(new(big.Float).Quo(&def.Value, big.NewFloat(divide)))
	// A bootstrap leaves 1.5 GiB of scratch and streamed DFT factors as garbage at N = 2^16; Go keeps
	// freed pages resident, and the network's next layers stacked their working set on them (encrypted
	// ResNet-20: 15.4 GiB after the first bootstrap for 13.8 before). One collection here is cheap: the
	// live data are pointer-free coefficient arrays.
	debug.FreeOSMemory()
	return &ctObj{c: b.c, ct: out}, nil
}

// bootstrapInHalves is Lattigo's bootstrapping circuit (ScaleDown, ModUp, CoeffsToSlots,
// EvalMod, SlotsToCoeffs) for equal ring degrees, on both cores when parallel: the two EvalMod
// evaluations (real and imaginary parts, the costliest step) at once, and each DFT factor's giant
// steps in two halves (bootstrap_dft.go); with streamed DFT factors (bootstrap_stream.go), also
// on one core. Lattigo's evaluators are safe for concurrent use since v6.2.0.
func (b *btpKeyObj) bootstrapInHalves(in *rlwe.Ciphertext, parallel bool) (*rlwe.Ciphertext, error) {
	eval := b.eval
	ct, _, err := eval.ScaleDown(in)
	if err != nil {
		return nil, err
	}
	if ct, err = eval.ModUp(ct); err != nil {
		return nil, err
	}
	re, im, err := b.coeffsToSlots(ct, parallel)
	if err != nil {
		return nil, err
	}
	if im == nil {
		if re, err = eval.EvalMod(re); err != nil {
			return nil, err
		}
	} else {
		halves := [2]*rlwe.Ciphertext{re, im}
		if err = inHalves(parallel, func(k int) (e error) { halves[k], e = eval.EvalMod(halves[k]); return }); err != nil {
			return nil, err
		}
		re, im = halves[0], halves[1]
	}
	out, err := b.slotsToCoeffs(re, im, parallel)
	if err != nil {
		return nil, err
	}
	out.Scale = eval.ResidualParameters.DefaultScale()
	return out, nil
}

// bootstrapKeyBytes is the memory the keys hold (their binary size).
func (b *btpKeyObj) bootstrapKeyBytes() int {
	return b.keys.BinarySize()
}
