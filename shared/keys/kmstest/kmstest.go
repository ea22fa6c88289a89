// Package kmstest connects tests to local-kms (github.com/nsmithuk/local-kms, the KMS emulator
// LocalStack embeds; scripts/local-kms.sh installs and starts it) through the real
// aws-sdk-go-v2 client, with a Transport in front of the client that counts the requests per
// operation and can make chosen requests fail (throttling, 5xx, a hung connection) before they
// reach the emulator. Tests only.
package kmstest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
)

// EnvEndpoint names the variable `scripts/local-kms.sh start` exports.
const EnvEndpoint = "LOCAL_KMS_ENDPOINT"

// Region and Account are what scripts/local-kms.sh starts local-kms with; they appear in
// its key ARNs.
const (
	Region  = "eu-west-1"
	Account = "111122223333"
)

// Endpoint returns local-kms's endpoint. When it is unset the test is skipped, except under
// CI (CI=true), where it fails: in CI the KMS tests never skip.
func Endpoint(t testing.TB) string {
	t.Helper()
	endpoint := os.Getenv(EnvEndpoint)
	if endpoint == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is unset under CI: scripts/test.sh starts local-kms", EnvEndpoint)
		}
		t.Skipf("%s is unset; start local-kms: eval \"$(scripts/local-kms.sh start)\"", EnvEndpoint)
	}
	return endpoint
}

// New returns the real KMS client pointed at local-kms through a new Transport, with static
// credentials and the SDK's retries off (so each call is one request and counts are exact);
// optFns may change that.
func New(t testing.TB, optFns ...func(*kms.Options)) (*kms.Client, *Transport) {
	t.Helper()
	tr := &Transport{}
	opts := kms.Options{
		Region:           Region,
		BaseEndpoint:     aws.String(Endpoint(t)),
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		RetryMaxAttempts: 1,
		HTTPClient:       &http.Client{Transport: tr},
	}
	return kms.New(opts, optFns...), tr
}

// Fault is what an intercepted request gets instead of local-kms's answer: an HTTP status
// and the KMS error type, or (Hang) no answer until the request's context ends. The zero
// Fault (Pass) lets the request through, so Fail(op, Pass, 1) then Fail(op, Throttling, 1)
// fails the second call.
type Fault struct {
	Status  int
	Type    string
	Message string
	// Hang holds the request until its context is done, as a KMS that stopped answering.
	Hang bool
}

// Faults KMS answers that a client must treat as retryable, a hung connection, and Pass.
var (
	Pass        = Fault{}
	Throttling  = Fault{Status: http.StatusBadRequest, Type: "ThrottlingException", Message: "Rate exceeded"}
	Internal    = Fault{Status: http.StatusInternalServerError, Type: "KMSInternalException", Message: "internal error"}
	Dependency  = Fault{Status: http.StatusInternalServerError, Type: "DependencyTimeoutException", Message: "dependency timeout"}
	Unavailable = Fault{Status: http.StatusInternalServerError, Type: "KeyUnavailableException", Message: "key unavailable"}
	Hang        = Fault{Hang: true}
)

// Transport is an http.RoundTripper for the SDK client (kms.Options.HTTPClient): it counts
// the requests of each operation (X-Amz-Target TrentService.<Op>), records the KeyId each
// carried, and answers queued faults itself; everything else goes to Base (default
// http.DefaultTransport), i.e. to local-kms.
type Transport struct {
	Base http.RoundTripper

	mu     sync.Mutex
	calls  map[string]int
	keyIDs map[string][]string
	params map[string][]map[string]any
	faults map[string][]Fault
}

// Fail makes the next n requests of op (e.g. "Sign") answer f.
func (tr *Transport) Fail(op string, f Fault, n int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.faults == nil {
		tr.faults = map[string][]Fault{}
	}
	for range n {
		tr.faults[op] = append(tr.faults[op], f)
	}
}

// Calls returns how many requests of op went out (faulted ones included).
func (tr *Transport) Calls(op string) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.calls[op]
}

