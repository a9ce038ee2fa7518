package main

import (
	"fmt"
	"math"
	"math/big"
	"testing"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/dft"
	ltckks "github.com/tuneinsight/lattigo/v6/circuits/ckks/lintrans"
	"github.com/tuneinsight/lattigo/v6/circuits/common/lintrans"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// sameDiagonals fails t unless got holds Lattigo's big-float diagonals want, as complex128, bit for bit
// (zeros of either sign equal: the encoder rounds them alike).
func sameDiagonals(t *testing.T, name string, got []lintrans.Diagonals[complex128], want []ltckks.Diagonals[complex128]) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d factors, Lattigo %d", name, len(got), len(want))
	}
	values := 0
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("%s factor %d: %d diagonals, Lattigo %d", name, i, len(got[i]), len(want[i]))
		}
		for k, w := range want[i] {
			g, ok := got[i][k]
			if !ok || len(g) != len(w) {
				t.Fatalf("%s factor %d: diagonal %d missing or of another length", name, i, k)
			}
			for j := range w {
				if real(g[j]) != real(w[j]) || imag(g[j]) != imag(w[j]) {
					t.Fatalf("%s factor %d diagonal %d slot %d: %v, Lattigo %v (|diff| %.3g)", name, i, k, j, g[j], w[j],
						math.Hypot(real(g[j]-w[j]), imag(g[j]-w[j])))
				}
				values++
			}
		}
	}
	t.Logf("%s: %d factors, %d values, bit-identical", name, len(want), values)
}

// bigDiagonals: Lattigo's GenMatrices for literal d, in big-float arithmetic, converted to complex128.
func bigDiagonals(d dft.MatrixLiteral, params ckks.Parameters) []ltckks.Diagonals[complex128] {
	generated := d.GenMatrices(params.LogN(), params.EncodingPrecision())
	out := make([]ltckks.Diagonals[complex128], len(generated))
	for i, diags := range generated {
		out[i] = ltckks.Diagonals[complex128]{}
		for k, v := range diags {
			out[i][k] = make([]complex128, len(v))
			for j, x := range v {
				out[i][k][j] = x.Complex128()
			}
		}
	}
	return out
}

// The complex128 diagonals the streamed evaluator keeps (dft.WithShapesOnly: lattigo_patch/dft/diagonals128.go)
// are Lattigo's big-float ones, for insecure_boot_n12 (full slots) and for sparse slots with factors that
// merge two FFT levels and share a rescale.
func TestDFTDiagonals128EqualLattigos(t *testing.T) {
	for _, lit := range []string{
		`{"log_message_ratio": 12, "stream_dft": true}`,
		`{"log_message_ratio": 12, "stream_dft": true, "log_slots": 9, "cts_log_scales": [[42, 42], [42]],
		  "stc_log_scales": [[30], [30, 30]]}`,
	} {
		c, err := newContext(12, nil, nil, []int{60, 40, 40, 40}, []int{61, 61}, 40, ring.Standard)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.enableBootstrapping([]byte(lit)); err != nil {
			t.Fatal(err)
		}
		btp, err := c.genBootstrapKeys(c.genSecretKey())
		if err != nil {
			t.Fatal(err)
		}
		params := btp.eval.BootstrappingParameters
		if params.EncodingPrecision() != 53 {
			t.Fatalf("encoding precision %d, not 53", params.EncodingPrecision())
		}
		cts, stc := btp.eval.C2SDFTMatrix.MatrixLiteral, btp.eval.S2CDFTMatrix.MatrixLiteral
		if cts.Scaling == nil || stc.Scaling == nil {
			t.Fatal("the evaluator's DFT literals carry no scaling")
		}
		sameDiagonals(t, "CoeffsToSlots "+lit, btp.stream.cts, bigDiagonals(cts, params))
		sameDiagonals(t, "SlotsToCoeffs "+lit, btp.stream.stc, bigDiagonals(stc, params))
	}
}

// Every type, format and option of a DFT literal, through NewMatrixFromLiteral's shapes-only build: the
// values kept are Lattigo's, made in complex128 at 53 bits of encoding precision, and Lattigo's own
// big-float values, converted, above.
func TestDFTShapesOnlyEveryFormatAndPrecision(t *testing.T) {
	for _, logScale := range []int{40, 58} {
		params, err := ckks.NewParametersFromLiteral(ckks.ParametersLiteral{LogN: 10, LogQ: []int{60, 60, 60, 60},
			LogP: []int{61}, LogDefaultScale: logScale})
		if err != nil {
			t.Fatal(err)
		}
		if prec := params.EncodingPrecision(); prec != max(53, uint(logScale)) {
			t.Fatalf("encoding precision %d at scale 2^%d", prec, logScale)
		}
		for _, typ := range []dft.Type{dft.HomomorphicEncode, dft.HomomorphicDecode} {
			for _, format := range []dft.Format{dft.Standard, dft.SplitRealAndImag, dft.RepackImagAsReal} {
				for _, logSlots := range []int{5, 9} {
					for _, bitReversed := range []bool{false, true} {
						d := dft.MatrixLiteral{Type: typ, Format: format, LogSlots: logSlots, LevelQ: 3, Levels: []int{1, 2},
							LogBSGSRatio: 1, BitReversed: bitReversed}
						if bitReversed {
							d.Scaling = big.NewFloat(0.3)
						}
						generated, err := dft.WithShapesOnly(func() error {
							_, err := dft.NewMatrixFromLiteral(params, d, nil)
							return err
						})
						if err != nil || len(generated) != 1 {
							t.Fatalf("%d generated matrices (%v), want 1", len(generated), err)
						}
						got := make([]lintrans.Diagonals[complex128], len(generated[0]))
						for i, diags := range generated[0] {
							got[i] = lintrans.Diagonals[complex128](diags)
						}
						name := fmt.Sprintf("scale 2^%d type %d format %d log_slots %d bit-reversed %v", logScale, typ,
							format, logSlots, bitReversed)
						sameDiagonals(t, name, got, bigDiagonals(d, params))
					}
				}
			}
		}
	}
}
