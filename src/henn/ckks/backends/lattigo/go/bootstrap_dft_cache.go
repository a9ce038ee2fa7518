package main

import (
	"sync"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/dft"
	ltckks "github.com/tuneinsight/lattigo/v6/circuits/ckks/lintrans"
)

// Kept streamed DFT factors. A streamed bootstrap encodes each CoeffsToSlots and SlotsToCoeffs factor
// when it runs (bootstrap_stream.go): the same plaintexts every time, since a bootstrap's input level is
// fixed. Where memory allows, the first encoding of each factor is kept (at the level it ran at, fewer
// primes than Lattigo's kept matrices) and later bootstraps read it: a program with several bootstraps
// pays the encoding once. The runtime sets the budget from the memory its program leaves free
// (henn_bootstrap_keep_dft); 0, the default, keeps nothing.

// dftFactorKey names one factor as it ran: which transform, its index, the ciphertext's level.
type dftFactorKey struct {
	slotsToCoeffs bool
	idx, level    int
}

type dftCache struct {
	mu           sync.Mutex
	budget, used int64
	factors      map[dftFactorKey]ltckks.LinearTransformation
}

// get returns the kept factor, if any.
func (d *dftCache) get(k dftFactorKey) (ltckks.LinearTransformation, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	lt, ok := d.factors[k]
	return lt, ok
}

// keep stores lt when it fits the budget (a second encoding of the same factor, made by a bootstrap
// running beside this one, is not stored twice).
func (d *dftCache) keep(k dftFactorKey, lt ltckks.LinearTransformation) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.factors[k]; ok {
		return
	}
	size := factorBytes(lt)
	if d.used+size > d.budget {
		return
	}
	if d.factors == nil {
		d.factors = map[dftFactorKey]ltckks.LinearTransformation{}
	}
	d.factors[k] = lt
	d.used += size
}

// setBudget sets the bytes the cache may hold; a budget below what it holds drops every kept factor.
func (d *dftCache) setBudget(budget int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.budget = max(0, budget)
	if d.used > d.budget {
		d.factors, d.used = nil, 0
	}
}

func (d *dftCache) held() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.used
}

// factorBytes: the coefficients of a factor's plaintexts.
func factorBytes(lt ltckks.LinearTransformation) int64 {
	var n int64
	for _, p := range lt.Vec {
		for _, limbs := range [][][]uint64{p.Q.Coeffs, p.P.Coeffs} {
			for _, limb := range limbs {
				n += int64(len(limb)) * 8
			}
		}
	}
	return n
}

// dftKeepBytes is what keeping every factor would take, each at the top level of its transform (an upper
// bound: a bootstrap runs each factor at or below it); 0 where the evaluator keeps its own matrices.
func (b *btpKeyObj) dftKeepBytes() int64 {
	if b.stream == nil {
		return 0
	}
	n := int64(b.eval.BootstrappingParameters.N()) * 8
	var total int64
	for t, mat := range []dft.Matrix{b.eval.C2SDFTMatrix, b.eval.S2CDFTMatrix} {
		diags := b.stream.cts
		if t == 1 {
			diags = b.stream.stc
		}
		for i, lt := range mat.Matrices {
			total += int64(len(diags[i].DiagonalsIndexList())) * int64(lt.LevelQ+1+lt.LevelP+1) * n
		}
	}
	return total
}
