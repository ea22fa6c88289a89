// Command abuse replays, against a local authserver on the loopback, the two floods the abuse
// defences are measured with, and prints the server's memory from /proc/PID/status:
//
//	go run ./test/abuse -pid PID -base http://127.0.0.1:8080 logins -n 150
//	go run ./test/abuse -pid PID -base http://127.0.0.1:8080 flood -d 60s -c 16
//
// logins opens n authorization requests, then posts n wrong-password logins for the seed's
// user at once (each a password check: argon2id's memory each); flood sends GET /authorize from
// one address for the duration. The storage floods try to make the server keep as much as an
// unauthenticated caller can, each for the duration and at most -max requests:
//
//	big      GET /authorize with about 900 KB of ui_locales, acr_values and prompt, from one address
//	rotate   the same from rotating source addresses in 127.0.0.0/8
//	par      PAR with 60 KB of those fields (the seed's client), from rotating source addresses
//	max      GET /authorize with state, nonce, ui_locales and acr_values at their limits (the
//	         largest requests accepted), from rotating source addresses
//
// With -data DIR they print the data file's size, and with -pid the server's peak memory.
// test/abuse/run.sh builds and starts the server and runs any of them. It refuses any base URL
// that is not on the loopback: it is a load generator.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	clientSecret = "acceptance-secret-0123456789abcdef"
	clientID     = "acceptance-client"
	redirectURI  = "http://127.0.0.1:4499/callback"
	username     = "alice"
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
	dataDir := fs.String("data", "", "the server's data directory, whose auth.db size is printed")
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
	maxN := sub.Int64("max", 1_000_000, "storage floods: at most this many requests")
	if err := sub.Parse(rest[1:]); err != nil {
		return err
	}
	if *d > 5*time.Minute {
		return fmt.Errorf("-d %v: at most 5m", *d)
	}
	root := strings.TrimRight(*base, "/")
	authorize := root + "/v2/authentication/oauth2/authorize"
	memory(*pid, "before")
	fileSize(*dataDir, "before")
	switch rest[0] {
	case "logins":
		err = logins(authorize, *n)
	case "flood":
		err = flood(authorize, *d, *c)
	case "big", "rotate", "par", "max":
		err = storageFlood(rest[0], root, *d, *c, *maxN, func() {
			memory(*pid, "during")
			fileSize(*dataDir, "during")
		})
	default:
		err = fmt.Errorf("unknown command %q", rest[0])
	}
	memory(*pid, "after")
	fileSize(*dataDir, "after")
	return err
}

// fileSize prints the size of the data file under dir.
func fileSize(dir, when string) {
	if dir == "" {
		return
	}
	st, err := os.Stat(filepath.Join(dir, "auth.db"))
	if err != nil {
		fmt.Printf("data file %s: %v\n", when, err)
		return
	}
	fmt.Printf("data file %s: %.2f MB\n", when, float64(st.Size())/1e6)
}

// bigFields are n bytes of the free-text parameters a pending request keeps, a third each.
func bigFields(n int) url.Values {
	third := n / 3
	return url.Values{
		"ui_locales": {strings.Repeat("fr ", third/3)},
		"acr_values": {strings.Repeat("a ", third/2)},
		"prompt":     {strings.Repeat("login ", third/6)},
	}
}

// rotatingDialer dials from a new source address in 127.0.0.0/8 at every connection (Linux
// routes the whole block to the loopback), so each request is a new client to a per-address
// limit.
func rotatingDialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	var next atomic.Uint32
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		i := next.Add(1)
		src := net.IPv4(127, byte(1+(i>>16)%254), byte(i>>8), byte(i))
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src}, Timeout: 5 * time.Second}
		return d.DialContext(ctx, network, addr)
	}
}

// storageFlood runs one of the storage floods (see the package comment) with c workers for d,
// at most maxN requests, calling every 10 s.
func storageFlood(kind, root string, d time.Duration, c int, maxN int64, every func()) error {
	tr := &http.Transport{MaxIdleConnsPerHost: c}
	if kind != "big" {
		tr = &http.Transport{DisableKeepAlives: true, DialContext: rotatingDialer()}
	}
	cl := &http.Client{Transport: tr, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func() (*http.Response, error) {
		if kind == "par" {
			form := bigFields(60 << 10)
			for k, v := range (url.Values{"response_type": {"code"}, "redirect_uri": {redirectURI}, "scope": {"openid"}, "state": {"st"}}) {
				form[k] = v
			}
			req, _ := http.NewRequest(http.MethodPost, root+"/v2/authentication/oauth2/par", strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.SetBasicAuth(clientID, clientSecret)
			return cl.Do(req)
		}
		q := bigFields(900 << 10)
		if kind == "max" {
			q = url.Values{"state": {strings.Repeat("s", 2048)}, "nonce": {strings.Repeat("n", 2048)},
				"ui_locales": {strings.Repeat("u", 256)}, "acr_values": {strings.Repeat("a", 512)}}
		}
		for k, v := range (url.Values{"client_id": {clientID}, "redirect_uri": {redirectURI}, "response_type": {"code"}, "scope": {"openid"}}) {
			q[k] = v
		}
		if q.Get("state") == "" {
			q.Set("state", "st")
		}
		return cl.Get(root + "/v2/authentication/oauth2/authorize?" + q.Encode())
	}
	var mu sync.Mutex
	statuses := map[int]int{}
	var sent atomic.Int64
	start := time.Now()
	end := start.Add(d)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				every()
			}
		}
	}()
	var wg sync.WaitGroup
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := map[int]int{}
			for time.Now().Before(end) && sent.Add(1) <= maxN {
				status := -1
				if resp, err := send(); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					status = resp.StatusCode
				}
				local[status]++
			}
			mu.Lock()
			for k, v := range local {
				statuses[k] += v
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(done)
	fmt.Printf("%s: %d requests in %v, statuses %v\n", kind, min(sent.Load(), maxN), time.Since(start).Round(time.Millisecond), statuses)
	return nil
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
