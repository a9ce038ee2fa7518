package main

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// A request's set of compact ciphertexts read in one call (a batch request holds hundreds: MNIST's 784),
// rather than one bridge call each: the whole set is checked before anything is allocated, then read by
// `threads` goroutines, each ciphertext exactly as unmarshalCiphertext reads it alone.

// maxSetCiphertexts bounds the count a caller may announce (a set beyond it is no request of any model).
const maxSetCiphertexts = 1 << 20

// compactIn is one payload of a set and what its header announces.
type compactIn struct {
	encoding, level, degree int
	data                    []byte
}

// unmarshalCiphertexts reads a set: all of it or an error naming the first bad ciphertext (by its index).
func (c *ctxObj) unmarshalCiphertexts(set []compactIn, threads int) ([]*ctObj, error) {
	if len(set) > maxSetCiphertexts {
		return nil, dataErr("a set of %d ciphertexts, at most %d are read at once", len(set), maxSetCiphertexts)
	}
	for i, in := range set {
		if err := c.checkCompact(in.encoding, len(in.data), in.level, in.degree); err != nil {
			return nil, setErr(i, err)
		}
	}
	out := make([]*ctObj, len(set))
	errs := make([]error, len(set))
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range max(1, min(threads, len(set))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= len(set) {
					return
				}
				in := set[i]
				if out[i], errs[i] = c.readCompact(in.encoding, in.data, in.level, in.degree); errs[i] != nil {
					failed.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, setErr(i, err)
		}
	}
	return out, nil
}

// setErr names the ciphertext of a set that err is about, keeping err's status.
func setErr(i int, err error) error {
	var be *bridgeError
	if errors.As(err, &be) {
		return &bridgeError{be.code, fmt.Sprintf("ciphertext %d of the set: %s", i, be.msg)}
	}
	return err
}
