package main

/*
#include <stdint.h>
*/
import "C"

import "fmt"

// kindSecretKey and kindBootstrapKeys extend the object kinds of henn's serialization header
// (serialize.go): the one kind that is never serialized, and the bootstrapping key set
// (bootstrap_serialize.go).
const (
	kindSecretKey     = 6
	kindBootstrapKeys = 7
)

// objectKind is the kind of the Go object itself (not of the Python wrapper that holds its
// handle): a serialization kind, kindSecretKey, or 0 for anything else (a context).
func objectKind(v any) int {
	switch v.(type) {
	case *ctObj:
		return kindCiphertext
	case *ptObj:
		return kindPlaintext
	case *pkObj:
		return kindPublicKey
	case *rlkObj:
		return kindRelinKey
	case *gkObj:
		return kindGaloisKeys
	case *skObj:
		return kindSecretKey
	case *btpKeyObj:
		return kindBootstrapKeys
	default:
		return 0
	}
}

//export henn_kind
func henn_kind(h C.uintptr_t, kind *C.int, errOut **C.char) C.int {
	return call(errOut, func() error {
		if kind == nil {
			return fmt.Errorf("no output slot given")
		}
		v, err := lookup(uintptr(h))
		if err != nil {
			return err
		}
		*kind = C.int(objectKind(v))
		return nil
	})
}
