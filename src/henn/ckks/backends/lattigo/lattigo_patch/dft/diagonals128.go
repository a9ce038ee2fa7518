package dft

import (
	"math"
	"math/big"
	"slices"

	ltcommon "github.com/tuneinsight/lattigo/v6/circuits/ckks/lintrans"
	"github.com/tuneinsight/lattigo/v6/utils"
	"github.com/tuneinsight/lattigo/v6/utils/bignum"
)

// Added by henn. GenMatrices in complex128 arithmetic, for the bridge's shapes-only build (shapes.go).
// Lattigo generates the DFT factors' diagonals in big.Float at the encoding precision, which is 53 bits
// whenever the default scale has at most 53: there every big.Float operation (Add, Sub, Mul, Quo, Neg,
// all round-to-nearest-even) is the float64 operation, so the same operations in the same order give the
// same values bit for bit, from the roots of unity (bignum.Cos's doubling formula, ported) to the scaling.
// Products are written with explicit float64 conversions so that no compiler fuses them into an FMA.
// Every entry of a product of FFT butterfly layers has one nonzero term (one path through the network),
// so the order in which Lattigo's map iteration sums the diagonals' terms does not change any value.
// The bridge's tests check the values against Lattigo's for every type, format and option
// (dft128_test.go): bit-identical.
//
// boot-n16 (N = 2^16, full slots, the bridge's GOGC = 5, 2-core VM shared with other jobs): the CtS and
// StC diagonals in 0.16 s on one core instead of 22.7 s in big floats (42.9 s CPU, most of it collections
// without go/gc_room.go's room); the bootstrapping evaluator built on loaded keys (a server) in 0.29 s
// instead of 18.1-21.8 s; the bootstrapping keys (genBootstrapKeys) in 9.7-9.8 s instead of 17.9-20.0 s,
// peak RSS 7.83 GiB instead of 9.20 GiB (docs/benchmarks.md). Factors on goroutines gained nothing.

// Precision128 is the encoding precision up to which the shapes-only build generates the DFT diagonals in
// complex128 (at 53 bits its arithmetic is Lattigo's big.Float arithmetic), not in big floats.
const Precision128 = 53

// genMatrices128 is d.GenMatrices(logN, prec) for prec <= Precision128 (ok false above), in complex128.
func (d MatrixLiteral) genMatrices128(logN int, prec uint) (plainVector []ltcommon.Diagonals[complex128], ok bool) {
	if prec > Precision128 {
		return nil, false
	}
	logSlots := d.LogSlots
	slots := 1 << logSlots
	maxDepth := d.Depth(false)
	imagRepack := d.Format == RepackImagAsReal

	logdSlots := logSlots
	if logdSlots < logN-1 && imagRepack {
		logdSlots++
	}

	roots := roots128(slots << 2)
	pow5 := make([]int, (slots<<1)+1)
	pow5[0] = 1
	for i := 1; i < (slots<<1)+1; i++ {
		pow5[i] = pow5[i-1] * 5
		pow5[i] &= (slots << 2) - 1
	}

	var a, b, c [][]complex128
	if d.Type == HomomorphicEncode {
		a, b, c = butterflies128(logSlots, 1<<logdSlots, roots, pow5, true)
	} else {
		a, b, c = butterflies128(logSlots, 1<<logdSlots, roots, pow5, false)
	}

	// the FFT levels each factor merges, in GenMatrices' order
	merge := make([]int, maxDepth)
	fftLevel := logSlots
	for i := 0; i < maxDepth; i++ {
		depth := int(math.Ceil(float64(fftLevel) / float64(maxDepth-i)))
		if d.Type == HomomorphicEncode {
			merge[i] = depth
		} else {
			merge[len(merge)-i-1] = depth
		}
		fftLevel -= depth
	}

	scaling := d.scaling128(slots, prec)
	plainVector = make([]ltcommon.Diagonals[complex128], maxDepth)
	fftLevel = logSlots
	for i := 0; i < maxDepth; i++ {
		plainVector[i] = d.factor128(i, fftLevel, merge[i], logSlots, logdSlots, a, b, c, scaling)
		fftLevel -= merge[i]
	}
	return plainVector, true
}

