package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config is one load run: whom to drive, as which client and user, how hard and how long.
type Config struct {
	// Base is the service's base URL; the service's fixed paths are appended to it.
	Base         string
	ClientID     string
	ClientSecret string
	RedirectURI  string
	Username     string
	Password     string
	Scope        string
	// AuthMethod is how the client authenticates at the token and revocation endpoints:
	// "basic" (client_secret_basic) or "post" (client_secret_post).
	AuthMethod string
	// NoPKCE leaves out code_challenge and code_verifier.
	NoPKCE bool
	// KeepSession keeps each user's cookies across flows, so that after the first login the
	// authorization request goes straight to consent. By default every flow is a new browser
	// and logs in.
	KeepSession bool
	// Concurrency is the number of simulated users, each running flows back to back.
	Concurrency int
	// Duration is the measured time; Warmup runs before it and is not measured (its errors
	// are still counted).
	Duration, Warmup time.Duration
	// Timeout bounds each request.
	Timeout time.Duration
	// Label names the run in the JSON (e.g. "embedded, openid").
	Label string
	// Progress receives a line each second; nil for none.
	Progress io.Writer
	// ServerPID, when set, is the server's process on this machine: its CPU time over the
	// measured window is reported, which on a shared machine says more than the rate.
	ServerPID int
}

func (c *Config) openid() bool { return slices.Contains(strings.Fields(c.Scope), "openid") }

func (c *Config) validate() error {
	var missing []string
	for name, v := range map[string]string{"client id": c.ClientID, "client secret": c.ClientSecret,
		"redirect URI": c.RedirectURI, "username": c.Username, "password": c.Password, "scope": c.Scope} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	if c.Concurrency < 1 {
		return errors.New("concurrency must be at least 1")
	}
	if c.Duration <= 0 {
		return errors.New("duration must be positive")
	}
	if c.AuthMethod != "basic" && c.AuthMethod != "post" {
		return fmt.Errorf("auth method %q: want basic or post", c.AuthMethod)
	}
	return nil
}

// Result is a run's figures, as printed and as written to the JSON file.
type Result struct {
	Label       string  `json:"label,omitempty"`
	Base        string  `json:"base_url"`
	Started     string  `json:"started"`
	Concurrency int     `json:"concurrency"`
	DurationSec float64 `json:"duration_sec"`
	WarmupSec   float64 `json:"warmup_sec"`
	Scope       string  `json:"scope"`
	OpenID      bool    `json:"openid"`
	KeepSession bool    `json:"keep_session"`
	// ElapsedSec is the measured window: from the end of the warm-up until the last flow
	// started in it finished.
	ElapsedSec  float64 `json:"elapsed_sec"`
	Flows       int64   `json:"flows"`
	FlowsPerSec float64 `json:"flows_per_sec"`
	// Errors counts failed flows, warm-up included, by "step: kind".
	Errors       int64            `json:"errors"`
	ErrorsByKind map[string]int64 `json:"errors_by_kind"`
	// Endpoints has one entry per step, plus "token" (both grants) and "flow" (whole flows).
	Endpoints map[string]Latency `json:"endpoints"`
	Machine   Machine            `json:"machine"`
	// CPU is the CPU time the server (with -server-pid) and the load generator used over the
	// measured window, and per completed flow.
	CPU CPU `json:"cpu"`
	// StealPct is the share of the machine's CPU time the hypervisor took (steal in
	// /proc/stat) over the measured window: on a virtual machine the capacity itself varies.
	StealPct float64 `json:"cpu_steal_pct"`
	// LoadAvg is /proc/loadavg at the start and at the end: a figure taken while something
	// else used the cores says so.
	LoadAvg [2]string `json:"load_avg"`
}

// Latency is the figures of one endpoint over the measured window, in milliseconds.
type Latency struct {
	Count  int     `json:"count"`
	PerSec float64 `json:"per_sec"`
	Mean   float64 `json:"mean_ms"`
	P50    float64 `json:"p50_ms"`
	P95    float64 `json:"p95_ms"`
	P99    float64 `json:"p99_ms"`
	Max    float64 `json:"max_ms"`
}

