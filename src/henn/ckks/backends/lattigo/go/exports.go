package main

/*
#include <stdint.h>
#include <stdlib.h>
*/
import "C"

import (
	"fmt"
	"runtime/debug"
	"unsafe"

	"github.com/tuneinsight/lattigo/v6/ring"
)

// Every exported function returns a status (core.go) and, when it is not 0, stores a message
// allocated with malloc in *err, which the caller frees with henn_free. Handles are uintptr_t.

func finish(code int, msg string, errOut **C.char) C.int {
	if code != statusOK && errOut != nil {
		*errOut = C.CString(msg)
	}
	return C.int(code)
}

func call(errOut **C.char, f func() error) C.int {
	code, msg := run(f)
	return finish(code, msg, errOut)
}

func floats(p *C.double, n C.int) ([]float64, error) {
	if n < 0 || (n > 0 && p == nil) {
		return nil, fmt.Errorf("bad array of %d numbers", int(n))
	}
	if n == 0 {
		return []float64{}, nil
	}
	return unsafe.Slice((*float64)(unsafe.Pointer(p)), int(n)), nil
}

func int64s(p *C.int64_t, n C.int) ([]int64, error) {
	if n < 0 || (n > 0 && p == nil) {
		return nil, fmt.Errorf("bad array of %d integers", int(n))
	}
	if n == 0 {
		return []int64{}, nil
	}
	return append([]int64(nil), unsafe.Slice((*int64)(unsafe.Pointer(p)), int(n))...), nil
}

// result runs f in context ctxH and stores the handle of the object it returns in *out.
func result(ctxH C.uintptr_t, out *C.uintptr_t, errOut **C.char, f func(c *ctxObj) (any, error)) C.int {
	return call(errOut, func() error {
		if out == nil {
			return fmt.Errorf("no output slot given")
		}
		c, err := getCtx(uintptr(ctxH))
		if err != nil {
			return err
		}
		v, err := f(c)
		if err != nil {
			return err
		}
		*out = C.uintptr_t(newHandle(v))
		return nil
	})
}

// unary: an operation on one ciphertext.
func unary(ctxH, aH C.uintptr_t, out *C.uintptr_t, errOut **C.char, f func(*ctxObj, *ctObj) (*ctObj, error)) C.int {
	return result(ctxH, out, errOut, func(c *ctxObj) (any, error) {
		a, err := get[*ctObj](c, uintptr(aH), "ciphertext")
		if err != nil {
			return nil, err
		}
		return f(c, a)
	})
}

// binop: an operation on a ciphertext and a second operand of type B.
func binop[B owned](ctxH, aH, bH C.uintptr_t, out *C.uintptr_t, errOut **C.char, what string,
	f func(*ctxObj, *ctObj, B) (*ctObj, error)) C.int {
	return unary(ctxH, aH, out, errOut, func(c *ctxObj, a *ctObj) (*ctObj, error) {
		b, err := get[B](c, uintptr(bH), what)
		if err != nil {
			return nil, err
		}
		return f(c, a, b)
	})
}

// optionalRelin returns nil for handle 0 (no relinearization), else the key.
func optionalRelin(c *ctxObj, h C.uintptr_t) (*rlkObj, error) {
	if h == 0 {
		return nil, nil
	}
	return get[*rlkObj](c, uintptr(h), "relinearization key")
}

//export henn_free
func henn_free(p unsafe.Pointer) { C.free(p) }

//export henn_release
func henn_release(h C.uintptr_t, errOut **C.char) C.int {
	return call(errOut, func() error { return release(uintptr(h)) })
}

//export henn_version
func henn_version(out **C.char, errOut **C.char) C.int {
	return call(errOut, func() error {
		*out = C.CString(lattigoVersion())
		return nil
	})
}

// henn_seeded_keys reports whether Galois and bootstrapping keys are made seeded (keygen.go).
//
//export henn_seeded_keys
func henn_seeded_keys(out *C.int, errOut **C.char) C.int {
	return call(errOut, func() error {
		*out = 0
		if seededKeys {
			*out = 1
		}
		return nil
	})
}

