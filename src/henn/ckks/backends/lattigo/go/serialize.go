package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/ring/ringqp"
	"github.com/tuneinsight/lattigo/v6/utils/buffer"
)

// Object kinds of henn's serialization header (henn.ckks.serialization.KINDS).
const (
	kindCiphertext = 1
	kindPlaintext  = 2
	kindPublicKey  = 3
	kindRelinKey   = 4
	kindGaloisKeys = 5
)

// binaryObject is what every serializable Lattigo object is: its size, then its bytes to a writer.
type binaryObject interface {
	BinarySize() int
	WriteTo(w io.Writer) (int64, error)
}

// serializable returns the Lattigo object behind a henn handle's value, whose bytes are what
// MarshalBinary writes.
func serializable(v any) (binaryObject, error) {
	switch o := v.(type) {
	case *ctObj:
		return o.ct, nil
	case *ptObj:
		return o.pt, nil
	case *pkObj:
		return o.pk, nil
	case *rlkObj:
		return o.rlk, nil
	case *gkObj:
		return o.set, nil
	case *btpKeyObj:
		return o.keys, nil
	case *skObj:
		return nil, fmt.Errorf("secret keys never leave the client: they cannot be serialized")
	default:
		return nil, handleErr("cannot serialize a %s", kindName(v))
	}
}

// marshal returns Lattigo's MarshalBinary bytes of a value or public key.
func marshal(v any) ([]byte, error) {
	o, err := serializable(v)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, o.BinarySize())
	return buf, writeInto(o, buf)
}

// writeInto writes o's bytes into buf, which must be exactly o.BinarySize() long.
func writeInto(o binaryObject, buf []byte) error {
	n, err := o.WriteTo(buffer.NewBuffer(buf))
	if err == nil && int(n) != len(buf) {
		err = fmt.Errorf("wrote %d bytes of %d", n, len(buf))
	}
	return err
}

// unmarshal parses data of the given kind. Lattigo's readers allocate whatever sizes the data
// announces before reading it, so the layout is walked first with every length bounded by the
// bytes left (no huge allocation from forged data); the result's shape is then checked against
// these parameters so that no later operation indexes out of range.
func (c *ctxObj) unmarshal(kind int, data []byte, level, degree int) (any, error) {
	w := &walker{b: data}
	var err error
	switch kind {
	case kindCiphertext, kindPlaintext:
		err = w.element()
	case kindPublicKey:
		err = w.vector(w.polyQP)
	case kindRelinKey:
		err = w.evaluationKey()
	case kindGaloisKeys:
		err = w.memKeySet(false)
	case kindBootstrapKeys:
		err = w.bootstrapKeys()
	default:
		return nil, dataErr("unknown object kind %d", kind)
	}
	if err == nil && w.off != len(data) {
		err = dataErr("%d bytes of trailing data", len(data)-w.off)
	}
	if err != nil {
		return nil, err
	}
	switch kind {
	case kindBootstrapKeys:
		return c.unmarshalBootstrapKeys(data)
	case kindCiphertext:
		ct := new(rlwe.Ciphertext)
		if err = ct.UnmarshalBinary(data); err != nil {
			return nil, dataErr("Lattigo cannot read the ciphertext: %v", err)
		}
		return &ctObj{c: c, ct: ct}, c.checkValue(&ct.Element, level, degree)
	case kindPlaintext:
		pt := new(rlwe.Plaintext)
		if err = pt.UnmarshalBinary(data); err != nil {
			return nil, dataErr("Lattigo cannot read the plaintext: %v", err)
		}
		return &ptObj{c: c, pt: pt}, c.checkValue(&pt.Element, level, 0)
	case kindPublicKey:
		pk := new(rlwe.PublicKey)
		if err = pk.UnmarshalBinary(data); err != nil {
			return nil, dataErr("Lattigo cannot read the public key: %v", err)
		}
		if !sameVectorQP(pk.Value, rlwe.NewPublicKey(c.params).Value) {
			return nil, dataErr("public key has the wrong shape for these parameters")
		}
		return c.wrapPublicKey(pk), nil
	case kindRelinKey:
		rlk := new(rlwe.RelinearizationKey)
		if err = rlk.UnmarshalBinary(data); err != nil {
			return nil, dataErr("Lattigo cannot read the relinearization key: %v", err)
		}
		if !c.fullGadget(&rlk.GadgetCiphertext) {
			return nil, dataErr("relinearization key has the wrong shape for these parameters")
		}
		return c.wrapRelinKey(rlk), nil
	default:
		set := new(rlwe.MemEvaluationKeySet)
		if err = set.UnmarshalBinary(data); err != nil {
			return nil, dataErr("Lattigo cannot read the Galois keys: %v", err)
		}
		keys, err := c.checkGaloisKeys(set)
		if err != nil {
			return nil, err
		}
		return c.wrapGaloisKeys(keys...), nil
	}
}

