package httpapi

import (
	"context"

	"github.com/acmebank/authserver/shared/authorizer"
)

// upstreamCall is what the proxy's rewrite needs to know of an accepted request.
type upstreamCall struct {
	path string
	id   authorizer.Identity
}

type upstreamKey struct{}

func withUpstream(ctx context.Context, c upstreamCall) context.Context {
	return context.WithValue(ctx, upstreamKey{}, c)
}

func upstreamFrom(ctx context.Context) (upstreamCall, bool) {
	c, ok := ctx.Value(upstreamKey{}).(upstreamCall)
	return c, ok
}
