package main

import (
	"fmt"
	"sort"
	"sync"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/dft"
	ltckks "github.com/tuneinsight/lattigo/v6/circuits/ckks/lintrans"
	"github.com/tuneinsight/lattigo/v6/circuits/common/lintrans"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring/ringqp"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// CoeffsToSlots and SlotsToCoeffs on both cores. Lattigo evaluates each factor of the DFT as one
// baby-step giant-step product on one goroutine. Here each factor's giant steps are split in two
// halves with about as many diagonals each, after one hoisted decomposition of the input and its
// baby-step rotations (also computed in two halves): M(ct) = A(ct) + B(ct), A and B on their own
// goroutine. The two partial sums are brought down from the special primes separately, so the
// result differs from Lattigo's in the last bits of rounding only. The rest mirrors Lattigo v6.2.0's
// circuits/ckks/dft (CoeffsToSlots, SlotsToCoeffs, dft).

// twoCoreDFT returns the factors of mat applied to ctIn, rescaled after each level.
// diags: the factors' diagonals when they are streamed (bootstrap_stream.go), else nil.
func (b *btpKeyObj) twoCoreDFT(ctIn *rlwe.Ciphertext, mat dft.Matrix, diags []lintrans.Diagonals[complex128], parallel bool) (*rlwe.Ciphertext, error) {
	inputLogSlots := ctIn.LogDimensions
	eval := b.eval.DFTEvaluator
	idx := 0
	ct := ctIn
	for _, lvl := range mat.Levels {
		for range lvl {
			lt, err := b.factor(mat, diags, idx, ct.Level(), parallel)
			if err != nil {
				return nil, err
			}
			out, err := b.linearTransformInHalves(ct, lt, parallel)
			if err != nil {
				return nil, err
			}
			ct = out
			idx++
		}
		if err := eval.Rescale(ct, ct); err != nil {
			return nil, err
		}
	}
	// the encoding matrices keep the plaintext polynomial Y = X^(N/n) of the input
	ct.LogDimensions = inputLogSlots
	return ct, nil
}

// linearTransformInHalves returns lt(ct), its giant steps split in two halves (two goroutines when parallel).
func (b *btpKeyObj) linearTransformInHalves(ct *rlwe.Ciphertext, lt ltckks.LinearTransformation, parallel bool) (*rlwe.Ciphertext, error) {
	lte := b.eval.DFTEvaluator.LTEvaluator
	params := b.eval.BootstrappingParameters
	levelQ := min(lt.LevelQ, ct.Level())
	whole := lintrans.LinearTransformation(lt)
	index, _, rotN2 := whole.BSGSIndex()
	halves := splitGiantSteps(whole, index)
	if lt.N1 == 0 || halves == nil {
		out := ckks.NewCiphertext(params, 1, levelQ)
		return out, lte.Evaluate(ct, lt, out)
	}
	levelP := lt.LevelP
	ringQP := params.RingQP().AtLevel(levelQ, levelP)
	decomposed := make([]ringqp.Poly, params.BaseRNSDecompositionVectorSize(levelQ, levelP))
	for i := range decomposed {
		decomposed[i] = ringQP.NewPoly()
	}
	lte.DecomposeNTT(levelQ, levelP, levelP+1, ct.Value[1], ct.IsNTT, decomposed)

	var rots [2][]int
	for i, r := range rotN2 {
		rots[i%2] = append(rots[i%2], r)
	}
	var rotated [2]map[int]*rlwe.Element[ringqp.Poly]
	err := inHalves(parallel, func(k int) error {
		rotated[k] = map[int]*rlwe.Element[ringqp.Poly]{}
		return lte.PreRotatedCiphertextForDiagonalMatrixMultiplication(levelQ, levelP, ct, decomposed, rots[k], rotated[k])
	})
	if err != nil {
		return nil, err
	}
	for r, el := range rotated[1] {
		rotated[0][r] = el
	}
	var parts [2]*rlwe.Ciphertext
	err = inHalves(parallel, func(k int) error {
		parts[k] = ckks.NewCiphertext(params, 1, levelQ)
		return lte.MultiplyByDiagMatrixBSGS(ct, halves[k], rotated[0], parts[k])
	})
	if err != nil {
		return nil, err
	}
	return parts[0], b.eval.Add(parts[0], parts[1], parts[0])
}

// splitGiantSteps: two transforms over disjoint giant steps with about as many diagonals each (nil
// when there are fewer than two giant steps).
func splitGiantSteps(lt lintrans.LinearTransformation, index map[int][]int) *[2]lintrans.LinearTransformation {
	if len(index) < 2 {
		return nil
	}
	giant := make([]int, 0, len(index))
	for j := range index {
		giant = append(giant, j)
	}
	sort.Slice(giant, func(a, c int) bool {
		return len(index[giant[a]]) > len(index[giant[c]]) || (len(index[giant[a]]) == len(index[giant[c]]) && giant[a] < giant[c])
	})
	var out [2]lintrans.LinearTransformation
	var load [2]int
	for k := range out {
		out[k] = lt
		out[k].Vec = map[int]ringqp.Poly{}
	}
	for _, j := range giant { // largest first, to the lighter half
		k := 0
		if load[1] < load[0] {
			k = 1
		}
		for _, i := range index[j] {
			out[k].Vec[j+i] = lt.Vec[j+i]
		}
		load[k] += len(index[j])
	}
	return &out
}

// inHalves runs f(0) and f(1): at once on two goroutines when parallel, else one after the other;
// a panic in the second goroutine becomes its error.
func inHalves(parallel bool, f func(k int) error) error {
	if !parallel {
		if err := f(0); err != nil {
			return err
		}
		return f(1)
	}
	var errs [2]error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() {
			if r := recover(); r != nil {
				errs[1] = fmt.Errorf("a bootstrapping goroutine panicked: %v", r)
			}
		}()
		errs[1] = f(1)
	}()
	errs[0] = f(0)
	wg.Wait()
	if errs[0] != nil {
		return errs[0]
	}
	return errs[1]
}

