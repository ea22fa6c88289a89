// Command rotatekeys is the Lambda function of the signing-key rotation, run by an EventBridge
// schedule (and invoked on demand by operators). It moves keys next → current → retired →
// deleted in the registry (DynamoDB) and creates and schedules deletion of KMS keys; the
// configuration comes from the environment like every function's (AUTH_TABLE,
// AUTH_KEY_BACKEND=kms, AUTH_KMS_KEY_TAG, AUTH_ROTATION_PERIOD, AUTH_JWKS_MAX_AGE,
// AUTH_ID_TOKEN_TTL). See docs/keys.md.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/acmebank/authserver/shared/app"
)

func main() {
	a := app.FromEnv()
	lambda.Start(newHandler(a.Rotator(), a.Log))
}
