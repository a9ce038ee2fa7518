package rlwe

// henn: seeded evaluation keys that stay seeded while they are used.
//
// Lattigo's compressed evaluation keys (EvaluationKeyParameters.Compressed) store only each gadget
// element's b half and a seed; the a halves come from one BLAKE2b stream over the whole key, so the key
// must be expanded in full (Expand) before a key switch can read it. Here every prime of every element
// has a stream of its own: AES-256-CTR under the seed, with the element's digit, row, basis and prime
// index as the counter block's first bytes. A key switch at level l then regenerates only the primes it
// reads, for the digits it reads (prime by prime as it multiplies in the multiple-prime gadget products:
// seeded_product.go; into pooled buffers in the single-prime one), while the key holds half its memory for
// its whole life. A UniformAccelerator (the bridge's VAES kernel) may write the rows in Go's place. The
// seed is public, as a is: a key's security is that of b = -a*s + e + gadget*s', the same whichever
// uniform a; AES-CTR under a random key stands for the uniform sampler, as Lattigo's BLAKE2b
// stream does.
//
// The patch moves Seed from EvaluationKey to its GadgetCiphertext (EvaluationKey's code reads it
// unchanged), so that the gadget products, which see only the GadgetCiphertext, find it.

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"math/bits"
	"sync"
	"unsafe"

	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/ring/ringqp"
	"github.com/tuneinsight/lattigo/v6/utils/sampling"
	"github.com/tuneinsight/lattigo/v6/utils/structs"
)

// seedStreams are a seeded key's streams: one AES-256-CTR keystream for each prime of each gadget element.
type seedStreams struct {
	seed  *[32]byte
	block cipher.Block
}

func newSeedStreams(seed *[32]byte) seedStreams { return seedStreams{seed, seedCipher(seed)} }

// fill writes prime k's row of element (i, j)'s a half (basis 0: Q, 1: P): the stream whose counter block
// starts with the element's digit, row, basis and prime index, filtered by fillUniform (by the installed
// UniformAccelerator where it takes the row).
func (st seedStreams) fill(i, j, basis, k int, s *ring.SubRing, row []uint64) {
	var iv [aes.BlockSize]byte
	binary.BigEndian.PutUint16(iv[0:], uint16(i))
	binary.BigEndian.PutUint16(iv[2:], uint16(j))
	iv[4] = byte(basis)
	binary.BigEndian.PutUint16(iv[5:], uint16(k)) // bytes 7..15 count blocks: 2^72 bytes, far beyond one prime
	if uniformAccelerator != nil && uniformAccelerator(st.seed, &iv, row, s.Modulus, s.Mask) {
		return
	}
	fillUniform(cipher.NewCTR(st.block, iv[:]), s, row)
}

// UniformAccelerator writes row as fillUniform writes it from the AES-256-CTR keystream under key from
// counter block iv, and reports whether it did (false: nothing written that counts).
type UniformAccelerator func(key *[32]byte, iv *[16]byte, row []uint64, q, mask uint64) bool

var uniformAccelerator UniformAccelerator

// SetUniformAccelerator installs f (nil restores Go's stream), before any key is made or used.
func SetUniformAccelerator(f UniformAccelerator) { uniformAccelerator = f }

// fillUniform writes row (len N) with the stream's 8-byte little-endian words masked to the prime's bit
// length, keeping those below the prime: uniform modulo q. The keystream is written straight into the row
// and filtered in place, read as native words (on little-endian machines no byte is swapped: twice the
// speed of reading big-endian words).
func fillUniform(stream cipher.Stream, s *ring.SubRing, row []uint64) {
	q, mask := s.Modulus, s.Mask
	for filled := 0; filled < len(row); {
		chunk := row[filled:]
		buf := unsafe.Slice((*byte)(unsafe.Pointer(&chunk[0])), 8*len(chunk))
		sampling.Keystream(stream, buf)
		k := filled
		for _, v := range chunk { // row[k] with k <= filled+i: only words already read are overwritten
			if bigEndian {
				v = bits.ReverseBytes64(v)
			}
			v &= mask
			row[k] = v
			k += int(((v - q) >> 63) & 1) // v < q (both below 2^63): no branch on the random value
		}
		filled = k
	}
}

var bigEndian = binary.NativeEndian.Uint16([]byte{0, 1}) == 1

// expandSeededA writes element (i, j)'s a half into a, on the primes of ringQ and ringP (nil: none) up to
// their levels (a ring at a level keeps every SubRing).
func expandSeededA(st seedStreams, i, j int, ringQ, ringP *ring.Ring, a ringqp.Poly) {
	for k := 0; k <= ringQ.Level(); k++ {
		st.fill(i, j, 0, k, ringQ.SubRings[k], a.Q.Coeffs[k])
	}
	if ringP != nil {
		for k := 0; k <= ringP.Level(); k++ {
			st.fill(i, j, 1, k, ringP.SubRings[k], a.P.Coeffs[k])
		}
	}
}

func seedCipher(seed *[32]byte) cipher.Block {
	block, err := aes.NewCipher(seed[:])
	if err != nil {
		panic(err) // a 32-byte key is always valid
	}
	return block
}

// rows recycles the a halves' rows between key switches, so that a key switch allocates nothing.
var rows = sync.Pool{}

func getRows(count, n int) [][]uint64 {
	out := make([][]uint64, count)
	for i := range out {
		if r, ok := rows.Get().([]uint64); ok && len(r) == n {
			out[i] = r
		} else {
			out[i] = make([]uint64, n)
		}
	}
	return out
}

