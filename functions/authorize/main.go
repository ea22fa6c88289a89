// Command authorize is the Lambda function of the authorization endpoint: the login and
// consent pages and the redirect back to the client.
package main

import "github.com/acmebank/authserver/shared/app"

func main() {
	a := app.FromEnv()
	h, err := a.AuthorizeRoutes()
	if err != nil {
		app.Fatal(err)
	}
	app.ServeLambda(h)
}