// henn_set_memory_policy sets the collector's GOGC percentage and soft memory limit (bytes; <= 0
// leaves it): environment variables set after the process started never reach a c-shared runtime.
//
//export henn_set_memory_policy
func henn_set_memory_policy(gcPercent C.int, limit C.int64_t, errOut **C.char) C.int {
	return call(errOut, func() error {
		debug.SetGCPercent(int(gcPercent))
		if limit > 0 {
			debug.SetMemoryLimit(int64(limit))
		}
		return nil
	})
}

// henn_return_memory collects now and hands the freed heap back to the operating system. Without it
// the gigabytes of keys and plaintexts a closed backend held stay garbage in the resident set until
// the next collection, which only Go allocations trigger: a process that goes on in Python (a test
// suite, a server between sessions) would keep them.
//
//export henn_return_memory
func henn_return_memory(errOut **C.char) C.int {
	return call(errOut, func() error {
		debug.FreeOSMemory()
		return nil
	})
}

//export henn_selftest_panic
func henn_selftest_panic(errOut **C.char) C.int {
	return call(errOut, func() error { panic("deliberate panic (henn_selftest_panic)") })
}

//export henn_context_new
func henn_context_new(logN, logScale C.int, logQ *C.int64_t, nq C.int, logP *C.int64_t, np C.int,
	q, p *C.uint64_t, realSlots C.int, out *C.uintptr_t, qOut, pOut *C.uint64_t, errOut **C.char) C.int {
	return call(errOut, func() error {
		lq, err := int64s(logQ, nq)
		if err != nil {
			return err
		}
		lp, err := int64s(logP, np)
		if err != nil {
			return err
		}
		sizesQ, sizesP := make([]int, len(lq)), make([]int, len(lp))
		for i, v := range lq {
			sizesQ[i] = int(v)
		}
		for i, v := range lp {
			sizesP[i] = int(v)
		}
		var pinnedQ, pinnedP []uint64
		if q != nil && p != nil {
			pinnedQ = append(pinnedQ, unsafe.Slice((*uint64)(unsafe.Pointer(q)), len(lq))...)
			pinnedP = append(pinnedP, unsafe.Slice((*uint64)(unsafe.Pointer(p)), len(lp))...)
		}
		ringType := ring.Standard
		if realSlots != 0 {
			ringType = ring.ConjugateInvariant
		}
		c, err := newContext(int(logN), pinnedQ, pinnedP, sizesQ, sizesP, int(logScale), ringType)
		if err != nil {
			return err
		}
		gotQ, gotP := c.params.Q(), c.params.P()
		if len(gotQ) != len(lq) || len(gotP) != len(lp) {
			return fmt.Errorf("Lattigo made %d+%d primes, %d+%d were asked for", len(gotQ), len(gotP), len(lq), len(lp))
		}
		copy(unsafe.Slice((*uint64)(unsafe.Pointer(qOut)), len(gotQ)), gotQ)
		copy(unsafe.Slice((*uint64)(unsafe.Pointer(pOut)), len(gotP)), gotP)
		*out = C.uintptr_t(newHandle(c))
		return nil
	})
}

//export henn_keygen_secret
func henn_keygen_secret(ctxH C.uintptr_t, out *C.uintptr_t, errOut **C.char) C.int {
	return result(ctxH, out, errOut, func(c *ctxObj) (any, error) { return c.genSecretKey(), nil })
}

//export henn_keygen_public
func henn_keygen_public(ctxH, skH C.uintptr_t, out *C.uintptr_t, errOut **C.char) C.int {
	return result(ctxH, out, errOut, func(c *ctxObj) (any, error) {
		sk, err := get[*skObj](c, uintptr(skH), "secret key")
		if err != nil {
			return nil, err
		}
		return c.genPublicKey(sk), nil
	})
}

//export henn_keygen_relin
func henn_keygen_relin(ctxH, skH C.uintptr_t, out *C.uintptr_t, errOut **C.char) C.int {
	return result(ctxH, out, errOut, func(c *ctxObj) (any, error) {
		sk, err := get[*skObj](c, uintptr(skH), "secret key")
		if err != nil {
			return nil, err
		}
		return c.genRelinKey(sk), nil
	})
}

