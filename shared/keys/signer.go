package keys

import (
	"context"
	"crypto"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/acmebank/authserver/shared/keys/keypolicy"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/golang-jwt/jwt/v5"
)

// DefaultSignerCacheTTL is keypolicy.DefaultSignerCacheTTL: how long a Signer keeps using the
// current key it last read from the registry.
const DefaultSignerCacheTTL = keypolicy.DefaultSignerCacheTTL

// ErrNoCurrentKey means the registry has no current key for the algorithm asked for: the
// rotation has never run (or the registry was wiped), or the algorithm is not in
// AUTH_ID_TOKEN_ALGS. Run the rotation once; a fresh deployment's first run creates a current
// key for every configured algorithm.
var ErrNoCurrentKey = errors.New("no current signing key in the registry: run the key rotation")

// Signer signs id_tokens with the registry's current key of the algorithm asked for
// (oauth.IDTokenSigner). It reads the registry once per cache period for every algorithm, puts
// the key's kid in the protected header (so the kid is part of what is signed) and signs with
// the key's Ref, never an alias, so the kid and the key that signs can never disagree.
type Signer struct {
	reg     oauth.KeyStore
	backend Backend
	methods map[string]*SigningMethod
	clock   oauth.Clock
	ttl     time.Duration

	mu      sync.Mutex
	cached  map[string]*currentKey // by algorithm; nil until read or after forget
	fetched time.Time
}

// currentKey is what a Signer caches: the registry record and its decoded public key, used to
// check signatures before they leave the process (see SignJWTWithType for which ones).
type currentKey struct {
	key oauth.SigningKey
	pub crypto.PublicKey
	// inProcess is the backend's SignsInProcess(key.Ref): what signs is a private key in this
	// process that the ref cannot swap for another.
	inProcess bool
	// checked is set once a signature of this key, made through the backend, verified with pub.
	checked atomic.Bool
}

// InProcessSigner is implemented by a Backend whose private keys, once loaded, sign in this
// process's memory (localkey; datakey for the data keys it unwrapped): SignsInProcess(ref)
// promises that every signature made with ref comes from one private key, held in memory,
// that nothing swaps behind the ref while the backend lives (a ref naming another key, or a
// key file replaced, is refused when the key is loaded). The Signer then verifies the first
// signature a resolved key makes and not the next ones. A backend that signs elsewhere (KMS)
// does not implement it, or answers false: each of its signatures is verified.
type InProcessSigner interface {
	SignsInProcess(ref string) bool
}

var _ oauth.IDTokenSigner = (*Signer)(nil)

// NewSigner returns a Signer over the registry reg and the backend b that holds the private
// keys. cacheTTL is how long the current keys are cached (DefaultSignerCacheTTL when zero).
func NewSigner(reg oauth.KeyStore, b Backend, clock oauth.Clock, cacheTTL time.Duration) *Signer {
	if cacheTTL <= 0 {
		cacheTTL = DefaultSignerCacheTTL
	}
	if clock == nil {
		clock = oauth.SystemClock{}
	}
	methods := make(map[string]*SigningMethod, len(Algs))
	for _, alg := range Algs {
		methods[alg] = NewSigningMethod(b, alg)
	}
	return &Signer{reg: reg, backend: b, methods: methods, clock: clock, ttl: cacheTTL}
}

// SignJWT returns claims as a compact JWS signed with alg ("" is RS256) by that algorithm's
// current key, its kid in the header. An algorithm outside Algs is refused. Failures worth
// retrying (the registry or the backend throttled, timed out or answered 5xx) wrap
// oauth.ErrTransient, which the token endpoint answers with 503 temporarily_unavailable.
func (s *Signer) SignJWT(ctx context.Context, alg string, claims jwt.MapClaims) (string, error) {
	return s.SignJWTWithType(ctx, alg, "", claims)
}

