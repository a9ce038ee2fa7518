package main

import (
	"fmt"
	"math/bits"
	"runtime"
	"unsafe"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
)

// dotEncode computes sum_t in[t] * encode(vals[t], level, scale): dotPlain of diagonals encoded on
// the fly, bit for bit (TestDotEncodeMatchesDotPlain), without making their plaintexts. A streamed
// BSGS step (ResNet-20: 15,028 diagonals per image, none kept) encoded each diagonal whole (7 MiB at
// N = 2^16 and 14 primes), wrote it to memory and read it back in the dot product. Here every
// diagonal is transformed and quantized once, then prime by prime the terms' rows are reduced and
// transformed into buffers that stay in cache and summed at once by the dot kernel.
func (c *ctxObj) dotEncode(in []*ctObj, vals [][]float64, level int, scale float64) (*ctObj, error) {
	if len(in) == 0 || len(in) != len(vals) {
		return nil, fmt.Errorf("dot product of %d ciphertexts and %d vectors", len(in), len(vals))
	}
	if err := c.checkLevel(level); err != nil {
		return nil, err
	}
	if err := checkScale(scale); err != nil {
		return nil, err
	}
	slots, period := c.params.MaxSlots(), len(vals[0])
	for t, v := range vals {
		if len(v) != period || period <= 0 || period&(period-1) != 0 || slots%period != 0 {
			return nil, fmt.Errorf("vector %d has %d values: every vector needs %d, or one power of two dividing "+
				"it (a vector repeating with that period)", t, len(v), slots)
		}
	}
	if out, ok, err := c.dotEncodeFused(in, vals, level, scale); ok || err != nil {
		return out, err
	}
	// elsewhere (no AVX-512, a value beyond 2^64 at this scale): encode, dot, recycle
	zeros := make([]float64, period)
	pts := make([]*ptObj, len(vals))
	defer func() {
		for _, p := range pts {
			if p != nil {
				p.recycle()
			}
		}
	}()
	for t, v := range vals {
		p, err := c.encodePeriodic(v, zeros, level, scale)
		if err != nil {
			return nil, err
		}
		pts[t] = p
	}
	return c.dotPlain(in, pts)
}

// dotTermChunk: terms whose rows of one prime are transformed together and summed by one call of the
// dot kernel (their rows, 8 MiB at N = 2^16, stay in cache); the sums of a call's chunks are added here.
const dotTermChunk = 16

// dotTerms: one call's per-term magnitudes and sign masks (quantizeMagnitudes), one chunk's rows of one
// prime and a partial sum's two limbs, pooled (at N = 2^16: 0.6 MiB per term, 9 MiB per chunk).
type dotTerms struct {
	mag  [][]uint64
	negs [][]uint8
	rows [][]uint64
	part [2][]uint64
}

// dotTermFree: scratch kept between calls. Not a sync.Pool: at the low GOGC of a large evaluation the
// collector runs every few hundred MiB of allocation and empties pools, and each call then allocated
// (and the kernel zeroed) its tens of MiB again.
var dotTermFree = make(chan *dotTerms, 4)

func putDotTerms(d *dotTerms) {
	select {
	case dotTermFree <- d:
	default: // more calls at once than kept: the collector takes it
	}
}

func getDotTerms(terms, n int) *dotTerms {
	var d *dotTerms
	select {
	case d = <-dotTermFree:
	default:
	}
	if d == nil || len(d.part[0]) != n {
		d = &dotTerms{part: [2][]uint64{make([]uint64, n), make([]uint64, n)}}
	}
	for len(d.mag) < terms {
		d.mag, d.negs = append(d.mag, make([]uint64, n)), append(d.negs, make([]uint8, n/8))
	}
	for len(d.rows) < min(terms, dotTermChunk) {
		d.rows = append(d.rows, make([]uint64, n))
	}
	return d
}

// fusedCoefficients: m, the coefficients of the sparse packing of a period (a vector of period P < slots is
// the sparse packing of its P slots, a polynomial in X^(N/m) of m = 2P coefficients, P on the real-slot ring;
// m = N for every slot), when the fused encode-and-dot kernels apply to the ciphertexts in at level; ok =
// false elsewhere (the encode-then-dotPlain path then gives the checks and errors).
func (c *ctxObj) fusedCoefficients(in []*ctObj, period, level int) (int, bool) {
	n, slots := c.params.N(), c.params.MaxSlots()
	md := c.plaintextMeta
	full := 1<<md.LogDimensions.Cols == slots && (n == slots || n == 2*slots)
	if c.ecd.Prec() > 53 || !quantizeKernel || !hasNativeDot() || !full || n%8 != 0 || !md.IsNTT {
		return 0, false
	}
	m := n / (slots / period)
	if m%8 != 0 || (period < slots && c.params.RingType() != ring.Standard) {
		return 0, false
	}
	for _, x := range in {
		if x.ct.Degree() != 1 || x.ct.Level() != level || !x.ct.IsNTT {
			return 0, false
		}
	}
	return m, true
}