//export henn_keygen_galois
func henn_keygen_galois(ctxH, skH C.uintptr_t, steps *C.int64_t, n, conjugate C.int, out *C.uintptr_t,
	errOut **C.char) C.int {
	return result(ctxH, out, errOut, func(c *ctxObj) (any, error) {
		sk, err := get[*skObj](c, uintptr(skH), "secret key")
		if err != nil {
			return nil, err
		}
		s, err := int64s(steps, n)
		if err != nil {
			return nil, err
		}
		return c.genGaloisKeys(sk, s, conjugate != 0)
	})
}

//export henn_galois_missing
func henn_galois_missing(ctxH, gkH C.uintptr_t, steps *C.int64_t, n, conjugate C.int, missing *C.int64_t,
	nMissing *C.int, errOut **C.char) C.int {
	return call(errOut, func() error {
		c, err := getCtx(uintptr(ctxH))
		if err != nil {
			return err
		}
		gk, err := get[*gkObj](c, uintptr(gkH), "Galois key set")
		if err != nil {
			return err
		}
		s, err := int64s(steps, n)
		if err != nil {
			return err
		}
		miss, err := c.missingGalois(gk, s, conjugate != 0)
		if err != nil {
			return err
		}
		copy(unsafe.Slice((*int64)(unsafe.Pointer(missing)), int(n)+1), miss)
		*nMissing = C.int(len(miss))
		return nil
	})
}

//export henn_encode
func henn_encode(ctxH C.uintptr_t, re, im *C.double, n, level C.int, scale C.double, out *C.uintptr_t,
	errOut **C.char) C.int {
	return result(ctxH, out, errOut, func(c *ctxObj) (any, error) {
		r, err := floats(re, n)
		if err != nil {
			return nil, err
		}
		i, err := floats(im, n)
		if err != nil {
			return nil, err
		}
		return c.encode(r, i, int(level), float64(scale))
	})
}

//export henn_decode
func henn_decode(ctxH, ptH C.uintptr_t, re, im *C.double, n C.int, errOut **C.char) C.int {
	return call(errOut, func() error {
		c, err := getCtx(uintptr(ctxH))
		if err != nil {
			return err
		}
		pt, err := get[*ptObj](c, uintptr(ptH), "plaintext")
		if err != nil {
			return err
		}
		r, err := floats(re, n)
		if err != nil {
			return err
		}
		i, err := floats(im, n)
		if err != nil {
			return err
		}
		return c.decode(pt, r, i)
	})
}

//export henn_encrypt
func henn_encrypt(ctxH, ptH, pkH C.uintptr_t, out *C.uintptr_t, errOut **C.char) C.int {
	return result(ctxH, out, errOut, func(c *ctxObj) (any, error) {
		pt, err := get[*ptObj](c, uintptr(ptH), "plaintext")
		if err != nil {
			return nil, err
		}
		pk, err := get[*pkObj](c, uintptr(pkH), "public key")
		if err != nil {
			return nil, err
		}
		return c.encrypt(pt, pk)
	})
}

//export henn_encrypt_symmetric
func henn_encrypt_symmetric(ctxH, ptH, skH C.uintptr_t, out *C.uintptr_t, errOut **C.char) C.int {
	return result(ctxH, out, errOut, func(c *ctxObj) (any, error) {
		pt, err := get[*ptObj](c, uintptr(ptH), "plaintext")
		if err != nil {
			return nil, err
		}
		sk, err := get[*skObj](c, uintptr(skH), "secret key")
		if err != nil {
			return nil, err
		}
		return c.encryptSymmetric(pt, sk)
	})
}

//export henn_decrypt
func henn_decrypt(ctxH, ctH, skH C.uintptr_t, out *C.uintptr_t, errOut **C.char) C.int {
	return result(ctxH, out, errOut, func(c *ctxObj) (any, error) {
		ct, err := get[*ctObj](c, uintptr(ctH), "ciphertext")
		if err != nil {
			return nil, err
		}
		sk, err := get[*skObj](c, uintptr(skH), "secret key")
		if err != nil {
			return nil, err
		}
		return c.decrypt(ct, sk), nil
	})
}
