// Command userinfo is the Lambda function of the OIDC UserInfo endpoint (GET and POST).
package main

import "github.com/acmebank/authserver/shared/app"

func main() {
	app.ServeLambda(app.FromEnv().UserinfoHandler())
}
