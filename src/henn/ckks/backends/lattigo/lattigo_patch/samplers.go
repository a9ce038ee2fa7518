package ring

import "encoding/binary"

// This file is henn's addition to Lattigo v6.2.0 (Apache-2.0), added by patch_lattigo.py with a call
// at the top of UniformSampler.Read and GaussianSampler.read. Both samplers give the same polynomials
// as Lattigo's own loops for the same PRNG stream (the same 1 KiB buffering, the same draws in the same
// order); they differ only in how they write:
//   - uniform: a draw outside [0, q) is overwritten by the next one instead of branching on it. About
//     half the draws are rejected for a prime just above a power of two, and that branch mispredicted
//     (9.5 -> 3.6 ns a coefficient at N = 2^16 here).
//   - Gaussian: Lattigo writes sample i into every prime's row before sample i+1. Rows 2^16 words apart
//     map to the same cache sets, so at N = 2^16 each write missed. Here blocks of samples are written
//     row by row.
// Key generation is mostly these two loops (Galois keys: one uniform and one Gaussian polynomial per
// digit).

// referenceSamplers: Lattigo's own loops instead (the bridge's tests compare the two).
var referenceSamplers bool

// UseReferenceSamplers selects Lattigo's own sampling loops (true) or henn's (false, the default); for
// tests, before any sampler runs.
func UseReferenceSamplers(on bool) { referenceSamplers = on }

const samplerBuffer = 1024 // Lattigo's buffer: the same stream positions for the same PRNG

func (u *UniformSampler) fastRead(pol Poly) bool {
	if referenceSamplers {
		return false
	}
	var buffer [samplerBuffer]byte
	if _, err := u.prng.Read(buffer[:]); err != nil {
		panic(err)
	}
	ptr, N := 0, u.baseRing.N()
	for j, s := range u.baseRing.SubRings[:u.baseRing.Level()+1] {
		q, mask, coeffs := s.Modulus, s.Mask, pol.Coeffs[j][:N]
		for i := 0; i < N; {
			if ptr == samplerBuffer {
				if _, err := u.prng.Read(buffer[:]); err != nil {
					panic(err)
				}
				ptr = 0
			}
			v := binary.BigEndian.Uint64(buffer[ptr:ptr+8]) & mask
			ptr += 8
			coeffs[i] = v
			var keep int
			if v < q { // compiles to a conditional move: no branch on the random value
				keep = 1
			}
			i += keep
		}
	}
	return true
}

const gaussianBlock = 256

// fastRead covers Lattigo's small-deviation case (every deviation henn uses); false leaves the others
// to Lattigo. f combines the old coefficient with the sample (ReadAndAdd); nil writes the sample (Read).
func (g *GaussianSampler) fastRead(pol Poly, f func(a, b, c uint64) uint64) bool {
	sigma, bound := float64(g.xe.Sigma), g.xe.Bound
	if referenceSamplers || (sigma > 0x20000000000000 && bound > 0xffffffffffffffff) {
		return false
	}
	var buffer [samplerBuffer]byte
	if _, err := g.prng.Read(buffer[:]); err != nil {
		panic(err)
	}
	var values, signs [gaussianBlock]uint64
	ptr, N := 0, g.baseRing.N()
	moduli := g.baseRing.ModuliChain()[:g.baseRing.level+1]
	for lo := 0; lo < N; lo += gaussianBlock {
		n := min(gaussianBlock, N-lo)
		for k := 0; k < n; k++ {
			for {
				norm, sign := g.normFloat64(buffer[:], &ptr)
				if v := norm * sigma; v <= bound {
					values[k], signs[k] = uint64(v+0.5), sign // rounding
					break
				}
			}
		}
		for j, qi := range moduli {
			row := pol.Coeffs[j][lo : lo+n]
			if f == nil { // Read: written, never read
				for k := range row {
					row[k] = (values[k] * signs[k]) | (qi-values[k])*(signs[k]^1)
				}
				continue
			}
			for k := range row {
				row[k] = f(row[k], (values[k]*signs[k])|(qi-values[k])*(signs[k]^1), qi)
			}
		}
	}
	if g.montgomery {
		g.baseRing.MForm(pol, pol)
	}
	return true
}