// Counts returns a copy of the request counts since the last Reset, by operation.
func (tr *Transport) Counts() map[string]int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return maps.Clone(tr.calls)
}

// Reset sets the counts and recorded key ids back to zero (queued faults stay).
func (tr *Transport) Reset() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	clear(tr.calls)
	clear(tr.keyIDs)
	clear(tr.params)
}

// KeyIDs returns the KeyId parameter of each request of op, in order.
func (tr *Transport) KeyIDs(op string) []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.keyIDs[op]...)
}

// Params returns the string parameter name (e.g. "SigningAlgorithm", "KeySpec") of each
// request of op, in order ("" where a request had none).
func (tr *Transport) Params(op, name string) []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var out []string
	for _, p := range tr.params[op] {
		v, _ := p[name].(string)
		out = append(out, v)
	}
	return out
}

// RoundTrip implements http.RoundTripper.
func (tr *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	op, _ := strings.CutPrefix(req.Header.Get("X-Amz-Target"), "TrentService.")
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	var in struct{ KeyId string }
	_ = json.Unmarshal(body, &in) // operations without a KeyId record ""
	var params map[string]any
	_ = json.Unmarshal(body, &params)

	tr.mu.Lock()
	if tr.calls == nil {
		tr.calls, tr.keyIDs, tr.params = map[string]int{}, map[string][]string{}, map[string][]map[string]any{}
	}
	tr.calls[op]++
	tr.keyIDs[op] = append(tr.keyIDs[op], in.KeyId)
	tr.params[op] = append(tr.params[op], params)
	var f Fault
	if q := tr.faults[op]; len(q) > 0 {
		f, tr.faults[op] = q[0], q[1:]
	}
	tr.mu.Unlock()

	switch {
	case f.Hang:
		<-req.Context().Done()
		return nil, req.Context().Err()
	case f.Status != 0:
		b, _ := json.Marshal(map[string]string{"__type": f.Type, "message": f.Message})
		return &http.Response{
			StatusCode: f.Status, Status: fmt.Sprintf("%d %s", f.Status, http.StatusText(f.Status)),
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header:        http.Header{"Content-Type": {"application/x-amz-json-1.1"}},
			Body:          io.NopCloser(bytes.NewReader(b)),
			ContentLength: int64(len(b)),
			Request:       req,
		}, nil
	}
	base := tr.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(req)
}

// KeyState returns the key's state in local-kms (Enabled, Disabled, PendingDeletion).
func KeyState(t testing.TB, c *kms.Client, ref string) types.KeyState {
	t.Helper()
	return Describe(t, c, ref).KeyState
}

// Describe returns the key's metadata.
func Describe(t testing.TB, c *kms.Client, ref string) *types.KeyMetadata {
	t.Helper()
	out, err := c.DescribeKey(context.Background(), &kms.DescribeKeyInput{KeyId: aws.String(ref)})
	if err != nil {
		t.Fatalf("DescribeKey %s: %v", ref, err)
	}
	return out.KeyMetadata
}

// Tags returns the key's tags.
func Tags(t testing.TB, c *kms.Client, ref string) map[string]string {
	t.Helper()
	out, err := c.ListResourceTags(context.Background(), &kms.ListResourceTagsInput{KeyId: aws.String(ref)})
	if err != nil {
		t.Fatalf("ListResourceTags %s: %v", ref, err)
	}
	tags := map[string]string{}
	for _, tg := range out.Tags {
		tags[aws.ToString(tg.TagKey)] = aws.ToString(tg.TagValue)
	}
	return tags
}

// Aliases returns the names of the aliases that point at the key.
func Aliases(t testing.TB, c *kms.Client, ref string) []string {
	t.Helper()
	out, err := c.ListAliases(context.Background(), &kms.ListAliasesInput{KeyId: aws.String(ref)})
	if err != nil {
		t.Fatalf("ListAliases %s: %v", ref, err)
	}
	var names []string
	for _, a := range out.Aliases {
		names = append(names, aws.ToString(a.AliasName))
	}
	return names
}
