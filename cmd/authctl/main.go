// Command authctl is the operator's tool: it registers clients, manages users, lists and
// revokes grants, shows and rotates the signing keys, and creates the DynamoDB Local table. It
// works on the same store as the service, the embedded one (a file under the data directory)
// or the DynamoDB table, chosen by the same AUTH_* environment variables or by flags.
//
//	authctl clients create --name "Acme Books" --redirect-uri https://books.example/cb --scope openid,email
//	authctl users create alice --email alice@example.com     # asks for the password
//	authctl --store dynamodb --table auth grants list --user alice
//
// docs/operations.md is the manual. Exit codes:
//
//	0  success
//	1  failure (store unreachable, unexpected error)
//	2  usage: unknown command or flag, missing or invalid argument (bad redirect URI, unknown scope, weak password)
//	3  not found: no such client, user or grant
//	4  conflict: the client id, uid or username is taken
//	5  partial: an import or a bulk revocation finished with some items failed (see the report)
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], streams{in: os.Stdin, out: os.Stdout, err: os.Stderr}, os.LookupEnv)
	stop()
	os.Exit(code)
}
