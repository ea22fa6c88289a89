// Command loadtest drives complete OAuth flows against a running service and reports what it
// sustains: N simulated users (-c), each a browser that runs flows back to back for a duration
// (-d). A flow is the authorization request, the login form, the consent form, the code
// exchange, a refresh and the revocation of the new refresh token. It prints a progress line
// each second on stderr, a table of flows per second, errors by kind and per-endpoint latency
// at the end, and writes the same figures as JSON with -json.
//
//	go run ./loadtest -base http://127.0.0.1:8080 -c 8 -d 15s \
//	    -client-id acceptance-client -client-secret ... -username alice -password ... -json out.json
//
// Each user is a browser of its own: a net/http client with its own cookie jar and keep-alive
// connections (HTTPS when the base URL says so), which reads every page and response whole and
// follows no redirect by itself. It is a black-box driver: it imports nothing of the service.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"syscall"
	"text/tabwriter"
	"time"
)

// gcPercent is the load generator's garbage collector target unless GOGC says otherwise. Its
// live heap is a few MiB (buffers per user, the latency samples), so the default target of
// 100 % would collect every few hundred flows; a larger one leaves more of the cores to the
// server under test for a few more MiB of memory.
const gcPercent = 800

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	env := func(k, def string) string {
		if v := os.Getenv(k); v != "" {
			return v
		}
		return def
	}
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	fs.StringVar(&cfg.Base, "base", "http://127.0.0.1:8080", "base URL of the service (the fixed /v2/authentication/... paths are appended)")
	fs.StringVar(&cfg.ClientID, "client-id", env("CLIENT_ID", "acceptance-client"), "client id (env CLIENT_ID)")
	fs.StringVar(&cfg.ClientSecret, "client-secret", env("CLIENT_SECRET", ""), "client secret (env CLIENT_SECRET)")
	fs.StringVar(&cfg.RedirectURI, "redirect-uri", env("REDIRECT_URI", "http://127.0.0.1:4499/callback"), "registered redirect URI (env REDIRECT_URI)")
	fs.StringVar(&cfg.Username, "username", env("USERNAME", "alice"), "user name (env USERNAME)")
	fs.StringVar(&cfg.Password, "password", env("PASSWORD", ""), "password (env PASSWORD)")
	fs.StringVar(&cfg.Scope, "scope", "email phone profile", "scope of the authorization request; with openid every exchange and refresh signs an id_token")
	fs.StringVar(&cfg.AuthMethod, "auth", "basic", "client authentication at token and revoke: basic or post")
	fs.BoolVar(&cfg.NoPKCE, "no-pkce", false, "send no PKCE code_challenge")
	fs.BoolVar(&cfg.KeepSession, "keep-session", false, "keep each user's cookies across flows (after the first, flows skip the login page)")
	fs.IntVar(&cfg.Concurrency, "c", 8, "concurrent simulated users")
	fs.DurationVar(&cfg.Duration, "d", 10*time.Second, "measured duration")
	fs.DurationVar(&cfg.Warmup, "warmup", 2*time.Second, "warm-up before the measured duration (not measured; errors still count)")
	fs.DurationVar(&cfg.Timeout, "timeout", 10*time.Second, "timeout of each request")
	fs.IntVar(&cfg.ServerPID, "server-pid", 0, "the server's process id (same machine): report its CPU time per flow")
	fs.StringVar(&cfg.Label, "label", "", "label of the run in the JSON (e.g. \"embedded\" or \"dynamodb\")")
	jsonOut := fs.String("json", "", "write the results as JSON to this file")
	quiet := fs.Bool("q", false, "no progress line")
	cpuProfile := fs.String("cpuprofile", "", "write the load generator's own CPU profile to this file (go tool pprof), to see what a flow costs the client")
	memProfile := fs.String("memprofile", "", "write the load generator's allocation profile to this file at the end (go tool pprof -sample_index=alloc_space)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if !*quiet {
		cfg.Progress = stderr
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	fmt.Fprintf(stderr, "loadtest: %s  c=%d  d=%s  warm-up=%s  scope=%q\n", cfg.Base, cfg.Concurrency, cfg.Duration, cfg.Warmup, cfg.Scope)
	res, err := Run(ctx, cfg)
	if err != nil {
		return err
	}
	printTable(stdout, res)
	if *memProfile != "" {
		if err := writeHeapProfile(*memProfile); err != nil {
			return err
		}
	}
	if *jsonOut != "" {
		data, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return fmt.Errorf("encode results: %w", err)
		}
		if err := os.WriteFile(*jsonOut, append(data, '\n'), 0o644); err != nil {
			return fmt.Errorf("write results: %w", err)
		}
	}
	if res.Errors > 0 {
		return fmt.Errorf("%d flows failed", res.Errors)
	}
	return nil
}

// printTable writes the figures of a run as an aligned table.
func printTable(out io.Writer, r *Result) {
	fmt.Fprintf(out, "%s  c=%d  %.1fs measured  scope=%q\n", r.Base, r.Concurrency, r.ElapsedSec, r.Scope)
	fmt.Fprintf(out, "flows: %d  (%.1f/s)  errors: %d\n", r.Flows, r.FlowsPerSec, r.Errors)
	if r.CPU.ServerSec > 0 {
		fmt.Fprintf(out, "server CPU: %.2f ms/flow (%.2f cores)  ", r.CPU.ServerMsPerFlow, r.CPU.ServerSec/r.ElapsedSec)
	}
	fmt.Fprintf(out, "load generator CPU: %.2f ms/flow  CPU steal: %.0f%%  load avg: %s\n\n", r.CPU.LoadgenMsPerFlow, r.StealPct, r.LoadAvg[0])
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "endpoint\tcount\treq/s\tmean ms\tp50 ms\tp95 ms\tp99 ms\tmax ms\t")
	for _, name := range order {
		l := r.Endpoints[name]
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", name, l.Count, l.PerSec, l.Mean, l.P50, l.P95, l.P99, l.Max)
	}
	tw.Flush()
	if len(r.ErrorsByKind) > 0 {
		fmt.Fprintln(out, "\nerrors by kind:")
		for _, k := range slices.Sorted(maps.Keys(r.ErrorsByKind)) {
			fmt.Fprintf(out, "  %6d  %s\n", r.ErrorsByKind[k], k)
		}
	}
}

// writeHeapProfile writes the allocations made since the start (alloc_space, alloc_objects).
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("memory profile: %w", err)
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		return fmt.Errorf("memory profile: %w", err)
	}
	return nil
}