// coeffsToSlots mirrors dft.Evaluator.CoeffsToSlotsNew with the two-core DFT.
func (b *btpKeyObj) coeffsToSlots(ctIn *rlwe.Ciphertext, parallel bool) (ctReal, ctImag *rlwe.Ciphertext, err error) {
	mat := b.eval.C2SDFTMatrix
	params := b.eval.BootstrappingParameters
	eval := b.eval.DFTEvaluator
	var diags []lintrans.Diagonals[complex128]
	if b.stream != nil {
		diags = b.stream.cts
	}
	zV, err := b.twoCoreDFT(ctIn, mat, diags, parallel)
	if err != nil {
		return nil, nil, err
	}
	if mat.Format != dft.RepackImagAsReal && mat.Format != dft.SplitRealAndImag {
		return zV, nil, nil
	}
	ctReal = ckks.NewCiphertext(params, 1, zV.Level())
	if mat.LogSlots == params.LogMaxSlots() {
		ctImag = ckks.NewCiphertext(params, 1, zV.Level())
	}
	if err = eval.Conjugate(zV, ctReal); err != nil {
		return nil, nil, err
	}
	tmp := ctImag
	if tmp == nil {
		tmp = ckks.NewCiphertext(params, 1, ctReal.Level())
	}
	if err = eval.Sub(zV, ctReal, tmp); err != nil { // imaginary part
		return nil, nil, err
	}
	if err = eval.Mul(tmp, -1i, tmp); err != nil {
		return nil, nil, err
	}
	if err = eval.Add(ctReal, zV, ctReal); err != nil { // real part
		return nil, nil, err
	}
	if mat.Format == dft.RepackImagAsReal && mat.LogSlots < params.LogMaxSlots() {
		if err = eval.Rotate(tmp, 1<<ctIn.LogDimensions.Cols, tmp); err != nil {
			return nil, nil, err
		}
		if err = eval.Add(ctReal, tmp, ctReal); err != nil {
			return nil, nil, err
		}
	}
	return ctReal, ctImag, nil
}

// slotsToCoeffs mirrors dft.Evaluator.SlotsToCoeffsNew with the two-core DFT.
func (b *btpKeyObj) slotsToCoeffs(ctReal, ctImag *rlwe.Ciphertext, parallel bool) (*rlwe.Ciphertext, error) {
	mat := b.eval.S2CDFTMatrix
	if ctReal.Level() < mat.LevelQ || (ctImag != nil && ctImag.Level() < mat.LevelQ) {
		return nil, fmt.Errorf("SlotsToCoeffs input below the matrices' level %d", mat.LevelQ)
	}
	eval := b.eval.DFTEvaluator
	in := ctReal
	if ctImag != nil {
		in = ckks.NewCiphertext(b.eval.BootstrappingParameters, 1, mat.LevelQ)
		if err := eval.Mul(ctImag, 1i, in); err != nil {
			return nil, err
		}
		if err := eval.Add(in, ctReal, in); err != nil {
			return nil, err
		}
	}
	var diags []lintrans.Diagonals[complex128]
	if b.stream != nil {
		diags = b.stream.stc
	}
	return b.twoCoreDFT(in, mat, diags, parallel)
}
