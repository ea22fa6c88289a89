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

// prepare loads the seed file, or on a first run with nothing configured creates a demo client
// and user, and prints how to try them on out. On DynamoDB it prints instead what to run when
// the table is still empty, and fails when the table does not exist.
func prepare(ctx context.Context, a *app.App, seedFile string, out io.Writer) error {
	if a.Config.Store == "dynamodb" && a.Config.DynamoEndpoint != "" {
		// A DynamoDB Local for development: create the table if it is not there yet. A deployed
		// table is created by the SAM template, never here.
		client, err := dynamo.NewClient(ctx, a.Config.DynamoEndpoint)
		if err != nil {
			return err
		}
		if err := dynamo.CreateTable(ctx, client, a.Config.Table); err != nil {
			return fmt.Errorf("create table %s: %w", a.Config.Table, err)
		}
	}
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
		rep, err := seed.Load(ctx, a.Store, f, a.Service.Passwords, time.Now())
		if err != nil {
			return fmt.Errorf("seed: %w", err)
		}
		a.Log.Info("seed loaded", "clients_created", rep.ClientsCreated, "clients_updated", rep.ClientsUpdated,
			"users_created", rep.UsersCreated, "users_updated", rep.UsersUpdated)
	}
	if a.Config.Store == "dynamodb" {
		advice, err := dynamoAdvice(ctx, a)
		if err != nil || advice == "" {
			return err
		}
		fmt.Fprint(out, advice)
		a.Log.Warn("the DynamoDB table is not set up yet: the steps to set it up are printed above", "table", a.Config.Table)
		return nil
	}
	if seedFile != "" {
		return nil
	}
	demo, err := demoSeed(ctx, a)
	if err != nil || demo == nil {
		return err
	}
	c, u := demo.Clients[0], demo.Users[0]
	q := url.Values{"client_id": {c.ClientID}, "redirect_uri": {c.RedirectURIs[0]}, "response_type": {"code"},
		"scope": {"openid email phone profile"}, "state": {"demo-state"}}
	fmt.Fprintf(out, `
Demo client and user (saved in %s):
  client_id:     %s
  client_secret: %s
  redirect_uri:  %s
  username:      %s
  password:      %s
Open this in a browser to sign in:
  %s%s?%s
`, filepath.Join(a.Config.DataDir, "demo.json"), c.ClientID, c.ClientSecret, c.RedirectURIs[0], u.Username, u.Password,
		a.Config.BaseURL, httpapi.PathAuthorize, q.Encode())
	return nil
}

// demoSeed returns the demo fixtures: created on a first run with an empty store (with random
// secrets saved, mode 0600, in the data directory), read back on later runs, nil when the
// store was set up otherwise.
func demoSeed(ctx context.Context, a *app.App) (*seed.File, error) {
	path := filepath.Join(a.Config.DataDir, "demo.json")
	if data, err := os.ReadFile(path); err == nil {
		return seed.Parse(data)
	}
	clients, err := a.Store.ListClients(ctx)
	if err != nil {
		return nil, err
	}
	if len(clients) > 0 {
		return nil, nil
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
		return nil, err
	}
	if _, err := seed.Load(ctx, a.Store, f, a.Service.Passwords, time.Now()); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return nil, err
	}
	return f, nil
}

// dynamoAdvice checks the DynamoDB table a newcomer points the server at. A missing table is an
// error naming the command that creates it; a table without clients, users or signing keys gives
// the steps to set it up (empty when nothing is missing). The server does not invent a demo
// client in a table that may be shared: the operator creates them with authctl.
func dynamoAdvice(ctx context.Context, a *app.App) (string, error) {
	cfg := a.Config
	clients, err := a.Store.ListClients(ctx)
	if notFound := new(types.ResourceNotFoundException); errors.As(err, &notFound) {
		if cfg.DynamoEndpoint != "" {
			return "", fmt.Errorf("DynamoDB table %q does not exist at %s: create it with\n  go run ./cmd/authctl table create --table %s --endpoint %s",
				cfg.Table, cfg.DynamoEndpoint, cfg.Table, cfg.DynamoEndpoint)
		}
		return "", fmt.Errorf("DynamoDB table %q does not exist: deploy the SAM template (it creates the table), or for DynamoDB Local set %s and create it with\n  go run ./cmd/authctl table create --table %s --endpoint http://127.0.0.1:8000",
			cfg.Table, config.EnvDynamoEndpoint, cfg.Table)
	}
	if err != nil {
		return "", err
	}
	users, err := a.Store.ListUsers(ctx)
	if err != nil {
		return "", err
	}
	set, err := a.Store.Keys(ctx)
	if err != nil {
		return "", err
	}
	if len(clients) > 0 && len(users) > 0 && len(set.Keys) > 0 {
		return "", nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nThe DynamoDB table %s is not set up yet. With authctl (the same AUTH_* settings as this server):\n", cfg.Table)
	fmt.Fprintf(&b, "  export %s=dynamodb %s=%s", config.EnvStore, config.EnvTable, cfg.Table)
	if cfg.DynamoEndpoint != "" {
		fmt.Fprintf(&b, " %s=%s", config.EnvDynamoEndpoint, cfg.DynamoEndpoint)
	}
	b.WriteString("\n")
	if len(clients) == 0 {
		b.WriteString("  no client: go run ./cmd/authctl clients create --name \"Demo App\" --redirect-uri http://127.0.0.1:4499/callback --scope openid,email,phone,profile\n")
	}
	if len(users) == 0 {
		b.WriteString("  no user:   go run ./cmd/authctl users create demo   (asks for the password)\n")
	}
	if len(set.Keys) == 0 {
		b.WriteString("  no signing key: the key rotation this server runs at start creates one now (`go run ./cmd/authctl keys rotate` does it by hand)\n")
	}
	b.WriteString("Then open /v2/authentication/oauth2/authorize with that client_id and redirect_uri (see README.md, DynamoDB mode).\n")
	return b.String(), nil
}