// factor128 is factor i of GenMatrices (its FFT levels fftLevel down to fftLevel-merge+1), repacking and
// scaling applied.
func (d MatrixLiteral) factor128(i, fftLevel, merge, logSlots, logdSlots int, a, b, c [][]complex128, scaling float64) map[int][]complex128 {
	slots := 1 << logSlots
	ltType, bitreversed := d.Type, d.BitReversed
	repack := logSlots != logdSlots && d.Format == RepackImagAsReal
	var vec map[int][]complex128
	if repack && ltType == HomomorphicDecode && i == 0 {
		vec = repackMatrix128(logSlots)
		for j := 0; j < merge; j++ {
			l := logSlots - (fftLevel - j)
			vec = nextLevel128(vec, logSlots, 2*slots, fftLevel-j, a[l], b[l], c[l], ltType, bitreversed)
		}
	} else {
		l := logSlots - fftLevel
		vec = fftDiagMatrix128(logSlots, fftLevel, a[l], b[l], c[l], ltType, bitreversed)
		for j := 1; j < merge; j++ {
			l = logSlots - (fftLevel - j)
			vec = nextLevel128(vec, logSlots, slots, fftLevel-j, a[l], b[l], c[l], ltType, bitreversed)
		}
	}
	// repacking after the IDFT: the last factor times [1, ..., 1, 0, ..., 0]
	if repack && ltType == HomomorphicEncode && i == d.Depth(false)-1 {
		for _, v := range vec {
			clear(v[slots:])
		}
	}
	for _, v := range vec {
		for x, z := range v {
			v[x] = complex(real(z)*scaling, imag(z)*scaling)
		}
	}
	return vec
}

// scaling128 is GenMatrices' factor by which every diagonal is multiplied, computed as it computes it: a
// big.Float of precision prec (<= 53 bits), exact as a float64.
func (d MatrixLiteral) scaling128(slots int, prec uint) float64 {
	scaling := new(big.Float).SetPrec(prec)
	if d.Scaling == nil {
		scaling.SetFloat64(1)
	} else {
		scaling.Set(d.Scaling)
	}
	if d.Type == HomomorphicEncode {
		if d.Format == RepackImagAsReal || d.Format == SplitRealAndImag {
			scaling.Quo(scaling, new(big.Float).SetFloat64(float64(2*slots)))
		} else {
			scaling.Quo(scaling, new(big.Float).SetFloat64(float64(slots)))
		}
	}
	scaling = bignum.Pow(scaling, new(big.Float).Quo(new(big.Float).SetPrec(prec).SetFloat64(1),
		new(big.Float).SetPrec(prec).SetFloat64(float64(d.Depth(false)))))
	f, _ := scaling.Float64()
	return f
}

// roots128 is ckks.GetRootsBigComplex(nthRoot, 53) in float64: e^(2 pi i j / nthRoot) for 0 <= j <= nthRoot.
func roots128(nthRoot int) []complex128 {
	roots := make([]complex128, nthRoot+1)
	quarm := nthRoot >> 2
	pi, _ := bignum.Pi(Precision128).Float64()
	e2ipi := 2 * pi / float64(nthRoot) // exact: powers of two
	cos := make([]float64, quarm+1)
	for i := 1; i < quarm; i++ {
		cos[i] = cos53(e2ipi * float64(i))
	}
	roots[0] = complex(1, 0)
	for i := 1; i < quarm; i++ {
		roots[i] = complex(cos[i], cos[quarm-i])
	}
	roots[quarm] = complex(0, 1)
	for i := 1; i < quarm+1; i++ {
		roots[i+1*quarm] = complex(-real(roots[quarm-i]), imag(roots[quarm-i]))
		roots[i+2*quarm] = complex(-real(roots[i]), -imag(roots[i]))
		roots[i+3*quarm] = complex(real(roots[quarm-i]), -imag(roots[quarm-i]))
	}
	roots[nthRoot] = roots[0]
	return roots
}

// cos53 is bignum.Cos at 53 bits: 1 - s/2 with s = (2 sin(x/2))^2 from (x 2^-25)^2 by 25 doublings
// s <- s (4 - s), each operation rounded as big.Float rounds it.
func cos53(x float64) float64 {
	const prec = 53
	t := 0.5
	for i := uint(1); i < (prec>>1)-1; i++ {
		t *= 0.5
	}
	s := float64(x * t)
	s = float64(s * x)
	s = float64(s * t)
	for i := uint(1); i < prec>>1; i++ {
		s = float64(s * float64(4-s))
	}
	return 1 - float64(s/2)
}

