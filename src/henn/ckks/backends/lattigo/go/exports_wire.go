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

// henn_unmarshal_ciphertexts reads a set of count compact ciphertexts (payload i: data[i], sizes[i] bytes,
// its header's encodings[i], levels[i], degrees[i]) on `threads` goroutines into outs[i], and each one's
// scale into scales[i] (the caller compares it with the header's). Nothing is kept on an error.
//
//export henn_unmarshal_ciphertexts
func henn_unmarshal_ciphertexts(ctxH C.uintptr_t, count C.int, encodings, levels, degrees *C.int, data *unsafe.Pointer,
	sizes *C.size_t, threads C.int, outs *C.uintptr_t, scales *C.double, errOut **C.char) C.int {
	return call(errOut, func() error {
		c, err := getCtx(uintptr(ctxH))
		if err != nil {
			return err
		}
		if count < 0 || count > maxSetCiphertexts {
			return dataErr("a set of %d ciphertexts, at most %d are read at once", int(count), maxSetCiphertexts)
		}
		n := int(count)
		if n > 0 && (encodings == nil || levels == nil || degrees == nil || data == nil || sizes == nil ||
			outs == nil || scales == nil) {
			return fmt.Errorf("no array given")
		}
		enc, lvl, deg := unsafe.Slice(encodings, n), unsafe.Slice(levels, n), unsafe.Slice(degrees, n)
		ptrs, lens := unsafe.Slice(data, n), unsafe.Slice(sizes, n)
		set := make([]compactIn, n)
		for i := range set {
			if ptrs[i] == nil && lens[i] > 0 {
				return fmt.Errorf("no data given for ciphertext %d", i)
			}
			// the caller has bounded each size exactly by its header (serialization.compact_payload_size);
			// checkCompact checks it again before anything is read
			set[i] = compactIn{int(enc[i]), int(lvl[i]), int(deg[i]), unsafe.Slice((*byte)(ptrs[i]), int(lens[i]))}
		}
		cts, err := c.unmarshalCiphertexts(set, int(threads))
		if err != nil {
			return err
		}
		hs, sc := unsafe.Slice(outs, n), unsafe.Slice(scales, n)
		for i, ct := range cts {
			sc[i] = C.double(ct.ct.Scale.Float64())
			hs[i] = C.uintptr_t(newHandle(ct))
		}
		return nil
	})
}