func putRows(rs [][]uint64) {
	for _, r := range rs {
		rows.Put(r)
	}
}

// seededView returns ct with the a halves a key switch at levelQ reads regenerated (its digits, each on
// the primes up to levelQ and every P prime), the b halves shared, and the function that recycles them.
func (eval Evaluator) seededView(levelQ int, ct *GadgetCiphertext) (*GadgetCiphertext, func()) {
	levelP := ct.LevelP()
	ringQP := eval.params.RingQP().AtLevel(levelQ, levelP)
	digits := min(len(ct.Value), eval.params.BaseRNSDecompositionVectorSize(levelQ, levelP))
	st := newSeedStreams(ct.Seed)
	n := eval.params.N()
	nP := 0
	if ringQP.RingP != nil {
		nP = levelP + 1
	}
	value := make(structs.Matrix[VectorQP], len(ct.Value))
	var used [][]uint64
	var expand [][2]int // the elements (i, j) whose a halves are regenerated
	for i := range ct.Value {
		value[i] = make([]VectorQP, len(ct.Value[i]))
		for j := range ct.Value[i] {
			if i >= digits {
				value[i][j] = ct.Value[i][j]
				continue
			}
			rs := getRows(levelQ+1+nP, n)
			used = append(used, rs...)
			a := ringqp.Poly{Q: ring.Poly{Coeffs: rs[:levelQ+1]}}
			if nP > 0 {
				a.P = ring.Poly{Coeffs: rs[levelQ+1:]}
			}
			value[i][j] = VectorQP{ct.Value[i][j][0], a}
			expand = append(expand, [2]int{i, j})
		}
	}
	halves(len(expand), func(from, to int) { // on two goroutines as the key switch's digits (parallel.go)
		for _, e := range expand[from:to] {
			expandSeededA(st, e[0], e[1], ringQP.RingQ, ringQP.RingP, value[e[0]][e[1]][1])
		}
	})
	return &GadgetCiphertext{BaseTwoDecomposition: ct.BaseTwoDecomposition, Value: value}, func() { putRows(used) }
}

// genSeededEvaluationKey fills a compressed evk (degree 0): a fresh seed, each b half -a*skOut + e with a
// from the seed's streams, then skIn times the gadget vector added, as genEvaluationKey does.
func (kgen KeyGenerator) genSeededEvaluationKey(skIn ring.Poly, skOut ringqp.Poly, evk *EvaluationKey) {
	seed := new([32]byte)
	if n, err := kgen.prng.Read(seed[:]); n != 32 || err != nil {
		panic("unable to sample evaluation key seed")
	}
	evk.Seed = seed
	st := newSeedStreams(seed)
	levelQ, levelP := evk.LevelQ(), evk.LevelP()
	ringQP := kgen.params.RingQP().AtLevel(levelQ, levelP)
	a := kgen.pool.AtLevel(levelQ, levelP).GetBuffPolyQP()
	defer kgen.pool.RecycleBuffPolyQP(a)
	sk := &SecretKey{Value: skOut}
	meta := &CiphertextMetaData{IsNTT: true, IsMontgomery: true}
	for i := range evk.Value {
		for j := range evk.Value[i] {
			expandSeededA(st, i, j, ringQP.RingQ, ringQP.RingP, *a)
			if err := kgen.encryptZeroSkFromC1QP(sk, levelQ, levelP, meta, *a, evk.Value[i][j][0]); err != nil {
				panic(err)
			}
		}
	}
	buffQ := kgen.pool.AtLevel(levelQ).GetBuffPoly()
	defer kgen.pool.RecycleBuffPoly(buffQ)
	if err := AddPolyTimesGadgetVectorToGadgetCiphertext(skIn, []GadgetCiphertext{evk.GadgetCiphertext}, *kgen.params.RingQP(), *buffQ); err != nil {
		panic(err)
	}
}

// expandSeeded is Expand for keys seeded here: the a halves at the key's levels, into buffer's degree-0
// elements when given. Like Lattigo's Expand it has a value receiver: the caller's key keeps its Seed, so
// its key switches still regenerate the a halves until the caller sets Seed to nil.
func (evk EvaluationKey) expandSeeded(params ParameterProvider, buffer *GadgetCiphertext) error {
	if buffer == nil {
		buffer = NewGadgetCiphertext(params, 0, evk.LevelQ(), evk.LevelP(), evk.BaseTwoDecomposition)
	}
	if len(buffer.Value) != len(evk.Value) || buffer.LevelQ() != evk.LevelQ() || buffer.LevelP() != evk.LevelP() {
		return errInvalidExpandBuffer
	}
	ringQP := params.GetRLWEParameters().RingQP().AtLevel(evk.LevelQ(), evk.LevelP())
	st := newSeedStreams(evk.Seed)
	for i := range evk.Value {
		if len(buffer.Value[i]) != len(evk.Value[i]) {
			return errInvalidExpandBuffer
		}
		for j := range evk.Value[i] {
			expandSeededA(st, i, j, ringQP.RingQ, ringQP.RingP, buffer.Value[i][j][0])
			evk.Value[i][j] = VectorQP{evk.Value[i][j][0], buffer.Value[i][j][0]}
		}
	}
	return nil
}

var errInvalidExpandBuffer = errors.New("invalid buffer: not of the key's shape")
