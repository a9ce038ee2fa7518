package main

/*
#include <stdint.h>
#include <stdlib.h>
*/
import "C"

import (
	"unsafe"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
)

// The secret key's bytes, for a client that keeps its key in a passphrase-protected file
// (henn.deploy.keyfile): never part of henn_marshal, which writes what may leave the client.

//export henn_secret_export
func henn_secret_export(ctxH, skH C.uintptr_t, out *unsafe.Pointer, n *C.size_t, errOut **C.char) C.int {
	return call(errOut, func() error {
		c, err := getCtx(uintptr(ctxH))
		if err != nil {
			return err
		}
		sk, err := get[*skObj](c, uintptr(skH), "secret key")
		if err != nil {
			return err
		}
		data, err := sk.sk.MarshalBinary()
		if err != nil {
			return err
		}
		defer clear(data)
		return cBytes(data, out, n)
	})
}

//export henn_secret_import
func henn_secret_import(ctxH C.uintptr_t, data unsafe.Pointer, n C.size_t, out *C.uintptr_t, errOut **C.char) C.int {
	return result(ctxH, out, errOut, func(c *ctxObj) (any, error) {
		if data == nil || n == 0 || n > 1<<31-1 {
			return nil, dataErr("a secret key of %d bytes", uint64(n))
		}
		buf := C.GoBytes(data, C.int(n))
		defer clear(buf)
		return c.unmarshalSecret(buf)
	})
}

// unmarshalSecret reads a secret key of these parameters (its layout walked with bounded lengths first).
func (c *ctxObj) unmarshalSecret(buf []byte) (*skObj, error) {
	w := &walker{b: buf}
	if err := w.polyQP(); err != nil {
		return nil, err
	}
	if w.off != len(buf) {
		return nil, dataErr("%d bytes of trailing data after the secret key", len(buf)-w.off)
	}
	sk := new(rlwe.SecretKey)
	if err := sk.UnmarshalBinary(buf); err != nil {
		return nil, dataErr("Lattigo cannot read the secret key: %v", err)
	}
	if !samePolyQP(sk.Value, rlwe.NewSecretKey(c.params).Value) {
		return nil, dataErr("secret key has the wrong shape for these parameters")
	}
	return c.wrapSecretKey(sk), nil
}
