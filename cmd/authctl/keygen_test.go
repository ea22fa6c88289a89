package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/acmebank/authserver/shared/oauth"
)

// keygen runs `clients keygen --alg alg --out <dir>/name` and returns the key file's path and
// the command's stdout and stderr.
func keygen(t *testing.T, tl *tool, alg, path string) (string, string, int) {
	t.Helper()
	return tl.run("", "clients", "keygen", "--alg", alg, "--out", path)
}

// TestClientsKeygen_PrivateKeyFile0600AndPublicJWKSThatCreateAccepts: for ES256 and PS256,
// keygen writes the private key as PKCS #8 PEM to a new file of mode 0600 and prints only the
// public JWK Set, one key whose kid is its RFC 7638 thumbprint; the private key appears on
// neither stdout nor stderr; `clients create --profile fapi2 --jwks-file` registers the
// printed set as it is.
func TestClientsKeygen_PrivateKeyFile0600AndPublicJWKSThatCreateAccepts(t *testing.T) {
	for _, alg := range []string{"ES256", "PS256"} {
		t.Run(alg, func(t *testing.T) {
			tl := embeddedTool(t)
			dir := t.TempDir()
			keyPath := filepath.Join(dir, "client-key.pem")
			out, errOut, code := keygen(t, tl, alg, keyPath)
			if code != exitOK {
				t.Fatalf("keygen: exit %d, stderr %s", code, errOut)
			}
			st, err := os.Stat(keyPath)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Errorf("the key file has mode %v, want 0600", st.Mode().Perm())
			}
			pemBytes, _ := os.ReadFile(keyPath)
			block, _ := pem.Decode(pemBytes)
			if block == nil || block.Type != "PRIVATE KEY" {
				t.Fatalf("the key file is not a PKCS #8 PEM block: %.40q", pemBytes)
			}
			priv, err := x509.ParsePKCS8PrivateKey(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			switch k := priv.(type) {
			case *ecdsa.PrivateKey:
				if alg != "ES256" || k.Curve.Params().Name != "P-256" {
					t.Fatalf("%s key file holds an EC key on %s", alg, k.Curve.Params().Name)
				}
			case *rsa.PrivateKey:
				if alg != "PS256" || k.N.BitLen() < 2048 {
					t.Fatalf("%s key file holds an RSA key of %d bits", alg, k.N.BitLen())
				}
			default:
				t.Fatalf("the key file holds a %T", priv)
			}
			for _, stream := range []string{out, errOut} {
				if strings.Contains(stream, "PRIVATE KEY") || strings.Contains(stream, string(pemBytes[30:80])) || strings.Contains(stream, `"d"`) {
					t.Fatalf("the private key was printed: %s", stream)
				}
			}

			var set jose.JSONWebKeySet
			if err := json.Unmarshal([]byte(out), &set); err != nil {
				t.Fatalf("stdout is not a JWK Set: %v\n%s", err, out)
			}
			if len(set.Keys) != 1 {
				t.Fatalf("the JWK Set holds %d keys, want 1", len(set.Keys))
			}
			k := set.Keys[0]
			tp, _ := k.Thumbprint(crypto.SHA256)
			if !k.IsPublic() || k.Use != "sig" || k.Algorithm != alg || k.KeyID != base64.RawURLEncoding.EncodeToString(tp) {
				t.Fatalf("the printed key: public %v, use %q, alg %q, kid %q (thumbprint %s)", k.IsPublic(), k.Use, k.Algorithm, k.KeyID,
					base64.RawURLEncoding.EncodeToString(tp))
			}
			if !k.Key.(interface{ Equal(crypto.PublicKey) bool }).Equal(priv.(crypto.Signer).Public()) {
				t.Fatal("the printed public key is not the file's key's public half")
			}

			jwksPath := filepath.Join(dir, "client-jwks.json")
			os.WriteFile(jwksPath, []byte(out), 0o644)
			var created createdClient
			tl.okJSON(&created, "", "clients", "create", "--id", "tpp", "--name", "TPP", "--redirect-uri", "https://tpp.example/cb", "--scope", "openid",
				"--profile", "fapi2", "--dpop", "--auth-method", "private_key_jwt", "--jwks-file", jwksPath, "--id-token-alg", alg)
			if created.ClientSecret != "" || created.Client.Profile != oauth.ProfileFAPI2 {
				t.Fatalf("the fapi2 client registered with the keygen JWK Set: %+v", created)
			}
		})
	}
}