// SignJWTWithType is SignJWT with typ as the header's typ ("" keeps "JWT"): RFC 9701's
// "token-introspection+jwt", for one. The typ is in the protected header, so it is signed;
// whichever backend holds the key (local files or KMS) signs the same signing input.
func (s *Signer) SignJWTWithType(ctx context.Context, alg, typ string, claims jwt.MapClaims) (string, error) {
	if alg == "" {
		alg = oauth.DefaultIDTokenAlg
	}
	method, ok := s.methods[alg]
	if !ok {
		return "", fmt.Errorf("sign id_token: %w %q", ErrUnsupportedAlg, alg)
	}
	cur, err := s.current(ctx, alg)
	if err != nil {
		return "", err
	}
	tok := jwt.NewWithClaims(method, claims)
	tok.Header["kid"] = cur.key.Kid
	if typ != "" {
		tok.Header["typ"] = typ
	}
	signingInput, err := tok.SigningString()
	if err != nil {
		return "", fmt.Errorf("sign id_token: encode: %w", err)
	}
	digest := sha256.Sum256([]byte(signingInput))
	sig, err := method.signDigest(ctx, cur.key.Ref, digest[:])
	if err != nil {
		if errors.Is(err, ErrUnknownKey) {
			s.forget() // the registry may have moved on: read it again on the next call
		}
		return "", fmt.Errorf("sign %s id_token with key %s: %w", alg, cur.key.Kid, classify(ctx, err))
	}
	// A signature that does not verify with the published key would be a token no client can
	// use (a ref that names another key, a corrupted key): refuse it here rather than there.
	// A key the backend holds in process (InProcessSigner) is checked once, on the first
	// signature it makes after the Signer resolved it (at start, and whenever the registry moves
	// on to another ref or public key): the backend guarantees the next signatures come from the
	// same private key, so verifying them again would prove nothing new and cost as much as the
	// signature itself (an ES256 verification is twice an ES256 signature). A key held
	// elsewhere (KMS) answers with whatever that service signed with: each signature is
	// verified, for a fraction of the Sign round trip it follows.
	if !cur.inProcess || !cur.checked.Load() {
		if err := VerifyDigest(cur.pub, alg, digest[:], sig); err != nil {
			s.forget()
			return "", fmt.Errorf("sign %s id_token: signature of key %s does not verify with its published key: %w", alg, cur.key.Kid, err)
		}
		cur.checked.Store(true)
	}
	return signingInput + "." + tok.EncodeSegment(sig), nil
}

// Kid returns the kid the Signer currently signs alg with (resolving it if needed); for logs
// and diagnostics.
func (s *Signer) Kid(ctx context.Context, alg string) (string, error) {
	cur, err := s.current(ctx, alg)
	if err != nil {
		return "", err
	}
	return cur.key.Kid, nil
}

// current returns the cached current key of alg, reading the registry when the cache has
// expired. Concurrent callers share one read, which resolves every algorithm at once.
func (s *Signer) current(ctx context.Context, alg string) (*currentKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	if s.cached == nil || !now.Before(s.fetched.Add(s.ttl)) || now.Before(s.fetched) {
		set, err := s.reg.Keys(ctx)
		if err != nil {
			return nil, fmt.Errorf("read signing-key registry: %w", classify(ctx, err))
		}
		cached := make(map[string]*currentKey, len(Algs))
		for _, a := range Algs {
			k, ok := set.Current(a)
			if !ok {
				continue
			}
			pub, err := PublicKey(k)
			if err != nil {
				return nil, fmt.Errorf("current %s signing key: %w", a, err)
			}
			if prev := s.cached[a]; prev != nil && prev.key.Ref == k.Ref && prev.key.Kid == k.Kid && samePublicKey(prev.pub, pub) {
				cached[a] = prev // the key of the last read again: what was checked of it holds
				continue
			}
			cached[a] = &currentKey{key: k, pub: pub, inProcess: s.signsInProcess(k.Ref)}
		}
		s.cached, s.fetched = cached, now
	}
	cur, ok := s.cached[alg]
	if !ok {
		return nil, fmt.Errorf("%w (algorithm %s)", ErrNoCurrentKey, alg)
	}
	return cur, nil
}

// forget drops the cached keys, and with them what was checked of them, so the next call reads
// the registry again and checks the key it names whatever it is.
func (s *Signer) forget() {
	s.mu.Lock()
	s.cached = nil
	s.mu.Unlock()
}

// samePublicKey reports whether a and b are the same RSA or ECDSA public key.
func samePublicKey(a, b crypto.PublicKey) bool {
	k, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && k.Equal(b)
}

// signsInProcess reports whether the backend holds ref's private key in this process
// (InProcessSigner).
func (s *Signer) signsInProcess(ref string) bool {
	b, ok := s.backend.(InProcessSigner)
	return ok && b.SignsInProcess(ref)
}

// classify marks errors worth retrying with oauth.ErrTransient when the adapter did not:
// deadlines and network timeouts. Adapters classify their own service's errors (throttling,
// 5xx); a canceled request is the caller going away, not a failure of ours.
func classify(ctx context.Context, err error) error {
	if errors.Is(err, oauth.ErrTransient) {
		return err
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) ||
		(ctx.Err() == nil && errors.Is(err, syscall.ECONNRESET)) {
		return fmt.Errorf("%w: %w", oauth.ErrTransient, err)
	}
	return err
}
