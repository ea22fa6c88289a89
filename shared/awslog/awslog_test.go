package awslog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/logging"

	"github.com/acmebank/authserver/shared/awslog"
)

// lines decodes every line of buf as one JSON object, failing on any line that is not.
func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", l)
		}
		out = append(out, m)
	}
	return out
}

func TestLogf_WritesOneJSONLineWithLevelAndMessage(t *testing.T) {
	for _, tc := range []struct {
		class logging.Classification
		level string
	}{{logging.Warn, "WARN"}, {logging.Debug, "DEBUG"}, {"OTHER", "INFO"}} {
		var buf bytes.Buffer
		l := awslog.New(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
		l.Logf(tc.class, "failed to close HTTP response body: %s, %d", "checksum", 42)
		got := lines(t, &buf)
		if len(got) != 1 || got[0]["level"] != tc.level || got[0]["msg"] != "failed to close HTTP response body: checksum, 42" || got[0]["source"] != "aws-sdk" {
			t.Fatalf("%s: logged %v", tc.class, got)
		}
	}
}

func TestLogf_RespectsTheLoggerLevel(t *testing.T) {
	var buf bytes.Buffer
	l := awslog.New(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	l.Logf(logging.Debug, "request %s", "retry")
	if buf.Len() != 0 {
		t.Fatalf("a DEBUG line passed an Info logger: %s", buf.String())
	}
}

// corruptChecksum answers every request 200 with a DynamoDB response-checksum header
// (X-Amz-Crc32) that does not match the body: the SDK then logs "failed to close HTTP response body ... checksum".
type corruptChecksum struct{}

func (corruptChecksum) RoundTrip(req *http.Request) (*http.Response, error) {
	body := `{}`
	return &http.Response{StatusCode: 200, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/x-amz-json-1.1"}, "X-Amz-Crc32": {"1"}},
		Body:   io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: req}, nil
}

// TestOption_TheSDKsOwnWarningsBecomeJSON: a client loaded with awslog.Option writes the SDK's
// checksum warning as a JSON line of the application's logger, not as SDK plain text.
func TestOption_TheSDKsOwnWarningsBecomeJSON(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	cfg, err := config.LoadDefaultConfig(context.Background(), awslog.Option(log), config.WithRegion("eu-west-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKID", "secret", "")))
	if err != nil {
		t.Fatal(err)
	}
	c := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String("http://dynamodb.invalid")
		o.HTTPClient = &http.Client{Transport: corruptChecksum{}}
		o.RetryMaxAttempts = 1
	})
	_, _ = c.ListTables(context.Background(), &dynamodb.ListTablesInput{})
	got := lines(t, &buf)
	found := false
	for _, m := range got {
		found = found || (m["level"] == "WARN" && strings.Contains(m["msg"].(string), "checksum") && m["source"] == "aws-sdk")
	}
	if !found {
		t.Fatalf("no JSON WARN line about the checksum: %v", got)
	}
}
