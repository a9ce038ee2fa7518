package main

import "testing"

// Kept factors are the streamed ones: every bootstrap gives the ciphertext of a bootstrap that encodes
// each factor, the one that fills the cache and those that read it; a budget below one factor keeps
// none, and lowering the budget drops what was kept.
func TestKeptStreamedFactorsGiveTheStreamedCiphertext(t *testing.T) {
	c, _, pk, kept := testBootCtx(t, true)
	streamed := streamedKeys(t, c, kept)
	need := streamed.dftKeepBytes()
	if need <= 0 || kept.dftKeepBytes() != 0 {
		t.Fatalf("keeping the factors takes %d bytes (Lattigo's kept matrices: %d), want > 0 (0)", need, kept.dftKeepBytes())
	}
	// what the parameters alone tell (btpInfo, before any key: a cluster worker's declared memory)
	p, err := c.bootstrapParams()
	if err != nil {
		t.Fatal(err)
	}
	if got := dftFactorBytes(p, true); got != need || dftFactorBytes(p, false) != 0 {
		t.Fatalf("the parameters give %d bytes of factors (%d without stream_dft), the keys %d", got, dftFactorBytes(p, false), need)
	}
	_, ct := encryptRandom(t, c, pk, 4, 1)
	want, err := streamed.bootstrap(ct, 4, true)
	if err != nil {
		t.Fatal(err)
	}
	streamed.keptDFT.setBudget(1)
	if _, err := streamed.bootstrap(ct, 4, true); err != nil {
		t.Fatal(err)
	}
	if got := streamed.keptDFT.held(); got != 0 {
		t.Fatalf("a 1-byte budget kept %d bytes", got)
	}
	streamed.keptDFT.setBudget(need)
	for i, parallel := range []bool{true, true, false} {
		got, err := streamed.bootstrap(ct, 4, parallel)
		if err != nil {
			t.Fatal(err)
		}
		if !got.ct.Equal(want.ct) {
			t.Fatalf("bootstrap %d with kept factors (parallel %v) gives another ciphertext", i, parallel)
		}
		if held := streamed.keptDFT.held(); held <= 0 || held > need {
			t.Fatalf("after bootstrap %d: %d bytes kept, want 1..%d", i, held, need)
		}
	}
	streamed.keptDFT.setBudget(0)
	if got := streamed.keptDFT.held(); got != 0 {
		t.Fatalf("a zero budget still holds %d bytes", got)
	}
}
