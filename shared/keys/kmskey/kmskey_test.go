package kmskey_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/golang-jwt/jwt/v5"

	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/keytest"
	"github.com/acmebank/authserver/shared/keys/kmskey"
	"github.com/acmebank/authserver/shared/keys/kmstest"
	"github.com/acmebank/authserver/shared/oauth"
)

// TestContract runs the backend contract against local-kms. local-kms signs PSS with the
// longest salt that fits where AWS KMS uses 32 bytes, so only the salt length is not checked.
func TestContract(t *testing.T) {
	keytest.RunWithOptions(t, func(t *testing.T) keys.Backend {
		client, _ := kmstest.New(t)
		return kmskey.New(client, kmskey.Options{})
	}, keytest.Options{PSSAnySalt: true})
}

func digest(s string) []byte {
	d := sha256.Sum256([]byte(s))
	return d[:]
}

func TestCreateKey_TagsDescribesAndAliasesTheKey(t *testing.T) {
	client, tr := kmstest.New(t)
	b := kmskey.New(client, kmskey.Options{TagKey: "app", TagValue: "auth-prod", AliasPrefix: "alias/authserver/idtoken"})
	ref, pub, err := b.CreateKey(context.Background(), keys.RS256)
	if err != nil {
		t.Fatal(err)
	}
	kid, _ := keys.Thumbprint(pub)
	if !strings.HasPrefix(ref, "arn:aws:kms:"+kmstest.Region+":"+kmstest.Account+":key/") {
		t.Fatalf("ref %q is not a key ARN", ref)
	}
	if tr.Calls("CreateKey") != 1 || tr.Calls("GetPublicKey") != 1 || tr.Calls("CreateAlias") != 1 {
		t.Fatalf("calls CreateKey %d GetPublicKey %d CreateAlias %d, want 1 each",
			tr.Calls("CreateKey"), tr.Calls("GetPublicKey"), tr.Calls("CreateAlias"))
	}
	// The public key is cached: no second GetPublicKey.
	if _, err := b.PublicKey(context.Background(), ref); err != nil || tr.Calls("GetPublicKey") != 1 {
		t.Fatalf("PublicKey after CreateKey: %v, %d GetPublicKey calls", err, tr.Calls("GetPublicKey"))
	}
	if got := kmstest.Tags(t, client, ref); got["app"] != "auth-prod" || len(got) != 1 {
		t.Fatalf("tags %v, want app=auth-prod", got)
	}
	alias := "alias/authserver/idtoken/" + kid
	if got := kmstest.Aliases(t, client, ref); !slices.Equal(got, []string{alias}) {
		t.Fatalf("aliases of %s: %v, want %s", ref, got, alias)
	}
	md := kmstest.Describe(t, client, ref)
	if md.KeySpec != types.KeySpecRsa2048 || md.KeyUsage != types.KeyUsageTypeSignVerify || aws.ToString(md.Description) != fmt.Sprintf(kmskey.DefaultDescription, "RS256") {
		t.Fatalf("key is %s/%s %q", md.KeySpec, md.KeyUsage, aws.ToString(md.Description))
	}
}

func TestCreateKey_FailureAfterCreationSchedulesTheKeyForDeletion(t *testing.T) {
	client, tr := kmstest.New(t)
	b := kmskey.New(client, kmskey.Options{})
	tr.Fail("GetPublicKey", kmstest.Throttling, 1)
	_, _, err := b.CreateKey(context.Background(), keys.ES256)
	if !errors.Is(err, oauth.ErrTransient) {
		t.Fatalf("CreateKey = %v, want a transient error", err)
	}
	ids := tr.KeyIDs("ScheduleKeyDeletion")
	if len(ids) != 1 || kmstest.KeyState(t, client, ids[0]) != types.KeyStatePendingDeletion {
		t.Fatalf("the half-made key was not scheduled for deletion (%v)", ids)
	}
}