// dotEncodeFused is dotEncode's fast path; ok = false (nothing done) where it does not apply.
func (c *ctxObj) dotEncodeFused(in []*ctObj, vals [][]float64, level int, scale float64) (*ctObj, bool, error) {
	n, period := c.params.N(), len(vals[0])
	m, ok := c.fusedCoefficients(in, period, level)
	if !ok {
		return nil, false, nil
	}
	md := c.plaintextMeta
	d := getDotTerms(len(vals), n)
	defer putDotTerms(d)
	buf, bufPool := complexBuffer(period)
	defer bufPool.Put(buf)
	values := *buf
	for t, v := range vals {
		for i, x := range v {
			values[i] = complex(x, 0)
		}
		if err := inverseFFT(c.ecd, int(c.params.RingQ().NthRoot()), values); err != nil {
			return nil, false, err
		}
		if !quantizeMagnitudes(values, m, scale, d.mag[t], d.negs[t]) {
			return nil, false, nil
		}
	}
	acc := rlwe.NewCiphertext(c.params, 1, level)
	meta := *in[0].ct.MetaData
	meta.Scale = in[0].ct.Scale.Mul(rlwe.NewScale(scale))
	acc.MetaData = &meta
	pin := pinLimbs(in, 2, level+1)
	defer pin.Unpin()
	for _, r := range d.rows {
		pin.Pin(&r[0])
	}
	pin.Pin(&d.part[0][0])
	pin.Pin(&d.part[1][0])
	chunk := min(len(in), dotTermChunk)
	c0, c1, p := make([]uintptr, chunk), make([]uintptr, chunk), make([]uintptr, chunk)
	for t := range p {
		p[t] = uintptr(unsafe.Pointer(&d.rows[t][0]))
	}
	ringQ := c.params.RingQ()
	for j := 0; j <= level; j++ {
		sub := ringQ.SubRings[j]
		q, bred := sub.Modulus, sub.BRedConstant
		dst0, dst1 := acc.Value[0].Coeffs[j], acc.Value[1].Coeffs[j]
		for lo := 0; lo < len(in); lo += chunk {
			hi := min(lo+chunk, len(in))
			for t := lo; t < hi; t++ {
				encodedRow(sub, d.mag[t], d.negs[t], m, n, md.IsMontgomery, d.rows[t-lo])
				c0[t-lo] = uintptr(unsafe.Pointer(&in[t].ct.Value[0].Coeffs[j][0]))
				c1[t-lo] = uintptr(unsafe.Pointer(&in[t].ct.Value[1].Coeffs[j][0]))
			}
			if lo == 0 {
				dotPrimeNative(c0[:hi-lo], c1[:hi-lo], p[:hi-lo], q, pow64Mod(q, bred), bred, productChunk(q), dst0, dst1)
				continue
			}
			dotPrimeNative(c0[:hi-lo], c1[:hi-lo], p[:hi-lo], q, pow64Mod(q, bred), bred, productChunk(q), d.part[0], d.part[1])
			sub.Add(dst0, d.part[0], dst0) // exact modulo q: the same sum as one pass over every term
			sub.Add(dst1, d.part[1], dst1)
		}
	}
	runtime.KeepAlive(d)
	return &ctObj{c: c, ct: acc}, true, nil
}

// encodedRow: one prime's row of an encoding of m coefficients in X^(n/m), as embedSlots and
// NTTSparseAndMontgomery write it: where m < n, the transform of dimension m with the roots of n, each
// value then repeated n/m times (the n-point transform of a polynomial in X^(n/m)).
func encodedRow(sub *ring.SubRing, mag []uint64, negs []uint8, m, n int, montgomery bool, row []uint64) {
	compactRow(sub, mag, negs, m, n, montgomery, row)
	if m == n {
		return
	}
	gap := n / m
	for j := m - 1; j >= 0; j-- {
		v := row[j]
		for w := range gap {
			row[j*gap+w] = v
		}
	}
}

// compactRow: encodedRow's first m values (all n where m = n), the transform before its repetition;
// row[m:] is zeroed.
func compactRow(sub *ring.SubRing, mag []uint64, negs []uint8, m, n int, montgomery bool, row []uint64) {
	signedRow(mag, negs, m, sub.Modulus, row)
	if m == n {
		sub.NTT(row[:n], row[:n])
		if montgomery {
			sub.MForm(row[:n], row[:n])
		}
		return
	}
	if montgomery {
		sub.MForm(row[:m], row[:m])
	}
	ring.NTTStandard(row[:m], row[:m], m, sub.Modulus, sub.MRedConstant, sub.BRedConstant, sub.RootsForward)
}

// encodePeriodic is encode for a vector repeating with period len(re), a power of two dividing the slots
// (all of them: encode): below the slots, Lattigo's sparse encoding of its len(re) slots, the polynomial in
// X^(slots/len(re)) that the full-slot encoding of the repeated vector gives but for the rounding of its
// zero coefficients.
func (c *ctxObj) encodePeriodic(re, im []float64, level int, scale float64) (*ptObj, error) {
	period, slots := len(re), c.params.MaxSlots()
	if len(im) != period || period <= 0 || period&(period-1) != 0 || slots%period != 0 {
		return nil, fmt.Errorf("encode needs %d values or a power of two dividing it, got %d real and %d imaginary "+
			"parts", slots, len(re), len(im))
	}
	if err := c.checkLevel(level); err != nil {
		return nil, err
	}
	if err := checkScale(scale); err != nil {
		return nil, err
	}
	pt := c.plaintextAt(level)
	pt.Scale = rlwe.NewScale(scale)
	if period < slots {
		pt.LogDimensions.Cols = bits.Len(uint(period)) - 1
	}
	if err := c.embed(re, im, pt); err != nil {
		return nil, err
	}
	pt.LogDimensions = c.plaintextMeta.LogDimensions // the same polynomial encodes the vector repeated over every slot
	return &ptObj{c: c, pt: pt, encoded: true}, nil
}
