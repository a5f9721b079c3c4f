package services

import (
	"crypto/rand"
	"math/big"
	"time"
)

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// NewID returns an opaque id with a type prefix ("c_", "cb_", "k_", "l_")
// and 16 base62 characters (~95 bits), so ids are unguessable and sortable by nothing.
func NewID(prefix string) string { return prefix + randomBase62(16) }

// NewTargetID returns a combo entry id: 8 base62 characters (30-routing §2: 6–12).
func NewTargetID() string { return randomBase62(8) }

func randomBase62(n int) string {
	b := make([]byte, n)
	max := big.NewInt(int64(len(base62)))
	for i := range b {
		v, err := rand.Int(rand.Reader, max)
		if err != nil {
			panic(err)
		}
		b[i] = base62[v.Int64()]
	}
	return string(b)
}

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// NewRequestID returns "req_" + a 26-character Crockford-base32 ULID:
// 48 bits of milliseconds then 80 random bits, so ids sort by time.
func NewRequestID(now time.Time) string {
	var b [30]byte
	copy(b[:], "req_")
	ms := uint64(now.UnixMilli())
	for i := 9; i >= 0; i-- {
		b[4+i] = crockford[ms&31]
		ms >>= 5
	}
	var r [10]byte
	if _, err := rand.Read(r[:]); err != nil {
		panic(err)
	}
	// 80 random bits → 16 characters of 5 bits.
	var acc uint64
	bits := 0
	j := 14
	for _, x := range r {
		acc = acc<<8 | uint64(x)
		bits += 8
		for bits >= 5 {
			bits -= 5
			b[j] = crockford[(acc>>uint(bits))&31]
			j++
		}
	}
	return string(b[:])
}
