// Command authorizer is the Lambda authorizer of the bank API routes (HTTP API, payload 2.0,
// simple responses): bearer token, one store read, certificate binding, the route's scopes.
package main

import "github.com/acmebank/authserver/shared/app"

func main() {
	az, err := app.FromEnv().Authorizer()
	if err != nil {
		app.Fatal(err)
	}
	app.ServeAuthorizer(az)
}
