package dft

import (
	"sync"

	ltcommon "github.com/tuneinsight/lattigo/v6/circuits/ckks/lintrans"
	"github.com/tuneinsight/lattigo/v6/circuits/common/lintrans"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/utils/bignum"
)

// Added by henn. A bridge that encodes each DFT factor just before it runs (its stream_dft) needs the
// factors' shapes only: encoding every diagonal over the whole QP basis when the bootstrapping
// evaluator is built took 38 s and a 3.6 GiB peak at N = 2^16, all of it thrown away at once. It needs
// the diagonals' values as complex128 (what the encoder reads at 53 bits of precision): those are
// generated in complex128 (diagonals128.go), not in big-float arithmetic, wherever that gives Lattigo's
// values, that is at an encoding precision of 53 bits.

var shapesOnly struct {
	sync.Mutex
	on        bool
	generated [][]ltcommon.Diagonals[complex128]
}

// WithShapesOnly runs build (a bootstrapping.NewEvaluator call) with NewMatrixFromLiteral making each
// factor's shape (levels, scale, dimensions, baby steps) without allocating or encoding its diagonals,
// and returns the diagonals' values each call generated, in call order, as complex128 (the caller keeps
// them rather than generating them again). Calls are serialized, so that a concurrent build of another
// kind never sees the setting.
func WithShapesOnly(build func() error) ([][]ltcommon.Diagonals[complex128], error) {
	shapesOnly.Lock()
	defer shapesOnly.Unlock()
	shapesOnly.on, shapesOnly.generated = true, nil
	defer func() { shapesOnly.on, shapesOnly.generated = false, nil }()
	err := build()
	return shapesOnly.generated, err
}

// generateShapesOnly is GenMatrices while WithShapesOnly runs, at a precision where genMatrices128 gives
// its values: those kept for the caller, the diagonals' indices returned (all NewMatrixFromLiteral reads
// of them then; each value nil).
func (d MatrixLiteral) generateShapesOnly(logN int, prec uint) ([]ltcommon.Diagonals[*bignum.Complex], bool) {
	values, ok := d.genMatrices128(logN, prec)
	if !ok {
		return nil, false
	}
	shapesOnly.generated = append(shapesOnly.generated, values)
	indices := make([]ltcommon.Diagonals[*bignum.Complex], len(values))
	for i, diags := range values {
		indices[i] = ltcommon.Diagonals[*bignum.Complex]{}
		for k := range diags {
			indices[i][k] = nil
		}
	}
	return indices, true
}

// keepGenerated keeps the diagonals Lattigo generated in big-float arithmetic while WithShapesOnly runs,
// at a precision above genMatrices128's, converted to complex128 (the values a streamed DFT encodes).
func keepGenerated(prec uint, generated []ltcommon.Diagonals[*bignum.Complex]) {
	if prec <= Precision128 {
		return // generateShapesOnly kept them
	}
	values := make([]ltcommon.Diagonals[complex128], len(generated))
	for i, diags := range generated {
		values[i] = ltcommon.Diagonals[complex128]{}
		for k, v := range diags {
			c := make([]complex128, len(v))
			for j, x := range v {
				c[j] = x.Complex128()
			}
			values[i][k] = c
		}
	}
	shapesOnly.generated = append(shapesOnly.generated, values)
}

// shapeOnly is lintrans.NewLinearTransformation without its diagonals (Vec nil).
func shapeOnly(ltparams ltcommon.Parameters) ltcommon.LinearTransformation {
	n1 := 0
	if ltparams.LogBabyStepGiantStepRatio >= 0 {
		n1 = lintrans.FindBestBSGSRatio(ltparams.DiagonalsIndexList, 1<<ltparams.LogDimensions.Cols,
			ltparams.LogBabyStepGiantStepRatio)
	}
	return ltcommon.LinearTransformation{
		MetaData: &rlwe.MetaData{
			PlaintextMetaData:  rlwe.PlaintextMetaData{LogDimensions: ltparams.LogDimensions, Scale: ltparams.Scale, IsBatched: true},
			CiphertextMetaData: rlwe.CiphertextMetaData{IsNTT: true, IsMontgomery: true},
		},
		LogBabyStepGiantStepRatio: ltparams.LogBabyStepGiantStepRatio,
		N1:                        n1,
		LevelQ:                    ltparams.LevelQ,
		LevelP:                    ltparams.LevelP,
	}
}

// FactorDiagonals is the number of diagonals of each factor the literal makes (in GenMatrices' order),
// from their index maps alone: what keeping its factors encoded takes, known before any key or value.
func (d MatrixLiteral) FactorDiagonals(logN int) []int {
	maps := d.computeBootstrappingDFTIndexMap(logN)
	counts := make([]int, len(maps))
	for i, m := range maps {
		counts[i] = len(m)
	}
	return counts
}
