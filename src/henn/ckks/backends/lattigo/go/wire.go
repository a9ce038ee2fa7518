package main

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/ring/ringqp"
	"github.com/tuneinsight/lattigo/v6/utils/sampling"
)

// Compact ciphertext encodings (henn.ckks.serialization, header meta "encoding"); "full" is
// Lattigo's MarshalBinary (64-bit words):
//
//	packed  Lattigo's MetaData (fixed size) | each polynomial, limb after limb, the N coefficients of
//	        limb i in bitLen(q_i) bits each, little-endian bit order (N*bitLen(q_i)/8 bytes a limb)
//	seeded  MetaData | c0 packed | the 32-byte seed c1 is sampled from (a fresh secret-key encryption),
//	        c1 drawn from Lattigo's keyed PRNG (a BLAKE2b XOF) of the seed
//	seeded_aes  as seeded, c1 drawn from the AES-256-CTR keystream under the seed (what henn writes)
//
// A reader bounds the size exactly from the header (level, degree, encoding) before parsing, and
// refuses any coefficient that is not below its prime.
const (
	encodingFull   = 0
	encodingPacked = 1
	encodingSeeded = 2 // written where the ciphertext still holds the c1 of its seed, else packed
	// encodingSeededAES: as encodingSeeded, c1 expanded by AES-256-CTR (seedStream). Asking for either
	// writes the expansion the ciphertext's seed was drawn with.
	encodingSeededAES = 3
	seedSize          = 32
)

// seedStream is the AES-256-CTR keystream under a 32-byte seed, from counter zero: how henn expands a
// ciphertext's public seed into its uniform c1. A pseudorandom function under a uniformly random key
// gives a c1 indistinguishable from uniform, as the BLAKE2b XOF of Lattigo's KeyedPRNG does, and with
// AES-NI it runs at several GB/s where the XOF gave ~0.3 GB/s: regenerating c1 took 1.6 of the 2 ms a
// server spent reading a seeded ciphertext at N = 2^13 with 6 primes.
type seedStream struct{ cipher.Stream }

func newSeedStream(seed []byte) (seedStream, error) {
	block, err := aes.NewCipher(seed)
	if err != nil {
		return seedStream{}, err
	}
	return seedStream{cipher.NewCTR(block, make([]byte, aes.BlockSize))}, nil
}

// Read writes the stream's next len(p) bytes into p without reading p.
func (s seedStream) Read(p []byte) (int, error) {
	sampling.Keystream(s.Stream, p)
	return len(p), nil
}

func seededEncoding(encoding int) bool {
	return encoding == encodingSeeded || encoding == encodingSeededAES
}

// metaSize is the size of Lattigo's binary MetaData (fixed: its JSON is written at fixed width).
var metaSize = rlwe.MetaData{}.BinarySize()

// encryptSeeded is Lattigo's secret-key encryption (rlwe.Encryptor.encryptZeroSk and
// encryptZeroSkFromC1QP, then addPtToCt) with c1 drawn from a keyed PRNG of a fresh random seed
// (Lattigo's withKeyedUniformSampling is unexported): c1 = a uniform in the NTT domain,
// c0 = NTT(e) - a*s + m. The ciphertext keeps the seed, so that it travels as c0 and the seed.
func (c *ctxObj) encryptSeeded(pt *ptObj, sk *skObj) (*ctObj, error) {
	if !pt.pt.IsNTT {
		return nil, fmt.Errorf("the plaintext is not in NTT form")
	}
	seed := make([]byte, seedSize)
	if _, err := rand.Read(seed); err != nil {
		return nil, fmt.Errorf("no randomness for the encryption seed: %v", err)
	}
	level := pt.pt.Level()
	ct := rlwe.NewCiphertext(c.params, 1, level)
	*ct.MetaData = *pt.pt.MetaData
	if err := c.sampleC1(seed, encodingSeededAES, level, ct.Value[1]); err != nil {
		return nil, err
	}
	prng, err := sampling.NewPRNG()
	if err != nil {
		return nil, err
	}
	xe, err := ring.NewSampler(prng, c.params.RingQ(), c.params.Xe(), false)
	if err != nil {
		return nil, err
	}
	ringQ := c.params.RingQ().AtLevel(level)
	c0 := ct.Value[0]
	xe.AtLevel(level).Read(c0)
	ringQ.NTT(c0, c0)
	if ct.IsMontgomery {
		ringQ.MForm(c0, c0)
	}
	ringQ.MulCoeffsMontgomeryThenSub(ct.Value[1], sk.sk.Value.Q, c0)
	ringQ.Add(c0, pt.pt.Value, c0)
	return &ctObj{c: c, ct: ct, seed: seed, seedEncoding: encodingSeededAES, seedLevel: level,
		seedDigest: digest(ct.Value[1])}, nil
}

