// Package main is henn's bridge to Lattigo v6: a c-shared library that Python loads with ctypes.
//
// Design (see exports.go for the C functions):
//   - No package-level state: every object (context, key, plaintext, ciphertext) lives behind a
//     runtime/cgo.Handle that Python owns and frees with henn_release.
//   - Every exported function runs its body through run(), which turns errors and recovered
//     panics into a status code plus a message; nothing can unwind into Python.
//   - This file and the others without `import "C"` hold the logic in plain Go, so that
//     `go test` can exercise it (cgo is not allowed in _test.go files).
package main

import (
	"errors"
	"fmt"
	"runtime/cgo"
)

// Status codes returned by every exported function (mirrored in bridge.py).
const (
	statusOK     = 0
	statusError  = 1 // Lattigo or the bridge refused the request
	statusPanic  = 2 // a panic was recovered: a bug, reported instead of crashing
	statusHandle = 3 // released, forged or mistyped handle
	statusData   = 4 // malformed serialized data
)

// bridgeError carries a status code other than statusError.
type bridgeError struct {
	code int
	msg  string
}

func (e *bridgeError) Error() string { return e.msg }

func handleErr(format string, args ...any) error {
	return &bridgeError{statusHandle, fmt.Sprintf(format, args...)}
}

func dataErr(format string, args ...any) error {
	return &bridgeError{statusData, fmt.Sprintf(format, args...)}
}

// run calls f and converts its outcome into (status, message); a panic becomes statusPanic.
func run(f func() error) (code int, msg string) {
	defer func() {
		if r := recover(); r != nil {
			code, msg = statusPanic, fmt.Sprintf("Lattigo panicked (recovered by the bridge): %v", r)
		}
	}()
	err := f()
	if err == nil {
		return statusOK, ""
	}
	var be *bridgeError
	if errors.As(err, &be) {
		return be.code, be.msg
	}
	return statusError, err.Error()
}

// newHandle pins v and returns the integer Python keeps.
func newHandle(v any) uintptr { return uintptr(cgo.NewHandle(v)) }

// lookup returns the object behind h, or an error for a released or forged handle
// (cgo.Handle.Value panics on those; the panic is recovered here).
func lookup(h uintptr) (v any, err error) {
	if h == 0 {
		return nil, handleErr("null handle: the object was never created or was already closed")
	}
	defer func() {
		if recover() != nil {
			v, err = nil, handleErr("handle %d is not live: the object was released (closed or garbage-collected) "+
				"or the handle was never issued", h)
		}
	}()
	return cgo.Handle(h).Value(), nil
}

// release frees handle h; the object is garbage-collected once nothing else refers to it (an
// encoding's buffers go back to its context's pool: only the release that deleted the handle does it).
func release(h uintptr) error {
	v, err := lookup(h)
	if err != nil {
		return err
	}
	if !deleteHandle(h) {
		return nil // a concurrent double release lost the race: already gone
	}
	if pt, ok := v.(*ptObj); ok {
		pt.recycle()
	}
	return nil
}

// deleteHandle deletes h, false when another caller deleted it first (Delete panics then).
func deleteHandle(h uintptr) (deleted bool) {
	defer func() {
		if recover() != nil {
			deleted = false
		}
	}()
	cgo.Handle(h).Delete()
	return true
}

// owned is implemented by every object that belongs to one context.
type owned interface{ owner() *ctxObj }

// get returns the object of type T behind h, checking that it belongs to context c.
func get[T owned](c *ctxObj, h uintptr, what string) (T, error) {
	var zero T
	v, err := lookup(h)
	if err != nil {
		return zero, err
	}
	t, ok := v.(T)
	if !ok {
		return zero, handleErr("handle %d refers to a %s, not a %s", h, kindName(v), what)
	}
	if t.owner() != c {
		return zero, handleErr("the %s was made by another Lattigo context: values and keys cannot move between "+
			"backend instances (serialize and deserialize them instead)", what)
	}
	return t, nil
}

// getCtx returns the context behind h.
func getCtx(h uintptr) (*ctxObj, error) {
	v, err := lookup(h)
	if err != nil {
		return nil, err
	}
	c, ok := v.(*ctxObj)
	if !ok {
		return nil, handleErr("handle %d refers to a %s, not a context", h, kindName(v))
	}
	return c, nil
}

func kindName(v any) string {
	switch v.(type) {
	case *ctxObj:
		return "context"
	case *skObj:
		return "secret key"
	case *pkObj:
		return "public key"
	case *rlkObj:
		return "relinearization key"
	case *gkObj:
		return "Galois key set"
	case *ctObj:
		return "ciphertext"
	case *ptObj:
		return "plaintext"
	case *btpKeyObj:
		return "bootstrapping key set"
	case *rotSumObj:
		return "rotation sum"
	default:
		return fmt.Sprintf("%T", v)
	}
}
