package sampling

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"sync"
)

// drbgChunk: the keystream made per AES key. Each refill costs one key expansion, small next to 16 KiB.
const drbgChunk = 16 << 10

// drbg is what every ThreadSafePRNG draws from in henn's build (patch_lattigo.py): AES-256 in counter
// mode keyed from crypto/rand once, rekeyed from its own keystream at each refill ("fast key erasure":
// the state never reveals an output already given), and each output byte wiped from the buffer once
// read. Lattigo reads crypto/rand for every 1 KiB of a key's uniform and Gaussian samples; on Linux that
// is 0.42 GB/s here against 7.5 GB/s for AES-CTR with AES-NI, and a bootstrapping key set needs GiBs.
// AES-256-CTR under a uniformly random key is the NIST SP 800-90A CTR_DRBG construction without its
// derivation function, which needs full-entropy seeds (crypto/rand's are).
type drbg struct {
	mu     sync.Mutex
	seeded bool
	key    [32]byte
	buf    [drbgChunk]byte
	pos    int
}

func (d *drbg) read(out []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.seeded {
		if _, err := rand.Read(d.key[:]); err != nil {
			return 0, err
		}
		d.seeded, d.pos = true, drbgChunk
	}
	for n := 0; n < len(out); {
		if d.pos == drbgChunk {
			if err := d.refill(); err != nil {
				return n, err
			}
		}
		c := copy(out[n:], d.buf[d.pos:])
		clear(d.buf[d.pos : d.pos+c])
		d.pos += c
		n += c
	}
	return len(out), nil
}

// refill: the next key, then a chunk of output, from one keystream under the current key (each key
// encrypts one counter sequence from zero, once).
func (d *drbg) refill() error {
	block, err := aes.NewCipher(d.key[:])
	if err != nil {
		return err
	}
	stream := cipher.NewCTR(block, make([]byte, aes.BlockSize))
	Keystream(stream, d.key[:])
	Keystream(stream, d.buf[:])
	d.pos = 0
	return nil
}

// keystreamZeros is what Keystream XORs a keystream onto: read-only zeros, one physical page, in cache.
var keystreamZeros [64 << 10]byte

// Keystream writes stream's next len(p) bytes into p without reading p. XORing onto p itself (after
// clearing it) reads p: on memory just allocated, whose pages the kernel maps to its shared zero page until
// written, a read before the write makes the write fault a second time and flush the TLB of every thread
// of the process (do_wp_page); a tenth of parsing a seeded batch request went there. XORed onto read-only
// zeros, p is written once.
func Keystream(stream cipher.Stream, p []byte) {
	for o := 0; o < len(p); o += len(keystreamZeros) {
		n := min(len(p)-o, len(keystreamZeros))
		stream.XORKeyStream(p[o:o+n], keystreamZeros[:n])
	}
}
