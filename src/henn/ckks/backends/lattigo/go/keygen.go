package main

import (
	"os"
	"runtime"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/utils"
)

// seededKeys: Galois keys, the bootstrapping ones included, are made seeded (lattigo_patch/rlwe/seeded.go):
// each gadget element keeps its b half and the key one 32-byte seed, and every key switch regenerates the a
// halves it reads. Half the key memory, resident and on the wire, and no slower: on ResNet-20 on an AVX2 VM,
// and on paper 000's MNIST CNN on a Zen 5 VM since the a halves are regenerated prime by prime in cache and
// by VAES (0.061 against 0.062 s full, 636 against 917 MiB; docs/benchmarks.md). HENN_SEEDED_KEYS=0 makes
// full keys.
var seededKeys = os.Getenv("HENN_SEEDED_KEYS") != "0"

// keyAt: the parameters of an evaluation key at levelQ (all special primes), seeded as seededKeys says.
func keyAt(levelQ, levelP int) rlwe.EvaluationKeyParameters {
	return rlwe.EvaluationKeyParameters{LevelQ: utils.Pointy(levelQ), LevelP: utils.Pointy(levelP), Compressed: seededKeys}
}

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
