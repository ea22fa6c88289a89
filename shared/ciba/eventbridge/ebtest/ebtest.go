// Package ebtest is a recorder of EventBridge PutEvents calls for tests: an HTTP server that
// answers the AWS JSON 1.1 protocol the SDK speaks (X-Amz-Target AWSEvents.PutEvents) and
// keeps every entry. EventBridge has no local emulator; this is the one AWS call of the
// service that is not run against one (docs/api.md). Point the SDK at it with BaseEndpoint or
// AWS_ENDPOINT_URL_EVENTBRIDGE.
package ebtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// Entry is one event as the SDK sent it, with the SigV4 credential scope it was signed for.
type Entry struct {
	EventBusName string
	Source       string
	DetailType   string
	Detail       string
	// Service is the signing service of the request's Authorization header ("events").
	Service string
}

// Recorder answers PutEvents and records the entries.
type Recorder struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []Entry
	// failing: every entry is answered as failed (FailedEntryCount), as EventBridge does for
	// an entry it could not put (throttled, bus not found).
	failing bool
}

// New starts a recorder; Close it when done.
func New() *Recorder {
	r := &Recorder{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	return r
}

// URL is the endpoint to point the SDK at.
func (r *Recorder) URL() string { return r.srv.URL }

// Close stops the server.
func (r *Recorder) Close() { r.srv.Close() }

// FailEntries makes every later entry fail (true) or succeed (false).
func (r *Recorder) FailEntries(fail bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failing = fail
}

// Entries are the entries recorded so far, in order.
func (r *Recorder) Entries() []Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Entry(nil), r.got...)
}

// Reset forgets the entries recorded so far.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = nil
}

type putEventsInput struct {
	Entries []struct {
		EventBusName string
		Source       string
		DetailType   string
		Detail       string
	}
}

func (r *Recorder) serve(w http.ResponseWriter, req *http.Request) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	if req.Method != http.MethodPost || req.Header.Get("X-Amz-Target") != "AWSEvents.PutEvents" {
		awsError(w, http.StatusBadRequest, "UnknownOperationException", "only PutEvents is recorded")
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	var in putEventsInput
	if err == nil {
		err = json.Unmarshal(body, &in)
	}
	if err != nil || len(in.Entries) == 0 || len(in.Entries) > 10 {
		awsError(w, http.StatusBadRequest, "ValidationException", "1 to 10 entries")
		return
	}
	service := signingService(req.Header.Get("Authorization"))
	r.mu.Lock()
	failing := r.failing
	type result struct {
		EventId      string `json:",omitempty"`
		ErrorCode    string `json:",omitempty"`
		ErrorMessage string `json:",omitempty"`
	}
	out := struct {
		FailedEntryCount int
		Entries          []result
	}{}
	for _, e := range in.Entries {
		if failing {
			out.FailedEntryCount++
			out.Entries = append(out.Entries, result{ErrorCode: "InternalFailure", ErrorMessage: "recorder told to fail"})
			continue
		}
		r.got = append(r.got, Entry{EventBusName: e.EventBusName, Source: e.Source, DetailType: e.DetailType, Detail: e.Detail, Service: service})
		out.Entries = append(out.Entries, result{EventId: fmt.Sprintf("evt-%d", len(r.got))})
	}
	r.mu.Unlock()
	_ = json.NewEncoder(w).Encode(out)
}

// signingService reads the service of a SigV4 Authorization header's credential scope
// (Credential=AKID/date/region/service/aws4_request).
func signingService(auth string) string {
	_, cred, ok := strings.Cut(auth, "Credential=")
	if !ok {
		return ""
	}
	cred, _, _ = strings.Cut(cred, ",")
	parts := strings.Split(cred, "/")
	if len(parts) != 5 {
		return ""
	}
	return parts[3]
}

func awsError(w http.ResponseWriter, status int, code, msg string) {
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": msg})
}
