// Package localkey is the key backend for running without AWS: each signing key is an RSA 2048
// private key in a PEM file (PKCS #8, mode 0600) in one directory, usually under the data
// directory of the local server. Keys are parsed once and kept in memory with their CRT values
// precomputed, so signing costs one RSA private-key operation.
package localkey

import (
	"context"
	"crypto"
	"crypto/rand"
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
	cache map[string]*rsa.PrivateKey
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
	return &Backend{dir: dir, cache: make(map[string]*rsa.PrivateKey)}, nil
}

// CreateKey generates an RSA 2048 key and writes it to <kid>.pem with mode 0600. The file is
// written under a temporary name and renamed, so a crash never leaves a half-written key.
func (b *Backend) CreateKey(ctx context.Context) (string, *rsa.PublicKey, error) {
	if err := ctx.Err(); err != nil {
		return "", nil, err
	}
	key, err := rsa.GenerateKey(rand.Reader, keys.KeyBits)
	if err != nil {
		return "", nil, fmt.Errorf("localkey: generate key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", nil, fmt.Errorf("localkey: encode key: %w", err)
	}
	ref := keys.Thumbprint(&key.PublicKey) + suffix
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
	return ref, &key.PublicKey, nil
}

// Sign signs digest (SHA-256) with RSASSA-PKCS1-v1_5.
func (b *Backend) Sign(ctx context.Context, ref string, digest []byte) ([]byte, error) {
	if len(digest) != 32 {
		return nil, fmt.Errorf("localkey: sign: digest must be 32 bytes, got %d", len(digest))
	}
	key, err := b.load(ref)
	if err != nil {
		return nil, err
	}
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest)
	if err != nil {
		return nil, fmt.Errorf("localkey: sign with %s: %w", ref, err)
	}
	return sig, nil
}

// PublicKey returns the public half of ref.
func (b *Backend) PublicKey(ctx context.Context, ref string) (*rsa.PublicKey, error) {
	key, err := b.load(ref)
	if err != nil {
		return nil, err
	}
	return &key.PublicKey, nil
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
func (b *Backend) load(ref string) (*rsa.PrivateKey, error) {
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
	if keys.Thumbprint(&key.PublicKey)+suffix != ref {
		return nil, fmt.Errorf("localkey: %s holds another key than its name says", ref)
	}
	b.cache[ref] = key
	return key, nil
}

// parse decodes a PKCS #8 (or PKCS #1) RSA private key in PEM and precomputes its CRT values.
func parse(data []byte) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	var key *rsa.PrivateKey
	switch block.Type {
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse PKCS #8 key: %w", err)
		}
		rk, ok := k.(*rsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("not an RSA key: %T", k)
		}
		key = rk
	case "RSA PRIVATE KEY":
		k, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse PKCS #1 key: %w", err)
		}
		key = k
	default:
		return nil, fmt.Errorf("unexpected PEM block %q", block.Type)
	}
	if key.N.BitLen() < keys.KeyBits {
		return nil, fmt.Errorf("RSA key of %d bits, want at least %d", key.N.BitLen(), keys.KeyBits)
	}
	key.Precompute()
	return key, nil
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
