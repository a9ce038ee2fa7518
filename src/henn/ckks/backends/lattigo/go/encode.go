package main

import (
	"math"
	"sync"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// Slot encoding, bit for bit what Lattigo's Encoder.Encode writes (TestEmbedMatchesLattigo), at
// about half its cost. Lattigo quantizes one coefficient at a time through
// ckks.SingleFloat64ToFixedPointCRT, which allocates the moduli chain and the reduction constants
// per coefficient: at N = 2^16 that was a third of an encode, and weight diagonals are encoded
// thousands of times per inference (ResNet-20: 15,028). Here the rounded magnitudes are computed
// once and reduced prime by prime over contiguous rows.

// encodeScratch holds one encode's rounded coefficient magnitudes and signs (N each).
type encodeScratch struct {
	mag  []uint64
	neg  []bool
	big  []bool  // |value * scale| >= 2^64: left to Lattigo's big-integer path
	negs []uint8 // quantizeRows: the negative lanes of each 8 coefficients
}

func (s *encodeScratch) negMasks(count int) []uint8 {
	if len(s.negs) < count {
		s.negs = make([]uint8, count)
	}
	return s.negs[:count]
}

var encodePools sync.Map // ring degree N -> *sync.Pool of *encodeScratch

func scratchFor(n int) (*encodeScratch, *sync.Pool) {
	p, _ := encodePools.LoadOrStore(n, &sync.Pool{New: func() any {
		return &encodeScratch{mag: make([]uint64, n), neg: make([]bool, n), big: make([]bool, n)}
	}})
	pool := p.(*sync.Pool)
	return pool.Get().(*encodeScratch), pool
}

var complexPools sync.Map // slots -> *sync.Pool of *[]complex128

func complexBuffer(slots int) (*[]complex128, *sync.Pool) {
	p, _ := complexPools.LoadOrStore(slots, &sync.Pool{New: func() any {
		b := make([]complex128, slots)
		return &b
	}})
	pool := p.(*sync.Pool)
	return pool.Get().(*[]complex128), pool
}

// embed writes re + i*im (all slots; the imaginary part is dropped on the conjugate-invariant ring,
// as Lattigo does) into pt, which NewPlaintext made at pt's level with its scale set.
func (c *ctxObj) embed(re, im []float64, pt *rlwe.Plaintext) error {
	if c.ecd.Prec() > 53 { // arbitrary-precision encoding: Lattigo's own path
		values := make([]complex128, len(re))
		for i := range values {
			values[i] = complex(re[i], im[i])
		}
		return c.ecd.Encode(values, pt)
	}
	buf, bufPool := complexBuffer(len(re))
	defer bufPool.Put(buf)
	values := *buf
	for i := range values {
		values[i] = complex(re[i], im[i])
	}
	return embedSlots(c.params, c.ecd, values, pt.MetaData, pt.Value, nil)
}

// embedSlots is Lattigo's Encoder.Embed of complex128 slots (double precision) on q and, when p is not
// nil, on p (a ringqp.Poly's two parts, as linear transformations keep their diagonals). values is
// overwritten (the inverse FFT runs in place).
func embedSlots(params ckks.Parameters, ecd *ckks.Encoder, values []complex128, md *rlwe.MetaData, q ring.Poly, p *ring.Poly) error {
	slots := len(values)
	if params.RingType() == ring.ConjugateInvariant {
		for i, v := range values {
			values[i] = complex(real(v), 0)
		}
	}
	var err error
	if len(values) == 1<<md.LogDimensions.Cols {
		err = inverseFFT(ecd, int(params.RingQ().NthRoot()), values)
	} else {
		err = ecd.IFFT(values, md.LogDimensions.Cols)
	}
	if err != nil {
		return err
	}
	s, scratchPool := scratchFor(params.N())
	defer scratchPool.Put(s)
	// coefficient layout of Complex128ToFixedPointCRT: real parts, then (standard ring) imaginary parts, then zeros
	n := slots
	if params.RingType() == ring.Standard {
		n = 2 * slots
	}
	scale := md.Scale.Float64()
	rings := []*ring.Ring{params.RingQ().AtLevel(q.Level())}
	polys := []ring.Poly{q}
	if p != nil && p.Level() > -1 {
		rings, polys = append(rings, params.RingP().AtLevel(p.Level())), append(polys, *p)
	}
	if !quantizeRows(values, n, scale, rings, polys, s) {
		s.quantizeAndReduce(values, n, scale, rings, polys)
	}
	for k, r := range rings {
		rlwe.NTTSparseAndMontgomery(r, md, polys[k])
	}
	return nil
}

// quantizeAndReduce is the Go path of quantizeRows, for every value.
func (s *encodeScratch) quantizeAndReduce(values []complex128, n int, scale float64, rings []*ring.Ring, polys []ring.Poly) {
	slots := len(values)
	for i, v := range values {
		s.quantize(i, real(v), scale)
	}
	if n > slots {
		for i, v := range values {
			s.quantize(slots+i, imag(v), scale)
		}
	}
	for k, r := range rings {
		s.reduce(r, n, polys[k].Coeffs)
		for i := 0; i < n; i++ {
			if s.big[i] {
				v := real(values[i%slots])
				if i >= slots {
					v = imag(values[i-slots])
				}
				ckks.SingleFloat64ToFixedPointCRT(r, i, v, scale, polys[k].Coeffs)
			}
		}
	}
}

// quantize rounds |value * scale| to the nearest integer (ties away from zero, as Lattigo does).
func (s *encodeScratch) quantize(i int, value, scale float64) {
	s.neg[i], s.big[i] = value < 0, false
	x := math.Abs(value) * scale
	if x >= 1.8446744073709552e+19 {
		s.mag[i], s.big[i] = 0, true
		return
	}
	s.mag[i] = uint64(x + 0.5)
}

// reduce writes the first n coefficients (the rest zero) modulo each prime of r, with Lattigo's
// conventions: a magnitude below 2^61 is left unreduced, a negative one becomes q - |x| mod q.
func (s *encodeScratch) reduce(r *ring.Ring, n int, coeffs [][]uint64) {
	moduli := r.ModuliChain()[:r.Level()+1]
	brc := r.BRedConstants()
	mag, neg := s.mag[:n], s.neg[:n]
	for j, q := range moduli {
		row, bj := coeffs[j], brc[j]
		for i, c := range mag {
			switch {
			case neg[i] && c > q:
				row[i] = q - ring.BRedAdd(c, q, bj)
			case neg[i]:
				row[i] = q - c
			case c > 0x1fffffffffffffff:
				row[i] = ring.BRedAdd(c, q, bj)
			default:
				row[i] = c
			}
		}
		clear(row[n:])
	}
}
