package main

import (
	"fmt"
	"math/bits"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
)

// dotPartsRowBytes bounds one group's encoded rows (terms x m values, one buffer per goroutine): larger
// calls run as several groups of parts, each reading the ciphertexts once more.
const dotPartsRowBytes = 64 << 20

// dotEncodeParts is dotEncode for many parts that read the same ciphertexts and vectors: part p is the sum
// over its terms t in [bounds[p], bounds[p+1]) of in[baby[t]] * encode(vals[vec[t]], level, scale). The giant
// steps of a BSGS layer all read its baby steps: one dotEncode per giant step streamed every baby step from
// memory once per giant step (ResNet-20's last stage: 32 giant steps over 30 baby steps of 14.7 MiB), and
// the dot kernel waited on memory. Here, prime by prime, each vector's row is transformed once at its
// period's size (m values, not n), then the kernel walks the coefficients a tile at a time, every part's sum
// of a tile reading the ciphertexts' tile from cache. Bit for bit dotEncode's sums
// (TestDotEncodePartsMatchesDotEncode); where the fused path does not apply, one dotEncode per part.
func (c *ctxObj) dotEncodeParts(in []*ctObj, baby, vec, bounds []int, vals [][]float64, level int, scale float64) ([]*ctObj, error) {
	if len(vals) == 0 || len(baby) == 0 || len(vec) != len(baby) || len(bounds) < 2 || bounds[0] != 0 ||
		bounds[len(bounds)-1] != len(baby) {
		return nil, fmt.Errorf("dot product parts: %d vectors, %d ciphertext and %d vector indices, part bounds %v",
			len(vals), len(baby), len(vec), bounds)
	}
	for p := 1; p < len(bounds); p++ {
		if bounds[p] <= bounds[p-1] {
			return nil, fmt.Errorf("dot product part %d has no terms (bounds %d, %d)", p-1, bounds[p-1], bounds[p])
		}
	}
	for t := range baby {
		if baby[t] < 0 || baby[t] >= len(in) || vec[t] < 0 || vec[t] >= len(vals) {
			return nil, fmt.Errorf("term %d reads ciphertext %d of %d and vector %d of %d", t, baby[t], len(in), vec[t],
				len(vals))
		}
	}
	period := len(vals[0])
	for i, v := range vals {
		if len(v) != period {
			return nil, fmt.Errorf("vector %d has %d values, vector 0 has %d", i, len(v), period)
		}
	}
	if out, ok, err := c.dotEncodePartsFused(in, baby, vec, bounds, vals, level, scale); ok || err != nil {
		return out, err
	}
	out := make([]*ctObj, len(bounds)-1)
	for p := range out {
		lo, hi := bounds[p], bounds[p+1]
		terms, rows := make([]*ctObj, hi-lo), make([][]float64, hi-lo)
		for t := lo; t < hi; t++ {
			terms[t-lo], rows[t-lo] = in[baby[t]], vals[vec[t]]
		}
		var err error
		if out[p], err = c.dotEncode(terms, rows, level, scale); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// dotEncodePartsFused is dotEncodeParts' fast path; ok = false (nothing done) where it does not apply.
func (c *ctxObj) dotEncodePartsFused(in []*ctObj, baby, vec, bounds []int, vals [][]float64, level int, scale float64) ([]*ctObj, bool, error) {
	slots, period := c.params.MaxSlots(), len(vals[0])
	if period <= 0 || period&(period-1) != 0 || slots%period != 0 || c.checkLevel(level) != nil || checkScale(scale) != nil {
		return nil, false, nil // dotEncode's checks and errors
	}
	m, ok := c.fusedCoefficients(in, period, level)
	if !ok {
		return nil, false, nil
	}
	for _, x := range in {
		if x.ct.Scale.Cmp(in[0].ct.Scale) != 0 {
			return nil, false, nil
		}
	}
	mag, negs, ok, err := c.quantizeTerms(vals, m, scale)
	if !ok || err != nil {
		return nil, false, err
	}
	meta := *in[0].ct.MetaData
	meta.Scale = in[0].ct.Scale.Mul(rlwe.NewScale(scale))
	out := make([]*ctObj, len(bounds)-1)
	for p := range out {
		ct := rlwe.NewCiphertext(c.params, 1, level)
		md := meta
		ct.MetaData = &md
		out[p] = &ctObj{c: c, ct: ct}
	}
	pin := pinLimbs(in, 2, level+1)
	defer pin.Unpin()
	outPin := pinLimbs(out, 2, level+1)
	defer outPin.Unpin()
	for _, g := range partGroups(bounds, vec, (m+8)*8, dotPartsRowBytes) {
		c.dotPartsGroup(in, baby, vec, bounds[g[0]:g[1]+1], mag, negs, m, level, out[g[0]:g[1]])
	}
	return out, true, nil
}

// quantizeTerms: each vector's inverse-FFT'd, quantized coefficients (quantizeMagnitudes), m per vector, on
// GOMAXPROCS goroutines; ok = false where a value needs Lattigo's big-integer path.
func (c *ctxObj) quantizeTerms(vals [][]float64, m int, scale float64) ([]uint64, []uint8, bool, error) {
	mag, negs := make([]uint64, len(vals)*m), make([]uint8, len(vals)*m/8)
	var failed atomic.Bool
	var firstErr atomic.Value
	nthRoot := int(c.params.RingQ().NthRoot())
	parallelFor(len(vals), func(t int) {
		if failed.Load() {
			return
		}
		buf, pool := complexBuffer(len(vals[t]))
		defer pool.Put(buf)
		values := *buf
		for i, x := range vals[t] {
			values[i] = complex(x, 0)
		}
		if err := inverseFFT(c.ecd, nthRoot, values); err != nil {
			firstErr.CompareAndSwap(nil, err)
			failed.Store(true)
			return
		}
		if !quantizeMagnitudes(values, m, scale, mag[t*m:(t+1)*m], negs[t*m/8:(t+1)*m/8]) {
			failed.Store(true)
		}
	})
	if err, _ := firstErr.Load().(error); err != nil {
		return nil, nil, false, err
	}
	return mag, negs, !failed.Load(), nil
}

// partGroups splits the parts into runs [first, end) whose distinct vectors' rows take at most budget
// bytes (rowBytes each); a part over it is a run of its own.
func partGroups(bounds, vec []int, rowBytes, budget int) [][2]int {
	var groups [][2]int
	first, seen := 0, map[int]bool{}
	for p := 0; p+1 < len(bounds); p++ {
		added := 0
		for _, v := range vec[bounds[p]:bounds[p+1]] {
			if !seen[v] {
				added++
			}
		}
		if p > first && (len(seen)+added)*rowBytes > budget {
			groups = append(groups, [2]int{first, p})
			first, seen = p, map[int]bool{}
		}
		for _, v := range vec[bounds[p]:bounds[p+1]] {
			seen[v] = true
		}
	}
	return append(groups, [2]int{first, len(bounds) - 1})
}

// dotPartsGroup computes the parts of bounds (a group's, offsets into the terms) into out, prime by prime
// on GOMAXPROCS goroutines, each with its buffer of the group's vectors' rows.
func (c *ctxObj) dotPartsGroup(in []*ctObj, baby, vec, bounds []int, mag []uint64, negs []uint8, m, level int, out []*ctObj) {
	lo, hi := bounds[0], bounds[len(bounds)-1]
	n, stride, g := c.params.N(), m+8, bits.TrailingZeros(uint(c.params.N()/m))
	babies, rowOf := make([]int32, hi-lo), make([]int32, hi-lo)
	local := map[int]int32{} // vector -> its row in the group's buffer
	var used []int
	for t := lo; t < hi; t++ {
		babies[t-lo] = int32(baby[t])
		r, ok := local[vec[t]]
		if !ok {
			r = int32(len(used))
			local[vec[t]] = r
			used = append(used, vec[t])
		}
		rowOf[t-lo] = r
	}
	rel := make([]int32, len(bounds))
	for p, b := range bounds {
		rel[p] = int32(b - lo)
	}
	workers := min(runtime.GOMAXPROCS(0), level+1)
	free := make(chan []uint64, workers)
	for range workers {
		free <- make([]uint64, len(used)*stride)
	}
	md := c.plaintextMeta
	ringQ := c.params.RingQ()
	parallelFor(level+1, func(j int) {
		rows := <-free
		defer func() { free <- rows }()
		sub := ringQ.SubRings[j]
		for r, v := range used {
			compactRow(sub, mag[v*m:(v+1)*m], negs[v*m/8:(v+1)*m/8], m, n, md.IsMontgomery, rows[r*stride:(r+1)*stride])
		}
		c0, c1 := make([]uintptr, len(in)), make([]uintptr, len(in))
		for i, x := range in {
			c0[i] = uintptr(unsafe.Pointer(&x.ct.Value[0].Coeffs[j][0]))
			c1[i] = uintptr(unsafe.Pointer(&x.ct.Value[1].Coeffs[j][0]))
		}
		dst0, dst1 := make([]uintptr, len(out)), make([]uintptr, len(out))
		for p, x := range out {
			dst0[p] = uintptr(unsafe.Pointer(&x.ct.Value[0].Coeffs[j][0]))
			dst1[p] = uintptr(unsafe.Pointer(&x.ct.Value[1].Coeffs[j][0]))
		}
		dotPartsNative(c0, c1, rows, stride, babies, rowOf, rel, n, g, sub.Modulus, sub.BRedConstant, dst0, dst1)
	})
}
