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
// evaluator is built took 38 s and a 3.6 GiB peak at N = 2^16, all of it thrown away at once.

var shapesOnly struct {
	sync.Mutex
	on        bool
	generated [][]ltcommon.Diagonals[*bignum.Complex]
}

// WithShapesOnly runs build (a bootstrapping.NewEvaluator call) with NewMatrixFromLiteral making each
// factor's shape (levels, scale, dimensions, baby steps) without allocating or encoding its diagonals,
// and returns the diagonals' values each call generated, in call order (generating them is most of
// the work, in big-float arithmetic: the caller keeps them rather than generating them again). Calls
// are serialized, so that a concurrent build of another kind never sees the setting.
func WithShapesOnly(build func() error) ([][]ltcommon.Diagonals[*bignum.Complex], error) {
	shapesOnly.Lock()
	defer shapesOnly.Unlock()
	shapesOnly.on, shapesOnly.generated = true, nil
	defer func() { shapesOnly.on, shapesOnly.generated = false, nil }()
	err := build()
	return shapesOnly.generated, err
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
