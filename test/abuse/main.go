// Command abuse replays, against a local authserver on the loopback, the two floods the abuse
// defences are measured with, and prints the server's memory from /proc/PID/status:
//
//	go run ./test/abuse -pid PID -base http://127.0.0.1:8080 logins -n 150
//	go run ./test/abuse -pid PID -base http://127.0.0.1:8080 flood -d 60s -c 16
//
// logins opens n authorization requests, then posts n wrong-password logins for the seed's
// user at once (each a password check: argon2id's memory each); flood sends GET /authorize from
// one address for the duration. test/abuse/run.sh builds and starts the server and runs both.
// It refuses any base URL that is not on the loopback: it is a load generator.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	clientID    = "acceptance-client"
	redirectURI = "http://127.0.0.1:4499/callback"
	username    = "alice"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "abuse:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("abuse", flag.ContinueOnError)
	pid := fs.Int("pid", 0, "server process id, whose /proc/PID/status memory is printed")
	base := fs.String("base", "http://127.0.0.1:8080", "server base URL (loopback only)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	u, err := url.Parse(*base)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("-base %s is not a loopback address", *base)
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return fmt.Errorf("want a command: logins or flood")
	}
	sub := flag.NewFlagSet(rest[0], flag.ContinueOnError)
	n := sub.Int("n", 150, "logins: concurrent login posts")
	d := sub.Duration("d", time.Minute, "flood: duration")
	c := sub.Int("c", 16, "flood: concurrent connections")
	if err := sub.Parse(rest[1:]); err != nil {
		return err
	}
	authorize := strings.TrimRight(*base, "/") + "/v2/authentication/oauth2/authorize"
	memory(*pid, "before")
	switch rest[0] {
	case "logins":
		err = logins(authorize, *n)
	case "flood":
		err = flood(authorize, *d, *c)
	default:
		err = fmt.Errorf("unknown command %q", rest[0])
	}
	memory(*pid, "after")
	return err
}

var hidden = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`)

func authorizeURL(authorize string) string {
	q := url.Values{"client_id": {clientID}, "redirect_uri": {redirectURI}, "response_type": {"code"},
		"scope": {"openid email"}, "state": {"st"}}
	return authorize + "?" + q.Encode()
}

// logins opens n login pages, then posts all their forms at once and counts the answers.
func logins(authorize string, n int) error {
	type page struct {
		client *http.Client
		form   url.Values
	}
	pages := make([]page, n)
	for i := range pages {
		jar, _ := cookiejar.New(nil)
		cl := &http.Client{Jar: jar, Timeout: 2 * time.Minute, Transport: &http.Transport{}}
		resp, err := cl.Get(authorizeURL(authorize))
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		form := url.Values{}
		for _, m := range hidden.FindAllStringSubmatch(string(body), -1) {
			form.Set(m[1], m[2])
		}
		if form.Get("request_id") == "" {
			return fmt.Errorf("no login form (status %d)", resp.StatusCode)
		}
		form.Set("username", username)
		form.Set("password", fmt.Sprintf("wrong-%d", i))
		pages[i] = page{cl, form}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	start := time.Now()
	gate := make(chan struct{})
	for _, p := range pages {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			status := -1
			if resp, err := p.client.PostForm(authorize, p.form); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				status = resp.StatusCode
			}
			mu.Lock()
			statuses[status]++
			mu.Unlock()
		}()
	}
	close(gate)
	wg.Wait()
	fmt.Printf("logins: %d posts in %v, statuses %v\n", n, time.Since(start).Round(time.Millisecond), statuses)
	return nil
}

// flood sends GET /authorize with c connections for d.
func flood(authorize string, d time.Duration, c int) error {
	target := authorizeURL(authorize)
	tr := &http.Transport{MaxIdleConnsPerHost: c}
	cl := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var mu sync.Mutex
	statuses := map[int]int{}
	var sent atomic.Int64
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := map[int]int{}
			for time.Now().Before(end) {
				status := -1
				if resp, err := cl.Get(target); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					status = resp.StatusCode
				}
				local[status]++
				sent.Add(1)
			}
			mu.Lock()
			for k, v := range local {
				statuses[k] += v
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	fmt.Printf("flood: %d requests in %v, statuses %v\n", sent.Load(), d, statuses)
	return nil
}

// memory prints the server's resident memory now (VmRSS) and its peak (VmHWM).
func memory(pid int, when string) {
	if pid == 0 {
		return
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		fmt.Printf("memory %s: %v\n", when, err)
		return
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") || strings.HasPrefix(line, "VmHWM:") {
			out = append(out, strings.Join(strings.Fields(line), " "))
		}
	}
	fmt.Printf("memory %s: %s\n", when, strings.Join(out, ", "))
}
