package services

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

// HKDF labels keep each use of the secret key independent: knowing the
// cookie key says nothing about the credential key.
const (
	labelCredentials   = "switchyard credentials v1"
	labelCookieHash    = "switchyard session cookie hash v1"
	labelCookieEncrypt = "switchyard session cookie encrypt v1"
	labelKeyID         = "switchyard key id v1"
)

// ErrWrongSecretKey means stored ciphertext was sealed with another key.
var ErrWrongSecretKey = errors.New("the secret key does not match the one this data directory was created with; restore the original SWITCHYARD_SECRET_KEY or <data-dir>/secret.key")

// Keyring derives every key Switchyard needs from one secret.
type Keyring struct {
	master []byte
	aead   cipher.AEAD
	keyID  string
}

// NewKeyring derives the keys from the secret key material (at least 32 bytes).
func NewKeyring(secret []byte) (*Keyring, error) {
	if len(secret) < 32 {
		return nil, fmt.Errorf("secret key: need at least 32 bytes, got %d", len(secret))
	}
	k := &Keyring{master: append([]byte(nil), secret...)}
	credKey := k.derive(labelCredentials, 32)
	block, err := aes.NewCipher(credKey)
	if err != nil {
		return nil, err
	}
	if k.aead, err = cipher.NewGCM(block); err != nil {
		return nil, err
	}
	k.keyID = hex.EncodeToString(k.derive(labelKeyID, 4))
	return k, nil
}

func (k *Keyring) derive(label string, n int) []byte {
	out, err := hkdf.Key(sha256.New, k.master, nil, label, n)
	if err != nil {
		panic(err) // only for n > 255*32, impossible here
	}
	return out
}

// KeyID names the key without revealing it (shown on the Health page).
func (k *Keyring) KeyID() string { return k.keyID }

// CookieKeys returns the hash and encryption keys for session cookies.
func (k *Keyring) CookieKeys() (hashKey, blockKey []byte) {
	return k.derive(labelCookieHash, 64), k.derive(labelCookieEncrypt, 32)
}

// Seal encrypts plaintext with AES-256-GCM under a fresh random nonce;
// aad binds the ciphertext to its row so it cannot be moved to another one.
func (k *Keyring) Seal(plaintext, aad []byte) []byte {
	nonce := make([]byte, k.aead.NonceSize(), k.aead.NonceSize()+len(plaintext)+k.aead.Overhead())
	if _, err := io.ReadFull(rand.Reader, nonce); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return k.aead.Seal(nonce, nonce, plaintext, aad)
}

// Open decrypts what Seal produced; a wrong key or tampered data gives ErrWrongSecretKey.
func (k *Keyring) Open(sealed, aad []byte) ([]byte, error) {
	ns := k.aead.NonceSize()
	if len(sealed) < ns+k.aead.Overhead() {
		return nil, ErrWrongSecretKey
	}
	out, err := k.aead.Open(nil, sealed[:ns], sealed[ns:], aad)
	if err != nil {
		return nil, ErrWrongSecretKey
	}
	return out, nil
}

// KeyCheck is a sealed constant stored once per data directory, so start-up
// can tell a wrong key before it touches any credential.
const keyCheckPlain = "switchyard-key-check"

// NewKeyCheck returns the value to store.
func (k *Keyring) NewKeyCheck() []byte { return k.Seal([]byte(keyCheckPlain), []byte("key-check")) }

// VerifyKeyCheck fails closed when the stored check was sealed with another key.
func (k *Keyring) VerifyKeyCheck(stored []byte) error {
	out, err := k.Open(stored, []byte("key-check"))
	if err != nil || string(out) != keyCheckPlain {
		return ErrWrongSecretKey
	}
	return nil
}

// RandomToken returns n random bytes as unpadded base64url.
func RandomToken(n int) string {
	b := make([]byte, n)
	if _, err := io.ReadFull(rand.Reader, b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// SHA256Hex is the lowercase hex SHA-256 of s.
func SHA256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
