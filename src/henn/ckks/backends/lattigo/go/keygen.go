package main

import (
	"os"
	"runtime"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/utils"
)

// seededKeys: Galois keys, the bootstrapping ones included, are made seeded (lattigo_patch/rlwe/seeded.go):
// each gadget element keeps its b half and the key one 32-byte seed, and every key switch regenerates the a
// halves it reads. Half the key memory, resident and on the wire, and measured no slower on ResNet-20
// (docs/benchmarks.md); HENN_SEEDED_KEYS=0 makes full keys, =1 seeded ones whatever preferFullKeys says.
var seededKeys = os.Getenv("HENN_SEEDED_KEYS") != "0"

// seededKeysChosen: HENN_SEEDED_KEYS is set, either way, and preferFullKeys leaves the choice to it.
var seededKeysChosen = os.Getenv("HENN_SEEDED_KEYS") != ""

// preferFullKeys makes this context's keys full where the evaluation's keys take a small share of the
// memory (small) and henn's IFMA kernels run, unless HENN_SEEDED_KEYS chose: there a key switch is fast
// enough that regenerating the a halves (AES-CTR and a filter, no IFMA in it) costs more than reading
// them, while without IFMA it was the other way round. Paper 000's MNIST CNN, one image a set: 0.077
// against 0.086 s full against seeded on a Zen 5 VM (AVX-512 IFMA, 5 alternations); 0.413 against 0.358 s
// on an AVX2-only Zen 3 VM (docs/benchmarks.md, the default's sweep). Where keys are large (ResNet-20:
// 7.7 against 12.9 GiB) the memory decides.
func (c *ctxObj) preferFullKeys(small bool) {
	c.fullKeys = !seededKeysChosen && small && hasIFMA()
}

// seededKeys: whether this context makes its Galois and bootstrapping keys seeded.
func (c *ctxObj) seededKeys() bool { return seededKeys && !c.fullKeys }

// keyAt: the parameters of an evaluation key at levelQ (all special primes), seeded as c.seededKeys says.
func (c *ctxObj) keyAt(levelQ, levelP int) rlwe.EvaluationKeyParameters {
	return rlwe.EvaluationKeyParameters{LevelQ: utils.Pointy(levelQ), LevelP: utils.Pointy(levelP), Compressed: c.seededKeys()}
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
