package main

import (
	"math"
	"testing"
)

func TestObjectKind(t *testing.T) {
	c := testCtx(t)
	k := testKeys(t, c)
	ct := encryptConst(t, c, k, 0.5, math.Exp2(36))
	pt, err := c.encode(make([]float64, c.params.MaxSlots()), make([]float64, c.params.MaxSlots()), 0, math.Exp2(36))
	if err != nil {
		t.Fatal(err)
	}
	want := map[any]int{ct: kindCiphertext, pt: kindPlaintext, k.pk: kindPublicKey, k.rk: kindRelinKey,
		k.gk: kindGaloisKeys, k.sk: kindSecretKey, c: 0}
	for obj, kind := range want {
		if got := objectKind(obj); got != kind {
			t.Errorf("objectKind(%s) = %d, want %d", kindName(obj), got, kind)
		}
	}
}
