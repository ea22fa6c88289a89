package keys_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/kmskey"
	"github.com/acmebank/authserver/shared/keys/kmstest"
	"github.com/acmebank/authserver/shared/keys/localkey"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/golang-jwt/jwt/v5"
)

// idTokenClaims are the claims of a typical id_token with the profile scope.
func idTokenClaims() jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{"iss": testIssuer, "aud": "client-1", "sub": "uid-123", "iat": now.Unix(),
		"exp": now.Add(time.Hour).Unix(), "auth_time": now.Unix(), "nonce": "n-0S6_WzA2Mj", "at_hash": "77QmUPtjPfzWtF2AnpK9RQ",
		"email": "ada@example.com", "email_verified": true, "name": "Ada Lovelace", "given_name": "Ada", "family_name": "Lovelace"}
}

// rotatedSigner returns a Signer over an embedded-store registry whose first rotation ran on backend.
func rotatedSigner(b *testing.B, backend keys.Backend) *keys.Signer {
	b.Helper()
	reg := benchRegistry(b)
	if _, err := keys.NewRotator(reg, backend, keys.Policy{}, nil, nil).Rotate(context.Background()); err != nil {
		b.Fatal(err)
	}
	return keys.NewSigner(reg, backend, nil, 0)
}

// BenchmarkSignJWT_LocalKey is the id_token signing throughput of the local key backend per
// algorithm (one private-key operation; the Signer checks the first signature of a key held
// in process, not each one):
// BenchmarkSignJWT_LocalKey/<alg>/serial (with the process's CPU time per token, cpu-µs/op,
// the figure to compare on a shared machine) and /parallel.
func BenchmarkSignJWT_LocalKey(b *testing.B) {
	lb, err := localkey.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	s := rotatedSigner(b, lb)
	claims := idTokenClaims()
	ctx := context.Background()
	for _, alg := range keys.Algs {
		b.Run(alg+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				if _, err := s.SignJWT(ctx, alg, claims); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
		})
		b.Run(alg+"/parallel", func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := s.SignJWT(ctx, alg, claims); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// cpuTime is the process's user and system CPU time so far: a benchmark's CPU per token, which
// on a shared machine says more than the wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSignJWT_KMS signs through the real aws-sdk-go-v2 client against local-kms
// (LOCAL_KMS_ENDPOINT), per algorithm, and reports the KMS calls each token costs (the design
// allows exactly one Sign).
func BenchmarkSignJWT_KMS(b *testing.B) {
	client, tr := kmstest.New(b)
	backend := kmskey.New(client, kmskey.Options{})
	s := rotatedSigner(b, backend)
	claims := idTokenClaims()
	ctx := context.Background()
	for _, alg := range keys.Algs {
		b.Run(alg, func(b *testing.B) {
			if _, err := s.SignJWT(ctx, alg, claims); err != nil { // resolve and cache the current key
				b.Fatal(err)
			}
			signs, pubs := tr.Calls("Sign"), tr.Calls("GetPublicKey")
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.SignJWT(ctx, alg, claims); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(tr.Calls("Sign")-signs)/float64(b.N), "kms-sign/op")
			b.ReportMetric(float64(tr.Calls("GetPublicKey")-pubs)/float64(b.N), "kms-getpublickey/op")
		})
	}
}

// BenchmarkPublicJWKS renders the JWKS of a registry with next, current and retired keys of
// every algorithm.
func BenchmarkPublicJWKS(b *testing.B) {
	lb, err := localkey.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	var set oauth.KeySet
	for _, alg := range keys.Algs {
		for _, state := range []string{oauth.KeyNext, oauth.KeyCurrent, oauth.KeyRetired} {
			ref, pub, err := lb.CreateKey(context.Background(), alg)
			if err != nil {
				b.Fatal(err)
			}
			k, err := keys.NewSigningKey(ref, alg, pub, time.Now())
			if err != nil {
				b.Fatal(err)
			}
			k.State = state
			set.Keys = append(set.Keys, k)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		keys.PublicJWKS(set)
	}
}
