package regional_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/dynamo"
	"github.com/acmebank/authserver/shared/store/regional"
)

// brownout is a region whose DynamoDB endpoint accepts connections and never answers: the
// real SDK client, with its retries, waits on it as on a replica in a brownout.
func brownout(t *testing.T) oauth.Store {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held <- c // read nothing, answer nothing
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for len(held) > 0 {
			(<-held).Close()
		}
	})
	client, err := dynamo.NewClient(context.Background(), "http://"+ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return dynamo.New(client, "authserver")
}

// TestStore_AHomeInABrownoutAnswersTemporarilyUnavailableWithinTheDeadline: every call routed
// to another region's replica is bounded by PeerTimeout, SDK retries included, and its failure
// is oauth.ErrTransient (temporarily_unavailable for the client), not a wait until the
// function's timeout; calls to the local replica are not affected.
func TestStore_AHomeInABrownoutAnswersTemporarilyUnavailableWithinTheDeadline(t *testing.T) {
	local := open(t)
	st, err := regional.New("eu-west-1", local, map[string]oauth.Store{"eu-central-1": brownout(t)})
	if err != nil {
		t.Fatal(err)
	}
	st.PeerTimeout = 300 * time.Millisecond
	now := time.Now().UTC()
	atPeer := oauth.WithHome(context.Background(), "eu-central-1")
	calls := map[string]func(ctx context.Context) error{
		"ConsumeCode": func(ctx context.Context) error { _, err := st.ConsumeCode(ctx, "h", "cl_1", now); return err },
		"IssueTokens": func(ctx context.Context) error { return st.IssueTokens(ctx, oauth.Issue{}, now) },
		"GetToken": func(ctx context.Context) error {
			_, err := st.GetToken(ctx, oauth.HashToken("at_unknown"), now)
			return err
		},
		"RevokeToken":     func(ctx context.Context) error { return st.RevokeToken(ctx, "h") },
		"RevokeGrant":     func(ctx context.Context) error { return st.RevokeGrant(ctx, "gr_1", now) },
		"GetGrant":        func(ctx context.Context) error { _, err := st.GetGrant(ctx, "gr_1", now); return err },
		"GetAuthRequest":  func(ctx context.Context) error { _, err := st.GetAuthRequest(ctx, "ar_1", now); return err },
		"TakeAuthRequest": func(ctx context.Context) error { _, err := st.TakeAuthRequest(ctx, "ar_1", now); return err },
		"UseOnce":         func(ctx context.Context) error { return st.UseOnce(ctx, "dpop:x", now.Add(time.Minute), now) },
		"GetInitialAccessToken": func(ctx context.Context) error {
			_, err := st.GetInitialAccessToken(ctx, "h", now)
			return err
		},
		"TakeInitialAccessToken": func(ctx context.Context) error {
			_, err := st.TakeInitialAccessToken(ctx, "h", now)
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(atPeer, 10*time.Second) // the function's timeout
			defer cancel()
			start := time.Now()
			err := call(ctx)
			took := time.Since(start)
			if !errors.Is(err, oauth.ErrTransient) {
				t.Fatalf("err = %v, want oauth.ErrTransient", err)
			}
			if took >= 5*time.Second {
				t.Fatalf("took %s: the peer deadline did not bound the call", took)
			}
		})
	}
	// The local replica is not bounded by the peer deadline: a call with no home named works.
	if err := st.UseOnce(context.Background(), "dpop:local", now.Add(time.Minute), now); err != nil {
		t.Fatalf("local UseOnce: %v", err)
	}
}
