package main

/*
#include <stdint.h>
#include <stdlib.h>
*/
import "C"

import (
	"encoding/json"
	"fmt"
)

// henn_enable_bootstrapping derives context ctxH's bootstrapping parameters from a JSON literal
// (bootstrap.go: btpLiteral) and returns what they came to as JSON (btpInfo) in *info.
//
//export henn_enable_bootstrapping
func henn_enable_bootstrapping(ctxH C.uintptr_t, literal *C.char, info **C.char, errOut **C.char) C.int {
	return call(errOut, func() error {
		c, err := getCtx(uintptr(ctxH))
		if err != nil {
			return err
		}
		if literal == nil || info == nil {
			return fmt.Errorf("no literal or output slot given")
		}
		got, err := c.enableBootstrapping([]byte(C.GoString(literal)))
		if err != nil {
			return err
		}
		text, err := json.Marshal(got)
		if err != nil {
			return err
		}
		*info = C.CString(string(text))
		return nil
	})
}

//export henn_keygen_bootstrap
func henn_keygen_bootstrap(ctxH, skH C.uintptr_t, out *C.uintptr_t, errOut **C.char) C.int {
	return result(ctxH, out, errOut, func(c *ctxObj) (any, error) {
		sk, err := get[*skObj](c, uintptr(skH), "secret key")
		if err != nil {
			return nil, err
		}
		return c.genBootstrapKeys(sk)
	})
}

// henn_bootstrap_key_bytes reports the size of a bootstrapping key set.
//
//export henn_bootstrap_key_bytes
func henn_bootstrap_key_bytes(ctxH, keyH C.uintptr_t, n *C.int64_t, errOut **C.char) C.int {
	return call(errOut, func() error {
		k, err := bootstrapKeys(ctxH, keyH)
		if err != nil {
			return err
		}
		*n = C.int64_t(k.bootstrapKeyBytes())
		return nil
	})
}

// henn_bootstrap: see btpKeyObj.bootstrap; parallel != 0 runs the two EvalMod halves at once.
//
//export henn_bootstrap
func henn_bootstrap(ctxH, aH, keyH C.uintptr_t, divide C.double, parallel C.int, out *C.uintptr_t,
	errOut **C.char) C.int {
	return binop(ctxH, aH, keyH, out, errOut, "bootstrapping key set", func(c *ctxObj, a *ctObj, k *btpKeyObj) (*ctObj, error) {
		return k.bootstrap(a, float64(divide), parallel != 0)
	})
}

// henn_bootstrap_keep_dft lets a bootstrapping key set keep up to budget bytes of encoded DFT factors
// (bootstrap_dft_cache.go; 0 keeps none, a negative budget leaves it as it is) and reports in *need what
// keeping all of them takes at most (0 where the evaluator keeps Lattigo's matrices anyway) and in *held
// what it holds now.
//
//export henn_bootstrap_keep_dft
func henn_bootstrap_keep_dft(ctxH, keyH C.uintptr_t, budget C.int64_t, need, held *C.int64_t, errOut **C.char) C.int {
	return call(errOut, func() error {
		k, err := bootstrapKeys(ctxH, keyH)
		if err != nil {
			return err
		}
		if need == nil || held == nil {
			return fmt.Errorf("no output slots given")
		}
		if budget >= 0 {
			k.keptDFT.setBudget(int64(budget))
		}
		*need, *held = C.int64_t(k.dftKeepBytes()), C.int64_t(k.keptDFT.held())
		return nil
	})
}

// bootstrapKeys is the bootstrapping key set keyH of context ctxH.
func bootstrapKeys(ctxH, keyH C.uintptr_t) (*btpKeyObj, error) {
	c, err := getCtx(uintptr(ctxH))
	if err != nil {
		return nil, err
	}
	return get[*btpKeyObj](c, uintptr(keyH), "bootstrapping key set")
}