// sampleC1 writes into c1 (level+1 limbs, a nil one allocated) the uniform polynomial of the seed, as
// Lattigo samples c1, from the seed's stream in `encoding` (encodingSeeded: Lattigo's keyed PRNG;
// encodingSeededAES: AES-CTR).
func (c *ctxObj) sampleC1(seed []byte, encoding, level int, c1 ring.Poly) error {
	if encoding == encodingSeededAES {
		return sampleUniformAES(seed, c.params.RingQ().SubRings[:level+1], c1)
	}
	prng, err := sampling.NewKeyedPRNG(seed)
	if err != nil {
		return err
	}
	for j, row := range c1.Coeffs {
		if row == nil {
			c1.Coeffs[j] = make([]uint64, c.params.N())
		}
	}
	ringqp.NewUniformSampler(prng, *c.params.RingQP()).AtLevel(level, -1).Read(ringqp.Poly{Q: c1})
	return nil
}

// seeded: the ciphertext still is the fresh encryption of its seed. Anything that made a new ciphertext
// out of it has no seed; the digest of c1 taken when the seed was drawn guards against a change in place
// (sampling c1 again to compare would cost as much as the encryption).
func (c *ctxObj) seeded(ct *ctObj) bool {
	return ct.seed != nil && ct.ct.Degree() == 1 && ct.ct.Level() == ct.seedLevel && digest(ct.ct.Value[1]) == ct.seedDigest
}

// digest is an FNV-1a-style hash of a polynomial's coefficients in four lanes (coefficient i into lane i%4 of
// each row), folded into one: each step is a bijection of its lane's state and the fold one of its state,
// so a change to any one coefficient always changes it. Four independent chains rather than one: a chain
// waits on each multiplication, and one took a sixth of reading a seeded ciphertext.
func digest(p ring.Poly) uint64 {
	const basis, prime = 14695981039346656037, 1099511628211
	h0, h1, h2, h3 := uint64(basis), uint64(basis), uint64(basis), uint64(basis)
	for _, row := range p.Coeffs {
		i := 0
		for ; i+4 <= len(row); i += 4 {
			r := row[i : i+4 : i+4]
			h0, h1, h2, h3 = (h0^r[0])*prime, (h1^r[1])*prime, (h2^r[2])*prime, (h3^r[3])*prime
		}
		for ; i < len(row); i++ {
			h0 = (h0 ^ row[i]) * prime
		}
	}
	h := uint64(basis)
	for _, x := range [...]uint64{h0, h1, h2, h3} {
		h = (h ^ x) * prime
	}
	return h
}

// limbBytes: the packed bytes of each limb of a polynomial at level (bitLen(q_i) bits per coefficient).
func (c *ctxObj) limbBytes(level int) []int {
	n := c.params.N()
	out := make([]int, level+1)
	for i, q := range c.params.Q()[:level+1] {
		out[i] = (n*bits.Len64(q) + 7) / 8
	}
	return out
}

func (c *ctxObj) packedPolyBytes(level int) int {
	total := 0
	for _, b := range c.limbBytes(level) {
		total += b
	}
	return total
}