func TestSign_SendsTheDigestToTheKeyARN(t *testing.T) {
	client, tr := kmstest.New(t)
	b := kmskey.New(client, kmskey.Options{AliasPrefix: "alias/idtoken/"})
	ref, pub, err := b.CreateKey(context.Background(), keys.RS256)
	if err != nil {
		t.Fatal(err)
	}
	d := digest("header.payload")
	sig, err := b.Sign(context.Background(), ref, keys.RS256, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := rsa.VerifyPKCS1v15(pub.(*rsa.PublicKey), crypto.SHA256, d, sig); err != nil {
		t.Fatal(err)
	}
	if ids := tr.KeyIDs("Sign"); !slices.Equal(ids, []string{ref}) {
		t.Fatalf("Sign went to %v, want the key ARN %s only (never an alias)", ids, ref)
	}
}

// TestAlgorithms_MapToKMSKeySpecsAndSigningAlgorithms: each JWS algorithm makes its own KMS
// key spec and signs with its own KMS signing algorithm, digest only; RS256 and PS256 never
// share a key.
func TestAlgorithms_MapToKMSKeySpecsAndSigningAlgorithms(t *testing.T) {
	client, tr := kmstest.New(t)
	b := kmskey.New(client, kmskey.Options{})
	want := map[string]struct{ spec, sign string }{
		keys.RS256: {"RSA_2048", "RSASSA_PKCS1_V1_5_SHA_256"},
		keys.PS256: {"RSA_2048", "RSASSA_PSS_SHA_256"},
		keys.ES256: {"ECC_NIST_P256", "ECDSA_SHA_256"},
	}
	refs := map[string]bool{}
	for _, alg := range keys.Algs {
		tr.Reset()
		ref, pub, err := b.CreateKey(context.Background(), alg)
		if err != nil {
			t.Fatalf("%s: %v", alg, err)
		}
		refs[ref] = true
		md := kmstest.Describe(t, client, ref)
		if string(md.KeySpec) != want[alg].spec || md.KeyUsage != types.KeyUsageTypeSignVerify ||
			aws.ToString(md.Description) != fmt.Sprintf(kmskey.DefaultDescription, alg) {
			t.Fatalf("%s key is %s/%s %q", alg, md.KeySpec, md.KeyUsage, aws.ToString(md.Description))
		}
		if got := tr.Params("CreateKey", "KeySpec"); !slices.Equal(got, []string{want[alg].spec}) {
			t.Fatalf("%s: CreateKey KeySpec %v", alg, got)
		}
		d := digest("h.p")
		sig, err := b.Sign(context.Background(), ref, alg, d)
		if err != nil {
			t.Fatalf("%s: Sign: %v", alg, err)
		}
		if got := tr.Params("Sign", "SigningAlgorithm"); !slices.Equal(got, []string{want[alg].sign}) {
			t.Fatalf("%s: Sign SigningAlgorithm %v, want %s", alg, got, want[alg].sign)
		}
		if got := tr.Params("Sign", "MessageType"); !slices.Equal(got, []string{"DIGEST"}) {
			t.Fatalf("%s: Sign MessageType %v, want DIGEST", alg, got)
		}
		if err := keys.VerifyDigest(pub, alg, d, sig); err != nil {
			t.Fatalf("%s: %v", alg, err)
		}
	}
	if len(refs) != len(keys.Algs) {
		t.Fatalf("%d distinct keys for %d algorithms", len(refs), len(keys.Algs))
	}
}

// TestSign_ES256TurnsKMSDERIntoRS: KMS answers ECDSA_SHA_256 in DER; the adapter returns the
// 64-byte R||S, whose halves are the DER's integers.
func TestSign_ES256TurnsKMSDERIntoRS(t *testing.T) {
	client, _ := kmstest.New(t)
	b := kmskey.New(client, kmskey.Options{})
	ref, pub, err := b.CreateKey(context.Background(), keys.ES256)
	if err != nil {
		t.Fatal(err)
	}
	d := digest("h.p")
	out, err := client.Sign(context.Background(), &kms.SignInput{KeyId: &ref, Message: d,
		MessageType: types.MessageTypeDigest, SigningAlgorithm: types.SigningAlgorithmSpecEcdsaSha256})
	if err != nil {
		t.Fatal(err)
	}
	if !ecdsa.VerifyASN1(pub.(*ecdsa.PublicKey), d, out.Signature) {
		t.Fatal("local-kms's DER signature does not verify")
	}
	rs, err := keys.ES256FromDER(out.Signature)
	if err != nil || len(rs) != 64 {
		t.Fatalf("ES256FromDER = %d bytes, %v", len(rs), err)
	}
	if err := keys.VerifyDigest(pub, keys.ES256, d, rs); err != nil {
		t.Fatal(err)
	}
	sig, err := b.Sign(context.Background(), ref, keys.ES256, d)
	if err != nil || len(sig) != 64 {
		t.Fatalf("Sign = %d bytes, %v; want R||S", len(sig), err)
	}
}

// TestErrors_AreClassifiedForTheTokenEndpoint: throttling, 5xx and a KMS that stops answering
// are transient (injected by the transport); a disabled, deleted or unknown key is gone
// (local-kms's own answers); a denied call is neither.
func TestErrors_AreClassifiedForTheTokenEndpoint(t *testing.T) {
	type keyFn func(t *testing.T, c *kms.Client, ref string) string
	disable := func(t *testing.T, c *kms.Client, ref string) string {
		if _, err := c.DisableKey(context.Background(), &kms.DisableKeyInput{KeyId: &ref}); err != nil {
			t.Fatal(err)
		}
		return ref
	}
	schedule := func(t *testing.T, c *kms.Client, ref string) string {
		if _, err := c.ScheduleKeyDeletion(context.Background(), &kms.ScheduleKeyDeletionInput{KeyId: &ref, PendingWindowInDays: aws.Int32(7)}); err != nil {
			t.Fatal(err)
		}
		return ref
	}
	unknown := func(*testing.T, *kms.Client, string) string {
		return "arn:aws:kms:" + kmstest.Region + ":" + kmstest.Account + ":key/00000000-0000-4000-8000-000000000000"
	}
	for _, tc := range []struct {
		name                    string
		fault                   kmstest.Fault
		key                     keyFn
		wantTransient, wantGone bool
	}{
		{"Throttling", kmstest.Throttling, nil, true, false},
		{"KMSInternal", kmstest.Internal, nil, true, false},
		{"DependencyTimeout", kmstest.Dependency, nil, true, false},
		{"KeyUnavailable", kmstest.Unavailable, nil, true, false},
		{"BadGateway", kmstest.Fault{Status: 502, Type: "BadGateway", Message: "upstream"}, nil, true, false},
		{"Hang", kmstest.Hang, nil, true, false},
		{"AccessDenied", kmstest.Fault{Status: 400, Type: "AccessDeniedException", Message: "not authorized to kms:Sign"}, nil, false, false},
		{"DisabledKey", kmstest.Pass, disable, false, true},
		{"PendingDeletion", kmstest.Pass, schedule, false, true},
		{"UnknownKey", kmstest.Pass, unknown, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, tr := kmstest.New(t)
			b := kmskey.New(client, kmskey.Options{})
			ref, _, err := b.CreateKey(context.Background(), keys.PS256)
			if err != nil {
				t.Fatal(err)
			}
			if tc.key != nil {
				ref = tc.key(t, client, ref)
			}
			tr.Fail("Sign", tc.fault, 1)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			_, err = b.Sign(ctx, ref, keys.PS256, digest("x"))
			if err == nil {
				t.Fatal("Sign succeeded")
			}
			if errors.Is(err, oauth.ErrTransient) != tc.wantTransient || errors.Is(err, keys.ErrUnknownKey) != tc.wantGone {
				t.Fatalf("Sign = %v: transient %v gone %v, want %v %v", err,
					errors.Is(err, oauth.ErrTransient), errors.Is(err, keys.ErrUnknownKey), tc.wantTransient, tc.wantGone)
			}
			if n := tr.Calls("Sign"); n != 1 {
				t.Fatalf("%d Sign requests, want 1", n)
			}
		})
	}
}

