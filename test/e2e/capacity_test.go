package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/go-jose/go-jose/v4"

	"github.com/acmebank/authserver/shared/app"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/dynamo"
)

// units is the capacity one operation consumed, as DynamoDB Local reports it with
// ReturnConsumedCapacity INDEXES (read units; write units of the table and of each global
// secondary index), and its write units by AWS's documented rules (docs/scale.md section 1).
// DynamoDB Local bills a transaction's table writes by the aggregate size of its items (2 units
// per KB of all items together) and the index writes it causes at the same transactional rate;
// AWS bills each item of a transactional write 2 units per KB, and propagates a transaction's
// changes to the indexes after it commits, as standard writes (1 unit per KB). Outside a
// transaction both bill 1 unit per KB per item and per index entry.
type units struct {
	reads, table         float64
	index                map[string]float64
	awsTable, awsIndexes float64
}

// meterItemKB is the item size AWS's rule assumes for a transaction's items: at most 1 KB
// (docs/scale.md section 4).
const meterItemKB = 1

// capacityMeter asks DynamoDB for the consumed capacity of every read and write the store sends
// and adds it up. It sits in the client's Initialize step: the store's inputs go out unchanged
// but for ReturnConsumedCapacity, which changes nothing stored or answered.
type capacityMeter struct {
	mu  sync.Mutex
	sum units
}

func newCapacityMeter() *capacityMeter {
	return &capacityMeter{sum: units{index: map[string]float64{}}}
}

func (m *capacityMeter) register(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("CapacityMeter",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			indexes := types.ReturnConsumedCapacityIndexes
			txItems := 0
			switch p := in.Parameters.(type) {
			case *dynamodb.GetItemInput:
				p.ReturnConsumedCapacity = indexes
			case *dynamodb.PutItemInput:
				p.ReturnConsumedCapacity = indexes
			case *dynamodb.UpdateItemInput:
				p.ReturnConsumedCapacity = indexes
			case *dynamodb.DeleteItemInput:
				p.ReturnConsumedCapacity = indexes
			case *dynamodb.TransactWriteItemsInput:
				p.ReturnConsumedCapacity = indexes
				for _, it := range p.TransactItems {
					if it.ConditionCheck != nil {
						return middleware.InitializeOutput{}, middleware.Metadata{}, fmt.Errorf("capacity meter: a ConditionCheck in a transaction is not priced here")
					}
				}
				txItems = len(p.TransactItems)
			}
			out, md, err := next.HandleInitialize(ctx, in)
			switch r := out.Result.(type) {
			case *dynamodb.GetItemOutput:
				m.add(r.ConsumedCapacity, true, 0)
			case *dynamodb.PutItemOutput:
				m.add(r.ConsumedCapacity, false, 0)
			case *dynamodb.UpdateItemOutput:
				m.add(r.ConsumedCapacity, false, 0)
			case *dynamodb.DeleteItemOutput:
				m.add(r.ConsumedCapacity, false, 0)
			case *dynamodb.TransactWriteItemsOutput:
				for i := range r.ConsumedCapacity {
					m.add(&r.ConsumedCapacity[i], false, txItems)
				}
			}
			return out, md, err
		}), middleware.After)
}

// add adds one request's consumed capacity; txItems is the number of items of a transaction
// (0 for a single-item request).
func (m *capacityMeter) add(c *types.ConsumedCapacity, read bool, txItems int) {
	if c == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if read {
		m.sum.reads += value(c.CapacityUnits)
		return
	}
	table := 0.0
	if c.Table != nil {
		table = value(c.Table.CapacityUnits)
	}
	m.sum.table += table
	if txItems > 0 {
		m.sum.awsTable += 2 * meterItemKB * float64(txItems)
	} else {
		m.sum.awsTable += table
	}
	for name, ix := range c.GlobalSecondaryIndexes {
		w := value(ix.CapacityUnits)
		m.sum.index[name] += w
		if txItems > 0 {
			w /= 2
		}
		m.sum.awsIndexes += w
	}
}

