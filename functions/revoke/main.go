// Command revoke is the Lambda function of token revocation (RFC 7009), on both documented
// paths.
package main

import "github.com/acmebank/authserver/shared/app"

func main() {
	app.ServeLambda(app.FromEnv().RevokeRoutes())
}
