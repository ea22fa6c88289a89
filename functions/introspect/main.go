// Command introspect is the Lambda function of token introspection (RFC 7662), for resource
// servers that are not behind API Gateway's authorizer.
package main

import "github.com/acmebank/authserver/shared/app"

func main() {
	app.ServeLambda(app.FromEnv().IntrospectHandler())
}
