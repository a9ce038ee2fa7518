package main

import (
	"bytes"
	"math"
	"testing"
)

// henn_unmarshal reads straight from the caller's buffer (no copy: a 1.2 GiB key set would otherwise
// be held twice): every object it makes must own its memory, so that the caller may free or reuse the
// buffer once the call returns.
func TestUnmarshalledObjectsDoNotAliasTheInput(t *testing.T) {
	c := testCtx(t)
	k := testKeys(t, c)
	n := c.params.MaxSlots()
	pt, err := c.encode(make([]float64, n), make([]float64, n), 2, math.Exp2(36))
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, btp := testBootCtx(t, true)
	cases := []struct {
		kind          int
		obj           any
		c             *ctxObj
		level, degree int
	}{
		{kindCiphertext, encryptConst(t, c, k, 0.5, math.Exp2(36)), c, c.params.MaxLevel(), 1},
		{kindPlaintext, pt, c, 2, 0},
		{kindPublicKey, k.pk, c, 0, 0},
		{kindRelinKey, k.rk, c, 0, 0},
		{kindGaloisKeys, k.gk, c, 0, 0},
		{kindBootstrapKeys, btp, btp.c, 0, 0},
	}
	for _, tc := range cases {
		want, err := marshal(tc.obj)
		if err != nil {
			t.Fatal(err)
		}
		buf := append([]byte{}, want...)
		obj, err := tc.c.unmarshal(tc.kind, buf, tc.level, tc.degree)
		if err != nil {
			t.Fatalf("kind %d: %v", tc.kind, err)
		}
		for i := range buf {
			buf[i] = 0xA5
		}
		got, err := marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("kind %d: the object changed when its input buffer was overwritten", tc.kind)
		}
	}
}
