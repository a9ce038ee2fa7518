package main

import (
	"fmt"
	"runtime/debug"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/dft"
	ltckks "github.com/tuneinsight/lattigo/v6/circuits/ckks/lintrans"
	"github.com/tuneinsight/lattigo/v6/circuits/common/lintrans"
	"github.com/tuneinsight/lattigo/v6/ring/ringqp"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
	"github.com/tuneinsight/lattigo/v6/utils"
)

// Streamed DFT matrices. Lattigo's bootstrapping evaluator keeps every CoeffsToSlots and
// SlotsToCoeffs diagonal encoded over the whole QP basis at the top level of its transform: 3.6 GiB
// at N = 2^16 (boot-n16), a third of what a bootstrap holds. With stream_dft the evaluator keeps the
// diagonals as complex values instead (about 0.1 GiB) and encodes each DFT factor just before it
// runs, at the level it runs at, on both cores, dropping it afterwards: the same plaintexts bit for
// bit (TestStreamedDFTMatchesCached), for a few seconds of encoding per bootstrap.

// dftDiagonals holds each factor's diagonals (slot values, as Lattigo's encoder reads them).
type dftDiagonals struct {
	cts, stc []lintrans.Diagonals[complex128]
}

// streamDFT drops the evaluator's encoded DFT matrices, keeping their diagonals' values.
func (b *btpKeyObj) streamDFT() {
	params := b.eval.BootstrappingParameters
	values := func(mat *dft.Matrix) []lintrans.Diagonals[complex128] {
		out := make([]lintrans.Diagonals[complex128], len(mat.Matrices))
		for i, d := range mat.GenMatrices(params.LogN(), params.EncodingPrecision()) {
			out[i] = lintrans.Diagonals[complex128]{}
			for k, v := range d {
				c := make([]complex128, len(v))
				for j, x := range v {
					c[j] = x.Complex128()
				}
				out[i][k] = c
			}
			mat.Matrices[i].Vec = nil
		}
		return out
	}
	b.stream = &dftDiagonals{cts: values(&b.eval.C2SDFTMatrix), stc: values(&b.eval.S2CDFTMatrix)}
	b.ecd = ckks.NewEncoder(params)
	debug.FreeOSMemory()
}

// factor returns DFT factor idx of mat for a ciphertext at level: Lattigo's own when the matrices are
// kept, else encoded now (diags nil: kept).
func (b *btpKeyObj) factor(mat dft.Matrix, diags []lintrans.Diagonals[complex128], idx, level int, parallel bool) (ltckks.LinearTransformation, error) {
	kept := mat.Matrices[idx]
	if diags == nil {
		return kept, nil
	}
	params := b.eval.BootstrappingParameters
	lt := lintrans.NewLinearTransformation(params, lintrans.Parameters{
		DiagonalsIndexList:        diags[idx].DiagonalsIndexList(),
		LevelQ:                    min(kept.LevelQ, level),
		LevelP:                    kept.LevelP,
		Scale:                     kept.Scale,
		LogDimensions:             kept.LogDimensions,
		LogBabyStepGiantStepRatio: kept.LogBabyStepGiantStepRatio,
	})
	if lt.N1 != kept.N1 {
		return ltckks.LinearTransformation{}, fmt.Errorf("streamed DFT factor %d: baby steps %d, not %d", idx, lt.N1, kept.N1)
	}
	return ltckks.LinearTransformation(lt), b.encodeFactor(lt, diags[idx], parallel)
}

// encodeFactor is lintrans.Encode (each diagonal pre-rotated by its giant step) in two halves.
func (b *btpKeyObj) encodeFactor(lt lintrans.LinearTransformation, diags lintrans.Diagonals[complex128], parallel bool) error {
	cols := 1 << lt.LogDimensions.Cols
	type job struct {
		diag, rot int
		poly      ringqp.Poly
	}
	var jobs []job
	if lt.N1 == 0 {
		for _, i := range diags.DiagonalsIndexList() {
			idx := i
			if idx < 0 {
				idx += cols
			}
			jobs = append(jobs, job{i, 0, lt.Vec[idx]})
		}
	} else {
		index, _, _ := lt.BSGSIndex()
		for j := range index {
			for _, i := range index[j] {
				jobs = append(jobs, job{i + j, -j & (cols - 1), lt.Vec[i+j]})
			}
		}
	}
	md := *lt.MetaData
	md.Scale = lt.Scale
	params := b.eval.BootstrappingParameters
	return inHalves(parallel, func(k int) error {
		buf := make([]complex128, cols)
		for n := k; n < len(jobs); n += 2 {
			v, err := diags.At(jobs[n].diag, cols)
			if err != nil {
				return err
			}
			utils.RotateSliceAllocFree(v, jobs[n].rot, buf)
			if err := embedSlots(params, b.ecd, buf, &md, jobs[n].poly.Q, &jobs[n].poly.P); err != nil {
				return err
			}
		}
		return nil
	})
}
