package main

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/tuneinsight/lattigo/v6/ring"
)

// sampleUniformAES writes into c1 (level+1 limbs) what Lattigo's uniform sampler (ring.UniformSampler, as
// patched: samplers.go) draws from the seed's AES-256-CTR stream (counter zero), word for word: each limb
// takes the stream's next 8-byte words, big-endian, masked to the bit length of its prime, keeping those
// below the prime until it has N. The keystream is written straight into the limb and filtered in place
// (by the VAES kernel where it runs, aes_vaes.go): the sampler's copy through a 1 KiB buffer, cleared and
// then encrypted a block at a time, took half of expanding a seed. A nil limb is allocated as it is
// reached (readCompact) and only written.
func sampleUniformAES(seed []byte, subRings []*ring.SubRing, c1 ring.Poly) error {
	if len(seed) != seedSize {
		return fmt.Errorf("a ciphertext seed has %d bytes, not %d", len(seed), seedSize)
	}
	var stream seedStream  // Go's stream, where the VAES kernel does not run
	var from uint64        // the VAES kernel's position in the stream, in words
	iv := make([]byte, 16) // counter zero
	for j, s := range subRings {
		if c1.Coeffs[j] == nil {
			c1.Coeffs[j] = make([]uint64, s.N)
		}
		q, mask, row := s.Modulus, s.Mask, c1.Coeffs[j]
		if hasVAES {
			from += aesUniform(seed, iv, from, row, q, mask, true)
			continue
		}
		if stream.Stream == nil {
			var err error
			if stream, err = newSeedStream(seed); err != nil {
				return err
			}
		}
		for filled := 0; filled < len(row); { // a later round's words were read already
			chunk := row[filled:]
			buf := unsafe.Slice((*byte)(unsafe.Pointer(&chunk[0])), 8*len(chunk))
			stream.Read(buf)
			k := filled
			for i := range chunk { // row[k] with k <= filled+i: only words already read are overwritten
				v := binary.BigEndian.Uint64(buf[8*i:]) & mask
				row[k] = v
				k += int(((v - q) >> 63) & 1) // v < q (both below 2^63): no branch on the random value
			}
			filled = k
		}
	}
	return nil
}
