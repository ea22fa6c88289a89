package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/acmebank/authserver/shared/app"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/dynamo"
)

// TestHelp_ExitsZero proves -h and --help print the usage and end with exit status 0, while
// an unknown flag is still an error.
func TestHelp_ExitsZero(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		err := run([]string{arg})
		if !errors.Is(err, flag.ErrHelp) || exitCode(err) != 0 {
			t.Errorf("authserver %s: %v, exit %d; want the usage and exit 0", arg, err, exitCode(err))
		}
	}
	if err := run([]string{"--no-such-flag"}); exitCode(err) != 1 {
		t.Errorf("an unknown flag: %v, exit %d; want exit 1", err, exitCode(err))
	}
}

// TestBadSetting_FailsBeforeTheDemoIsCreated proves every setting is checked before the demo
// client and user are created and printed: a server that will not start shows no credentials.
func TestBadSetting_FailsBeforeTheDemoIsCreated(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"deprecation date", map[string]string{"AUTH_DEPRECATION_DATE": "2026-01-01"}, nil, "deprecation date"},
		{"sunset", map[string]string{"AUTH_DEPRECATION_SUNSET": "tomorrow"}, nil, "sunset"},
		{"api upstream", nil, []string{"--api-upstream", "ftp://bank.example"}, "upstream"},
		{"route scopes", map[string]string{config.EnvRouteScopes: "{not json"}, nil, config.EnvRouteScopes},
		{"tls certificate", nil, []string{"--tls-cert", "/nonexistent/cert.pem", "--tls-key", "/nonexistent/key.pem"}, "nonexistent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Setenv(config.EnvDataDir, dir)
			t.Setenv("AUTH_ADDR", "127.0.0.1:0")
			t.Setenv(config.EnvLogLevel, "error")
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			err := run(tt.args)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run: %v, want an error naming %q", err, tt.want)
			}
			if _, err := os.Stat(filepath.Join(dir, "demo.json")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the demo credentials were created before the bad setting was refused (%v)", err)
			}
		})
	}
}

// TestDocumentedDeprecationDefault_IsAccepted proves the default README.md documents for
// AUTH_DEPRECATION_DATE is a value the server accepts, and is the default it applies.
func TestDocumentedDeprecationDefault_IsAccepted(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `AUTH_DEPRECATION_DATE`[^|]*\\| `([^`]*)`").FindSubmatch(readme)
	if row == nil {
		t.Fatal("README.md has no AUTH_DEPRECATION_DATE row with a default")
	}
	got, err := app.ParseDeprecation(string(row[1]))
	if err != nil {
		t.Fatalf("the documented default %q is refused: %v", row[1], err)
	}
	if !got.Equal(httpapi.DefaultDeprecationDate) {
		t.Errorf("the documented default %q is %v, the applied default is %v", row[1], got, httpapi.DefaultDeprecationDate)
	}
}

// dynamoApp is the local server's app over a fresh, uniquely named table in DynamoDB Local
// (not created yet), deleted afterwards if it was. It skips without DynamoDB Local, and fails
// in CI, which always runs it.
func dynamoApp(t *testing.T) *app.App {
	t.Helper()
	ep := os.Getenv("DYNAMODB_LOCAL_ENDPOINT")
	if ep == "" {
		msg := "DYNAMODB_LOCAL_ENDPOINT is unset: run `eval \"$(scripts/dynamodb-local.sh start)\"` to test against DynamoDB Local"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	var b [6]byte
	rand.Read(b[:])
	table := "authserver-test-" + hex.EncodeToString(b[:])
	env := map[string]string{
		config.EnvStore: "dynamodb", config.EnvTable: table, config.EnvDynamoEndpoint: ep, config.EnvDataDir: t.TempDir(),
		config.EnvPasswordTime: "1", config.EnvPasswordMemory: "64",
	}
	cfg, err := config.FromLookup(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if client, err := dynamo.NewClient(ctx, ep); err == nil {
			_, _ = client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
		}
	})
	return a
}

// TestDynamoDBMode_MissingTableFailsWithTheCreateCommand proves a table that does not exist is
// a startup error that names the authctl command creating it.
func TestDynamoDBMode_MissingTableFailsWithTheCreateCommand(t *testing.T) {
	a := dynamoApp(t)
	_, err := dynamoAdvice(context.Background(), a)
	want := "authctl table create --table " + a.Config.Table + " --endpoint " + a.Config.DynamoEndpoint
	if err == nil || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), want) {
		t.Fatalf("a missing table: %v; want an error naming %q", err, want)
	}
}

// TestDynamoDBMode_EmptyTableSaysWhatToRun proves that against an empty table the server says
// which authctl commands create a client and a user and that the rotation creates the keys,
// without failing, and that once they exist it says nothing.
func TestDynamoDBMode_EmptyTableSaysWhatToRun(t *testing.T) {
	a := dynamoApp(t)
	ctx := context.Background()
	var out bytes.Buffer
	if err := prepare(ctx, a, "", &out); err != nil { // creates the table in DynamoDB Local
		t.Fatalf("an empty table must not fail the start: %v", err)
	}
	for _, want := range []string{
		"AUTH_STORE=dynamodb AUTH_TABLE=" + a.Config.Table + " AUTH_DYNAMODB_ENDPOINT=" + a.Config.DynamoEndpoint,
		"authctl clients create --name", "authctl users create", "key rotation this server runs at start",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the advice lacks %q:\n%s", want, out.String())
		}
	}
	if err := a.Store.CreateClient(ctx, oauth.Client{ID: "c1", Name: "C", RedirectURIs: []string{"https://c.example/cb"}, Scopes: []string{"openid"}}); err != nil {
		t.Fatal(err)
	}
	if err := a.Store.CreateUser(ctx, oauth.User{UID: "u1", Username: "alice"}); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := prepare(ctx, a, "", &out); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); strings.Contains(got, "clients create") || strings.Contains(got, "users create") || !strings.Contains(got, "key rotation") {
		t.Errorf("with a client and a user, only the keys are missing:\n%s", got)
	}
	if _, err := a.Rotator().Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := prepare(ctx, a, "", &out); err != nil || out.Len() != 0 {
		t.Errorf("a set-up table: %v, printed %q; want nothing", err, out.String())
	}
}