func value(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// take returns what was consumed since the last take and starts again from zero.
func (m *capacityMeter) take() units {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.sum
	m.sum = units{index: map[string]float64{}}
	return u
}

// newMeteredAWSEnv is newAWSEnv (the DynamoDB store on DynamoDB Local, KMS on local-kms) with
// a capacity meter on the DynamoDB client, on a table of dynamo.TableDefinition whose indexes
// project what projection says (the table's is ALL).
func newMeteredAWSEnv(t *testing.T, projection types.ProjectionType) (*env, *capacityMeter) {
	t.Helper()
	meter := newCapacityMeter()
	e, _ := newInstrumentedAWSEnv(t, awsEnvSetup{vars: map[string]string{config.EnvPasskeyRPID: "localhost"},
		projection: projection, apiOptions: []func(*middleware.Stack) error{meter.register}})
	return e, meter
}

// capacityRow is a row of docs/scale.md's table of measured capacity:
//
//	| code exchange | 0 | 5 | 2 | 2 | 9 | 7 | 2 | **9** |
//
// the operation; its read units; the write units DynamoDB Local reports for the table, gsi1 and
// gsi2, and their sum; the table's and the indexes' write units by AWS's rules, and their sum
// (the figure the prices use).
var capacityRow = regexp.MustCompile(`(?m)^\| ([a-z][^|]*?) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \| \*\*([0-9.]+)\*\* \|$`)

// capacityFigures are the eight figures of a capacityRow.
type capacityFigures [8]float64

// docCapacity reads docs/scale.md's table of measured capacity.
func docCapacity(t *testing.T) map[string]capacityFigures {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "docs", "scale.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]capacityFigures{}
	for _, m := range capacityRow.FindAllStringSubmatch(string(b), -1) {
		var f capacityFigures
		for i := range f {
			if f[i], err = strconv.ParseFloat(m[2+i], 64); err != nil {
				t.Fatalf("docs/scale.md: %s: %v", m[1], err)
			}
		}
		rows[m[1]] = f
	}
	return rows
}

// TestCapacity_IndexWritesPerOperationAreTheFiguresOfScaleMD measures, on DynamoDB Local with
// ReturnConsumedCapacity INDEXES, the read and write units of each operation docs/scale.md
// prices, the write units of the table and of each index apart, and asserts the figures of
// docs/scale.md's table of measured capacity, so the cost model cannot leave out the index
// writes again (or drift from the store). The operations run warm, as in a running function:
// the client and the current key cached.
func TestCapacity_IndexWritesPerOperationAreTheFiguresOfScaleMD(t *testing.T) {
	e, meter := newMeteredAWSEnv(t, types.ProjectionTypeAll)
	warm := e.tokens(t, "openid email")
	e.refresh(t, warm["refresh_token"].(string), nil)

	got := map[string]units{}
	measure := func(name string, op func()) {
		t.Helper()
		meter.take()
		op()
		got[name] = meter.take()
	}
	var code string
	// prompt=consent: the warm-up's grant would let the consent page be skipped (remembered
	// consent); the figures are those of the three pages.
	measure("sign-in (3 pages)", func() { code = e.code(t, url.Values{"prompt": {"consent"}}) })
	var tok map[string]any
	measure("code exchange", func() {
		var st int
		if st, tok = e.exchange(t, code, nil); st != 200 {
			t.Fatalf("exchange %d %v", st, tok)
		}
	})
	var fresh map[string]any
	measure("refresh", func() {
		var st int
		if st, fresh = e.refresh(t, tok["refresh_token"].(string), nil); st != 200 {
			t.Fatalf("refresh %d %v", st, fresh)
		}
	})
	measure("bearer check", func() {
		if !e.tokenValid(fresh["access_token"].(string)) {
			t.Fatal("the refreshed access token is not valid")
		}
	})
	measure("revocation of a refresh token", func() {
		if st := e.revoke(t, httpapi.PathRevoke, fresh["refresh_token"].(string), nil); st != 200 {
			t.Fatalf("revoke %d", st)
		}
	})
	// A FAPI 2.0 client's proof adds its jti (a REPLAY# item, in no index) to the exchange.
	key := newDPoPKey(t, jose.ES256)
	dpopCode, verifier := e.codeWithPKCE(t, url.Values{"scope": {"openid email"}})
	measure("code exchange with DPoP", func() {
		proof := key.proof(t, e, http.MethodPost, e.url(httpapi.PathToken), "")
		if st, body, _ := e.dpopPost(t, httpapi.PathToken, codeParams(dpopCode, verifier), proof); st != 200 {
			t.Fatalf("exchange with DPoP %d %v", st, body)
		}
	})
	e.setRotation(t, oauth.RotationOff)
	kept := e.tokens(t, "openid email")
	measure("refresh that keeps its token", func() {
		if st, body := e.refresh(t, kept["refresh_token"].(string), nil); st != 200 || body["refresh_token"] != kept["refresh_token"] {
			t.Fatalf("refresh %d %v, want the same refresh token", st, body)
		}
	})

	// A payment, PAR to the bank API call, as TestRoundTrips_PaymentFromPARToTheBankAPICall
	// counts it: the first payment sets up the customer's authenticator app and is not measured.
	e.mountAPI(t, app.APIOptions{})
	e.payment(t, func(_ string, _, _ map[string]int, op func()) { op() })
	// Its steps are metered one by one, so the test's own reads (the authenticator app's key)
	// are left out.
	pay := units{index: map[string]float64{}}
	e.payment(t, func(_ string, _, _ map[string]int, op func()) {
		meter.take()
		op()
		u := meter.take()
		pay.reads, pay.table, pay.awsTable, pay.awsIndexes = pay.reads+u.reads, pay.table+u.table, pay.awsTable+u.awsTable, pay.awsIndexes+u.awsIndexes
		for ix, w := range u.index {
			pay.index[ix] += w
		}
	})
	got["payment, PAR to the bank API call"] = pay

	doc := docCapacity(t)
	if len(doc) == 0 {
		t.Error("docs/scale.md: no table of measured capacity")
	}
	for name, u := range got {
		gsi1, gsi2 := u.index[dynamo.IndexGSI1], u.index[dynamo.IndexGSI2]
		measured := capacityFigures{u.reads, u.table, gsi1, gsi2, u.table + gsi1 + gsi2,
			u.awsTable, u.awsIndexes, u.awsTable + u.awsIndexes}
		t.Logf("%s: | %v | %v | %v | %v | %v | %v | %v | **%v** |", name,
			measured[0], measured[1], measured[2], measured[3], measured[4], measured[5], measured[6], measured[7])
		want, ok := doc[name]
		if !ok {
			t.Errorf("docs/scale.md: no capacity row for %q", name)
			continue
		}
		if measured != want {
			t.Errorf("%s: measured %v, docs/scale.md says %v", name, measured, want)
		}
	}
	for name := range doc {
		if _, ok := got[name]; !ok {
			t.Errorf("docs/scale.md: capacity row %q is not measured here", name)
		}
	}
}

// TestCapacity_KeysOnlyIndexesWouldTakeTheRefreshAndRevocationOffTheIndexes measures what the
// projection decision of docs/storage.md ("Index projections") weighs: on a table whose two
// indexes project only their keys, the exchange still writes the grant's entry in each index,
// but a refresh and a revocation, which change none of the grant's index keys, write none. It
// asserts the figures docs/storage.md gives (the table of ALL is the one above).
func TestCapacity_KeysOnlyIndexesWouldTakeTheRefreshAndRevocationOffTheIndexes(t *testing.T) {
	e, meter := newMeteredAWSEnv(t, types.ProjectionTypeKeysOnly)
	warm := e.tokens(t, "openid email")
	e.refresh(t, warm["refresh_token"].(string), nil)

	code := e.code(t, nil)
	meter.take()
	st, tok := e.exchange(t, code, nil)
	if st != 200 {
		t.Fatalf("exchange %d %v", st, tok)
	}
	exchange := meter.take()
	st, fresh := e.refresh(t, tok["refresh_token"].(string), nil)
	if st != 200 {
		t.Fatalf("refresh %d %v", st, fresh)
	}
	refresh := meter.take()
	if st := e.revoke(t, httpapi.PathRevoke, fresh["refresh_token"].(string), nil); st != 200 {
		t.Fatalf("revoke %d", st)
	}
	revocation := meter.take()

	for _, c := range []struct {
		name       string
		u          units
		wantLocal  float64 // index write units on DynamoDB Local
		wantAWS    float64 // the same by AWS's rule
		wantWrites float64 // write units by AWS's rule, table and indexes
	}{
		{"code exchange", exchange, 4, 2, 9},
		{"refresh", refresh, 0, 0, 8},
		{"revocation of a refresh token", revocation, 0, 0, 8},
	} {
		t.Logf("%s with KEYS_ONLY indexes: index write units %v on Local (%v by AWS's rule), %v write units by AWS's rule",
			c.name, c.u.index, c.u.awsIndexes, c.u.awsTable+c.u.awsIndexes)
		if got := c.u.index[dynamo.IndexGSI1] + c.u.index[dynamo.IndexGSI2]; got != c.wantLocal || c.u.awsIndexes != c.wantAWS {
			t.Errorf("%s with KEYS_ONLY indexes: index write units %v on Local, %v by AWS's rule; docs/storage.md says %v and %v",
				c.name, got, c.u.awsIndexes, c.wantLocal, c.wantAWS)
		}
		if got := c.u.awsTable + c.u.awsIndexes; got != c.wantWrites {
			t.Errorf("%s with KEYS_ONLY indexes: %v write units by AWS's rule, docs/storage.md says %v", c.name, got, c.wantWrites)
		}
	}
}
