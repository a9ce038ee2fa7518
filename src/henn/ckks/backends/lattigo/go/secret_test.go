package main

import (
	"testing"

	"github.com/tuneinsight/lattigo/v6/ring"
)

// A secret key read back from its bytes decrypts what the original encrypted; bytes of other parameters,
// cut or extended ones are refused.
func TestSecretKeyRoundTrip(t *testing.T) {
	c := testCtx(t)
	k := testKeys(t, c)
	data, err := k.sk.sk.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	sk, err := c.unmarshalSecret(data)
	if err != nil {
		t.Fatal(err)
	}
	ct := encryptConst(t, c, k, 0.25, c.params.DefaultScale().Float64())
	re, im := make([]float64, c.params.MaxSlots()), make([]float64, c.params.MaxSlots())
	if err = c.decode(c.decrypt(ct, sk), re, im); err != nil {
		t.Fatal(err)
	}
	if d := re[0] - 0.25; d > 1e-6 || d < -1e-6 {
		t.Fatalf("decrypted %v with the key read back, want 0.25", re[0])
	}
	for _, bad := range [][]byte{data[:len(data)/2], append(append([]byte{}, data...), 0), {}} {
		if _, err = c.unmarshalSecret(bad); err == nil {
			t.Fatalf("%d bytes of a %d-byte secret key were accepted", len(bad), len(data))
		}
	}
	other, err := newContext(11, nil, nil, []int{50, 36, 36}, []int{50}, 36, ring.Standard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err = other.unmarshalSecret(data); err == nil {
		t.Fatal("a secret key of other parameters was accepted")
	}
}
