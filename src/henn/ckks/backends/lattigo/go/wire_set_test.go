package main

import (
	"errors"
	"math/bits"
	"strings"
	"testing"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
)

// setOfSeeded writes n fresh encryptions at the level below the top, seeded.
func setOfSeeded(t *testing.T, c *ctxObj, n int) []compactIn {
	k := keys{sk: c.genSecretKey()}
	level := c.params.MaxLevel() - 1
	set := make([]compactIn, n)
	for i := range set {
		_, pt := encodeRamp(t, c, 0.01*float64(i+1), level)
		ct, err := c.encryptSymmetric(pt, k.sk)
		if err != nil {
			t.Fatal(err)
		}
		data, used, err := c.marshalCiphertext(ct, encodingSeededAES)
		if err != nil {
			t.Fatal(err)
		}
		set[i] = compactIn{used, level, 1, data}
	}
	return set
}

// setOf writes n ciphertexts (seeded, packed and of degree 2 in turn) and returns them with their set.
func setOf(t *testing.T, c *ctxObj, n int) ([]*ctObj, []compactIn) {
	t.Helper()
	k := testKeys(t, c)
	level := c.params.MaxLevel() - 1
	cts, set := make([]*ctObj, n), make([]compactIn, n)
	for i := range cts {
		_, pt := encodeRamp(t, c, 0.01*float64(i+1), level)
		ct, err := c.encryptSymmetric(pt, k.sk)
		if err != nil {
			t.Fatal(err)
		}
		enc := encodingSeeded
		switch i % 3 {
		case 1:
			enc = encodingPacked
		case 2:
			if ct, err = c.mul(ct, ct, nil); err != nil {
				t.Fatal(err)
			}
			enc = encodingPacked
		}
		data, used, err := c.marshalCiphertext(ct, enc)
		if err != nil {
			t.Fatal(err)
		}
		cts[i], set[i] = ct, compactIn{used, ct.ct.Level(), ct.ct.Degree(), data}
	}
	return cts, set
}

// A set reads back bit for bit, on any number of goroutines, as each of its ciphertexts reads alone.
func TestUnmarshalCiphertextsMatchesOneByOne(t *testing.T) {
	c := testCtx(t)
	want, set := setOf(t, c, 7)
	for _, threads := range []int{0, 1, 3, 16} {
		got, err := c.unmarshalCiphertexts(set, threads)
		if err != nil {
			t.Fatalf("%d threads: %v", threads, err)
		}
		for i, ct := range got {
			alone, err := c.unmarshalCiphertext(set[i].encoding, set[i].data, set[i].level, set[i].degree)
			if err != nil {
				t.Fatal(err)
			}
			for _, ref := range []*ctObj{want[i], alone} {
				if !ct.ct.Equal(ref.ct) {
					t.Fatalf("%d threads: ciphertext %d differs", threads, i)
				}
			}
			if ct.seedDigest != alone.seedDigest || string(ct.seed) != string(alone.seed) || c.seeded(ct) != c.seeded(alone) {
				t.Fatalf("%d threads: ciphertext %d has another seed", threads, i)
			}
		}
	}
}

// A bad ciphertext anywhere in a set refuses the whole set with a data error that names it; a size that
// disagrees with its header is refused before anything of the set is read.
func TestUnmarshalCiphertextsRefusesBadMembers(t *testing.T) {
	c := testCtx(t)
	_, set := setOf(t, c, 5)
	for name, spoil := range map[string]func([]compactIn){
		"truncated":  func(s []compactIn) { s[3].data = s[3].data[:len(s[3].data)-1] },
		"level":      func(s []compactIn) { s[3].level = c.params.MaxLevel() + 1 },
		"degree":     func(s []compactIn) { s[3].degree = 3 },
		"encoding":   func(s []compactIn) { s[3].encoding = 9 },
		"seeded d=2": func(s []compactIn) { s[2].encoding, s[2].degree = encodingSeededAES, 2 },
		"coefficient": func(s []compactIn) {
			d := append([]byte(nil), s[3].data...)
			for i := metaSize; i < metaSize+16; i++ {
				d[i] = 0xff
			}
			s[3].data = d
		},
	} {
		spoilt := append([]compactIn(nil), set...)
		spoil(spoilt)
		bad := 3
		if name == "seeded d=2" {
			bad = 2
		}
		_, err := c.unmarshalCiphertexts(spoilt, 2)
		var be *bridgeError
		if !errors.As(err, &be) || be.code != statusData || !strings.Contains(be.msg, "ciphertext "+string(rune('0'+bad))+" of the set") {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if _, err := c.unmarshalCiphertexts(make([]compactIn, maxSetCiphertexts+1), 1); err == nil {
		t.Fatal("an oversized set was read")
	}
	if got, err := c.unmarshalCiphertexts(nil, 2); err != nil || len(got) != 0 {
		t.Fatalf("an empty set: %v, %d", err, len(got))
	}
}

// A set of 64 seeded ciphertexts at MNIST's batch parameters (N = 2^13 real-slot ring, 35 + 5 x 24 bits),
// read in one call, and each of its parts: go test -run X -bench ReadSeeded -benchtime 20x
func BenchmarkReadSeeded(b *testing.B) {
	c, err := newContext(13, nil, nil, []int{35, 24, 24, 24, 24, 24}, []int{49}, 24, ring.ConjugateInvariant)
	if err != nil {
		b.Fatal(err)
	}
	t := &testing.T{}
	set := setOfSeeded(t, c, 64)
	level, ct := set[0].level, set[0]
	c0 := rlwe.NewCiphertext(c.params, 1, level)
	b.Run("set", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.unmarshalCiphertexts(set, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unpack_c0", func(b *testing.B) {
		for b.Loop() {
			for range set {
				off, sizes := metaSize, c.limbBytes(level)
				for i, q := range c.params.Q()[:level+1] {
					unpackLimb(ct.data[off:off+sizes[i]], c0.Value[0].Coeffs[i], bits.Len64(q), q)
					off += sizes[i]
				}
			}
		}
	})
	b.Run("sample_c1", func(b *testing.B) {
		for b.Loop() {
			for range set {
				if err := c.sampleC1(ct.data[len(ct.data)-seedSize:], encodingSeededAES, level, c0.Value[1]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("digest", func(b *testing.B) {
		for b.Loop() {
			for range set {
				digest(c0.Value[1])
			}
		}
	})
	b.Run("allocate", func(b *testing.B) {
		for b.Loop() {
			for range set {
				rlwe.NewCiphertext(c.params, 1, level)
			}
		}
	})
}
