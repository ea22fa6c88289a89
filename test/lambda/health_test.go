package lambda_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/acmebank/authserver/shared/config"
)

// TestHealth_EveryCheckOverwritesTheRegionsOneItem: the health bootstrap, in the template's
// configuration, answers 200 to Route 53's request after a write and a read of one item in the
// table; 50 checks leave that one item (HEALTH#ready#<region>), and nothing else is written.
func TestHealth_EveryCheckOverwritesTheRegionsOneItem(t *testing.T) {
	s := newStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	before := scanKeys(t, ctx, s)
	f, rec := s.start(t, ctx, "health")
	defer rec.close()
	defer f.stop()
	ev := readEvent(t, "health.json")
	for i := range 50 {
		o, err := f.invoke(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		if r := httpResponse(t, o); r.StatusCode != 200 {
			t.Fatalf("check %d: status %d: %s\n%s", i+1, r.StatusCode, r.Body, f.out.String())
		}
	}
	s.checkIAM(t, "health", rec)
	after := scanKeys(t, ctx, s)
	var added []string
	for k := range after {
		if !before[k] {
			added = append(added, k)
		}
	}
	if want := "HEALTH#ready#" + awsEnv["AWS_REGION"]; len(added) != 1 || added[0] != want || len(after) != len(before)+1 {
		t.Errorf("50 checks added %v (%d items before, %d after), want the one item %s", added, len(before), len(after), want)
	}
	report(t, "health", bootstrap(t, "health"), f)
}

// TestHealth_ATableThatDoesNotAnswerIs503WithinTheDeadline: with the table's endpoint accepting
// connections and never answering (a brownout), the health function answers 503 within its 1 s
// deadline, well inside the 2 s Route 53 gives an endpoint after connecting, instead of
// hanging until the function's timeout.
func TestHealth_ATableThatDoesNotAnswerIs503WithinTheDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered, until the listener closes
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e := env(t, "health", map[string]string{config.EnvTable: "health-brownout", config.EnvDynamoEndpoint: "http://" + ln.Addr().String()})
	f, err := startFunction(ctx, "health", bootstrap(t, "health"), e)
	if err != nil {
		t.Fatal(err)
	}
	defer f.stop()
	for range 3 {
		start := time.Now()
		o, err := f.invoke(ctx, readEvent(t, "health.json"))
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		r := httpResponse(t, o)
		if r.StatusCode != 503 || header(r, "Retry-After") == "" {
			t.Errorf("status %d, Retry-After %q, want 503 with Retry-After", r.StatusCode, header(r, "Retry-After"))
		}
		if took > 1500*time.Millisecond {
			t.Errorf("answered after %v, want within the 1 s deadline (Route 53 waits 2 s)", took)
		}
		t.Logf("a table that does not answer: %d after %v", r.StatusCode, took.Round(time.Millisecond))
	}
}

// scanKeys are the partition keys of every item of the stack's table.
func scanKeys(t *testing.T, ctx context.Context, s *stack) map[string]bool {
	t.Helper()
	db := dynamodb.New(dynamodb.Options{Region: awsEnv["AWS_REGION"], BaseEndpoint: aws.String(s.endpoint),
		Credentials: credentials.NewStaticCredentialsProvider(awsEnv["AWS_ACCESS_KEY_ID"], awsEnv["AWS_SECRET_ACCESS_KEY"], "")})
	out := map[string]bool{}
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(s.table)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			pk, _ := it["pk"].(*types.AttributeValueMemberS)
			if pk != nil {
				out[pk.Value] = true
			}
		}
	}
	return out
}