// checkValue checks a deserialized ciphertext/plaintext against the parameters and the header.
func (c *ctxObj) checkValue(el *rlwe.Element[ring.Poly], level, degree int) error {
	if el.MetaData == nil || !el.IsNTT || !el.IsBatched || el.LogDimensions != c.params.LogMaxDimensions() {
		return dataErr("payload metadata is not that of a CKKS value in NTT form with %d slots", c.params.MaxSlots())
	}
	if el.Scale.Mod != nil || el.Scale.Value.IsInf() || el.Scale.Value.Sign() <= 0 {
		return dataErr("payload scale is not a positive real number")
	}
	if len(el.Value) != degree+1 {
		return dataErr("payload has %d polynomials, the header announces degree %d", len(el.Value), degree)
	}
	for _, p := range el.Value {
		if !samePoly(p, c.params.N(), level+1) {
			return dataErr("payload polynomials do not match level %d at N = %d", level, c.params.N())
		}
	}
	return nil
}

func (c *ctxObj) checkGaloisKeys(set *rlwe.MemEvaluationKeySet) ([]*rlwe.GaloisKey, error) {
	if set.RelinearizationKey != nil {
		return nil, dataErr("Galois key payload holds a relinearization key")
	}
	nthRoot := c.params.RingQ().NthRoot()
	keys := make([]*rlwe.GaloisKey, 0, len(set.GaloisKeys))
	for el, gk := range set.GaloisKeys {
		if gk == nil || gk.GaloisElement != el || el&1 == 0 || el >= nthRoot || gk.NthRoot != nthRoot {
			return nil, dataErr("Galois key for element %d is inconsistent", el)
		}
		if !c.fullGadget(&gk.GadgetCiphertext) {
			return nil, dataErr("Galois key for element %d has the wrong shape for these parameters", el)
		}
		keys = append(keys, gk)
	}
	return keys, nil
}

func samePoly(p ring.Poly, n, rows int) bool {
	if len(p.Coeffs) != rows {
		return false
	}
	for _, row := range p.Coeffs {
		if len(row) != n {
			return false
		}
	}
	return true
}

func samePolyQP(a, b ringqp.Poly) bool {
	return samePoly(a.Q, b.Q.N(), len(b.Q.Coeffs)) && samePoly(a.P, b.P.N(), len(b.P.Coeffs))
}

func sameVectorQP(a, b rlwe.VectorQP) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !samePolyQP(a[i], b[i]) {
			return false
		}
	}
	return true
}

// fullGadget: g has the shape of a key over the whole modulus of these parameters (gadgetShape).
func (c *ctxObj) fullGadget(g *rlwe.GadgetCiphertext) bool {
	return gadgetShape(g, *c.params.GetRLWEParameters(), c.params.MaxLevelQ(), c.params.MaxLevelP())
}

// walker checks the layout of Lattigo's binary format (little-endian lengths, see
// utils/structs and core/rlwe WriteTo methods of v6.2.0) without allocating.
type walker struct {
	b   []byte
	off int
}

func (w *walker) take(n uint64) error {
	if n > uint64(len(w.b)-w.off) {
		return dataErr("payload truncated at byte %d (needs %d more bytes)", w.off, n)
	}
	w.off += int(n)
	return nil
}

func (w *walker) u8() (uint8, error) {
	if err := w.take(1); err != nil {
		return 0, err
	}
	return w.b[w.off-1], nil
}

