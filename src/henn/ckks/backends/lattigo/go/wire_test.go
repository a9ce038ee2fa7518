package main

import (
	"bytes"
	"crypto/aes"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
)

// encodeRamp encodes the slots v*(i%7-3) at level; it returns them with the plaintext.
func encodeRamp(t *testing.T, c *ctxObj, v float64, level int) ([]float64, *ptObj) {
	t.Helper()
	n := c.params.MaxSlots()
	re, im := make([]float64, n), make([]float64, n)
	for i := range re {
		re[i] = v * float64(i%7-3)
	}
	pt, err := c.encode(re, im, level, c.params.DefaultScale().Float64())
	if err != nil {
		t.Fatal(err)
	}
	return re, pt
}

// A seeded encryption decrypts as precisely as Lattigo's own secret-key encryption, its c1 comes back
// bit for bit from the seed, and it travels as c0 and the seed.
func TestSeededEncryption(t *testing.T) {
	c := testCtx(t)
	k := testKeys(t, c)
	level := c.params.MaxLevel() - 1
	want, pt := encodeRamp(t, c, 0.125, level)
	ct, err := c.encryptSymmetric(pt, k.sk)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := rlwe.NewEncryptor(c.params, k.sk.sk).EncryptNew(pt.pt)
	if err != nil {
		t.Fatal(err)
	}
	got, lattigo := maxError(t, c, k.sk, ct, want), maxError(t, c, k.sk, &ctObj{c: c, ct: ref}, want)
	if got > 1e-6 || got > 4*lattigo+1e-9 {
		t.Fatalf("seeded encryption error %g, Lattigo's %g", got, lattigo)
	}
	if !c.seeded(ct) {
		t.Fatal("a fresh seeded encryption does not regenerate its c1")
	}
	data, enc, err := c.marshalCiphertext(ct, encodingSeeded)
	if err != nil || enc != encodingSeededAES || len(data) != c.compactSize(encodingSeededAES, level, 1) {
		t.Fatalf("seeded marshal: encoding %d, %d bytes, %v", enc, len(data), err)
	}
	back, err := c.unmarshalCiphertext(encodingSeededAES, data, level, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !back.ct.Value[0].Equal(&ct.ct.Value[0]) || !back.ct.Value[1].Equal(&ct.ct.Value[1]) ||
		!back.ct.MetaData.Equal(ct.ct.MetaData) {
		t.Fatal("the ciphertext read back from c0 and the seed differs from the one written")
	}
	// any operation gives a ciphertext without a seed: written packed
	sum, err := c.add(ct, ct)
	if err != nil {
		t.Fatal(err)
	}
	if _, enc, err = c.marshalCiphertext(sum, encodingSeeded); err != nil || enc != encodingPacked {
		t.Fatalf("a sum was written with encoding %d (%v), want packed", enc, err)
	}
	// a change in place to c1 loses the seed too
	ct.ct.Value[1].Coeffs[0][0] ^= 1
	if c.seeded(ct) {
		t.Fatal("a ciphertext whose c1 changed still claims its seed")
	}
}

// The seed's stream is AES-256 of the counters 0, 1, 2, ... (128-bit big-endian) under the seed.
func TestSeedStreamIsAESCounterMode(t *testing.T) {
	seed := make([]byte, seedSize)
	for i := range seed {
		seed[i] = byte(i)
	}
	s, err := newSeedStream(seed)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 3*aes.BlockSize)
	if _, err := s.Read(got[:5]); err != nil { // reads continue the stream across calls
		t.Fatal(err)
	}
	if _, err := s.Read(got[5:]); err != nil {
		t.Fatal(err)
	}
	block, _ := aes.NewCipher(seed)
	for i := 0; i < 3; i++ {
		counter, want := make([]byte, aes.BlockSize), make([]byte, aes.BlockSize)
		counter[aes.BlockSize-1] = byte(i)
		block.Encrypt(want, counter)
		if !bytes.Equal(got[i*aes.BlockSize:(i+1)*aes.BlockSize], want) {
			t.Fatalf("block %d of the seed stream is not AES(seed, %d)", i, i)
		}
	}
}