// compactSize is the exact payload size of a ciphertext in a compact encoding.
func (c *ctxObj) compactSize(encoding, level, degree int) int {
	if seededEncoding(encoding) {
		return metaSize + c.packedPolyBytes(level) + seedSize
	}
	return metaSize + (degree+1)*c.packedPolyBytes(level)
}

// marshalCiphertext writes ct in an encoding (encodingSeeded: seeded where it can be, else packed);
// it returns the bytes and the encoding used.
func (c *ctxObj) marshalCiphertext(ct *ctObj, encoding int) ([]byte, int, error) {
	switch encoding {
	case encodingFull:
		data, err := ct.ct.MarshalBinary()
		return data, encodingFull, err
	case encodingSeeded, encodingSeededAES:
		if c.seeded(ct) {
			encoding = ct.seedEncoding
		} else {
			encoding = encodingPacked
		}
	case encodingPacked:
	default:
		return nil, 0, fmt.Errorf("unknown ciphertext encoding %d", encoding)
	}
	md, err := ct.ct.MetaData.MarshalBinary()
	if err != nil {
		return nil, 0, err
	}
	if len(md) != metaSize {
		return nil, 0, fmt.Errorf("Lattigo's metadata is %d bytes, not %d", len(md), metaSize)
	}
	level := ct.ct.Level()
	polys := ct.ct.Value
	if seededEncoding(encoding) {
		polys = polys[:1]
	}
	out := make([]byte, c.compactSize(encoding, level, ct.ct.Degree()))
	off := copy(out, md)
	sizes := c.limbBytes(level)
	for _, p := range polys {
		for i, q := range c.params.Q()[:level+1] {
			packLimb(out[off:off+sizes[i]], p.Coeffs[i], bits.Len64(q), q)
			off += sizes[i]
		}
	}
	if seededEncoding(encoding) {
		copy(out[off:], ct.seed)
	}
	return out, encoding, nil
}

// checkCompact refuses, before anything is allocated, a compact ciphertext whose header (encoding, level,
// degree) is not one of these parameters or whose payload is not exactly the size the header implies.
func (c *ctxObj) checkCompact(encoding, size, level, degree int) error {
	if err := c.checkLevel(level); err != nil {
		return dataErr("%v", err)
	}
	if degree < 1 || degree > 2 || (seededEncoding(encoding) && degree != 1) {
		return dataErr("a ciphertext of degree %d cannot have this encoding", degree)
	}
	if encoding != encodingPacked && !seededEncoding(encoding) {
		return dataErr("unknown ciphertext encoding %d", encoding)
	}
	if want := c.compactSize(encoding, level, degree); size != want {
		return dataErr("payload is %d bytes, a ciphertext at level %d takes %d", size, level, want)
	}
	return nil
}

// unmarshalCiphertext reads a compact ciphertext whose header announces level and degree.
func (c *ctxObj) unmarshalCiphertext(encoding int, data []byte, level, degree int) (*ctObj, error) {
	if err := c.checkCompact(encoding, len(data), level, degree); err != nil {
		return nil, err
	}
	return c.readCompact(encoding, data, level, degree)
}

