package main

import (
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
	"github.com/tuneinsight/lattigo/v6/utils/bignum"
)

// Fused linear combinations: out[o] = sum_t W[o][t] * in[t] for real weights, each weight
// encoded at `scale`, the result NOT rescaled (scale = in.Scale * scale).
//
// The result is bit-identical to the generic path (one mulScalar and one add per term): every
// term is the ciphertext times the same integer M = round(w * scale) that mulScalar uses (with
// Lattigo's own rounding when it takes the native constant path), and the sum is reduced
// exactly modulo each prime. The work is done directly on the RNS limbs: for every prime q_j,
// products x * (M mod q_j) are accumulated in 128 bits without reduction and reduced once per
// coefficient (or every `chunk` terms, so that the accumulator cannot overflow). Limbs of primes
// below 2^52 use AVX-512 IFMA (52-bit multiply-accumulate, fused_ifma.go) where the CPU has it,
// the others Go (a C kernel with 128-bit integers measured 20-30% slower than Go's bits.Mul64 here).
// Tiles (polynomial, prime, 64 coefficients) run on GOMAXPROCS goroutines; every output of a
// tile reads the inputs' slices while they are in cache.
//
// Multiplying by a constant is coefficient-wise in both the NTT and the coefficient domain
// (for a real constant Lattigo's two half-ring multipliers coincide), so the domain flag of the
// inputs is kept as is.

// lcBlock: coefficients per tile. All inputs' slices of one tile (K * lcBlock * 8 bytes) should
// stay in L2 while every output of the tile reads them.
const lcBlock = 64

// weightMultiplier returns M = round(w * scale) as mulScalar(a, w, scale) would multiply by it,
// and the scale factor mulScalar gives the result.
func (c *ctxObj) weightMultiplier(w, scale float64, level int) (*big.Int, rlwe.Scale) {
	q := c.params.Q()[level]
	atQ := math.Abs(scale/float64(q)-1) < 1e-15
	if atQ && w != math.Trunc(w) {
		// Lattigo's native constant product (Evaluator.Mul / bigComplexToRNSScalar): the
		// constant at EncodingPrecision, times the exact prime, rounded half away from zero.
		qs := rlwe.NewScale(q)
		cst := bignum.ToComplex(w, c.params.EncodingPrecision())
		r := new(big.Float).Mul(cst[0], &qs.Value)
		if cst[0].Sign() > 0 {
			r.Add(r, new(big.Float).SetFloat64(0.5))
		} else if cst[0].Sign() < 0 {
			r.Sub(r, new(big.Float).SetFloat64(0.5))
		}
		m, _ := r.Int(nil)
		return m, qs
	}
	var s *big.Float
	if atQ {
		s = new(big.Float).SetUint64(q)
	} else {
		s = new(big.Float).SetFloat64(scale)
	}
	m, _ := roundScaled(w, s).Int(nil)
	return m, rlwe.NewScale(s)
}

// lcPlan: the nonzero terms of every output in CSR form, with their multipliers per prime.
type lcPlan struct {
	level  int
	indptr []int      // outputs+1
	index  []int      // input of each term
	mult   [][]uint64 // [prime][term]: M mod q_prime
	chunk  []int      // per prime: terms that may be accumulated in 128 bits before a reduction
	factor rlwe.Scale // scale factor of every term
	first  []int      // per output: first input with a nonzero weight, -1 if none
}

