package main

import (
	"os"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
)

// A key switch runs on two goroutines where GOMAXPROCS allows (lattigo_patch/rlwe/parallel.go: its digits in
// two halves, ModDown's two polynomials at once); HENN_PARALLEL_KEYSWITCH=0 keeps Lattigo's one goroutine,
// to compare. Read when the bridge loads.
func init() { rlwe.SetParallelKeySwitch(os.Getenv("HENN_PARALLEL_KEYSWITCH") != "0") }
