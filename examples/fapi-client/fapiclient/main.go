package fapiclient

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"
)

// ErrUsage is a command line that does not parse.
var ErrUsage = errors.New("usage")

// Parse reads the command line of examples/fapi-client into a Config (In and Out unset); the
// usage goes to stderr. flag.ErrHelp is returned for -h.
func Parse(args []string, stderr io.Writer) (Config, error) {
	fs := flag.NewFlagSet("fapi-client", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	fs.StringVar(&cfg.Issuer, "issuer", "", "the authorization server's issuer identifier (required)")
	fs.StringVar(&cfg.ClientID, "client-id", "", "the client's client_id (required)")
	fs.StringVar(&cfg.KeyFile, "key", "", "the client's private key, PEM (what authctl clients keygen wrote; required)")
	fs.StringVar(&cfg.KeyID, "kid", "", "the kid the key is registered under (default: its RFC 7638 thumbprint, as keygen registers it)")
	fs.StringVar(&cfg.RedirectURI, "redirect-uri", "http://127.0.0.1:4499/callback", "a registered redirect URI; an http loopback one is listened on")
	fs.StringVar(&cfg.Scope, "scope", "openid", "the scope asked for")
	fs.BoolVar(&cfg.Paste, "paste", false, "read the URL the browser was redirected to from stdin instead of listening")
	fs.DurationVar(&cfg.Timeout, "timeout", 5*time.Minute, "how long to wait for the browser's redirect on the loopback redirect URI")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, err
		}
		return cfg, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if cfg.Issuer == "" || cfg.ClientID == "" || cfg.KeyFile == "" || fs.NArg() > 0 {
		fs.Usage()
		return cfg, fmt.Errorf("%w: --issuer, --client-id and --key are required, and no arguments", ErrUsage)
	}
	return cfg, nil
}

// Main is the command line of examples/fapi-client: it parses args, runs the flow, and returns
// the exit code (0 done, 1 the flow failed, 2 a usage error).
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cfg, err := Parse(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "fapi-client: %v\n", err)
		return 2
	}
	cfg.In, cfg.Out = stdin, stdout
	if _, err := Run(ctx, cfg); err != nil {
		fmt.Fprintf(stderr, "fapi-client: %v\n", err)
		return 1
	}
	return 0
}