// newLCPlan reads the m x k row-major weight matrix (zeros skipped).
func (c *ctxObj) newLCPlan(weights []float64, m, k, level int, scale float64) (*lcPlan, error) {
	if err := checkScale(scale); err != nil {
		return nil, err
	}
	if err := c.checkLevel(level); err != nil {
		return nil, err
	}
	if len(weights) != m*k {
		return nil, fmt.Errorf("weight matrix has %d entries, expected %d x %d", len(weights), m, k)
	}
	p := &lcPlan{level: level, indptr: make([]int, m+1), first: make([]int, m)}
	for o := 0; o < m; o++ {
		p.first[o] = -1
		for t, w := range weights[o*k : (o+1)*k] {
			if math.IsNaN(w) || math.IsInf(w, 0) {
				return nil, fmt.Errorf("weight [%d][%d] is %v", o, t, w)
			}
			if w != 0 {
				if p.first[o] < 0 {
					p.first[o] = t
				}
				p.index = append(p.index, t)
			}
		}
		p.indptr[o+1] = len(p.index)
	}
	_, p.factor = c.weightMultiplier(0, scale, level)
	moduli := c.params.Q()[:level+1]
	p.mult = make([][]uint64, level+1)
	for j := range p.mult {
		p.mult[j] = make([]uint64, len(p.index))
	}
	// The multipliers (big-number rounding, ~1 us each) in parallel over outputs.
	parallelFor(m, func(o int) {
		row := weights[o*k : (o+1)*k]
		r := new(big.Int)
		for t := p.indptr[o]; t < p.indptr[o+1]; t++ {
			mi, _ := c.weightMultiplier(row[p.index[t]], scale, level)
			for j, q := range moduli {
				p.mult[j][t] = r.Mod(mi, r.SetUint64(q)).Uint64() // Euclidean: in [0, q)
			}
		}
	})
	p.chunk = make([]int, level+1)
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	for j, q := range moduli {
		// chunk * (q-1)^2 + (q-1) < 2^128: the partial sum, reduced to < q, plus chunk products.
		qm := new(big.Int).SetUint64(q - 1)
		room := new(big.Int).Sub(limit, big.NewInt(1))
		room.Sub(room, qm)
		room.Quo(room, qm.Mul(qm, qm))
		if room.IsInt64() && room.Int64() < math.MaxInt32 {
			p.chunk[j] = int(room.Int64())
		} else {
			p.chunk[j] = math.MaxInt32
		}
	}
	return p, nil
}

// parallelFor runs f(0..n-1) on GOMAXPROCS goroutines.
func parallelFor(n int, f func(i int)) {
	workers := runtime.GOMAXPROCS(0)
	if workers > n {
		workers = n
	}
	if workers <= 1 {
		for i := 0; i < n; i++ {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var panicked atomic.Value
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { // a goroutine's panic would kill the process: hand it to the caller
				if r := recover(); r != nil {
					panicked.CompareAndSwap(nil, fmt.Sprint(r))
				}
			}()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(i)
			}
		}()
	}
	wg.Wait()
	if r := panicked.Load(); r != nil {
		panic(r)
	}
}

// linearCombinations evaluates the m x len(in) weight matrix on the inputs (all of one degree, 1 or
// 2, at `level`, of equal scale: henn has checked it; checked again here). Degree-2 inputs (products
// not yet relinearized) give degree-2 outputs: a layer after a square relinearizes its few outputs
// instead of the square's many (lazy relinearization).
func (c *ctxObj) linearCombinations(in []*ctObj, weights []float64, m, level int, scale float64) ([]*ctObj, error) {
	k := len(in)
	if k == 0 || m < 0 {
		return nil, fmt.Errorf("a linear combination needs at least one ciphertext")
	}
	degree := in[0].ct.Degree()
	for i, a := range in {
		if a.ct.Degree() != degree || degree < 1 || degree > 2 {
			return nil, fmt.Errorf("ciphertext %d has degree %d, ciphertext 0 degree %d: the inputs must all be "+
				"of degree 1 or all of degree 2", i, a.ct.Degree(), degree)
		}
		if a.ct.Level() != level {
			return nil, fmt.Errorf("ciphertext %d is at level %d, not %d", i, a.ct.Level(), level)
		}
		if _, err := withScale(a.ct.El(), in[0].ct.Scale); err != nil {
			return nil, fmt.Errorf("ciphertext %d: %w", i, err)
		}
		if a.ct.IsNTT != in[0].ct.IsNTT {
			return nil, fmt.Errorf("ciphertexts are in different domains (NTT and coefficients)")
		}
	}
	plan, err := c.newLCPlan(weights, m, k, level, scale)
	if err != nil {
		return nil, err
	}
	outs := make([]*ctObj, m)
	for o := range outs {
		src := in[0]
		if plan.first[o] >= 0 { // the generic sum takes its scale from the first term
			src = in[plan.first[o]]
		}
		ct := rlwe.NewCiphertext(c.params, degree, level)
		meta := *src.ct.MetaData
		meta.Scale = src.ct.Scale.Mul(plan.factor)
		ct.MetaData = &meta
		outs[o] = &ctObj{c: c, ct: ct}
	}
	c.accumulate(plan, in, outs, lcBlock == 64 && hasIFMA()) // the IFMA kernel's tile
	return outs, nil
}

