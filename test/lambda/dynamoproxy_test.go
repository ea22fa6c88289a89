package lambda_test

import (
	"testing"

	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acmebank/authserver/shared/store/dynamo"
	"github.com/acmebank/authserver/test/template/cfn"
)

// access is one DynamoDB item access as IAM authorizes it: the action (a transaction's items
// are authorized as Put/Update/Delete/ConditionCheckItem each) and the item's partition key.
type access struct {
	Action string
	PK     string
	Index  string
	// Transact: the item was one of a transaction's.
	Transact bool
}

// dynamoRecorder sits between one function and DynamoDB Local and records every access, so
// the test can check the function's template policy allows each of them. (DynamoDB Local
// does not enforce IAM; this is how a too-narrow policy fails here rather than in AWS.)
type dynamoRecorder struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []access
	// requests counts the HTTP requests (a transaction is one, whatever its items).
	requests int
	// calls are the first maxCalls requests in the order they arrived, each with its items
	// and when the proxy received it and had answered it.
	calls []call
	// latency (nanoseconds) holds each request that long before it is forwarded: the network
	// between a function and DynamoDB, which DynamoDB Local on the same machine does not have.
	latency atomic.Int64
}

// call is one DynamoDB request through the proxy: its operation (GetItem,
// TransactWriteItems, ...) and when it came in and went back out, and the partition keys of
// its items.
type call struct {
	dynamo.Span
	PKs []string
}

// maxCalls bounds the calls a recorder keeps (a load run makes many).
const maxCalls = 100000

func newDynamoRecorder(target string) (*dynamoRecorder, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	rec := &dynamoRecorder{}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		r.Out.Host = r.In.Host // the SigV4 signature covers the Host header
	}}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		i := rec.record(r.Header.Get("X-Amz-Target"), body)
		time.Sleep(time.Duration(rec.latency.Load()))
		aw := &answerWriter{ResponseWriter: w, answered: func() { rec.answered(i) }}
		proxy.ServeHTTP(aw, r)
		aw.done()
	}))
	return rec, nil
}

func (d *dynamoRecorder) url() string { return d.srv.URL }
func (d *dynamoRecorder) close()      { d.srv.Close() }

type attr struct {
	S string `json:"S"`
}

type keyed struct {
	Key       map[string]attr `json:"Key"`
	Item      map[string]attr `json:"Item"`
	IndexName string          `json:"IndexName"`
	// ExpressionAttributeValues hold a Query's partition key value (":pk", as the store's
	// queries name it): on an index, what dynamodb:LeadingKeys is judged on.
	ExpressionAttributeValues map[string]attr `json:"ExpressionAttributeValues"`
}