func TestSign_StandardRetryerAbsorbsOneThrottle(t *testing.T) {
	client, tr := kmstest.New(t, func(o *kms.Options) {
		o.RetryMaxAttempts = 3
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		})
	})
	b := kmskey.New(client, kmskey.Options{})
	ref, _, err := b.CreateKey(context.Background(), keys.ES256)
	if err != nil {
		t.Fatal(err)
	}
	tr.Fail("Sign", kmstest.Throttling, 1)
	if _, err := b.Sign(context.Background(), ref, keys.ES256, digest("x")); err != nil {
		t.Fatalf("Sign after one throttle: %v", err)
	}
	tr.Fail("Sign", kmstest.Throttling, 3)
	if _, err := b.Sign(context.Background(), ref, keys.ES256, digest("x")); !errors.Is(err, oauth.ErrTransient) {
		t.Fatalf("Sign throttled past the retries = %v, want transient", err)
	}
	if n := tr.Calls("Sign"); n != 5 {
		t.Fatalf("%d Sign requests, want 2 + 3", n)
	}
}

func TestScheduleDeletion_UsesThePendingWindowAndIsIdempotent(t *testing.T) {
	for _, tc := range []struct{ opt, want int32 }{{0, 30}, {7, 7}, {3, 7}, {45, 30}} {
		client, tr := kmstest.New(t)
		b := kmskey.New(client, kmskey.Options{PendingWindowDays: tc.opt})
		ref, _, err := b.CreateKey(context.Background(), keys.RS256)
		if err != nil {
			t.Fatal(err)
		}
		before := time.Now()
		for range 2 {
			if err := b.ScheduleDeletion(context.Background(), ref); err != nil {
				t.Fatalf("window %d: ScheduleDeletion: %v", tc.opt, err)
			}
		}
		if n := tr.Calls("ScheduleKeyDeletion"); n != 2 {
			t.Fatalf("%d ScheduleKeyDeletion requests, want 2", n)
		}
		md := kmstest.Describe(t, client, ref)
		// local-kms stamps the deletion date in whole seconds from its own clock.
		got := md.DeletionDate.Sub(before)
		want := time.Duration(tc.want) * 24 * time.Hour
		if md.KeyState != types.KeyStatePendingDeletion || got < want-2*time.Second || got > want+time.Minute {
			t.Fatalf("window option %d: key %s, deleted after %v, want %d days", tc.opt, md.KeyState, got, tc.want)
		}
	}
}