// accumulate fills the outputs, tile by tile: (polynomial, prime, block of lcBlock coefficients).
// Limbs of primes below 2^52 go through the AVX-512 IFMA kernel where the CPU has it
// (fused_ifma.go), the others (and every limb elsewhere) through 64x64-bit products in Go.
func (c *ctxObj) accumulate(p *lcPlan, in, outs []*ctObj, useIFMA bool) {
	n := c.params.N()
	primes := p.level + 1
	blocks := (n + lcBlock - 1) / lcBlock
	perPoly := primes * blocks
	ringQ := c.params.RingQ()
	ifma := useIFMA && n%lcBlock == 0
	polys := in[0].ct.Degree() + 1
	if ifma {
		defer pinLimbs(in, polys, primes).Unpin()
	}
	// terms[poly][prime][term]: the limb each term reads (addrs: the same as integers, for C)
	terms := make([][][]unsafe.Pointer, polys)
	addrs := make([][][]uintptr, polys)
	for d := range terms {
		terms[d] = make([][]unsafe.Pointer, primes)
		addrs[d] = make([][]uintptr, primes)
		for j := range terms[d] {
			limbs := make([]unsafe.Pointer, len(in))
			for i, a := range in {
				limb := a.ct.Value[d].Coeffs[j]
				if len(limb) != n {
					panic(fmt.Sprintf("input %d limb %d has %d coefficients, expected %d", i, j, len(limb), n))
				}
				limbs[i] = unsafe.Pointer(&limb[0])
			}
			terms[d][j] = make([]unsafe.Pointer, len(p.index))
			for t, i := range p.index {
				terms[d][j][t] = limbs[i]
			}
			if ifma && ringQ.SubRings[j].Modulus < ifmaMaxModulus {
				addrs[d][j] = make([]uintptr, len(p.index))
				for t, ptr := range terms[d][j] {
					addrs[d][j][t] = uintptr(ptr)
				}
			}
		}
	}
	parallelFor(polys*perPoly, func(tile int) {
		d, rest := tile/perPoly, tile%perPoly
		j, b := rest/blocks, rest%blocks
		c0 := b * lcBlock
		c1 := min(c0+lcBlock, n)
		sub := ringQ.SubRings[j]
		q, bred := sub.Modulus, sub.BRedConstant
		r64 := pow64Mod(q, bred)
		mult, chunk, tp, ta := p.mult[j], p.chunk[j], terms[d][j], addrs[d][j]
		var accHi, accLo [lcBlock]uint64
		for o, out := range outs {
			dst := out.ct.Value[d].Coeffs[j][c0:c1]
			t0, t1 := p.indptr[o], p.indptr[o+1]
			if t0 == t1 {
				clear(dst)
				continue
			}
			width := len(dst)
			hi, lo := accHi[:width], accLo[:width]
			clear(hi)
			clear(lo)
			off := uintptr(c0) * 8
			limb := func(t int) []uint64 { return unsafe.Slice((*uint64)(unsafe.Add(tp[t], off)), width) }
			for s := t0; s < t1; s += chunk {
				if s > t0 { // reduce the partial sums to [0, q) before the next chunk
					for x := range lo {
						lo[x], hi[x] = reduce128(hi[x], lo[x], q, r64, bred), 0
					}
				}
				e := min(s+chunk, t1)
				if ta != nil {
					for u := s; u < e; u += ifmaMaxTerms {
						v := min(u+ifmaMaxTerms, e)
						macc52(ta[u:v], c0, mult[u:v], &accHi, &accLo)
					}
					continue
				}
				t := s
				for ; t+2 <= e; t += 2 { // two terms per pass over the accumulators
					macc2(hi, lo, limb(t), limb(t+1), mult[t], mult[t+1])
				}
				for ; t < e; t++ {
					macc1(hi, lo, limb(t), mult[t])
				}
			}
			for x := range dst {
				dst[x] = reduce128(hi[x], lo[x], q, r64, bred)
			}
		}
	})
}

