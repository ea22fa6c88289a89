// Command token is the Lambda function of the token endpoint: the authorization_code and
// refresh_token grants.
package main

import "github.com/acmebank/authserver/shared/app"

func main() {
	app.ServeLambda(app.FromEnv().TokenHandler())
}
