package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/localkey"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// fixture is the function's handler over real parts: the embedded store as the key registry,
// the local key backend, keys.Rotator, and a clock the test moves.
type fixture struct {
	store *embedded.Store
	h     func(context.Context, json.RawMessage) (any, error)
	logs  *bytes.Buffer
	mu    sync.Mutex
	now   time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	st, err := embedded.Open(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b, err := localkey.New(filepath.Join(dir, "keys"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{store: st, logs: &bytes.Buffer{}, now: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	clock := oauth.ClockFunc(func() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now })
	log := slog.New(slog.NewJSONHandler(f.logs, nil))
	f.h = newHandler(keys.NewRotator(st, b, keys.Policy{}, clock, log), log)
	return f
}

func (f *fixture) advance(d time.Duration) { f.mu.Lock(); f.now = f.now.Add(d); f.mu.Unlock() }

func (f *fixture) registry(t *testing.T) oauth.KeySet {
	t.Helper()
	set, err := f.store.Keys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func (f *fixture) invoke(t *testing.T, payload string) (any, error) {
	t.Helper()
	return f.h(context.Background(), json.RawMessage(payload))
}

// cloudFormation is the endpoint behind a ResponseURL: it records the responses PUT to it.
type cloudFormation struct {
	srv       *httptest.Server
	mu        sync.Mutex
	responses []map[string]any
}

func newCloudFormation(t *testing.T) *cloudFormation {
	cf := &cloudFormation{}
	cf.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var resp map[string]any
		if r.Method != http.MethodPut || json.Unmarshal(body, &resp) != nil {
			http.Error(w, "want a JSON PUT", http.StatusBadRequest)
			return
		}
		cf.mu.Lock()
		cf.responses = append(cf.responses, resp)
		cf.mu.Unlock()
	}))
	t.Cleanup(cf.srv.Close)
	return cf
}

// request is a custom-resource request as CloudFormation sends it for the InitialKey resource.
func (cf *cloudFormation) request(requestType string) string {
	req := map[string]any{
		"RequestType": requestType, "RequestId": "req-" + requestType, "ResponseURL": cf.srv.URL + "/response?X-Amz-Signature=abc",
		"ResourceType": "AWS::CloudFormation::CustomResource", "LogicalResourceId": "InitialKey",
		"StackId":            "arn:aws:cloudformation:eu-west-1:123456789012:stack/authserver/0b1c",
		"ResourceProperties": map[string]any{"ServiceToken": "arn:aws:lambda:eu-west-1:123456789012:function:rotate", "KeyTag": "authserver"},
	}
	if requestType != "Create" {
		req["PhysicalResourceId"] = physicalID
	}
	b, _ := json.Marshal(req)
	return string(b)
}

func (cf *cloudFormation) last(t *testing.T) map[string]any {
	t.Helper()
	cf.mu.Lock()
	defer cf.mu.Unlock()
	if len(cf.responses) == 0 {
		t.Fatal("no response reached the ResponseURL")
	}
	return cf.responses[len(cf.responses)-1]
}

func TestCustomResource_CreateRunsTheRotationAndAnswersSuccess(t *testing.T) {
	f, cf := newFixture(t), newCloudFormation(t)
	if _, err := f.invoke(t, cf.request("Create")); err != nil {
		t.Fatal(err)
	}
	cur, ok := f.registry(t).Current(keys.RS256)
	if !ok {
		t.Fatal("Create left the registry without a current key: a fresh stack could not sign")
	}
	resp := cf.last(t)
	data, _ := resp["Data"].(map[string]any)
	if resp["Status"] != "SUCCESS" || resp["PhysicalResourceId"] != physicalID || resp["RequestId"] != "req-Create" ||
		resp["LogicalResourceId"] != "InitialKey" || !strings.HasPrefix(resp["StackId"].(string), "arn:aws:cloudformation:") ||
		data["CurrentKid"] != cur.Kid {
		t.Fatalf("response %v, want SUCCESS for InitialKey with CurrentKid %s", resp, cur.Kid)
	}

	// An update (a key setting changed) runs the rotation again: nothing is due, the current
	// key stays, and the resource keeps its physical id (no replacement, no Delete).
	before := f.registry(t)
	if _, err := f.invoke(t, cf.request("Update")); err != nil {
		t.Fatal(err)
	}
	if resp := cf.last(t); resp["Status"] != "SUCCESS" || resp["PhysicalResourceId"] != physicalID {
		t.Fatalf("update response %v", resp)
	}
	if after := f.registry(t); after.Version != before.Version {
		t.Fatalf("an update with nothing due rewrote the registry: version %d -> %d", before.Version, after.Version)
	}
}

func TestCustomResource_DeleteKeepsTheKeysAndAnswersSuccess(t *testing.T) {
	f, cf := newFixture(t), newCloudFormation(t)
	if _, err := f.invoke(t, cf.request("Create")); err != nil {
		t.Fatal(err)
	}
	before := f.registry(t)
	if _, err := f.invoke(t, cf.request("Delete")); err != nil {
		t.Fatal(err)
	}
	if resp := cf.last(t); resp["Status"] != "SUCCESS" || resp["PhysicalResourceId"] != physicalID {
		t.Fatalf("delete response %v, want SUCCESS", resp)
	}
	if after := f.registry(t); after.Version != before.Version || len(after.Keys) != len(before.Keys) {
		t.Fatalf("Delete changed the registry: %+v -> %+v", before, after)
	}
}

func TestCustomResource_FailedRotationAnswersFailedWithTheReason(t *testing.T) {
	f, cf := newFixture(t), newCloudFormation(t)
	f.store.Close() // the registry cannot be read: the run fails
	if _, err := f.invoke(t, cf.request("Create")); err != nil {
		t.Fatalf("the FAILED response was delivered, so the invocation itself succeeds: %v", err)
	}
	resp := cf.last(t)
	if resp["Status"] != "FAILED" || !strings.Contains(resp["Reason"].(string), "key rotation") || resp["PhysicalResourceId"] != physicalID {
		t.Fatalf("response %v, want FAILED with the rotation's error as the reason", resp)
	}
	if !strings.Contains(f.logs.String(), `"level":"ERROR"`) {
		t.Fatalf("failure not logged as an error: %s", f.logs.String())
	}
}

func TestCustomResource_UnreachableResponseURLFailsTheInvocation(t *testing.T) {
	f, cf := newFixture(t), newCloudFormation(t)
	req := cf.request("Create")
	cf.srv.Close() // CloudFormation's endpoint is gone: Lambda must see the failure (and retry)
	if _, err := f.invoke(t, req); err == nil {
		t.Fatal("a response that never reached CloudFormation was reported as success")
	}
}

// scheduled is an EventBridge scheduled event as Lambda delivers it (events/rotatekeys.json).
const scheduled = `{"version":"0","id":"53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa","detail-type":"Scheduled Event",
"source":"aws.events","account":"123456789012","time":"2026-01-01T00:00:00Z","region":"eu-west-1",
"resources":["arn:aws:events:eu-west-1:123456789012:rule/rotate-keys"],"detail":{}}`

func TestHandler_ScheduledEventRotatesAndLogsItsReportAsJSON(t *testing.T) {
	f := newFixture(t)
	out, err := f.invoke(t, scheduled)
	if err != nil {
		t.Fatal(err)
	}
	rep, _ := out.(keys.Report)
	if cur, ok := f.registry(t).Current(keys.RS256); !ok || rep.Algs[keys.RS256].Current != cur.Kid || !rep.Changed {
		t.Fatalf("report %+v; registry current %v", rep, cur.Kid)
	}
	var line map[string]any
	if err := json.Unmarshal(f.logs.Bytes(), &line); err != nil {
		t.Fatalf("log is not one JSON line: %q", f.logs.String())
	}
	if _, ok := line["report"].(map[string]any); !ok || line["msg"] != "key rotation done" || line["mode"] != "scheduled" {
		t.Fatalf("log line %v lacks the report", line)
	}
}

// TestHandler_OnDemandActions is docs/deploy.md's "rotate on demand": {"action":"rotate"}
// makes the due transitions, {"action":"promote"} replaces the current key now, once the next
// one has been published for the policy's lead.
func TestHandler_OnDemandActions(t *testing.T) {
	f := newFixture(t)
	out, err := f.invoke(t, `{"action":"rotate"}`)
	if err != nil {
		t.Fatal(err)
	}
	first := out.(keys.Report)
	for _, alg := range keys.Algs {
		if first.Algs[alg].Current == "" || first.Algs[alg].Next == "" {
			t.Fatalf("rotate on a fresh registry: %+v, want a current and a next %s key", first, alg)
		}
	}
	out, err = f.invoke(t, `{"action":"promote"}`)
	if err != nil {
		t.Fatal(err)
	}
	if rep := out.(keys.Report); len(rep.Promoted()) != 0 {
		t.Fatalf("promote signed with a key published for no time: %+v", rep)
	}
	f.advance(keys.DefaultPolicy().PublishLead())
	out, err = f.invoke(t, `{"action":"promote"}`)
	if err != nil {
		t.Fatal(err)
	}
	rep := out.(keys.Report)
	for _, alg := range keys.Algs {
		if a := rep.Algs[alg]; a.Promoted != first.Algs[alg].Next || a.Current != first.Algs[alg].Next {
			t.Fatalf("promote after the lead: %+v, want %s promoted", a, first.Algs[alg].Next)
		}
	}
}

func TestHandler_UnrecognisedPayloadIsRefusedAndChangesNothing(t *testing.T) {
	f := newFixture(t)
	for _, payload := range []string{`{}`, `{"promote":true}`, `{"action":"delete"}`, `{"source":"aws.events"}`,
		`{"RequestType":"Create"}`, `[]`, `"rotate"`, `null`} {
		if _, err := f.invoke(t, payload); err == nil {
			t.Errorf("%s was accepted", payload)
		}
	}
	if set := f.registry(t); len(set.Keys) != 0 || set.Version != 0 {
		t.Fatalf("a refused payload changed the registry: %+v", set)
	}
}

// TestCustomResource_RacingInvocationsLeaveOneCurrentKey: CloudFormation may retry a Create
// while the schedule fires. 50 racing invocations (custom-resource Creates and scheduled
// events) on a fresh registry all succeed, every Create is answered SUCCESS with the same
// current key, and the registry holds exactly one current key.
func TestCustomResource_RacingInvocationsLeaveOneCurrentKey(t *testing.T) {
	f, cf := newFixture(t), newCloudFormation(t)
	const runs = 50
	create := cf.request("Create")
	errs := make([]error, runs)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			payload := scheduled
			if i%2 == 0 {
				payload = create
			}
			_, errs[i] = f.h(context.Background(), json.RawMessage(payload))
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("invocation %d: %v", i, err)
		}
	}
	set := f.registry(t)
	current := map[string][]string{} // by algorithm
	for _, k := range set.Keys {
		if k.State == oauth.KeyCurrent {
			current[k.Algorithm()] = append(current[k.Algorithm()], k.Kid)
		}
	}
	for _, alg := range keys.Algs {
		if len(current[alg]) != 1 {
			t.Fatalf("current %s keys %v, want exactly one", alg, current[alg])
		}
	}
	cf.mu.Lock()
	defer cf.mu.Unlock()
	if len(cf.responses) != runs/2 {
		t.Fatalf("%d responses for %d Creates", len(cf.responses), runs/2)
	}
	for _, resp := range cf.responses {
		data, _ := resp["Data"].(map[string]any)
		if resp["Status"] != "SUCCESS" || data["CurrentKid"] != current[keys.RS256][0] {
			t.Errorf("response %v, want SUCCESS with CurrentKid %s", resp, current[keys.RS256][0])
		}
		for _, alg := range keys.Algs {
			if data["CurrentKid"+alg] != current[alg][0] {
				t.Errorf("response %v, want CurrentKid%s %s", resp, alg, current[alg][0])
			}
		}
	}
}

// TestHandler_ARegionThatDoesNotRotateRefusesEveryRun: in a multi-region deployment's other
// regions (AUTH_KEY_ROTATION=off) a scheduled run or an operator's is refused and the registry,
// which the primary region's rotation alone writes, is left as it was.
func TestHandler_ARegionThatDoesNotRotateRefusesEveryRun(t *testing.T) {
	f := newFixture(t)
	f.h = newHandler(notHere{}, slog.New(slog.NewJSONHandler(f.logs, nil)))
	for _, p := range []string{`{"action":"rotate"}`, `{"action":"promote"}`,
		`{"source":"aws.events","detail-type":"Scheduled Event","id":"e1"}`} {
		if _, err := f.invoke(t, p); !errors.Is(err, errNotHere) {
			t.Errorf("%s: %v, want the run refused", p, err)
		}
	}
	if set := f.registry(t); len(set.Keys) != 0 {
		t.Errorf("registry written: %+v", set)
	}
}