// macc2: (hi, lo) += a*ma + b*mb, 128-bit, element-wise.
func macc2(hi, lo, a, b []uint64, ma, mb uint64) {
	n := len(lo)
	hi, a, b = hi[:n], a[:n], b[:n]
	for x := 0; x < n; x++ {
		h, l := bits.Mul64(a[x], ma)
		h1, l1 := bits.Mul64(b[x], mb)
		var cy uint64
		l, cy = bits.Add64(l, l1, 0)
		h += h1 + cy
		lo[x], cy = bits.Add64(lo[x], l, 0)
		hi[x] += h + cy
	}
}

// macc1: (hi, lo) += a * m, 128-bit, element-wise.
func macc1(hi, lo, a []uint64, m uint64) {
	n := len(lo)
	hi, a = hi[:n], a[:n]
	for x := 0; x < n; x++ {
		h, l := bits.Mul64(a[x], m)
		var cy uint64
		lo[x], cy = bits.Add64(lo[x], l, 0)
		hi[x] += h + cy
	}
}

// reduce128 returns (hi * 2^64 + lo) mod q, with r64 = 2^64 mod q.
func reduce128(hi, lo, q, r64 uint64, bred [2]uint64) uint64 {
	h := ring.BRedAdd(hi, q, bred)
	return ring.CRed(ring.BRed(h, r64, q, bred)+ring.BRedAdd(lo, q, bred), q)
}

// dotPlain computes sum_i in[i] * pts[i]; every operand at one level, degree-1 ciphertexts and
// plaintexts in the ciphertexts' domain, every product of one scale (henn checked it; the scale of
// the result is the first product's). Lattigo's MulThenAdd converts the plaintext to Montgomery
// form and reduces every product; here, as in accumulate, the products of a 64-coefficient tile
// are summed in 128 bits and reduced once per coefficient (or every `chunk` terms): the same value
// modulo each prime, with about a third of the modular work and no temporaries. The C kernel
// (dot_kernel.go) runs where the compiler has 128-bit integers, the Go one elsewhere.
func (c *ctxObj) dotPlain(in []*ctObj, pts []*ptObj) (*ctObj, error) {
	return c.dotPlainWith(in, pts, hasNativeDot(), 0)
}

// dotPlainWith: dotPlain with the C (native) or Go kernel, reducing at least every maxChunk terms
// (0: only where 128 bits could overflow; tests force the intermediate reductions).
func (c *ctxObj) dotPlainWith(in []*ctObj, pts []*ptObj, native bool, maxChunk int) (*ctObj, error) {
	if len(in) == 0 || len(in) != len(pts) {
		return nil, fmt.Errorf("dot product of %d ciphertexts and %d plaintexts", len(in), len(pts))
	}
	level := in[0].ct.Level()
	for i := range in {
		if in[i].ct.Degree() != 1 {
			return nil, fmt.Errorf("term %d: ciphertext of degree %d (relinearize first)", i, in[i].ct.Degree())
		}
		if in[i].ct.Level() != level || pts[i].pt.Level() != level {
			return nil, fmt.Errorf("term %d: levels %d and %d, expected %d", i, in[i].ct.Level(), pts[i].pt.Level(), level)
		}
		if in[i].ct.IsNTT != in[0].ct.IsNTT || pts[i].pt.IsNTT != in[0].ct.IsNTT {
			return nil, fmt.Errorf("term %d: operands in different domains (NTT and coefficients)", i)
		}
	}
	acc := ckks.NewCiphertext(c.params, 1, level)
	meta := *in[0].ct.MetaData
	meta.Scale = in[0].ct.Scale.Mul(pts[0].pt.Scale)
	acc.MetaData = &meta
	ringQ := c.params.RingQ()
	var c0, c1, p []uintptr
	if native {
		pin := pinLimbs(in, 2, level+1)
		pinPlaintexts(pin, pts, level+1)
		defer pin.Unpin()
		c0, c1, p = make([]uintptr, len(in)), make([]uintptr, len(in)), make([]uintptr, len(in))
	}
	for j := 0; j <= level; j++ {
		sub := ringQ.SubRings[j]
		q, bred := sub.Modulus, sub.BRedConstant
		r64 := pow64Mod(q, bred)
		chunk := productChunk(q)
		if maxChunk > 0 {
			chunk = min(chunk, maxChunk)
		}
		if !native {
			for d := 0; d < 2; d++ {
				dotLimbGo(in, pts, d, j, q, r64, bred, chunk, acc.Value[d].Coeffs[j])
			}
			continue
		}
		for t := range in {
			c0[t] = uintptr(unsafe.Pointer(&in[t].ct.Value[0].Coeffs[j][0]))
			c1[t] = uintptr(unsafe.Pointer(&in[t].ct.Value[1].Coeffs[j][0]))
			p[t] = uintptr(unsafe.Pointer(&pts[t].pt.Value.Coeffs[j][0]))
		}
		dotPrimeNative(c0, c1, p, q, r64, bred, chunk, acc.Value[0].Coeffs[j], acc.Value[1].Coeffs[j])
	}
	return &ctObj{c: c, ct: acc}, nil
}

