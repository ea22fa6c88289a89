package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/acmebank/authserver/shared/app"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/seed"
	"github.com/acmebank/authserver/shared/store/dynamo"
)

// ensureTable makes sure the DynamoDB table exists before anything reads it: against a local
// endpoint (DynamoDB Local) it creates a missing table, as `authctl table create` would; a
// deployed table (no endpoint) is created by the SAM template, never here, so a missing one is
// an error naming what creates it. The embedded store needs nothing.
func ensureTable(ctx context.Context, a *app.App) error {
	cfg := a.Config
	if cfg.Store != "dynamodb" {
		return nil
	}
	if cfg.DynamoEndpoint != "" {
		client, err := dynamo.NewClient(ctx, cfg.DynamoEndpoint)
		if err != nil {
			return err
		}
		if err := dynamo.CreateTable(ctx, client, cfg.Table); err != nil {
			return fmt.Errorf("%w\n(with %s set, the server creates a missing table at that endpoint: is DynamoDB Local running there? `scripts/dynamodb-local.sh start` starts one)",
				err, config.EnvDynamoEndpoint)
		}
		return nil
	}
	_, err := a.Store.ListClients(ctx)
	if notFound := new(types.ResourceNotFoundException); errors.As(err, &notFound) {
		return fmt.Errorf("DynamoDB table %q does not exist: deploy the SAM template (it creates the table), or for DynamoDB Local set %s to its endpoint (the server then creates the table)",
			cfg.Table, config.EnvDynamoEndpoint)
	}
	if err != nil {
		return fmt.Errorf("DynamoDB table %q: %w", cfg.Table, err)
	}
	return nil
}

// prepare loads the seed file, or on a first run with nothing configured creates a demo client
// and user, and prints how to try them on out (their secrets on the first run only, then where
// they are). On DynamoDB it prints instead what to run when the table has no client or user.
// The table exists by now (ensureTable) and the key rotation has run.
func prepare(ctx context.Context, a *app.App, seedFile string, out io.Writer) error {
	if seedFile != "" {
		data, err := os.ReadFile(seedFile)
		if err != nil {
			return fmt.Errorf("seed: %w", err)
		}
		f, err := seed.Parse(data)
		if err != nil {
			return err
		}
		if err := f.CheckIDTokenAlgs(a.Config.IDTokenAlgs); err != nil {
			return err
		}
		rep, err := seed.Load(ctx, a.Store, f, a.Authn.Passwords, time.Now())
		if err != nil {
			return fmt.Errorf("seed: %w", err)
		}
		a.Log.Info("seed loaded", "clients_created", rep.ClientsCreated, "clients_updated", rep.ClientsUpdated,
			"users_created", rep.UsersCreated, "users_updated", rep.UsersUpdated)
	}
	if a.Config.Store == "dynamodb" {
		advice, missing, err := dynamoAdvice(ctx, a)
		if err != nil || advice == "" {
			return err
		}
		fmt.Fprint(out, advice)
		a.Log.Warn("the DynamoDB table has "+strings.Join(missing, " and ")+": the commands that add them are printed above", "table", a.Config.Table)
		return nil
	}
	if seedFile != "" {
		return nil
	}
	demo, created, err := demoSeed(ctx, a)
	if err != nil || demo == nil {
		return err
	}
	c, u := demo.Clients[0], demo.Users[0]
	path := filepath.Join(a.Config.DataDir, "demo.json")
	q := url.Values{"client_id": {c.ClientID}, "redirect_uri": {c.RedirectURIs[0]}, "response_type": {"code"},
		"scope": {"openid email phone profile"}, "state": {"demo-state"}}
	authorize := a.Config.BaseURL + httpapi.PathAuthorize + "?" + q.Encode()
	if !created {
		fmt.Fprintf(out, `
Demo client %s and user %s: their secret and password are in %s
  (jq -r '.clients[0].client_secret, .users[0].password' %s)
Open this in a browser to sign in:
  %s
`, c.ClientID, u.Username, path, path, authorize)
		return nil
	}
	fmt.Fprintf(out, `
Demo client and user (shown this once; saved in %s):
  client_id:     %s
  client_secret: %s
  redirect_uri:  %s
  username:      %s
  password:      %s
Open this in a browser to sign in:
  %s
`, path, c.ClientID, c.ClientSecret, c.RedirectURIs[0], u.Username, u.Password, authorize)
	return nil
}