// CPU is CPU time in seconds over the measured window (Linux /proc), and in milliseconds per
// completed flow: the cost of a flow, whatever else the machine was doing.
type CPU struct {
	ServerSec        float64 `json:"server_sec,omitempty"`
	ServerMsPerFlow  float64 `json:"server_ms_per_flow,omitempty"`
	LoadgenSec       float64 `json:"loadgen_sec"`
	LoadgenMsPerFlow float64 `json:"loadgen_ms_per_flow"`
}

// cpuSeconds returns a process's user+system CPU time from /proc/PID/stat (0 for self).
func cpuSeconds(pid int) (float64, bool) {
	path := "/proc/self/stat"
	if pid > 0 {
		path = fmt.Sprintf("/proc/%d/stat", pid)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	// The command name may hold spaces; the fields counted here come after its ')'.
	i := strings.LastIndexByte(string(data), ')')
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return (utime + stime) / 100, true // USER_HZ is 100 on Linux
}

// Machine is where the load generator ran, so a figure is never read without it.
type Machine struct {
	CPUs     int    `json:"cpus"`
	CPUModel string `json:"cpu_model,omitempty"`
	Go       string `json:"go"`
	OS       string `json:"os"`
}

// order is the order of the table's rows.
var order = append(stepNames[:], "token", "flow")

// Run drives cfg.Concurrency users through complete flows for the warm-up and the duration,
// then returns the figures of the measured window. It stops early, with the figures so far,
// when ctx ends.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ep, err := resolve(cfg.Base)
	if err != nil {
		return nil, err
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	loadStart := loadAvg()
	started := time.Now()
	measureFrom := started.Add(cfg.Warmup)
	end := measureFrom.Add(cfg.Duration)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	var (
		flows, errCount atomic.Int64
		mu              sync.Mutex
		errs            = map[string]int64{}
		workers         = make([]*worker, cfg.Concurrency)
		wg              sync.WaitGroup
	)
	for i := range workers {
		w := &worker{user: newUser(&cfg, ep)}
		workers[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.user.close()
			var buf []sample
			for runCtx.Err() == nil {
				t0 := time.Now()
				if !t0.Before(end) {
					return
				}
				measured := !t0.Before(measureFrom)
				var err error
				buf, err = w.user.flow(runCtx, buf[:0])
				if runCtx.Err() != nil && ctx.Err() != nil {
					return // interrupted: the last flow is not counted either way
				}
				if err != nil {
					errCount.Add(1)
					var fe *flowError
					kind := "other: " + err.Error()
					if errors.As(err, &fe) {
						kind = fe.Error()
					}
					mu.Lock()
					errs[kind]++
					mu.Unlock()
				}
				if !measured {
					continue
				}
				done := time.Now()
				for _, s := range buf {
					w.lat[s.step] = append(w.lat[s.step], s.d)
				}
				if err == nil {
					flows.Add(1)
					w.flow = append(w.flow, done.Sub(t0))
				}
				if done.After(w.last) {
					w.last = done
				}
			}
		}()
	}

	// CPU counters are read when the measured window opens and once every worker is done.
	var cpu0Server, cpu0Self float64
	var cpuOK bool
	var steal0, total0 uint64
	cpuTimer := time.AfterFunc(time.Until(measureFrom), func() {
		steal0, total0 = stealTicks()
		cpu0Self, _ = cpuSeconds(0)
		if cfg.ServerPID > 0 {
			cpu0Server, cpuOK = cpuSeconds(cfg.ServerPID)
		}
	})

	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		if cfg.Progress == nil {
			return
		}
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		var prev int64
		for {
			select {
			case <-stopProgress:
				return
			case now := <-tick.C:
				f := flows.Load()
				phase := "run"
				if now.Before(measureFrom) {
					phase = "warm-up"
				}
				fmt.Fprintf(cfg.Progress, "%5.1fs %-7s flows %7d  %7.1f/s  errors %d\n",
					now.Sub(started).Seconds(), phase, f, float64(f-prev), errCount.Load())
				prev = f
			}
		}
	}()
	wg.Wait()
	close(stopProgress)
	<-progressDone
	cpuTimer.Stop()
	steal1, total1 := stealTicks()
	cpu1Self, _ := cpuSeconds(0)
	cpu1Server, cpu1OK := 0.0, false
	if cfg.ServerPID > 0 {
		cpu1Server, cpu1OK = cpuSeconds(cfg.ServerPID)
	}

	last := measureFrom
	var lat [numSteps][]time.Duration
	var flowLat, tokenLat []time.Duration
	for _, w := range workers {
		if w.last.After(last) {
			last = w.last
		}
		for s := range numSteps {
			lat[s] = append(lat[s], w.lat[s]...)
		}
		flowLat = append(flowLat, w.flow...)
	}
	tokenLat = append(append(tokenLat, lat[stepCode]...), lat[stepRefresh]...)
	elapsed := last.Sub(measureFrom).Seconds()
	res := &Result{
		Label: cfg.Label, Base: cfg.Base, Started: started.UTC().Format(time.RFC3339),
		Concurrency: cfg.Concurrency, DurationSec: cfg.Duration.Seconds(), WarmupSec: cfg.Warmup.Seconds(),
		Scope: cfg.Scope, OpenID: cfg.openid(), KeepSession: cfg.KeepSession,
		ElapsedSec: elapsed, Flows: flows.Load(), Errors: errCount.Load(), ErrorsByKind: errs,
		Endpoints: map[string]Latency{}, Machine: machine(), LoadAvg: [2]string{loadStart, loadAvg()},
	}
	if elapsed > 0 {
		res.FlowsPerSec = float64(res.Flows) / elapsed
	}
	if total1 > total0 && total0 > 0 {
		res.StealPct = 100 * float64(steal1-steal0) / float64(total1-total0)
	}
	res.CPU.LoadgenSec = cpu1Self - cpu0Self
	if cpuOK && cpu1OK {
		res.CPU.ServerSec = cpu1Server - cpu0Server
	}
	if res.Flows > 0 {
		res.CPU.LoadgenMsPerFlow = 1000 * res.CPU.LoadgenSec / float64(res.Flows)
		res.CPU.ServerMsPerFlow = 1000 * res.CPU.ServerSec / float64(res.Flows)
	}
	for s := range numSteps {
		res.Endpoints[stepNames[s]] = summarize(lat[s], elapsed)
	}
	res.Endpoints["token"] = summarize(tokenLat, elapsed)
	res.Endpoints["flow"] = summarize(flowLat, elapsed)
	return res, nil
}

