package httpapi

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// readBody returns the body whole at every size up to MaxBodyBytes (across the pooled
// buffer's growth), and http.MaxBytesError beyond it.
func TestReadBody_WholeUpToTheLimitThenMaxBytesError(t *testing.T) {
	for _, n := range []int{0, 1, 511, 512, 513, 4096, MaxBodyBytes - 1, MaxBodyBytes, MaxBodyBytes + 1, 3 * MaxBodyBytes} {
		for round := 0; round < 2; round++ { // the second round reuses pooled buffers
			body := strings.Repeat("k=v&", n/4+1)[:n]
			r := httptest.NewRequest(http.MethodPost, PathToken, strings.NewReader(body))
			got, err := readBody(httptest.NewRecorder(), r)
			if n > MaxBodyBytes {
				var tooBig *http.MaxBytesError
				if !errors.As(err, &tooBig) {
					t.Fatalf("%d bytes: err %v, want *http.MaxBytesError", n, err)
				}
				continue
			}
			if err != nil || got != body {
				t.Fatalf("%d bytes: got %d bytes, %v", n, len(got), err)
			}
		}
	}
}

// A body read after a larger one does not see the larger one's bytes.
func TestReadBody_PooledBufferNotLeaked(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 2000)
	readBody(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, PathToken, bytes.NewReader(big)))
	got, err := readBody(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, PathToken, strings.NewReader("a=b")))
	if err != nil || got != "a=b" {
		t.Fatalf("got %q, %v", got, err)
	}
}
