package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/acmebank/authserver/shared/admin"
	"github.com/acmebank/authserver/shared/app"
	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/boot"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// Exit codes (documented in main.go and docs/operations.md).
const (
	exitOK       = 0
	exitFailure  = 1
	exitUsage    = 2
	exitNotFound = 3
	exitConflict = 4
	exitPartial  = 5
)

// streams are the command's standard streams, so tests run it in-process.
type streams struct {
	in       io.Reader
	out, err io.Writer
}

// usageError is a command line the operator must correct: exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// partialError is a bulk action that finished with some items failed: exit code 5. The
// report has been written; the error says how many failed.
type partialError struct{ msg string }

func (e partialError) Error() string { return e.msg }

// run executes one command line and returns the process's exit code.
func run(ctx context.Context, args []string, std streams, lookupEnv func(string) (string, bool)) int {
	c := &cli{std: std, lookupEnv: lookupEnv}
	root := c.rootCommand()
	root.SetArgs(args)
	root.SetIn(std.in)
	root.SetOut(std.out)
	root.SetErr(std.err)
	err := root.ExecuteContext(ctx)
	if cerr := c.close(); cerr != nil && err == nil {
		err = cerr
	}
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(std.err, "authctl: %v\n", err)
	code := exitCode(err)
	if code == exitUsage && !errors.Is(err, admin.ErrInvalid) {
		fmt.Fprintln(std.err, "Run 'authctl --help' (or the command with --help) for usage.")
	}
	return code
}

// exitCode classifies an error for scripts.
func exitCode(err error) int {
	var ue usageError
	var pe partialError
	switch {
	case errors.As(err, &ue), errors.Is(err, admin.ErrInvalid), isCobraUsage(err):
		return exitUsage
	case errors.As(err, &pe):
		return exitPartial
	case errors.Is(err, oauth.ErrNotFound):
		return exitNotFound
	case errors.Is(err, oauth.ErrAlreadyExists):
		return exitConflict
	default:
		return exitFailure
	}
}

// isCobraUsage recognises the argument errors cobra itself returns (it has no error types).
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "accepts ", "requires at least", "invalid argument", "required flag", "if any flags in the group", "flag needs an argument"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// cli holds the global flags and, once a command asks for it, the opened store.
type cli struct {
	std       streams
	lookupEnv func(string) (string, bool)

	output     string
	storeKind  string
	dataDir    string
	table      string
	region     string
	endpoint   string
	keyBackend string
	verbose    bool
	actor      string

	cfg      config.Config
	st       oauth.Store
	app      *app.App
	closeFns []func() error
}

func (c *cli) env(key, def string) string {
	if v, ok := c.lookupEnv(key); ok && v != "" {
		return v
	}
	return def
}

