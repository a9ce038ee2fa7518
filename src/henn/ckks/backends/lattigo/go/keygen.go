package main

import (
	"runtime"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
)

// generateKeys runs gen(kgen, 0..n-1) on GOMAXPROCS goroutines. Each goroutine has a KeyGenerator of
// its own: Lattigo's samplers keep buffer state between calls, so sharing one would let goroutines race
// on it, and a fresh generator keys its own PRNG from the system's entropy. Key generation is one key
// switch key after another (ResNet-20: ~210 keys, over a minute on one core), so it scales with cores.
func generateKeys(params rlwe.ParameterProvider, n int, gen func(kgen *rlwe.KeyGenerator, i int)) {
	workers := runtime.GOMAXPROCS(0)
	if workers > n {
		workers = n
	}
	gens := make(chan *rlwe.KeyGenerator, workers)
	for w := 0; w < workers; w++ {
		gens <- rlwe.NewKeyGenerator(params)
	}
	parallelFor(n, func(i int) {
		kgen := <-gens
		defer func() { gens <- kgen }()
		gen(kgen, i)
	})
}