// record notes one request as it arrives and returns its index in calls (-1 past maxCalls),
// for answered.
func (d *dynamoRecorder) record(target string, body []byte) int {
	_, op, _ := strings.Cut(target, ".")
	i := -1
	d.mu.Lock()
	d.requests++
	if len(d.calls) < maxCalls {
		i = len(d.calls)
		d.calls = append(d.calls, call{Span: dynamo.Span{Op: op, Start: time.Now()}})
	}
	d.mu.Unlock()
	var req struct {
		keyed
		TransactItems []map[string]keyed `json:"TransactItems"`
	}
	_ = json.Unmarshal(body, &req)
	add := func(a access) {
		d.mu.Lock()
		d.got = append(d.got, a)
		if i >= 0 {
			d.calls[i].PKs = append(d.calls[i].PKs, a.PK)
		}
		d.mu.Unlock()
	}
	pk := func(k keyed) string {
		if v, ok := k.Key["pk"]; ok {
			return v.S
		}
		if v, ok := k.ExpressionAttributeValues[":pk"]; ok && k.IndexName != "" {
			return v.S
		}
		return k.Item["pk"].S
	}
	switch op {
	case "TransactWriteItems", "TransactGetItems":
		for _, it := range req.TransactItems {
			for kind, k := range it {
				action := map[string]string{"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem",
					"ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}[kind]
				add(access{Action: action, PK: pk(k), Transact: op == "TransactWriteItems"})
			}
		}
	default:
		add(access{Action: op, PK: pk(req.keyed), Index: req.IndexName})
	}
	return i
}

// answered notes that the request record numbered i has had its answer.
func (d *dynamoRecorder) answered(i int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if i >= 0 && i < len(d.calls) {
		d.calls[i].End = time.Now()
	}
}

// answerWriter calls answered once, when the proxy starts writing an answer back (or at done):
// before the function can have read it, so a request the function sends after an answer
// always starts after that answer's end, and two requests in flight together overlap.
type answerWriter struct {
	http.ResponseWriter
	once     sync.Once
	answered func()
}

func (a *answerWriter) WriteHeader(code int) {
	a.done()
	a.ResponseWriter.WriteHeader(code)
}

func (a *answerWriter) Write(b []byte) (int, error) {
	a.done()
	return a.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController (the reverse proxy's flushes) reach the connection.
func (a *answerWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

func (a *answerWriter) done() { a.once.Do(a.answered) }

// callsSince returns the requests from the n-th on (n is a count() taken before them).
func (d *dynamoRecorder) callsSince(n int) []call {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n >= len(d.calls) {
		return nil
	}
	return slices.Clone(d.calls[n:])
}

// writes counts the item writes recorded so far (a transaction's items each).
func (d *dynamoRecorder) writes() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, a := range d.got {
		switch a.Action {
		case "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem":
			n++
		}
	}
	return n
}

// accesses returns what was recorded so far, deduplicated by action and item type.
func (d *dynamoRecorder) accesses() []access {
	d.mu.Lock()
	defer d.mu.Unlock()
	seen := map[access]bool{}
	var out []access
	for _, a := range d.got {
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Action+out[i].PK < out[j].Action+out[j].PK })
	return out
}

// allowedBy reports whether one of a function's template statements allows the access: the
// dynamodb action on the table, with the partition key matching its LeadingKeys patterns.
func allowedBy(stmts []cfn.Statement, a access) bool {
	for _, s := range stmts {
		if s.Effect != "Allow" || !contains(s.Actions, "dynamodb:"+a.Action) {
			continue
		}
		// A statement grants an index's access only when its resource names that index (the
		// table's ARN grants none of its indexes), and the other way round; the leading keys of
		// a Query of an index are the index's partition key.
		if onIndex(s, a.Index) != (a.Index != "") {
			continue
		}
		for _, p := range s.LeadingKeys() {
			if ok, _ := path.Match(p, a.PK); ok {
				return true
			}
			// IAM's StringLike * also matches '/', which path.Match does not.
			if strings.HasSuffix(p, "*") && strings.HasPrefix(a.PK, strings.TrimSuffix(p, "*")) && !strings.ContainsAny(strings.TrimSuffix(p, "*"), "*?") {
				return true
			}
		}
	}
	return false
}

// onIndex reports whether a statement's resources name the index (any index when index is "").
func onIndex(s cfn.Statement, index string) bool {
	for _, r := range s.Resources {
		js, _ := json.Marshal(r)
		if index == "" && strings.Contains(string(js), "/index/") {
			return true
		}
		if index != "" && strings.Contains(string(js), "/index/"+index+`"`) {
			return true
		}
	}
	return false
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// itemType is the item-type prefix of a partition key (TOKEN#abc -> TOKEN#), for reports.
func itemType(pk string) string {
	if i := strings.Index(pk, "#"); i >= 0 {
		return pk[:i+1]
	}
	return pk
}

func TestAllowedBy_MatchesActionAndItemType(t *testing.T) {
	stmts := []cfn.Statement{
		{Effect: "Allow", Actions: []string{"dynamodb:GetItem"}, Condition: map[string]any{
			"ForAllValues:StringLike": map[string]any{"dynamodb:LeadingKeys": []any{"TOKEN#*", "KEYS#registry"}}}},
		{Effect: "Allow", Actions: []string{"dynamodb:Query"}, Resources: []any{map[string]any{"Fn::Sub": []any{"${TableArn}/index/gsi1", map[string]any{}}}},
			Condition: map[string]any{"ForAllValues:StringLike": map[string]any{"dynamodb:LeadingKeys": []any{"USER#*"}}}},
	}
	for _, tc := range []struct {
		name string
		a    access
		want bool
	}{
		{"read of a token", access{Action: "GetItem", PK: "TOKEN#abc/def+"}, true},
		{"read of the key registry", access{Action: "GetItem", PK: "KEYS#registry"}, true},
		{"read of another registry item", access{Action: "GetItem", PK: "KEYS#other"}, false},
		{"read of a client", access{Action: "GetItem", PK: "CLIENT#cl_1"}, false},
		{"write of a token", access{Action: "PutItem", PK: "TOKEN#abc"}, false},
		{"query of an index", access{Action: "Query", Index: "gsi1"}, false},
		{"query of the granted index on a granted partition", access{Action: "Query", Index: "gsi1", PK: "USER#u1"}, true},
		{"query of the granted index on another partition", access{Action: "Query", Index: "gsi1", PK: "USERS#3"}, false},
		{"query of another index", access{Action: "Query", Index: "gsi2", PK: "USER#u1"}, false},
		{"query of the table", access{Action: "Query", PK: "USER#u1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := allowedBy(stmts, tc.a); got != tc.want {
				t.Errorf("allowedBy(%+v) = %v, want %v", tc.a, got, tc.want)
			}
		})
	}
}

func TestRecorder_SplitsTransactionsIntoItemActions(t *testing.T) {
	d := &dynamoRecorder{}
	d.record("DynamoDB_20120810.TransactWriteItems", []byte(`{"TransactItems":[
		{"Put":{"Item":{"pk":{"S":"GRANT#g1"},"sk":{"S":"GRANT"}}}},
		{"Update":{"Key":{"pk":{"S":"CODE#c1"}}}},
		{"Delete":{"Key":{"pk":{"S":"TOKEN#t1"}}}},
		{"ConditionCheck":{"Key":{"pk":{"S":"CLIENT#x"}}}}]}`))
	d.record("DynamoDB_20120810.GetItem", []byte(`{"Key":{"pk":{"S":"KEYS#registry"}}}`))
	got := d.accesses()
	want := []access{{"ConditionCheckItem", "CLIENT#x", "", true}, {"DeleteItem", "TOKEN#t1", "", true}, {"GetItem", "KEYS#registry", "", false},
		{"PutItem", "GRANT#g1", "", true}, {"UpdateItem", "CODE#c1", "", true}}
	if len(got) != len(want) {
		t.Fatalf("accesses %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("access %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// count is how many DynamoDB requests the function made.
func (d *dynamoRecorder) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.requests
}

// items counts the items the function's requests read and wrote (a transaction's items one
// by one, as DynamoDB bills them: a transactional item costs twice a plain one), and how
// many of the writes were inside transactions.
func (d *dynamoRecorder) items() (reads, writes, transactional int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, a := range d.got {
		switch a.Action {
		case "GetItem", "Query", "BatchGetItem", "Scan":
			reads++
		default:
			writes++
			if a.Transact {
				transactional++
			}
		}
	}
	return reads, writes, transactional
}
