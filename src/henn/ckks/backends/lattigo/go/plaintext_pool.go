package main

import (
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// Encodings reuse the coefficient buffers of released encodings of their level. Weight diagonals are
// encoded, used once and released by the thousand (ResNet-20: 15,028 per image, 7 MiB each at
// N = 2^16 and 14 primes); a fresh one was zeroed by Go's allocator and page-faulted in by the kernel
// (5% of an image's CPU time), and its garbage made the collector run (GOGC is low for large
// networks). The pools are sync.Pools: what nobody takes back goes at the next garbage collections.
// Only encode's plaintexts are recycled, once their handle is released: Python holds no other
// reference to them, and no bridge operation keeps a plaintext it was given.

// plaintextAt is ckks.NewPlaintext(c.params, level) whose coefficients are NOT zeroed when recycled:
// the caller writes every coefficient (embed does: quantizeRows and reduce write all N of each row).
func (c *ctxObj) plaintextAt(level int) *rlwe.Plaintext {
	if c.ecd.Prec() <= 53 { // Lattigo's arbitrary-precision encoding gets fresh (zeroed) buffers
		if v := c.recycled[level].Get(); v != nil {
			pt := v.(*rlwe.Plaintext)
			md := *c.plaintextMeta // what NewPlaintext sets, copied
			pt.MetaData = &md
			return pt
		}
	}
	return ckks.NewPlaintext(c.params, level)
}

// recycle hands an encoding's plaintext to its level's pool (its handle has just been released).
func (o *ptObj) recycle() {
	if !o.encoded || o.pt == nil {
		return
	}
	pt, level := o.pt, o.pt.Level()
	o.pt, o.encoded = nil, false
	if level >= 0 && level < len(o.c.recycled) && len(pt.Value.Coeffs) == level+1 {
		o.c.recycled[level].Put(pt)
	}
}
