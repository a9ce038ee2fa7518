package main

/*
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Homomorphic operations, metadata and serialization (see exports.go for the conventions).

//export henn_add
func henn_add(ctxH, aH, bH C.uintptr_t, out *C.uintptr_t, errOut **C.char) C.int {
	return binop(ctxH, aH, bH, out, errOut, "ciphertext", (*ctxObj).add)
}

//export henn_sub
func henn_sub(ctxH, aH, bH C.uintptr_t, out *C.uintptr_t, errOut **C.char) C.int {
	return binop(ctxH, aH, bH, out, errOut, "ciphertext", (*ctxObj).sub)
}

//export henn_add_plain
func henn_add_plain(ctxH, aH, bH C.uintptr_t, out *C.uintptr_t, errOut **C.char) C.int {
	return binop(ctxH, aH, bH, out, errOut, "plaintext", (*ctxObj).addPlain)
}

//export henn_sub_plain
func henn_sub_plain(ctxH, aH, bH C.uintptr_t, out *C.uintptr_t, errOut **C.char) C.int {
	return binop(ctxH, aH, bH, out, errOut, "plaintext", (*ctxObj).subPlain)
}

//export henn_mul_plain
func henn_mul_plain(ctxH, aH, bH C.uintptr_t, out *C.uintptr_t, errOut **C.char) C.int {
	return binop(ctxH, aH, bH, out, errOut, "plaintext", (*ctxObj).mulPlain)
}

//export henn_negate
func henn_negate(ctxH, aH C.uintptr_t, out *C.uintptr_t, errOut **C.char) C.int {
	return unary(ctxH, aH, out, errOut, func(c *ctxObj, a *ctObj) (*ctObj, error) { return c.negate(a), nil })
}

//export henn_mul
func henn_mul(ctxH, aH, bH, rkH C.uintptr_t, out *C.uintptr_t, errOut **C.char) C.int {
	return binop(ctxH, aH, bH, out, errOut, "ciphertext", func(c *ctxObj, a, b *ctObj) (*ctObj, error) {
		rk, err := optionalRelin(c, rkH)
		if err != nil {
			return nil, err
		}
		return c.mul(a, b, rk)
	})
}

//export henn_square
func henn_square(ctxH, aH, rkH C.uintptr_t, out *C.uintptr_t, errOut **C.char) C.int {
	return unary(ctxH, aH, out, errOut, func(c *ctxObj, a *ctObj) (*ctObj, error) {
		rk, err := optionalRelin(c, rkH)
		if err != nil {
			return nil, err
		}
		return c.mul(a, a, rk) // the same operand twice: Lattigo takes its squaring path
	})
}

//export henn_relinearize
func henn_relinearize(ctxH, aH, rkH C.uintptr_t, out *C.uintptr_t, errOut **C.char) C.int {
	return binop(ctxH, aH, rkH, out, errOut, "relinearization key", (*ctxObj).relinearize)
}

//export henn_rescale
func henn_rescale(ctxH, aH C.uintptr_t, out *C.uintptr_t, errOut **C.char) C.int {
	return unary(ctxH, aH, out, errOut, (*ctxObj).rescale)
}

//export henn_drop_level
func henn_drop_level(ctxH, aH C.uintptr_t, levels C.int, out *C.uintptr_t, errOut **C.char) C.int {
	return unary(ctxH, aH, out, errOut, func(c *ctxObj, a *ctObj) (*ctObj, error) {
		return c.dropLevel(a, int(levels))
	})
}

//export henn_rotate
func henn_rotate(ctxH, aH C.uintptr_t, step C.int64_t, gkH C.uintptr_t, out *C.uintptr_t, errOut **C.char) C.int {
	return binop(ctxH, aH, gkH, out, errOut, "Galois key set", func(c *ctxObj, a *ctObj, gk *gkObj) (*ctObj, error) {
		return c.rotate(a, int64(step), gk)
	})
}

//export henn_rotate_hoisted
func henn_rotate_hoisted(ctxH, aH C.uintptr_t, steps *C.int64_t, n C.int, gkH C.uintptr_t, outs *C.uintptr_t,
	errOut **C.char) C.int {
	return call(errOut, func() error {
		c, err := getCtx(uintptr(ctxH))
		if err != nil {
			return err
		}
		a, err := get[*ctObj](c, uintptr(aH), "ciphertext")
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
		if outs == nil && len(s) > 0 {
			return fmt.Errorf("no output slots given")
		}
		res, err := c.rotateHoisted(a, s, gk)
		if err != nil {
			return err
		}
		putHandles(outs, res)
		return nil
	})
}

//export henn_conjugate
func henn_conjugate(ctxH, aH, gkH C.uintptr_t, out *C.uintptr_t, errOut **C.char) C.int {
	return binop(ctxH, aH, gkH, out, errOut, "Galois key set", (*ctxObj).conjugate)
}

//export henn_add_scalar
func henn_add_scalar(ctxH, aH C.uintptr_t, re, im C.double, out *C.uintptr_t, errOut **C.char) C.int {
	return unary(ctxH, aH, out, errOut, func(c *ctxObj, a *ctObj) (*ctObj, error) {
		return c.addScalar(a, float64(re), float64(im))
	})
}

//export henn_mul_scalar
func henn_mul_scalar(ctxH, aH C.uintptr_t, re, im, scale C.double, out *C.uintptr_t, errOut **C.char) C.int {
	return unary(ctxH, aH, out, errOut, func(c *ctxObj, a *ctObj) (*ctObj, error) {
		return c.mulScalar(a, float64(re), float64(im), float64(scale))
	})
}

//export henn_metadata
func henn_metadata(h C.uintptr_t, level *C.int, scale, logScale *C.double, degree *C.int, errOut **C.char) C.int {
	return call(errOut, func() error {
		v, err := lookup(uintptr(h))
		if err != nil {
			return err
		}
		l, s, ls, d, err := metadata(v)
		if err != nil {
			return err
		}
		*level, *scale, *logScale, *degree = C.int(l), C.double(s), C.double(ls), C.int(d)
		return nil
	})
}

//export henn_marshal
func henn_marshal(h C.uintptr_t, out *unsafe.Pointer, n *C.size_t, errOut **C.char) C.int {
	return call(errOut, func() error {
		v, err := lookup(uintptr(h))
		if err != nil {
			return err
		}
		// written straight into the malloc'd buffer: a 1.2 GiB key set is not held a second time in Go's heap
		o, err := serializable(v)
		if err != nil {
			return err
		}
		size := o.BinarySize()
		buf := C.malloc(C.size_t(size + 1)) // +1: never malloc(0)
		if buf == nil {
			return fmt.Errorf("out of memory for a %d-byte buffer", size)
		}
		if err := writeInto(o, unsafe.Slice((*byte)(buf), size)); err != nil {
			C.free(buf)
			return err
		}
		*out, *n = buf, C.size_t(size)
		return nil
	})
}

// cBytes hands data to the caller as a malloc'd copy (freed with henn_free).
func cBytes(data []byte, out *unsafe.Pointer, n *C.size_t) error {
	buf := C.malloc(C.size_t(len(data) + 1)) // +1: never malloc(0)
	if buf == nil {
		return fmt.Errorf("out of memory for a %d-byte buffer", len(data))
	}
	if len(data) > 0 {
		C.memcpy(buf, unsafe.Pointer(&data[0]), C.size_t(len(data)))
	}
	*out, *n = buf, C.size_t(len(data))
	return nil
}

//export henn_unmarshal
func henn_unmarshal(ctxH C.uintptr_t, kind C.int, data unsafe.Pointer, n C.size_t, level, degree C.int,
	out *C.uintptr_t, errOut **C.char) C.int {
	return result(ctxH, out, errOut, func(c *ctxObj) (any, error) {
		if data == nil && n > 0 {
			return nil, fmt.Errorf("no data given")
		}
		// read in place, no copy: the objects own their memory (TestUnmarshalledObjectsDoNotAliasTheInput),
		// and the caller holds the buffer for the call; it has bounded n by what the parameters allow
		// (serialization.max_payload). Objects of 2 GiB and more pass too (C.GoBytes would take a C int).
		return c.unmarshal(int(kind), unsafe.Slice((*byte)(data), int(n)), int(level), int(degree))
	})
}

//export henn_rotate_sum_new
func henn_rotate_sum_new(ctxH, gkH C.uintptr_t, out *C.uintptr_t, errOut **C.char) C.int {
	return result(ctxH, out, errOut, func(c *ctxObj) (any, error) {
		gk, err := get[*gkObj](c, uintptr(gkH), "Galois key set")
		if err != nil {
			return nil, err
		}
		return c.newRotateSum(gk), nil
	})
}

//export henn_rotate_sum_add
func henn_rotate_sum_add(ctxH, sumH, aH C.uintptr_t, step C.int64_t, errOut **C.char) C.int {
	return call(errOut, func() error {
		c, err := getCtx(uintptr(ctxH))
		if err != nil {
			return err
		}
		sum, err := get[*rotSumObj](c, uintptr(sumH), "rotation sum")
		if err != nil {
			return err
		}
		a, err := get[*ctObj](c, uintptr(aH), "ciphertext")
		if err != nil {
			return err
		}
		return sum.add(a, int64(step))
	})
}

//export henn_rotate_sum_result
func henn_rotate_sum_result(ctxH, sumH C.uintptr_t, out *C.uintptr_t, errOut **C.char) C.int {
	return result(ctxH, out, errOut, func(c *ctxObj) (any, error) {
		sum, err := get[*rotSumObj](c, uintptr(sumH), "rotation sum")
		if err != nil {
			return nil, err
		}
		return sum.result()
	})
}
