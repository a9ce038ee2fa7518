package main

/*
#include <stdint.h>
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Fused linear combinations (fused.go); conventions of exports.go.

// ciphertexts resolves n ciphertext handles of context c.
func ciphertexts(c *ctxObj, hs *C.uintptr_t, n C.int) ([]*ctObj, error) {
	if n <= 0 || hs == nil {
		return nil, fmt.Errorf("a linear combination needs at least one ciphertext, got %d", int(n))
	}
	raw := unsafe.Slice((*C.uintptr_t)(unsafe.Pointer(hs)), int(n))
	out := make([]*ctObj, len(raw))
	for i, h := range raw {
		a, err := get[*ctObj](c, uintptr(h), "ciphertext")
		if err != nil {
			return nil, err
		}
		out[i] = a
	}
	return out, nil
}

//export henn_linear_combination
func henn_linear_combination(ctxH C.uintptr_t, hs *C.uintptr_t, weights *C.double, n C.int, level C.int,
	scale C.double, out *C.uintptr_t, errOut **C.char) C.int {
	return result(ctxH, out, errOut, func(c *ctxObj) (any, error) {
		in, err := ciphertexts(c, hs, n)
		if err != nil {
			return nil, err
		}
		w, err := floats(weights, n)
		if err != nil {
			return nil, err
		}
		res, err := c.linearCombinations(in, w, 1, int(level), float64(scale))
		if err != nil {
			return nil, err
		}
		return res[0], nil
	})
}

// henn_linear_combinations: m outputs from the same k inputs; weights is the m x k matrix,
// row-major; outs receives m handles.
//
//export henn_linear_combinations
func henn_linear_combinations(ctxH C.uintptr_t, hs *C.uintptr_t, k C.int, weights *C.double, m C.int, level C.int,
	scale C.double, outs *C.uintptr_t, errOut **C.char) C.int {
	return call(errOut, func() error {
		c, err := getCtx(uintptr(ctxH))
		if err != nil {
			return err
		}
		in, err := ciphertexts(c, hs, k)
		if err != nil {
			return err
		}
		if m < 0 || (m > 0 && outs == nil) || int64(m)*int64(k) > 1<<31-1 {
			return fmt.Errorf("bad output count %d", int(m))
		}
		w, err := floats(weights, C.int(int(m)*int(k)))
		if err != nil {
			return err
		}
		res, err := c.linearCombinations(in, w, int(m), int(level), float64(scale))
		if err != nil {
			return err
		}
		putHandles(outs, res)
		return nil
	})
}

// henn_dot_plain: sum_i cts[i] * pts[i] into one new ciphertext (Lattigo's MulThenAdd: no
// intermediate products), the inner sums of a BSGS diagonal transform.
//
//export henn_dot_plain
func henn_dot_plain(ctxH C.uintptr_t, cs, ps *C.uintptr_t, n C.int, out *C.uintptr_t, errOut **C.char) C.int {
	return result(ctxH, out, errOut, func(c *ctxObj) (any, error) {
		in, err := ciphertexts(c, cs, n)
		if err != nil {
			return nil, err
		}
		raw := unsafe.Slice((*C.uintptr_t)(unsafe.Pointer(ps)), int(n))
		pts := make([]*ptObj, len(raw))
		for i, h := range raw {
			if pts[i], err = get[*ptObj](c, uintptr(h), "plaintext"); err != nil {
				return nil, err
			}
		}
		return c.dotPlain(in, pts)
	})
}

// henn_dot_encode: sum_i cts[i] * encode(vals[i]) into one new ciphertext, vals n rows of `slots`
// real values (row-major), each encoded at `level` and `scale` (dot_encode.go).
//
//export henn_dot_encode
func henn_dot_encode(ctxH C.uintptr_t, cs *C.uintptr_t, vals *C.double, n, slots, level C.int, scale C.double,
	out *C.uintptr_t, errOut **C.char) C.int {
	return result(ctxH, out, errOut, func(c *ctxObj) (any, error) {
		in, err := ciphertexts(c, cs, n)
		if err != nil {
			return nil, err
		}
		if int64(n)*int64(slots) > 1<<31-1 || slots <= 0 {
			return nil, fmt.Errorf("bad vector size %d x %d", int(n), int(slots))
		}
		flat, err := floats(vals, n*slots)
		if err != nil {
			return nil, err
		}
		rows := make([][]float64, int(n))
		for t := range rows {
			rows[t] = flat[t*int(slots) : (t+1)*int(slots)]
		}
		return c.dotEncode(in, rows, int(level), float64(scale))
	})
}

// henn_dot_encode_parts: nparts sums, part p of terms t in [bounds[p], bounds[p+1]) each
// cts[baby[t]] * encode(vals[vec[t]]); vals is nvals rows of `period` real values (row-major), encoded at
// `level` and `scale` (dot_parts.go); outs receives nparts handles.
//
//export henn_dot_encode_parts
func henn_dot_encode_parts(ctxH C.uintptr_t, cs *C.uintptr_t, n C.int, baby, vec *C.int64_t, terms C.int,
	bounds *C.int64_t, nparts C.int, vals *C.double, nvals, period, level C.int, scale C.double, outs *C.uintptr_t,
	errOut **C.char) C.int {
	return call(errOut, func() error {
		c, err := getCtx(uintptr(ctxH))
		if err != nil {
			return err
		}
		in, err := ciphertexts(c, cs, n)
		if err != nil {
			return err
		}
		if nparts <= 0 || outs == nil || terms <= 0 || nvals <= 0 || period <= 0 || int64(nvals)*int64(period) > 1<<31-1 {
			return fmt.Errorf("bad dot product parts: %d parts, %d terms, %d vectors of %d values", int(nparts),
				int(terms), int(nvals), int(period))
		}
		cts, err := int64s(baby, terms)
		if err != nil {
			return err
		}
		rows, err := int64s(vec, terms)
		if err != nil {
			return err
		}
		ends, err := int64s(bounds, nparts+1)
		if err != nil {
			return err
		}
		flat, err := floats(vals, nvals*period)
		if err != nil {
			return err
		}
		vectors := make([][]float64, int(nvals))
		for v := range vectors {
			vectors[v] = flat[v*int(period) : (v+1)*int(period)]
		}
		res, err := c.dotEncodeParts(in, ints(cts), ints(rows), ints(ends), vectors, int(level), float64(scale))
		if err != nil {
			return err
		}
		putHandles(outs, res)
		return nil
	})
}

// putHandles writes a handle for each object of res into the caller's array outs (len(res) slots).
func putHandles[T any](outs *C.uintptr_t, res []T) {
	slots := unsafe.Slice((*C.uintptr_t)(unsafe.Pointer(outs)), len(res))
	for i, r := range res {
		slots[i] = C.uintptr_t(newHandle(r))
	}
}

// ints converts indices from the bridge (each checked where it is used).
func ints(v []int64) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}