func (w *walker) u32() (uint32, error) {
	if err := w.take(4); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(w.b[w.off-4:]), nil
}

func (w *walker) u64() (uint64, error) {
	if err := w.take(8); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(w.b[w.off-8:]), nil
}

// count reads a length and checks that that many elements of at least minSize bytes fit.
func (w *walker) count(minSize uint64) (uint64, error) {
	n, err := w.u64()
	if err != nil {
		return 0, err
	}
	if n > math.MaxInt32 || n*minSize > uint64(len(w.b)-w.off) {
		return 0, dataErr("payload announces %d elements at byte %d, more than the data holds", n, w.off-8)
	}
	return n, nil
}

// vector walks a structs.Vector of elements read by item (each at least 8 bytes long).
func (w *walker) vector(item func() error) error {
	n, err := w.count(8)
	if err != nil {
		return err
	}
	for i := uint64(0); i < n; i++ {
		if err = item(); err != nil {
			return err
		}
	}
	return nil
}

func (w *walker) coeffs() error {
	n, err := w.count(8)
	if err != nil {
		return err
	}
	return w.take(8 * n)
}

func (w *walker) poly() error { return w.vector(w.coeffs) }

func (w *walker) polyQP() error {
	if err := w.poly(); err != nil {
		return err
	}
	return w.poly()
}

// element: has-metadata flag, fixed-size JSON metadata, vector of polynomials.
func (w *walker) element() error {
	has, err := w.u8()
	if err != nil {
		return err
	}
	if has != 1 {
		return dataErr("payload has no CKKS metadata")
	}
	if err = w.take(uint64(new(rlwe.MetaData).BinarySize())); err != nil {
		return err
	}
	return w.vector(w.poly)
}

// evaluationKey: base-two decomposition, matrix of VectorQP (uncompressed keys only).
func (w *walker) evaluationKey() error {
	if _, err := w.u64(); err != nil {
		return err
	}
	rows, err := w.count(8)
	if err != nil {
		return err
	}
	if rows == 0 {
		return dataErr("evaluation key has no rows")
	}
	seeded := false
	for i := uint64(0); i < rows; i++ {
		cols, err := w.count(8)
		if err != nil {
			return err
		}
		if cols == 0 {
			return dataErr("evaluation key row %d is empty", i)
		}
		for j := uint64(0); j < cols; j++ {
			off := w.off
			if err = w.vector(w.polyQP); err != nil {
				return err
			}
			switch degree := binary.LittleEndian.Uint64(w.b[off:]) - 1; {
			case degree > 1:
				return dataErr("evaluation key element (%d, %d) has %d polynomials, not 1 or 2", i, j, degree+1)
			case i == 0 && j == 0:
				seeded = degree == 0
			case seeded != (degree == 0):
				return dataErr("evaluation key mixes seeded and full elements")
			}
		}
	}
	if seeded { // the seed of the a halves (lattigo_patch/rlwe/seeded.go)
		return w.take(32)
	}
	return nil
}

// memKeySet: MemEvaluationKeySet, a relinearization key (only where allowed) and a map of Galois keys.
func (w *walker) memKeySet(withRelin bool) error {
	hasRlk, err := w.u8()
	if err != nil {
		return err
	}
	switch {
	case hasRlk == 1 && withRelin:
		if err = w.evaluationKey(); err != nil {
			return err
		}
	case hasRlk == 1:
		return dataErr("Galois key payload holds a relinearization key")
	case hasRlk != 0:
		return dataErr("key set has a bad presence flag %d", hasRlk)
	}
	hasGks, err := w.u8()
	if err != nil || hasGks == 0 {
		return err
	}
	if hasGks != 1 {
		return dataErr("Galois key payload has a bad presence flag %d", hasGks)
	}
	n, err := w.u32()
	if err != nil {
		return err
	}
	if uint64(n)*24 > uint64(len(w.b)-w.off) {
		return dataErr("payload announces %d Galois keys, more than the data holds", n)
	}
	for i := uint32(0); i < n; i++ {
		if err = w.take(24); err != nil { // map key, Galois element, NthRoot
			return err
		}
		if err = w.evaluationKey(); err != nil {
			return err
		}
	}
	return nil
}