// TestSigner_OneKMSSignPerToken: an id_token signed through KMS costs exactly one Sign call
// (and, with the current key cached, nothing else), and KMS throttling reaches the token
// endpoint as temporarily_unavailable.
func TestSigner_OneKMSSignPerToken(t *testing.T) {
	client, tr := kmstest.New(t)
	b := kmskey.New(client, kmskey.Options{})
	reg := &oneKeyRegistry{}
	ref, pub, err := b.CreateKey(context.Background(), keys.RS256)
	if err != nil {
		t.Fatal(err)
	}
	k, err := keys.NewSigningKey(ref, keys.RS256, pub, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	k.State = oauth.KeyCurrent
	reg.set.Keys = []oauth.SigningKey{k}
	s := keys.NewSigner(reg, b, nil, time.Minute)
	before := map[string]int{}
	for _, op := range []string{"Sign", "GetPublicKey", "CreateKey"} {
		before[op] = tr.Calls(op)
	}
	const tokens = 5
	for i := range tokens {
		tok, err := s.SignJWT(context.Background(), keys.RS256, jwt.MapClaims{"sub": "u", "n": i})
		if err != nil {
			t.Fatal(err)
		}
		p, err := jwt.Parse(tok, func(*jwt.Token) (any, error) { return pub, nil }, jwt.WithValidMethods([]string{"RS256"}))
		if err != nil || p.Header["kid"] != k.Kid {
			t.Fatalf("token does not verify with kid %s: %v", k.Kid, err)
		}
	}
	if got := tr.Calls("Sign") - before["Sign"]; got != tokens {
		t.Fatalf("%d KMS Sign calls for %d tokens, want exactly one each", got, tokens)
	}
	if tr.Calls("GetPublicKey") != before["GetPublicKey"] || tr.Calls("CreateKey") != before["CreateKey"] {
		t.Fatal("signing made KMS calls other than Sign")
	}

	tr.Fail("Sign", kmstest.Throttling, 1)
	_, err = s.SignJWT(context.Background(), keys.RS256, jwt.MapClaims{"sub": "u"})
	if e := oauth.AsError(err); e.Code != oauth.ErrCodeTemporarilyUnavailable || e.Status != 503 {
		t.Fatalf("throttled signing = %v, want 503 temporarily_unavailable", err)
	}
}

// TestSigner_TypedJWTThroughKMS: a JWT with a typ (RFC 9701's token-introspection+jwt) signed
// through KMS carries the typ in its verified header, for one Sign call.
func TestSigner_TypedJWTThroughKMS(t *testing.T) {
	client, tr := kmstest.New(t)
	b := kmskey.New(client, kmskey.Options{})
	for _, alg := range []string{keys.RS256, keys.PS256, keys.ES256} {
		ref, pub, err := b.CreateKey(context.Background(), alg)
		if err != nil {
			t.Fatal(err)
		}
		k, err := keys.NewSigningKey(ref, alg, pub, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		k.State = oauth.KeyCurrent
		reg := &oneKeyRegistry{set: oauth.KeySet{Keys: []oauth.SigningKey{k}}}
		s := keys.NewSigner(reg, b, nil, time.Minute)
		before := tr.Calls("Sign")
		tok, err := s.SignJWTWithType(context.Background(), alg, oauth.JWTTypeIntrospection, jwt.MapClaims{"iss": "https://as"})
		if err != nil {
			t.Fatal(err)
		}
		p, err := jwt.Parse(tok, func(*jwt.Token) (any, error) { return pub, nil }, jwt.WithValidMethods([]string{alg}))
		if err != nil || p.Header["typ"] != oauth.JWTTypeIntrospection || p.Header["kid"] != k.Kid {
			t.Fatalf("%s: header %v, want typ %s kid %s: %v", alg, p.Header, oauth.JWTTypeIntrospection, k.Kid, err)
		}
		if got := tr.Calls("Sign") - before; got != 1 {
			t.Fatalf("%s: %d KMS Sign calls, want 1", alg, got)
		}
	}
}

type oneKeyRegistry struct{ set oauth.KeySet }

func (r *oneKeyRegistry) Keys(context.Context) (oauth.KeySet, error) { return r.set, nil }
func (r *oneKeyRegistry) UpdateKeys(context.Context, func(oauth.KeySet) (oauth.KeySet, error)) error {
	return errors.New("read-only")
}