// A ciphertext written by henn before seeded_aes (c1 from Lattigo's keyed BLAKE2b PRNG) reads back with
// that c1, and is written again in its own encoding.
func TestLegacySeededCiphertext(t *testing.T) {
	c := testCtx(t)
	k := testKeys(t, c)
	level := c.params.MaxLevel()
	want, pt := encodeRamp(t, c, 0.25, level)
	ct, err := c.encryptSymmetric(pt, k.sk)
	if err != nil {
		t.Fatal(err)
	}
	// the same encryption with c1 from the legacy stream: c0 = m + e - a*s holds for the new a
	legacy := ct.ct.CopyNew()
	ringQ := c.params.RingQ().AtLevel(level)
	ringQ.MulCoeffsMontgomeryThenAdd(ct.ct.Value[1], k.sk.sk.Value.Q, legacy.Value[0])
	if err := c.sampleC1(ct.seed, encodingSeeded, level, legacy.Value[1]); err != nil {
		t.Fatal(err)
	}
	ringQ.MulCoeffsMontgomeryThenSub(legacy.Value[1], k.sk.sk.Value.Q, legacy.Value[0])
	old := &ctObj{c: c, ct: legacy, seed: ct.seed, seedEncoding: encodingSeeded, seedLevel: level,
		seedDigest: digest(legacy.Value[1])}
	data, enc, err := c.marshalCiphertext(old, encodingSeeded)
	if err != nil || enc != encodingSeeded {
		t.Fatalf("legacy seeded marshal: encoding %d, %v", enc, err)
	}
	back, err := c.unmarshalCiphertext(encodingSeeded, data, level, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !back.ct.Value[1].Equal(&legacy.Value[1]) || back.ct.Value[1].Equal(&ct.ct.Value[1]) {
		t.Fatal("the legacy seed did not expand into Lattigo's keyed-PRNG c1")
	}
	if e := maxError(t, c, k.sk, back, want); e > 1e-6 {
		t.Fatalf("legacy seeded ciphertext decrypts with error %g", e)
	}
}

// Packed ciphertexts of both degrees read back bit for bit; wrong sizes, out-of-range coefficients,
// a nonzero padding and random bytes are refused.
func TestPackedCiphertext(t *testing.T) {
	c := testCtx(t)
	k := testKeys(t, c)
	ct := encryptConst(t, c, k, 0.5, c.params.DefaultScale().Float64())
	prod, err := c.mul(ct, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []*ctObj{ct, prod} {
		level, degree := x.ct.Level(), x.ct.Degree()
		data, enc, err := c.marshalCiphertext(x, encodingPacked)
		if err != nil || enc != encodingPacked {
			t.Fatal(enc, err)
		}
		back, err := c.unmarshalCiphertext(encodingPacked, data, level, degree)
		if err != nil {
			t.Fatal(err)
		}
		for i := range x.ct.Value {
			if !back.ct.Value[i].Equal(&x.ct.Value[i]) {
				t.Fatalf("polynomial %d differs after packing", i)
			}
		}
		for _, bad := range [][]byte{data[:len(data)-1], append(append([]byte{}, data...), 0), {}} {
			if _, err = c.unmarshalCiphertext(encodingPacked, bad, level, degree); err == nil {
				t.Fatalf("%d bytes of a %d-byte ciphertext were accepted", len(bad), len(data))
			}
		}
		forged := append([]byte{}, data...)
		for i := metaSize; i < metaSize+8; i++ {
			forged[i] = 0xff // the first coefficient: all ones, above the prime
		}
		if _, err = c.unmarshalCiphertext(encodingPacked, forged, level, degree); err == nil {
			t.Fatal("a coefficient above its prime was accepted")
		}
		random := make([]byte, len(data))
		for i := range random {
			random[i] = byte(rand.IntN(256))
		}
		if _, err = c.unmarshalCiphertext(encodingPacked, random, level, degree); err == nil {
			t.Fatal("random bytes were accepted")
		}
	}
	if v := decryptFirst(t, c, k, ct); !near(v, 0.5) {
		t.Fatalf("decrypted %v", v)
	}
}

func TestPackLimbRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, b := range []int{20, 26, 36, 41, 50, 61} {
		q := uint64(1)<<b - 1 - uint64(r.IntN(1000))*2
		for _, n := range []int{8, 13, 1024} {
			in := make([]uint64, n)
			for i := range in {
				in[i] = r.Uint64N(q)
			}
			in[0], in[n-1] = q-1, 0
			buf := make([]byte, (n*b+7)/8)
			packLimb(buf, in, bits.Len64(q), q)
			out := make([]uint64, n)
			if j := unpackLimb(buf, out, bits.Len64(q), q); j >= 0 {
				t.Fatalf("b=%d n=%d: coefficient %d refused", b, n, j)
			}
			for i := range in {
				if in[i] != out[i] {
					t.Fatalf("b=%d n=%d: coefficient %d is %d, was %d", b, n, i, out[i], in[i])
				}
			}
			for _, k := range []int{1, n / 2, n - 2} { // q itself (q-1 with its low bit set) is refused, where it is
				in[k] = q - 1
				packLimb(buf, in, bits.Len64(q), q)
				buf[k*b>>3] |= 1 << (k * b & 7)
				if j := unpackLimb(buf, out, bits.Len64(q), q); j != k {
					t.Fatalf("b=%d n=%d: coefficient %d holds q, refused at %d", b, n, k, j)
				}
			}
			packLimb(buf, in, bits.Len64(q), q)
			if n*b%8 != 0 {
				buf[len(buf)-1] |= 0x80
				if unpackLimb(buf, out, bits.Len64(q), q) < 0 {
					t.Fatalf("b=%d n=%d: set padding bits were accepted", b, n)
				}
			}
		}
	}
}
