package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"io"
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

// TestDynamoDBMode_MissingDeployedTableFailsNamingWhatCreatesIt proves a table that does not
// exist, with no local endpoint configured, is a startup error that names the SAM template and
// the local alternative, and says nothing about restoring keys.
func TestDynamoDBMode_MissingDeployedTableFailsNamingWhatCreatesIt(t *testing.T) {
	a := dynamoApp(t)
	a.Config.DynamoEndpoint = "" // as deployed: the store still reaches DynamoDB Local, where the table is missing
	err := ensureTable(context.Background(), a)
	if err == nil || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), "SAM template") ||
		!strings.Contains(err.Error(), config.EnvDynamoEndpoint) || strings.Contains(err.Error(), "restore") {
		t.Fatalf("a missing deployed table: %v; want an error naming the SAM template and %s", err, config.EnvDynamoEndpoint)
	}
}

// TestDynamoDBMode_StartCreatesAMissingLocalTableAndNamesOnlyWhatIsMissing follows the start
// as run does it against DynamoDB Local and a table that does not exist: the table is created
// (README.md, DynamoDB mode), the key check passes, the rotation makes the first signing key,
// and what is printed and logged names only the client and the user, with their commands.
func TestDynamoDBMode_StartCreatesAMissingLocalTableAndNamesOnlyWhatIsMissing(t *testing.T) {
	a := dynamoApp(t)
	var logs bytes.Buffer
	a.Log = slog.New(slog.NewTextHandler(&logs, nil))
	ctx := context.Background()
	if err := ensureTable(ctx, a); err != nil {
		t.Fatalf("a missing table with %s set: %v; want it created", config.EnvDynamoEndpoint, err)
	}
	if err := checkSigningKeys(ctx, a); err != nil {
		t.Fatalf("the key check on a new table: %v", err)
	}
	if _, err := a.Rotator().Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := prepare(ctx, a, "", &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"has no client and no user yet", "authctl clients create --name", "authctl users create"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the advice lacks %q:\n%s", want, out.String())
		}
	}
	if got := out.String() + logs.String(); strings.Contains(got, "signing key") || strings.Contains(got, "not set up") {
		t.Errorf("the start names a signing key or a table not set up, though only the client and user are missing:\n%s", got)
	}
	if !strings.Contains(logs.String(), "no client and no user") {
		t.Errorf("the warning does not say what is missing:\n%s", logs.String())
	}
}

// TestDynamoDBMode_EmptyTableSaysWhatToRun proves that against an empty table the server says
// which authctl commands create a client, a user and a signing key, without failing, and that
// once they exist it says nothing.
func TestDynamoDBMode_EmptyTableSaysWhatToRun(t *testing.T) {
	a := dynamoApp(t)
	ctx := context.Background()
	if err := ensureTable(ctx, a); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := prepare(ctx, a, "", &out); err != nil {
		t.Fatalf("an empty table must not fail the start: %v", err)
	}
	for _, want := range []string{
		"AUTH_STORE=dynamodb AUTH_TABLE=" + a.Config.Table + " AUTH_DYNAMODB_ENDPOINT=" + a.Config.DynamoEndpoint,
		"authctl clients create --name", "authctl users create", "authctl keys rotate",
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
	if got := out.String(); strings.Contains(got, "clients create") || strings.Contains(got, "users create") || !strings.Contains(got, "keys rotate") {
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

// TestDemo_SecretsPrintedOnTheFirstStartOnly proves the demo client's secret and the user's
// password are printed when they are created, and later starts say where they are instead.
func TestDemo_SecretsPrintedOnTheFirstStartOnly(t *testing.T) {
	dir := t.TempDir()
	a := localApp(t, dir)
	defer a.Close()
	ctx := context.Background()
	var first, second bytes.Buffer
	if err := prepare(ctx, a, "", &first); err != nil {
		t.Fatal(err)
	}
	demo, created, err := demoSeed(ctx, a)
	if err != nil || created || demo == nil {
		t.Fatalf("demoSeed after the first start: created %v, %v", created, err)
	}
	secret, password := demo.Clients[0].ClientSecret, demo.Users[0].Password
	if !strings.Contains(first.String(), secret) || !strings.Contains(first.String(), password) {
		t.Fatalf("the first start does not show the demo secrets:\n%s", first.String())
	}
	if err := prepare(ctx, a, "", &second); err != nil {
		t.Fatal(err)
	}
	got := second.String()
	if strings.Contains(got, secret) || strings.Contains(got, password) {
		t.Errorf("a later start prints the secrets again:\n%s", got)
	}
	if !strings.Contains(got, filepath.Join(dir, "demo.json")) || !strings.Contains(got, "/authorize?client_id=demo-client") {
		t.Errorf("a later start does not say where the secrets are or the URL to open:\n%s", got)
	}
}

// TestHelp_ListsEverySettingWithItsDefaultAndDoc runs authserver --help and checks that the
// usage names every declared setting (shared/config.Settings) with its default and its doc,
// and the flag of each setting that has one.
func TestHelp_ListsEverySettingWithItsDefaultAndDoc(t *testing.T) {
	var usage bytes.Buffer
	if err := runWith([]string{"--help"}, io.Discard, &usage); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	out := usage.String()
	for _, s := range config.Settings() {
		if !strings.Contains(out, s.Name+" (default ") || !strings.Contains(out, strings.ReplaceAll(s.Doc, "`", "")) {
			t.Errorf("--help does not list %s with its default and doc", s.Name)
		}
		if s.Flag != "" && !strings.Contains(out, "-"+s.Flag+" ") {
			t.Errorf("--help does not list the flag --%s of %s", s.Flag, s.Name)
		}
	}
}

// TestSettingFlags_AFlagGivenOverridesItsVariable: --addr given wins over AUTH_ADDR; a setting
// whose flag is not given keeps its variable (AUTH_SEED) or stays unset (AUTH_DATA_DIR), so the
// default the usage shows never hides a variable.
func TestSettingFlags_AFlagGivenOverridesItsVariable(t *testing.T) {
	env := map[string]string{"AUTH_ADDR": "127.0.0.1:1", "AUTH_SEED": "seed.json"}
	fs := flag.NewFlagSet("authserver", flag.ContinueOnError)
	lookup := settingFlags(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err := fs.Parse([]string{"--addr", "127.0.0.1:2"}); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"AUTH_ADDR": "127.0.0.1:2", "AUTH_SEED": "seed.json", config.EnvDataDir: ""} {
		if got, _ := lookup(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
}
