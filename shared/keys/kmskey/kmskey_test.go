package kmskey_test

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/golang-jwt/jwt/v5"

	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/keytest"
	"github.com/acmebank/authserver/shared/keys/kmsfake"
	"github.com/acmebank/authserver/shared/keys/kmskey"
	"github.com/acmebank/authserver/shared/oauth"
)

func TestContract(t *testing.T) {
	keytest.Run(t, func(t *testing.T) keys.Backend {
		return kmskey.New(kmsfake.New(t).Client(), kmskey.Options{})
	})
}

func digest(s string) []byte {
	d := sha256.Sum256([]byte(s))
	return d[:]
}

func TestCreateKey_TagsDescribesAndAliasesTheKey(t *testing.T) {
	fake := kmsfake.New(t)
	b := kmskey.New(fake.Client(), kmskey.Options{TagKey: "app", TagValue: "auth-prod", AliasPrefix: "alias/authserver/idtoken"})
	ref, pub, err := b.CreateKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ref, "arn:aws:kms:"+kmsfake.Region+":"+kmsfake.Account+":key/") {
		t.Fatalf("ref %q is not a key ARN", ref)
	}
	if got := fake.Tags(ref); got["app"] != "auth-prod" || len(got) != 1 {
		t.Fatalf("tags %v, want app=auth-prod", got)
	}
	alias := "alias/authserver/idtoken/" + keys.Thumbprint(pub)
	if got := fake.Aliases(); got[alias] != ref || len(got) != 1 {
		t.Fatalf("aliases %v, want %s → %s", got, alias, ref)
	}
	if fake.Calls("CreateKey") != 1 || fake.Calls("GetPublicKey") != 1 || fake.Calls("CreateAlias") != 1 {
		t.Fatalf("calls CreateKey %d GetPublicKey %d CreateAlias %d, want 1 each",
			fake.Calls("CreateKey"), fake.Calls("GetPublicKey"), fake.Calls("CreateAlias"))
	}
	// The public key is cached: no second GetPublicKey.
	if _, err := b.PublicKey(context.Background(), ref); err != nil || fake.Calls("GetPublicKey") != 1 {
		t.Fatalf("PublicKey after CreateKey: %v, %d GetPublicKey calls", err, fake.Calls("GetPublicKey"))
	}
}

func TestCreateKey_FailureAfterCreationSchedulesTheKeyForDeletion(t *testing.T) {
	fake := kmsfake.New(t)
	b := kmskey.New(fake.Client(), kmskey.Options{})
	fake.Fail("GetPublicKey", kmsfake.Throttling, 1)
	_, _, err := b.CreateKey(context.Background())
	if !errors.Is(err, oauth.ErrTransient) {
		t.Fatalf("CreateKey = %v, want a transient error", err)
	}
	ids := fake.KeyIDs("ScheduleKeyDeletion")
	if len(ids) != 1 || fake.KeyState(ids[0]) != "PendingDeletion" {
		t.Fatalf("the half-made key was not scheduled for deletion (%v)", ids)
	}
}

func TestSign_SendsTheDigestToTheKeyARN(t *testing.T) {
	fake := kmsfake.New(t)
	b := kmskey.New(fake.Client(), kmskey.Options{AliasPrefix: "alias/idtoken/"})
	ref, pub, err := b.CreateKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d := digest("header.payload")
	sig, err := b.Sign(context.Background(), ref, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, d, sig); err != nil {
		t.Fatal(err)
	}
	if ids := fake.KeyIDs("Sign"); !slices.Equal(ids, []string{ref}) {
		t.Fatalf("Sign went to %v, want the key ARN %s only (never an alias)", ids, ref)
	}
}