// demoSeed returns the demo fixtures and whether this call created them: created on a first
// run with an empty store (with random secrets saved, mode 0600, in the data directory), read
// back on later runs, nil when the store was set up otherwise.
func demoSeed(ctx context.Context, a *app.App) (*seed.File, bool, error) {
	path := filepath.Join(a.Config.DataDir, "demo.json")
	if data, err := os.ReadFile(path); err == nil {
		f, err := seed.Parse(data)
		return f, false, err
	}
	clients, err := a.Store.ListClients(ctx)
	if err != nil {
		return nil, false, err
	}
	if len(clients) > 0 {
		return nil, false, nil
	}
	f := &seed.File{
		Clients: []seed.Client{{
			ClientID: "demo-client", ClientSecret: oauth.NewSecret(oauth.PrefixSecret), Name: "Demo App",
			RedirectURIs: []string{"http://127.0.0.1:4499/callback"},
			Scopes:       []string{"openid", "email", "phone", "profile", "bank:transfers:write"},
		}},
		Users: []seed.User{{
			UID: "demo-uid-0001", Username: "demo", Password: oauth.NewSecret("")[:16], Email: "demo@example.com",
			EmailVerified: true, Phone: "+33612345678", Name: "Demo User", GivenName: "Demo", FamilyName: "User",
			Birthdate: "1990-01-01", Locale: "en-GB", ZoneInfo: "Europe/Paris", UpdatedAt: time.Now().Unix(),
			CompanyProfileID: "demo-company-profile", CompanyUserID: "demo-company-user",
		}},
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, false, err
	}
	if _, err := seed.Load(ctx, a.Store, f, a.Authn.Passwords, time.Now()); err != nil {
		return nil, false, err
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return nil, false, err
	}
	return f, true, nil
}

// dynamoAdvice checks the DynamoDB table a newcomer points the server at (it exists:
// ensureTable). A table without clients, users or signing keys gives the commands that add
// them, and the list of what is missing (both empty when nothing is). The server does not
// invent a demo client in a table that may be shared: the operator creates them with authctl.
func dynamoAdvice(ctx context.Context, a *app.App) (string, []string, error) {
	cfg := a.Config
	clients, err := a.Store.ListClients(ctx)
	if err != nil {
		return "", nil, err
	}
	users, err := a.Store.ListUsers(ctx)
	if err != nil {
		return "", nil, err
	}
	set, err := a.Store.Keys(ctx)
	if err != nil {
		return "", nil, err
	}
	var missing, steps []string
	if len(clients) == 0 {
		missing = append(missing, "no client")
		steps = append(steps, "  no client: go run ./cmd/authctl clients create --name \"Demo App\" --redirect-uri http://127.0.0.1:4499/callback --scope openid,email,phone,profile\n")
	}
	if len(users) == 0 {
		missing = append(missing, "no user")
		steps = append(steps, "  no user:   go run ./cmd/authctl users create demo   (asks for the password)\n")
	}
	if len(set.Keys) == 0 {
		missing = append(missing, "no signing key")
		steps = append(steps, "  no signing key: go run ./cmd/authctl keys rotate\n")
	}
	if len(missing) == 0 {
		return "", nil, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nThe DynamoDB table %s has %s yet. With authctl (the same AUTH_* settings as this server):\n", cfg.Table, strings.Join(missing, " and "))
	fmt.Fprintf(&b, "  export %s=dynamodb %s=%s", config.EnvStore, config.EnvTable, cfg.Table)
	if cfg.DynamoEndpoint != "" {
		fmt.Fprintf(&b, " %s=%s", config.EnvDynamoEndpoint, cfg.DynamoEndpoint)
	}
	b.WriteString("\n")
	for _, s := range steps {
		b.WriteString(s)
	}
	b.WriteString("Then open /v2/authentication/oauth2/authorize with that client_id, its redirect_uri and a PKCE code_challenge (README.md, DynamoDB mode, has the lines).\n")
	return b.String(), missing, nil
}
