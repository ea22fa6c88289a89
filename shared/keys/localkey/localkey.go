// Package localkey is the key backend for running without AWS: each signing key is a private
// key in a PEM file (PKCS #8, mode 0600) in one directory, usually under the data directory of
// the local server: RSA 2048 for RS256 and PS256, ECDSA P-256 for ES256. Keys are parsed once
// and kept in memory (RSA keys with their CRT values precomputed), so signing costs one
// private-key operation.
package localkey

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/acmebank/authserver/shared/keys"
)

// suffix ends every key file name; the ref of a key is its file name, <kid>.pem.
const suffix = ".pem"

// Backend keeps signing keys as PEM files in a directory.
type Backend struct {
	dir string

	mu    sync.RWMutex
	cache map[string]crypto.Signer // *rsa.PrivateKey or *ecdsa.PrivateKey
}

var _ keys.Backend = (*Backend)(nil)

// New returns a backend over dir, creating it (mode 0700) if it does not exist.
func New(dir string) (*Backend, error) {
	if dir == "" {
		return nil, errors.New("localkey: empty key directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("localkey: create key directory: %w", err)
	}
	return &Backend{dir: dir, cache: make(map[string]crypto.Signer)}, nil
}

// CreateKey generates a key for alg (RSA 2048 for RS256 and PS256, P-256 for ES256) and writes
// it to <kid>.pem with mode 0600. The file is written under a temporary name and renamed, so a
// crash never leaves a half-written key.
func (b *Backend) CreateKey(ctx context.Context, alg string) (string, crypto.PublicKey, error) {
	if err := ctx.Err(); err != nil {
		return "", nil, err
	}
	key, err := keys.GenerateKey(alg)
	if err != nil {
		return "", nil, fmt.Errorf("localkey: generate key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", nil, fmt.Errorf("localkey: encode key: %w", err)
	}
	kid, err := keys.Thumbprint(key.Public())
	if err != nil {
		return "", nil, fmt.Errorf("localkey: %w", err)
	}
	ref := kid + suffix
	tmp, err := os.CreateTemp(b.dir, ".new-*"+suffix) // CreateTemp uses mode 0600
	if err != nil {
		return "", nil, fmt.Errorf("localkey: create key file: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op once renamed
	werr := pem.Encode(tmp, &pem.Block{Type: "PRIVATE KEY", Bytes: der})
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), filepath.Join(b.dir, ref))
	}
	if werr != nil {
		return "", nil, fmt.Errorf("localkey: write key file: %w", werr)
	}
	b.mu.Lock()
	b.cache[ref] = key
	b.mu.Unlock()
	return ref, key.Public(), nil
}

// Sign signs digest (SHA-256) with alg and returns the JWS signature value (keys.SignDigest).
func (b *Backend) Sign(ctx context.Context, ref, alg string, digest []byte) ([]byte, error) {
	if len(digest) != 32 {
		return nil, fmt.Errorf("localkey: sign: digest must be 32 bytes, got %d", len(digest))
	}
	key, err := b.load(ref)
	if err != nil {
		return nil, err
	}
	sig, err := keys.SignDigest(key, alg, digest)
	if err != nil {
		return nil, fmt.Errorf("localkey: sign with %s: %w", ref, err)
	}
	return sig, nil
}

// SignsInProcess is true for every ref (keys.InProcessSigner): a key is parsed once and kept
// in memory, and load refuses a file whose key is not the one its name (the kid) says, so a
// ref signs with one private key for the life of the backend.
func (b *Backend) SignsInProcess(string) bool { return true }

var _ keys.InProcessSigner = (*Backend)(nil)

// PublicKey returns the public half of ref.
func (b *Backend) PublicKey(ctx context.Context, ref string) (crypto.PublicKey, error) {
	key, err := b.load(ref)
	if err != nil {
		return nil, err
	}
	return key.Public(), nil
}

// ScheduleDeletion removes the key file at once (there is no pending window for a local key)
// and forgets the cached key. A key already gone is not an error.
func (b *Backend) ScheduleDeletion(ctx context.Context, ref string) error {
	path, err := b.path(ref)
	if err != nil {
		return err
	}
	b.mu.Lock()
	delete(b.cache, ref)
	err = os.Remove(path)
	b.mu.Unlock()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("localkey: delete %s: %w", ref, err)
	}
	return nil
}

// load returns the parsed key of ref from the cache, reading its file the first time.
func (b *Backend) load(ref string) (crypto.Signer, error) {
	b.mu.RLock()
	key := b.cache[ref]
	b.mu.RUnlock()
	if key != nil {
		return key, nil
	}
	path, err := b.path(ref)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if key := b.cache[ref]; key != nil {
		return key, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("localkey: %s: %w", ref, keys.ErrUnknownKey)
	}
	if err != nil {
		return nil, fmt.Errorf("localkey: read %s: %w", ref, err)
	}
	key, err = parse(data)
	if err != nil {
		return nil, fmt.Errorf("localkey: %s: %w", ref, err)
	}
	if kid, err := keys.Thumbprint(key.Public()); err != nil || kid+suffix != ref {
		return nil, fmt.Errorf("localkey: %s holds another key than its name says", ref)
	}
	b.cache[ref] = key
	return key, nil
}

// parse decodes a PKCS #8 private key in PEM (RSA of at least keys.KeyBits bits, or ECDSA
// P-256; a PKCS #1 RSA key or a SEC 1 EC key is accepted too) and precomputes RSA CRT values.
func parse(data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	var key any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("unexpected PEM block %q", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", block.Type, err)
	}
	switch k := key.(type) {
	case *rsa.PrivateKey:
		if k.N.BitLen() < keys.KeyBits {
			return nil, fmt.Errorf("RSA key of %d bits, want at least %d", k.N.BitLen(), keys.KeyBits)
		}
		k.Precompute()
		return k, nil
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("EC key on %s, want P-256", k.Curve.Params().Name)
		}
		return k, nil
	}
	return nil, fmt.Errorf("not an RSA or P-256 key: %T", key)
}

// path turns a ref into the path of its file, refusing anything that is not a plain key file
// name in the directory (a ref comes from the registry, which must not be able to point the
// backend at other files).
func (b *Backend) path(ref string) (string, error) {
	if !strings.HasSuffix(ref, suffix) || len(ref) == len(suffix) || strings.HasPrefix(ref, ".") ||
		strings.ContainsAny(ref, `/\`) || filepath.Base(ref) != ref {
		return "", fmt.Errorf("localkey: invalid key ref %q: %w", ref, keys.ErrUnknownKey)
	}
	return filepath.Join(b.dir, ref), nil
}
