package multiregion_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/golang-jwt/jwt/v5"

	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/datakey"
	"github.com/acmebank/authserver/shared/keys/kmstest"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/dynamo"
	"github.com/acmebank/authserver/shared/store/regional"
	"github.com/acmebank/authserver/test/template/cfn"
)

// lostRegion is a region's DynamoDB endpoint once the region is lost: it accepts connections
// and never answers, so every call to it waits for its deadline.
func lostRegion(t *testing.T, table string) oauth.Store {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 256)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held <- c
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for len(held) > 0 {
			(<-held).Close()
		}
	})
	client, err := dynamo.NewClient(context.Background(), "http://"+ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return dynamo.New(client, table)
}

// waitKeys waits until st's replica holds the key registry at version v or later.
func waitKeys(t *testing.T, st oauth.KeyStore, v int64) oauth.KeySet {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ks, err := st.Keys(context.Background())
		if err == nil && ks.Version >= v {
			return ks
		}
		if time.Now().After(deadline) {
			t.Fatalf("the key registry did not reach version %d within 30 s (%d, %v)", v, ks.Version, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// secondaryRotation is the secondary (eu-central-1) stack's AUTH_KEY_ROTATION in template.yaml,
// with RotationRegion set to rotationRegion.
func secondaryRotation(t *testing.T, rotationRegion string) string {
	t.Helper()
	tpl, err := cfn.Load()
	if err != nil {
		t.Fatal(err)
	}
	ev := tpl.NewEvaluator(map[string]string{"AWS::Region": "eu-central-1", "PrimaryRegion": "eu-west-1",
		"SecondaryRegion": "eu-central-1", "GlobalTableName": "authserver-grants", "SigningMode": "data-key",
		"PrimaryWrapKeyArn": "arn:aws:kms:eu-west-1:123456789012:key/mrk-1234abcd12ab34cd56ef1234567890ab",
		"BaseUrl":           "https://auth.bank.example", "RotationRegion": rotationRegion})
	if failed, err := ev.FailedRules(); err != nil || len(failed) > 0 {
		t.Fatalf("RotationRegion=%q: the rules refuse the secondary's stack: %v %v", rotationRegion, failed, err)
	}
	v, err := ev.Eval(tpl.Env(tpl.Resources["RotateKeysFunction"])[config.EnvKeyRotation])
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestFailover_WithThePrimaryLostTheSecondaryServesAndAfterTheSwitchRotates follows the
// failover runbook of docs/multiregion.md on the simulation. The primary (eu-west-1) rotates and
// its registry reaches the secondary (eu-central-1); then the primary is lost (its endpoint
// accepts and never answers). The secondary keeps answering what it can: its own sign-ins'
// codes are exchanged and their refresh tokens rotated, id_tokens are signed with the
// replicated keys (unwrapped by the secondary's wrapping key: local-kms has one key standing for
// the multi-Region key's two replicas), and a code the lost primary issued is
// temporarily_unavailable within the peer deadline, with nothing written. After the runbook's
// switch (RotationRegion: the secondary's rotation on, its own store and wrapping key) the
// secondary's rotation runs when due, the secondary signs with the key it promoted, and the
// primary, once back, reads that registry by replication and signs with the same key.
func TestFailover_WithThePrimaryLostTheSecondaryServesAndAfterTheSwitchRotates(t *testing.T) {
	w := newWorld(t, true, replicationDelay)
	ctx := context.Background()
	kmsClient, _ := kmstest.New(t)
	wrap, err := kmsClient.CreateKey(ctx, &kms.CreateKeyInput{KeySpec: kmstypes.KeySpecSymmetricDefault, KeyUsage: kmstypes.KeyUsageTypeEncryptDecrypt})
	if err != nil {
		t.Fatal(err)
	}
	wrapKey := aws.ToString(wrap.KeyMetadata.KeyId)
	policy := keys.DefaultPolicy()
	start := time.Now().UTC()

	// The primary's first rotation (InitialKey), replicated to the secondary.
	first, err := keys.NewRotator(w.storeA, datakey.New(kmsClient, wrapKey, nil), policy, oauth.SystemClock{}, nil).Rotate(ctx)
	if err != nil {
		t.Fatalf("the primary's first rotation: %v", err)
	}
	primaryKeys := waitKeys(t, w.storeB, 1)
	codes := w.issueCodes(t, 1) // issued by the primary before it was lost, replicated

	// The primary is lost: the secondary's store reaches a replica that never answers.
	lost, err := regional.New(w.b.name, w.storeB, map[string]oauth.Store{w.a.name: lostRegion(t, w.a.table)})
	if err != nil {
		t.Fatal(err)
	}
	lost.PeerTimeout = 500 * time.Millisecond
	svc := service(lost, w.b.name)

	// A code the primary issued: temporarily_unavailable within the deadline, nothing written.
	began := time.Now()
	_, err = w.exchange(svc, codes[0])
	if took := time.Since(began); oauth.AsError(err).Code != oauth.ErrCodeTemporarilyUnavailable || took > 3*time.Second {
		t.Errorf("a code of the lost primary: %v after %v, want temporarily_unavailable within the peer deadline", err, took)
	}
	// (Consuming it in the secondary's own replica succeeds: the refusal wrote nothing there.)
	if _, err := w.storeB.ConsumeCode(ctx, oauth.HashToken(codes[0]), w.client.ID, time.Now()); err != nil {
		t.Errorf("the refused exchange changed the secondary's replica of the code: %v", err)
	}

	// The secondary's own sign-ins: a code it issues (its consent page's write, local) is
	// exchanged, and the refresh token rotated, all in the secondary.
	now := time.Now().UTC()
	code := oauth.NewSecret(oauth.PrefixCode + w.b.name + ".")
	g := oauth.Grant{ID: oauth.NewID(oauth.PrefixGrant), ClientID: w.client.ID, UID: "u-1001", Scopes: oauth.Scopes{"email"},
		AuthTime: now, CreatedAt: now, ExpiresAt: now.Add(72 * time.Hour)}
	if err := lost.CreateCode(ctx, oauth.Code{Hash: oauth.HashToken(code), Grant: g, RedirectURI: w.redirect, ExpiresAt: now.Add(time.Minute)}); err != nil {
		t.Fatalf("a sign-in in the secondary: %v", err)
	}
	resp, err := w.exchange(svc, code)
	if err != nil {
		t.Fatalf("the secondary refused its own code with the primary lost: %v", err)
	}
	if _, err := w.refresh(svc, resp.RefreshToken); err != nil {
		t.Errorf("the secondary refused its own refresh token with the primary lost: %v", err)
	}

	// id_tokens: the secondary signs with the replicated current key.
	signed := func(st oauth.KeyStore, at time.Time) string {
		t.Helper()
		signer := keys.NewSigner(st, datakey.New(kmsClient, wrapKey, nil), oauth.ClockFunc(func() time.Time { return at }), time.Minute)
		tok, err := signer.SignJWT(ctx, keys.RS256, jwt.MapClaims{"iss": "https://auth.bank.example/v2/authentication/oauth2", "sub": "u-1001"})
		if err != nil {
			t.Fatalf("signing an id_token: %v", err)
		}
		parsed, _, err := jwt.NewParser().ParseUnverified(tok, jwt.MapClaims{})
		if err != nil {
			t.Fatal(err)
		}
		kid, _ := parsed.Header["kid"].(string)
		return kid
	}
	cur, _ := primaryKeys.Current(keys.RS256)
	if kid := signed(lost, time.Now()); kid != cur.Kid {
		t.Errorf("the secondary signs with %s, want the replicated current key %s", kid, cur.Kid)
	}

	// The runbook's switch: RotationRegion=<secondary> in the secondary's stack turns its
	// rotation on (template.yaml, as deployed there), on its own store and wrapping key. A run
	// when the current key is due replaces it there.
	if before, after := secondaryRotation(t, ""), secondaryRotation(t, w.b.name); before != "off" || after != "on" {
		t.Fatalf("the secondary stack's %s is %q, and %q after the runbook's switch: want off, then on", config.EnvKeyRotation, before, after)
	}
	rotationRun := func(at time.Time) keys.Report {
		t.Helper()
		rep, err := keys.NewRotator(lost, datakey.New(kmsClient, wrapKey, nil), policy, oauth.ClockFunc(func() time.Time { return at }), nil).Rotate(ctx)
		if err != nil {
			t.Fatalf("the secondary's rotation at %v: %v", at, err)
		}
		return rep
	}
	var promoted string
	for at := start; at.Before(start.Add(3 * policy.RotationPeriod)); at = at.Add(policy.JWKSCacheTTL + policy.IDTokenTTL) {
		rep := rotationRun(at)
		if p := rep.Algs[keys.RS256].Promoted; p != "" {
			promoted = p
			if kid := signed(lost, at); kid != promoted {
				t.Errorf("after the secondary's rotation it signs with %s, want %s, which it promoted", kid, promoted)
			}
			t.Logf("the secondary's rotation promoted %s at +%v (the primary's first run made %s)", p, at.Sub(start).Round(time.Hour), first.Algs[keys.RS256].Current)
			break
		}
	}
	if promoted == "" {
		t.Fatal("the secondary's rotation never promoted a key within three rotation periods")
	}

	// The primary returns: its replica has the secondary's registry by replication (the
	// simulation's replicator stands for the table's), and it signs with the same key.
	ksB, err := w.storeB.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	back := waitKeys(t, w.storeA, ksB.Version)
	if c, _ := back.Current(keys.RS256); c.Kid != promoted {
		t.Errorf("the returning primary's registry has current %s, want %s", c.Kid, promoted)
	}
}