// dotLimbGo: one limb of the dot product with the Go kernel (the fallback of dotLimbNative).
func dotLimbGo(in []*ctObj, pts []*ptObj, d, j int, q, r64 uint64, bred [2]uint64, chunk int, dst []uint64) {
	var hiBuf, loBuf [lcBlock]uint64
	for c0 := 0; c0 < len(dst); c0 += lcBlock {
		c1 := min(c0+lcBlock, len(dst))
		hi, lo := hiBuf[:c1-c0], loBuf[:c1-c0]
		clear(hi)
		clear(lo)
		t := 0
		for t < len(in) {
			if t > 0 && t%chunk == 0 {
				for x := range lo {
					lo[x], hi[x] = reduce128(hi[x], lo[x], q, r64, bred), 0
				}
			}
			a, p := in[t].ct.Value[d].Coeffs[j][c0:c1], pts[t].pt.Value.Coeffs[j][c0:c1]
			if t+1 < len(in) && (t+1)%chunk != 0 {
				maccv2(hi, lo, a, p, in[t+1].ct.Value[d].Coeffs[j][c0:c1], pts[t+1].pt.Value.Coeffs[j][c0:c1])
				t += 2
				continue
			}
			maccv1(hi, lo, a, p)
			t++
		}
		for x := range hi {
			dst[c0+x] = reduce128(hi[x], lo[x], q, r64, bred)
		}
	}
}

// productChunk: products of residues mod q that may be summed in 128 bits, on top of a partial
// sum already reduced below q, before a reduction.
func productChunk(q uint64) int {
	qm := new(big.Int).SetUint64(q - 1)
	room := new(big.Int).Lsh(big.NewInt(1), 128)
	room.Sub(room, big.NewInt(1)).Sub(room, qm).Quo(room, qm.Mul(qm, qm))
	if !room.IsInt64() || room.Int64() > math.MaxInt32 {
		return math.MaxInt32
	}
	return max(1, int(room.Int64()))
}

// pow64Mod returns 2^64 mod q = 2 * (2^63 mod q) mod q.
func pow64Mod(q uint64, bred [2]uint64) uint64 {
	r := ring.BRedAdd(1<<63, q, bred)
	return ring.CRed(r+r, q)
}

// maccv1: (hi, lo) += a * b, 128-bit, element-wise.
func maccv1(hi, lo, a, b []uint64) {
	n := len(lo)
	hi, a, b = hi[:n], a[:n], b[:n]
	for x := 0; x < n; x++ {
		h, l := bits.Mul64(a[x], b[x])
		var cy uint64
		lo[x], cy = bits.Add64(lo[x], l, 0)
		hi[x] += h + cy
	}
}

// maccv2: (hi, lo) += a*b + c*d, 128-bit, element-wise (one pass over the accumulators).
func maccv2(hi, lo, a, b, c, d []uint64) {
	n := len(lo)
	hi, a, b, c, d = hi[:n], a[:n], b[:n], c[:n], d[:n]
	for x := 0; x < n; x++ {
		h, l := bits.Mul64(a[x], b[x])
		h1, l1 := bits.Mul64(c[x], d[x])
		var cy uint64
		l, cy = bits.Add64(l, l1, 0)
		h += h1 + cy
		lo[x], cy = bits.Add64(lo[x], l, 0)
		hi[x] += h + cy
	}
}