// readCompact reads a compact ciphertext that checkCompact passed.
func (c *ctxObj) readCompact(encoding int, data []byte, level, degree int) (*ctObj, error) {
	md := new(rlwe.MetaData)
	if err := md.UnmarshalBinary(data[:metaSize]); err != nil {
		return nil, dataErr("unreadable ciphertext metadata: %v", err)
	}
	// each limb allocated as it is written (c1's by the sampler, AES or not): rlwe.NewCiphertext zeroed all
	// of a ciphertext's 0.8 MB at once, out of cache again by the time each limb was written
	ct := &rlwe.Ciphertext{Element: rlwe.Element[ring.Poly]{Value: make([]ring.Poly, degree+1), MetaData: md}}
	for k := range ct.Value {
		ct.Value[k].Coeffs = make([][]uint64, level+1)
	}
	polys := ct.Value
	if seededEncoding(encoding) {
		polys = polys[:1]
	}
	off, sizes, n := metaSize, c.limbBytes(level), c.params.N()
	for k, p := range polys {
		for i, q := range c.params.Q()[:level+1] {
			p.Coeffs[i] = make([]uint64, n)
			if j := unpackLimb(data[off:off+sizes[i]], p.Coeffs[i], bits.Len64(q), q); j >= 0 {
				return nil, dataErr("coefficient %d of limb %d of polynomial %d is not below its prime", j, i, k)
			}
			off += sizes[i]
		}
	}
	out := &ctObj{c: c, ct: ct}
	if seededEncoding(encoding) {
		out.seed, out.seedEncoding, out.seedLevel = bytes.Clone(data[off:]), encoding, level
		if err := c.sampleC1(out.seed, encoding, level, ct.Value[1]); err != nil {
			return nil, dataErr("bad seed: %v", err)
		}
		out.seedDigest = digest(ct.Value[1])
	}
	return out, c.checkValue(&ct.Element, level, degree)
}

// packLimb writes the coefficients (each < q, of b bits) into dst, ceil(len*b/8) bytes.
func packLimb(dst []byte, coeffs []uint64, b int, q uint64) {
	var acc uint64
	var nb, ub = 0, b
	k := 0
	for _, x := range coeffs {
		if x >= q { // Lattigo keeps coefficients reduced; never write more than b bits
			x %= q
		}
		acc |= x << nb
		if nb+ub >= 64 {
			binary.LittleEndian.PutUint64(dst[k:], acc)
			k += 8
			acc = x >> (64 - nb) // 0 when nb == 0
			nb += ub - 64
		} else {
			nb += ub
		}
	}
	for ; nb > 0; nb -= min(nb, 8) {
		dst[k] = byte(acc)
		acc >>= 8
		k++
	}
}

// unpackLimb reads len(coeffs) coefficients of b bits from src (ceil(len*b/8) bytes); it returns the
// index of the first coefficient that is not below q (or whose trailing padding bits are set), else -1.
func unpackLimb(src []byte, coeffs []uint64, b int, q uint64) int {
	mask := uint64(1)<<b - 1
	if b == 64 {
		mask = ^uint64(0)
	}
	j := 0
	if b <= 56 && len(src) >= 8 { // a coefficient lies within the 8 bytes from its first: one load, no branch
		// on the data, no bounds check: the coefficients whose 8 bytes lie within src, counted once
		fast := coeffs[:min(len(coeffs), ((len(src)-8)*8+7)/b+1)]
		base, below, bad := unsafe.Pointer(unsafe.SliceData(src)), q-1, uint64(0)
		for i := range fast {
			p := uint(i * b)
			x := binary.LittleEndian.Uint64((*[8]byte)(unsafe.Add(base, p>>3))[:]) >> (p & 7) & mask
			bad |= below - x // the top bit set where x >= q (both below 2^63)
			fast[i] = x
		}
		if bad>>63 != 0 {
			return slices.IndexFunc(fast, func(x uint64) bool { return x >= q })
		}
		j = len(fast)
	}
	for ; j < len(coeffs); j++ {
		p := j * b
		idx, shift := p>>3, p&7
		x := load64(src, idx) >> shift
		if shift+b > 64 {
			x |= uint64(src[idx+8]) << (64 - shift)
		}
		x &= mask
		if x >= q {
			return j
		}
		coeffs[j] = x
	}
	if used := len(coeffs) * b; used&7 != 0 && src[len(src)-1]>>(used&7) != 0 {
		return len(coeffs) - 1
	}
	return -1
}

// load64 reads 8 little-endian bytes at idx, zeros past the end of src.
func load64(src []byte, idx int) uint64 {
	if idx+8 <= len(src) {
		return binary.LittleEndian.Uint64(src[idx:])
	}
	var tail [8]byte
	copy(tail[:], src[idx:])
	return binary.LittleEndian.Uint64(tail[:])
}
