package main

/*
#include <stdint.h>
#include <stdlib.h>
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Compact ciphertext encodings (wire.go; see exports.go for the conventions).

//export henn_wire_meta_size
func henn_wire_meta_size(out *C.int, errOut **C.char) C.int {
	return call(errOut, func() error {
		*out = C.int(metaSize)
		return nil
	})
}

//export henn_marshal_ciphertext
func henn_marshal_ciphertext(ctxH, ctH C.uintptr_t, encoding C.int, out *unsafe.Pointer, n *C.size_t, used *C.int,
	errOut **C.char) C.int {
	return call(errOut, func() error {
		c, err := getCtx(uintptr(ctxH))
		if err != nil {
			return err
		}
		ct, err := get[*ctObj](c, uintptr(ctH), "ciphertext")
		if err != nil {
			return err
		}
		data, enc, err := c.marshalCiphertext(ct, int(encoding))
		if err != nil {
			return err
		}
		*used = C.int(enc)
		return cBytes(data, out, n)
	})
}

//export henn_unmarshal_ciphertext
func henn_unmarshal_ciphertext(ctxH C.uintptr_t, encoding C.int, data unsafe.Pointer, n C.size_t, level, degree C.int,
	out *C.uintptr_t, errOut **C.char) C.int {
	return result(ctxH, out, errOut, func(c *ctxObj) (any, error) {
		if data == nil && n > 0 {
			return nil, fmt.Errorf("no data given")
		}
		// the caller has bounded n exactly by the header (serialization.compact_payload_size)
		buf := unsafe.Slice((*byte)(data), int(n))
		return c.unmarshalCiphertext(int(encoding), buf, int(level), int(degree))
	})
}
