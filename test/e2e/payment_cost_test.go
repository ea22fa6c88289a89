package e2e

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"golang.org/x/oauth2"

	"github.com/acmebank/authserver/shared/app"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/keys/kmstest"
	"github.com/acmebank/authserver/shared/store/dynamo"
)

// tableItem is one item of the table as a scan sees it: its keys, type and TTL (epoch
// seconds; 0 when it has none).
type tableItem struct {
	key, typ string
	ttl      int64
}

// scanTable reads every item of the service's table, through a client of its own (so the
// service's call counter does not see it).
func scanTable(t *testing.T, e *env) map[string]tableItem {
	t.Helper()
	ctx := context.Background()
	client, err := dynamo.NewClient(ctx, dynamoLocalEndpoint(t))
	if err != nil {
		t.Fatal(err)
	}
	items := map[string]tableItem{}
	p := dynamodb.NewScanPaginator(client, &dynamodb.ScanInput{TableName: aws.String(e.app.Config.Table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			s := func(name string) string {
				if v, ok := it[name].(*types.AttributeValueMemberS); ok {
					return v.Value
				}
				return ""
			}
			var ttl int64
			if v, ok := it["ttl"].(*types.AttributeValueMemberN); ok {
				ttl, _ = strconv.ParseInt(v.Value, 10, 64)
			}
			k := s("pk") + "|" + s("sk")
			items[k] = tableItem{key: k, typ: s("type"), ttl: ttl}
		}
	}
	return items
}

// newCountedAWSEnv is newAWSEnv with the capacity meter of the capacity tests on the
// DynamoDB client, beside its call counter.
func newCountedAWSEnv(t *testing.T) (*env, *kmstest.Transport, *dynamo.CallCounter, *capacityMeter) {
	t.Helper()
	ddbCalls, meter := dynamo.NewCallCounter(), newCapacityMeter()
	e, kmsCalls := newInstrumentedAWSEnv(t, awsEnvSetup{vars: map[string]string{config.EnvPasskeyRPID: "localhost"},
		apiOptions: []func(*middleware.Stack) error{ddbCalls.Register, meter.register}})
	return e, kmsCalls, ddbCalls, meter
}

// payment runs one payment as TestRoundTrips_PaymentFromPARToTheBankAPICall counts it: PAR,
// the pushed request's page, the password, the payment's confirmation by the customer's passkey
// over its details (dynamic linking, also the sign-in's strong step; on the customer's first
// payment, after setting up a second step and adding the passkey), the code exchange and the
// one bank API call. Each step runs inside measure, with the AWS requests it must make (the bank API must
// be mounted).
func (e *env) payment(t *testing.T, measure func(step string, wantDDB, wantKMS map[string]int, op func())) {
	t.Helper()
	details := "[" + rarPayment + "]"
	pkce := oauth2.GenerateVerifier()
	p := pushedParams(oauth2.S256ChallengeFromVerifier(pkce))
	p.Set("scope", "openid bank:transfers:write")
	p.Set("authorization_details", details)
	var uri string
	measure("PAR", map[string]int{"PutItem": 1}, nil, func() {
		st, body := e.push(t, p)
		if uri, _ = body["request_uri"].(string); st != http.StatusCreated || uri == "" {
			t.Fatalf("push: %d %v", st, body)
		}
	})
	b := newBrowser(t)
	measure("open the pushed request's page", map[string]int{"GetItem": 1, "PutItem": 1}, nil, func() {
		if resp := b.open(e.parURL(uri)); resp.StatusCode != http.StatusOK {
			t.Fatalf("open: %d", resp.StatusCode)
		}
	})
	measure("password", map[string]int{"GetItem": 5, "PutItem": 3, "UpdateItem": 3, "DeleteItem": 2}, nil, func() { b.login(e, username, password) })
	var code string
	if strings.Contains(b.last, `value="payment_passkey"`) {
		// The payment step: the customer's passkey signs over the details (dynamic linking),
		// which is also the sign-in's strong step.
		measure("passkey over the payment", map[string]int{"GetItem": 6, "PutItem": 4, "DeleteItem": 3}, nil, func() {
			code = b.pay(e).Query().Get("code")
		})
	} else {
		// The first payment: the customer sets up a second step, then adds a passkey.
		if !paymentPage(b.last) {
			b.secondStep(e)
		}
		code = b.pay(e).Query().Get("code")
	}
	if code == "" {
		t.Fatal("the payment's confirmation redirected without a code")
	}
	var tok *oauth2.Token
	measure("code exchange", map[string]int{"UpdateItem": 1, "TransactWriteItems": 1}, map[string]int{"Sign": 1}, func() {
		var err error
		if tok, err = e.oauth2Config("openid").Exchange(context.Background(), code, oauth2.VerifierOption(pkce)); err != nil {
			t.Fatalf("exchange: %v", err)
		}
	})
	if tok.RefreshToken != "" {
		t.Fatal("a payment grant got a refresh token")
	}
	measure("bank API call", map[string]int{"GetItem": 1, "UpdateItem": 1}, nil, func() {
		req, _ := http.NewRequest(http.MethodGet, e.url("/v2/bank/accounts"), nil)
		req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
		if st, body, _ := do(t, req); st != http.StatusOK {
			t.Fatalf("bank API call: %d %v", st, body)
		}
	})
}

// paymentItemLives are the lifetimes, at the defaults, of the items a payment leaves
// (docs/storage.md, "The items of a payment").
var paymentItemLives = map[string]time.Duration{
	"GRANT":   90 * 24 * time.Hour,
	"TOKEN":   5 * time.Minute,
	"CODE":    2 * time.Minute,
	"REPLAY":  16 * time.Minute,
	"SESSION": 8 * time.Hour,
}

// TestRoundTrips_PaymentFromPARToTheBankAPICall counts, on DynamoDB Local and local-kms, the
// AWS requests of each step of one payment as a warm deployment serves it (the client cached,
// the customer's passkey added by an earlier payment): the pushed request, the pages (open,
// password, the passkey over the payment), the code exchange and the one bank API
// call the payment token is good for; and the items the payment leaves in the table, with
// their TTLs. docs/scale.md ("Cost of one payment") and docs/storage.md ("The items of a
// payment") quote these figures.
func TestRoundTrips_PaymentFromPARToTheBankAPICall(t *testing.T) {
	e, kmsCalls, ddbCalls, meter := newCountedAWSEnv(t)
	e.mountAPI(t, app.APIOptions{})
	// The first payment adds the customer's passkey and warms the client cache and the
	// current key: it is not counted.
	e.payment(t, func(_ string, _, _ map[string]int, op func()) { op() })

	before := scanTable(t, e)
	total := map[string]int{}
	var totalKMS, requests int
	var reads, writes float64
	e.payment(t, func(step string, wantDDB, wantKMS map[string]int, op func()) {
		t.Helper()
		ddbCalls.Reset()
		kmsCalls.Reset()
		meter.take()
		op()
		requests++ // each step is one HTTP request: one API Gateway request, one Lambda invocation
		u := meter.take()
		reads += u.reads
		writes += u.awsTable + u.awsIndexes
		got := ddbCalls.Calls()
		if !maps.Equal(got, wantDDB) {
			t.Errorf("%s: DynamoDB requests %v, want %v", step, got, wantDDB)
		}
		if kms := kmsCalls.Counts(); !maps.Equal(kms, wantKMS) && !(len(kms) == 0 && len(wantKMS) == 0) {
			t.Errorf("%s: KMS requests %v, want %v", step, kms, wantKMS)
		}
		for op, n := range got {
			total[op] += n
		}
		totalKMS += kmsCalls.Counts()["Sign"]
		t.Logf("%s: DynamoDB %v, %v read units, %v write units; KMS %v", step, got, u.reads, u.awsTable+u.awsIndexes, kmsCalls.Counts())
	})
	sum := 0
	for _, n := range total {
		sum += n
	}
	t.Logf("one payment: %d HTTP requests; DynamoDB %v (%d requests), %v read units, %v write units (AWS's rules); KMS Sign %d",
		requests, total, sum, reads, writes, totalKMS)
	if requests != 6 || reads != 13 || writes != 36 {
		t.Errorf("one payment: %d HTTP requests, %v read units, %v write units; want 6, 13, 36 (docs/scale.md)", requests, reads, writes)
	}
	wantTotal := map[string]int{"GetItem": 13, "PutItem": 9, "DeleteItem": 5, "UpdateItem": 5, "TransactWriteItems": 1}
	if !maps.Equal(total, wantTotal) || totalKMS != 1 {
		t.Errorf("one payment: DynamoDB %v, KMS Sign %d; want %v and 1 (docs/scale.md)", total, totalKMS, wantTotal)
	}

	// What the payment leaves in the table: new items by type, each with a TTL.
	after := scanTable(t, e)
	left := map[string]int{}
	now := e.clock.Now()
	for k, it := range after {
		if _, ok := before[k]; ok {
			continue
		}
		left[it.typ]++
		ttl := time.Unix(it.ttl, 0)
		if it.ttl == 0 || ttl.Before(now) {
			t.Errorf("item %s (%s) has TTL %d: every item a payment leaves must expire", k, it.typ, it.ttl)
		}
		life := ttl.Sub(now).Round(time.Minute)
		t.Logf("left: a %s item, expires in %s", it.typ, life)
		if want, ok := paymentItemLives[it.typ]; ok && life != want {
			t.Errorf("a payment's %s item expires in %s, want %s (docs/storage.md)", it.typ, life, want)
		}
	}
	var kinds []string
	for typ, n := range left {
		kinds = append(kinds, typ+"="+strconv.Itoa(n))
	}
	slices.Sort(kinds)
	t.Logf("items a payment leaves: %v", kinds)
	if want := []string{"CODE=1", "GRANT=1", "REPLAY=1", "SESSION=1", "TOKEN=1"}; !slices.Equal(kinds, want) {
		t.Errorf("a payment left %v, want %v (docs/storage.md)", kinds, want)
	}
}
