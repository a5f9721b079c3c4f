package services

import (
	"crypto/rand"
	"math/big"
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