// TestClientsKeygen_NeverOverwritesAFile: keygen refuses an --out that exists, a regular
// file or a symlink (dangling or not), with a usage error; the file keeps its content and mode,
// the symlink's target is not created, and nothing is printed on stdout. No device is tried: a
// regression would write to, and on a failed write remove, a path the whole machine shares.
func TestClientsKeygen_NeverOverwritesAFile(t *testing.T) {
	tl := embeddedTool(t)
	dir := t.TempDir()
	existing := filepath.Join(dir, "client-key.pem")
	if err := os.WriteFile(existing, []byte("the key the client uses today\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "link.pem")
	target := filepath.Join(dir, "target.pem")
	if err := os.Symlink(target, dangling); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{existing, dangling} {
		out, errOut, code := keygen(t, tl, "ES256", path)
		if code != exitUsage || out != "" || !strings.Contains(errOut, "refusing to overwrite") {
			t.Errorf("keygen --out %s (exists): exit %d, stdout %q, stderr %q; want exit %d, nothing on stdout", path, code, out, errOut, exitUsage)
		}
	}
	if b, _ := os.ReadFile(existing); string(b) != "the key the client uses today\n" {
		t.Errorf("the existing key file was changed: %q", b)
	}
	if st, _ := os.Stat(existing); st.Mode().Perm() != 0o640 {
		t.Errorf("the existing key file's mode changed to %v", st.Mode().Perm())
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Errorf("keygen created the target of a symlink: %v", err)
	}
}

// TestClientsKeygen_RefusesOtherAlgorithmsAndWritesNothing: an algorithm FAPI 2.0 does not
// allow for a client's key (RS256, HS256, none) is a usage error and no file is created.
func TestClientsKeygen_RefusesOtherAlgorithmsAndWritesNothing(t *testing.T) {
	tl := embeddedTool(t)
	dir := t.TempDir()
	for _, alg := range []string{"RS256", "HS256", "none", "es256", ""} {
		path := filepath.Join(dir, "key-"+alg+".pem")
		out, errOut, code := keygen(t, tl, alg, path)
		if code != exitUsage || out != "" || !strings.Contains(errOut, "ES256 or PS256") {
			t.Errorf("keygen --alg %q: exit %d, stdout %q, stderr %q", alg, code, out, errOut)
		}
		if _, err := os.Lstat(path); !os.IsNotExist(err) {
			t.Errorf("keygen --alg %q left a file: %v", alg, err)
		}
	}
	if _, errOut, code := tl.run("", "clients", "keygen", "--alg", "ES256"); code != exitUsage || !strings.Contains(errOut, "out") {
		t.Errorf("keygen without --out: exit %d, stderr %q", code, errOut)
	}
}

// TestClientsKeygen_FiftyRacingRunsOnOneFileOneWins: 50 keygens racing on one --out (two
// terminals, a script run twice): exactly one writes the file, the others are refused, and the
// file holds the private half of the JWK Set the winner printed.
func TestClientsKeygen_FiftyRacingRunsOnOneFileOneWins(t *testing.T) {
	tl := embeddedTool(t)
	path := filepath.Join(t.TempDir(), "client-key.pem")
	type result struct {
		out  string
		code int
	}
	results := make(chan result, 50)
	var start sync.WaitGroup
	start.Add(1)
	for range 50 {
		go func() {
			start.Wait()
			out, _, code := tl.run("", "clients", "keygen", "--alg", "ES256", "--out", path)
			results <- result{out, code}
		}()
	}
	start.Done()
	var winners []string
	for range 50 {
		r := <-results
		switch r.code {
		case exitOK:
			winners = append(winners, r.out)
		case exitUsage:
			if r.out != "" {
				t.Errorf("a refused keygen printed %q", r.out)
			}
		default:
			t.Errorf("a racing keygen exited %d", r.code)
		}
	}
	if len(winners) != 1 {
		t.Fatalf("%d of 50 racing keygens wrote the file, want 1", len(winners))
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal([]byte(winners[0]), &set); err != nil || len(set.Keys) != 1 {
		t.Fatalf("the winner's JWK Set: %v %s", err, winners[0])
	}
	pemBytes, _ := os.ReadFile(path)
	block, _ := pem.Decode(pemBytes)
	priv, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !set.Keys[0].Key.(interface{ Equal(crypto.PublicKey) bool }).Equal(priv.(crypto.Signer).Public()) {
		t.Fatal("the file's key is not the one whose public half the winner printed")
	}
}