// butterflies128 is ifftPlainVec (inverse) or fftPlainVec: each FFT level's three butterfly vectors.
func butterflies128(logN, dslots int, roots []complex128, pow5 []int, inverse bool) (a, b, c [][]complex128) {
	N := 1 << logN
	a, b, c = make([][]complex128, logN), make([][]complex128, logN), make([][]complex128, logN)
	size := 1
	if 2*N == dslots {
		size = 2
	}
	for index := 0; index < logN; index++ {
		m := 2 << index // fftPlainVec: m = 2, 4, ..., N
		if inverse {
			m = N >> index // ifftPlainVec: m = N, N/2, ..., 2
		}
		aM, bM, cM := make([]complex128, dslots), make([]complex128, dslots), make([]complex128, dslots)
		tt := m >> 1
		gap, mask := N/m, (m<<2)-1
		for i := 0; i < N; i += m {
			for j := 0; j < m>>1; j++ {
				idx1, idx2 := i+j, i+j+tt
				for u := 0; u < size; u++ {
					if inverse {
						k := ((m << 2) - (pow5[j] & mask)) * gap
						aM[idx1+u*N], aM[idx2+u*N] = roots[0], -roots[k]
						bM[idx1+u*N], cM[idx2+u*N] = roots[0], roots[k]
					} else {
						k := (pow5[j] & mask) * gap
						aM[idx1+u*N], aM[idx2+u*N] = roots[0], -roots[k]
						bM[idx1+u*N], cM[idx2+u*N] = roots[k], roots[0]
					}
				}
			}
		}
		a[index], b[index], c[index] = aM, bM, cM
	}
	return
}

// levelRotation is the rotation of FFT level `level` (genFFTDiagMatrix, multiplyFFTMatrixWithNextFFTLevel).
func levelRotation(logL, level, N int, ltType Type, bitreversed bool) int {
	if ltType == HomomorphicEncode && !bitreversed || ltType == HomomorphicDecode && bitreversed {
		return (1 << (level - 1)) & (N - 1)
	}
	return (1 << (logL - level)) & (N - 1)
}

// bitReverse128 is the in-place bit reversal of genFFTDiagMatrix and multiplyFFTMatrixWithNextFFTLevel.
func bitReverse128(logL int, vs ...[]complex128) {
	for _, v := range vs {
		utils.BitReverseInPlaceSlice(v, 1<<logL)
		if len(v) > 1<<logL {
			utils.BitReverseInPlaceSlice(v[1<<logL:], 1<<logL)
		}
	}
}

// fftDiagMatrix128 is genFFTDiagMatrix.
func fftDiagMatrix128(logL, fftLevel int, a, b, c []complex128, ltType Type, bitreversed bool) map[int][]complex128 {
	rot := levelRotation(logL, fftLevel, 1<<logL, ltType, bitreversed)
	if bitreversed {
		bitReverse128(logL, a, b, c)
	}
	vectors := map[int][]complex128{}
	addToDiag128(vectors, 0, a)
	addToDiag128(vectors, rot, b)
	addToDiag128(vectors, (1<<logL)-rot, c)
	return vectors
}

// repackMatrix128 is genRepackMatrix.
func repackMatrix128(logL int) map[int][]complex128 {
	a, b := make([]complex128, 2<<logL), make([]complex128, 2<<logL)
	for i := 0; i < 1<<logL; i++ {
		a[i], a[i+(1<<logL)] = 1, 1i
		b[i], b[i+(1<<logL)] = 1i, 1
	}
	return map[int][]complex128{0: a, 1 << logL: b}
}

// nextLevel128 is multiplyFFTMatrixWithNextFFTLevel (the diagonals visited in order of index).
func nextLevel128(vec map[int][]complex128, logL, N, nextLevel int, a, b, c []complex128, ltType Type, bitreversed bool) map[int][]complex128 {
	rot := levelRotation(logL, nextLevel, N, ltType, bitreversed)
	if bitreversed {
		bitReverse128(logL, a, b, c)
	}
	newVec := map[int][]complex128{}
	keys := make([]int, 0, len(vec))
	for i := range vec {
		keys = append(keys, i)
	}
	slices.Sort(keys)
	for _, i := range keys {
		addToDiag128(newVec, i, rotateAndMul128(vec[i], 0, a))
		addToDiag128(newVec, (i+rot)&(N-1), rotateAndMul128(vec[i], rot, b))
		addToDiag128(newVec, (i-rot)&(N-1), rotateAndMul128(vec[i], -rot, c))
	}
	return newVec
}

// addToDiag128 is addToDiagMatrix; vec is copied if it starts a diagonal.
func addToDiag128(diagMat map[int][]complex128, index int, vec []complex128) {
	if diagMat[index] == nil {
		diagMat[index] = slices.Clone(vec)
		return
	}
	for i, z := range vec {
		diagMat[index][i] += z
	}
}

// rotateAndMul128 is rotateAndMulNew: b times a rotated by k, each product as bignum's ComplexMultiplier
// rounds it.
func rotateAndMul128(a []complex128, k int, b []complex128) []complex128 {
	c := make([]complex128, len(a))
	mask := len(a) - 1
	for i := range c {
		x, y := b[i], a[(i+k)&mask]
		c[i] = complex(float64(real(x)*real(y))-float64(imag(x)*imag(y)), float64(real(x)*imag(y))+float64(imag(x)*real(y)))
	}
	return c
}