func TestErrors_AreClassifiedForTheTokenEndpoint(t *testing.T) {
	for _, tc := range []struct {
		fault                   kmsfake.Fault
		wantTransient, wantGone bool
	}{
		{kmsfake.Throttling, true, false},
		{kmsfake.Internal, true, false},
		{kmsfake.Dependency, true, false},
		{kmsfake.Unavailable, true, false},
		{kmsfake.Fault{Status: 502, Type: "BadGateway", Message: "upstream"}, true, false},
		{kmsfake.Fault{Status: 400, Type: "KMSInvalidStateException", Message: "key is disabled"}, false, true},
		{kmsfake.Fault{Status: 400, Type: "AccessDeniedException", Message: "not authorized to kms:Sign"}, false, false},
	} {
		t.Run(tc.fault.Type, func(t *testing.T) {
			fake := kmsfake.New(t)
			b := kmskey.New(fake.Client(), kmskey.Options{})
			ref, _, err := b.CreateKey(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			fake.Fail("Sign", tc.fault, 1)
			_, err = b.Sign(context.Background(), ref, digest("x"))
			if err == nil {
				t.Fatal("Sign succeeded through an injected fault")
			}
			if errors.Is(err, oauth.ErrTransient) != tc.wantTransient || errors.Is(err, keys.ErrUnknownKey) != tc.wantGone {
				t.Fatalf("Sign = %v: transient %v gone %v, want %v %v", err,
					errors.Is(err, oauth.ErrTransient), errors.Is(err, keys.ErrUnknownKey), tc.wantTransient, tc.wantGone)
			}
		})
	}
}

func TestSign_StandardRetryerAbsorbsOneThrottle(t *testing.T) {
	fake := kmsfake.New(t)
	client := fake.Client(func(o *kms.Options) {
		o.RetryMaxAttempts = 3
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		})
	})
	b := kmskey.New(client, kmskey.Options{})
	ref, _, err := b.CreateKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fake.Fail("Sign", kmsfake.Throttling, 1)
	if _, err := b.Sign(context.Background(), ref, digest("x")); err != nil {
		t.Fatalf("Sign after one throttle: %v", err)
	}
	fake.Fail("Sign", kmsfake.Throttling, 3)
	if _, err := b.Sign(context.Background(), ref, digest("x")); !errors.Is(err, oauth.ErrTransient) {
		t.Fatalf("Sign throttled past the retries = %v, want transient", err)
	}
	if n := fake.Calls("Sign"); n != 5 {
		t.Fatalf("%d Sign requests, want 2 + 3", n)
	}
}

func TestScheduleDeletion_UsesThePendingWindowAndIsIdempotent(t *testing.T) {
	for _, tc := range []struct{ opt, want int32 }{{0, 30}, {7, 7}, {3, 7}, {45, 30}} {
		fake := kmsfake.New(t)
		now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		fake.Now = func() time.Time { return now }
		b := kmskey.New(fake.Client(), kmskey.Options{PendingWindowDays: tc.opt})
		ref, _, err := b.CreateKey(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := b.ScheduleDeletion(context.Background(), ref); err != nil {
				t.Fatalf("window %d: ScheduleDeletion: %v", tc.opt, err)
			}
		}
		out, err := fake.Client().DescribeKey(context.Background(), &kms.DescribeKeyInput{KeyId: &ref})
		if err != nil {
			t.Fatal(err)
		}
		if got := out.KeyMetadata.DeletionDate.Sub(now); got != time.Duration(tc.want)*24*time.Hour {
			t.Fatalf("window option %d: key deleted after %v, want %d days", tc.opt, got, tc.want)
		}
	}
}

// TestSigner_OneKMSSignPerToken: an id_token signed through KMS costs exactly one Sign call
// (and, with the current key cached, nothing else), and KMS throttling reaches the token
// endpoint as temporarily_unavailable.
func TestSigner_OneKMSSignPerToken(t *testing.T) {
	fake := kmsfake.New(t)
	b := kmskey.New(fake.Client(), kmskey.Options{})
	reg := &oneKeyRegistry{}
	ref, pub, err := b.CreateKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	k := keys.NewSigningKey(ref, pub, time.Now())
	k.State = oauth.KeyCurrent
	reg.set.Keys = []oauth.SigningKey{k}
	s := keys.NewSigner(reg, b, nil, time.Minute)
	before := map[string]int{}
	for _, op := range []string{"Sign", "GetPublicKey", "CreateKey"} {
		before[op] = fake.Calls(op)
	}
	const tokens = 5
	for i := range tokens {
		tok, err := s.SignJWT(context.Background(), jwt.MapClaims{"sub": "u", "n": i})
		if err != nil {
			t.Fatal(err)
		}
		p, err := jwt.Parse(tok, func(*jwt.Token) (any, error) { return pub, nil }, jwt.WithValidMethods([]string{"RS256"}))
		if err != nil || p.Header["kid"] != k.Kid {
			t.Fatalf("token does not verify with kid %s: %v", k.Kid, err)
		}
	}
	if got := fake.Calls("Sign") - before["Sign"]; got != tokens {
		t.Fatalf("%d KMS Sign calls for %d tokens, want exactly one each", got, tokens)
	}
	if fake.Calls("GetPublicKey") != before["GetPublicKey"] || fake.Calls("CreateKey") != before["CreateKey"] {
		t.Fatal("signing made KMS calls other than Sign")
	}

	fake.Fail("Sign", kmsfake.Throttling, 1)
	_, err = s.SignJWT(context.Background(), jwt.MapClaims{"sub": "u"})
	if e := oauth.AsError(err); e.Code != oauth.ErrCodeTemporarilyUnavailable || e.Status != 503 {
		t.Fatalf("throttled signing = %v, want 503 temporarily_unavailable", err)
	}
}

type oneKeyRegistry struct{ set oauth.KeySet }

func (r *oneKeyRegistry) Keys(context.Context) (oauth.KeySet, error) { return r.set, nil }
func (r *oneKeyRegistry) UpdateKeys(context.Context, func(oauth.KeySet) (oauth.KeySet, error)) error {
	return errors.New("read-only")
}
