package dynamo_test

import (
	"testing"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/storetest"
)

// TestConformance runs the store contract that the embedded store runs too, against
// DynamoDB Local, each sub-test on a table of its own.
func TestConformance(t *testing.T) {
	localEndpoint(t)
	storetest.Run(t, func(t *testing.T) oauth.Store { return newFixture(t).store })
}