func (c *cli) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "authctl",
		Short: "Operate the authorization server: clients, users, grants, signing keys",
		Long: `authctl is the operator's tool of the authorization server. It registers clients,
manages users, lists and revokes grants, shows and rotates the signing keys, and creates the
DynamoDB Local table.

It works directly on the service's store: the embedded store (a file under --data; stop the
local server first, the file admits one process at a time) or the DynamoDB table (--store
dynamodb --table NAME, with --endpoint for DynamoDB Local). Defaults come from the same AUTH_*
environment variables as the service, so in a shell set up for the service it needs no flags.

Exit codes: 0 success, 1 failure, 2 usage or invalid input, 3 not found, 4 conflict (id or
username taken), 5 partial (an import or bulk revocation had failed items).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			switch c.output {
			case "text", "json":
				return nil
			}
			return usagef("--output %q: want json or text", c.output)
		},
		RunE: groupRun,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	d := config.Defaults()
	f := root.PersistentFlags()
	f.StringVarP(&c.output, "output", "o", "text", "output format: text or json (for scripts)")
	f.StringVar(&c.storeKind, "store", c.env(config.EnvStore, d.Store), "store: embedded or dynamodb (env "+config.EnvStore+")")
	f.StringVar(&c.dataDir, "data", c.env(config.EnvDataDir, d.DataDir), "data directory of the embedded store and local keys (env "+config.EnvDataDir+")")
	f.StringVar(&c.table, "table", c.env(config.EnvTable, ""), "DynamoDB table (env "+config.EnvTable+")")
	f.StringVar(&c.region, "region", c.env("AWS_REGION", ""), "AWS region of the DynamoDB table (env AWS_REGION)")
	f.StringVar(&c.endpoint, "endpoint", c.env(config.EnvDynamoEndpoint, ""), "DynamoDB endpoint, e.g. http://127.0.0.1:8000 for DynamoDB Local (env "+config.EnvDynamoEndpoint+")")
	f.StringVar(&c.keyBackend, "key-backend", c.env(config.EnvKeyBackend, d.KeyBackend), "signing-key backend for keys rotate: local or kms (env "+config.EnvKeyBackend+")")
	f.BoolVarP(&c.verbose, "verbose", "v", false, "log the service's messages (key rotation) on stderr")
	f.StringVar(&c.actor, "actor", "", "who runs the command, in the audit record of every change (default: the OS user)")
	root.AddCommand(c.clientsCommand(), c.usersCommand(), c.grantsCommand(), c.keysCommand(), c.tableCommand(), c.storeCommand(),
		c.registrationCommand())
	return root
}

// groupRun is the action of a command that only groups subcommands: help without arguments,
// a usage error for an unknown subcommand (cobra would print help and succeed).
func groupRun(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return cmd.Help()
}

// exactArgs is cobra.ExactArgs with a usage error that names the arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return usagef("%s takes %d argument(s): %s (got %d)", cmd.CommandPath(), len(names), strings.Join(names, " "), len(args))
		}
		return nil
	}
}

// config is the service configuration with the flags layered over the environment.
func (c *cli) config() (config.Config, error) {
	over := map[string]string{
		config.EnvStore:          c.storeKind,
		config.EnvDataDir:        c.dataDir,
		config.EnvTable:          c.table,
		config.EnvDynamoEndpoint: c.endpoint,
		config.EnvKeyBackend:     c.keyBackend,
	}
	cfg, err := config.FromLookup(func(k string) (string, bool) {
		if v, ok := over[k]; ok {
			return v, true
		}
		return c.lookupEnv(k)
	})
	if err != nil {
		return config.Config{}, usageError{err}
	}
	if c.region != "" && cfg.Store == "dynamodb" {
		// The SDK takes its region from the environment (dynamo.NewClient); the flag sets it
		// for this process only.
		os.Setenv("AWS_REGION", c.region)
	}
	return cfg, nil
}

// auditLog is where the audit records of the operator's changes go, always: the file of
// AUTH_AUDIT_LOG, else stderr (stdout is the command's output), as JSON lines marked
// "log":"audit".
func (c *cli) auditLog(cfg config.Config) (*slog.Logger, error) {
	if cfg.AuditLog == "" || cfg.AuditLog == "stdout" {
		return boot.NewAuditLogger(c.std.err), nil
	}
	log, closeFn, err := boot.OpenAudit(cfg.AuditLog)
	if err != nil {
		return nil, err
	}
	if closeFn != nil {
		c.closeFns = append(c.closeFns, closeFn)
	}
	return log, nil
}

// operator is who runs the command: --actor, else the OS user.
func (c *cli) operator() string {
	if c.actor != "" {
		return c.actor
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return c.env("USER", "unknown")
}

// logger is where the service's messages go: stderr with --verbose.
func (c *cli) logger() *slog.Logger {
	if !c.verbose {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(c.std.err, nil))
}

// storeUse says whether a command works on an existing store or may create one.
type storeUse int

const (
	// existingStore: the command refuses to create an embedded store that is not there (a
	// mistyped data directory is an error, not a new empty store).
	existingStore storeUse = iota
	// newStoreAllowed: the command may create the store (registering the first client or user).
	newStoreAllowed
)

// openStore opens the configured store once per command. With existingStore, an embedded store
// file that does not exist is an error (a mistyped --data would otherwise show an empty store
// and leave a new file behind); commands that write create it.
func (c *cli) openStore(ctx context.Context, use storeUse) (oauth.Store, config.Config, error) {
	if c.st != nil {
		return c.st, c.cfg, nil
	}
	cfg, err := c.config()
	if err != nil {
		return nil, cfg, err
	}
	path := filepath.Join(cfg.DataDir, embedded.FileName)
	if _, err := os.Stat(path); cfg.Store != "dynamodb" && use == existingStore && errors.Is(err, os.ErrNotExist) {
		return nil, cfg, fmt.Errorf("no embedded store at %s (check --data or %s): %w", path, config.EnvDataDir, oauth.ErrNotFound)
	}
	st, closeFn, err := boot.OpenStore(ctx, cfg, boot.Logger(cfg), app.OpenEmbedded)
	if errors.Is(err, embedded.ErrLocked) {
		return nil, cfg, fmt.Errorf("the embedded store %s is in use by another process (the local server?): stop it first, the store admits one process at a time", path)
	}
	if err != nil {
		return nil, cfg, err
	}
	c.st = st
	if closeFn != nil {
		c.closeFns = append(c.closeFns, closeFn)
	}
	c.cfg = cfg
	return c.st, cfg, nil
}

// admin returns the admin service over the opened store, with the service's password cost.
func (c *cli) admin(ctx context.Context, use storeUse) (*admin.Service, error) {
	st, cfg, err := c.openStore(ctx, use)
	if err != nil {
		return nil, err
	}
	hasher := authn.PasswordHasher{Time: cfg.Argon2Time, MemoryKiB: cfg.Argon2MemoryKiB, Threads: 1}
	audit, err := c.auditLog(cfg)
	if err != nil {
		return nil, err
	}
	adm := admin.New(st, hasher, oauth.SystemClock{}, audit)
	adm.Actor = c.operator()
	adm.IDTokenAlgs = cfg.IDTokenAlgs
	adm.JWKS = boot.JWKSFetcher(cfg)
	return adm, nil
}

// openApp wires the whole service (store and key backend) as the server does: what key
// rotation needs.
func (c *cli) openApp(ctx context.Context) (*app.App, error) {
	if c.app != nil {
		return c.app, nil
	}
	cfg, err := c.config()
	if err != nil {
		return nil, err
	}
	a, err := app.New(ctx, cfg, c.logger())
	if errors.Is(err, embedded.ErrLocked) {
		return nil, fmt.Errorf("the embedded store under %s is in use by another process (the local server?): stop it first", cfg.DataDir)
	}
	if err != nil {
		return nil, err
	}
	c.app, c.cfg = a, cfg
	c.closeFns = append(c.closeFns, a.Close)
	return a, nil
}

func (c *cli) close() error {
	var errs []error
	for _, f := range c.closeFns {
		errs = append(errs, f())
	}
	c.closeFns = nil
	return errors.Join(errs...)
}

// emit writes v as indented JSON with --output json, or calls text otherwise.
func (c *cli) emit(v any, text func(w io.Writer)) error {
	if c.output == "json" {
		enc := json.NewEncoder(c.std.out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	text(c.std.out)
	return nil
}

// note writes a line for the operator on stderr (never part of the output scripts parse).
func (c *cli) note(format string, args ...any) {
	fmt.Fprintf(c.std.err, format+"\n", args...)
}

// isTerminal reports whether a stream is an interactive terminal.
func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// splitList flattens repeated and comma- or space-separated flag values:
// --scope openid,email --scope "phone profile".
func splitList(in []string) []string {
	var out []string
	for _, s := range in {
		out = append(out, strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })...)
	}
	return out
}