// worker is one user's own samples, merged when the run ends (no lock on the hot path).
type worker struct {
	user *user
	lat  [numSteps][]time.Duration
	flow []time.Duration
	last time.Time
}

// summarize sorts d and returns its count, rate over secs, mean and percentiles.
func summarize(d []time.Duration, secs float64) Latency {
	if len(d) == 0 {
		return Latency{}
	}
	slices.Sort(d)
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	l := Latency{Count: len(d), Mean: ms(sum / time.Duration(len(d))),
		P50: ms(percentile(d, 50)), P95: ms(percentile(d, 95)), P99: ms(percentile(d, 99)), Max: ms(d[len(d)-1])}
	if secs > 0 {
		l.PerSec = float64(len(d)) / secs
	}
	return l
}

// percentile is the nearest-rank percentile of sorted samples: the smallest sample with at
// least p% of the samples at or below it.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p% of n), in integers
	rank = max(1, min(len(sorted), rank))
	return sorted[rank-1]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

func loadAvg() string {
	data, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(data))
}

// stealTicks returns the steal and total ticks of all CPUs from /proc/stat (zeros elsewhere).
func stealTicks() (steal, total uint64) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0
	}
	for i, x := range f[1:] {
		n, err := strconv.ParseUint(x, 10, 64)
		if err != nil {
			return 0, 0
		}
		if i < 8 { // user nice system idle iowait irq softirq steal; guest time is inside user
			total += n
		}
		if i == 7 {
			steal = n
		}
	}
	return steal, total
}
