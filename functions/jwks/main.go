// Command jwks is the Lambda function that publishes the signing keys (JWKS) and the OpenID
// discovery document, from the key registry, with no call to KMS.
package main

import "github.com/acmebank/authserver/shared/app"

func main() {
	app.ServeLambda(app.FromEnv().KeysRoutes())
}
