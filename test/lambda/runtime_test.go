package lambda_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// runtimeAPI is the Lambda Runtime API (2018-06-01) as the Lambda service speaks it to a
// custom runtime's bootstrap: the binary long-polls GET .../invocation/next, answers each
// invocation with POST .../invocation/{id}/response or .../error, and reports a failed start
// with POST .../init/error. One runtimeAPI serves one function process, as one Lambda
// execution environment does.
type runtimeAPI struct {
	srv      *httptest.Server
	arn      string
	queue    chan *invocation
	mu       sync.Mutex
	pending  map[string]*invocation
	seq      atomic.Int64
	nextOnce sync.Once
	// firstNext is closed when the process first asks for an invocation: it has finished its
	// init phase (the Lambda init duration).
	firstNext   chan struct{}
	firstNextAt time.Time
	initErr     chan string
}

// invocation is one event handed to the function and what it answered.
type invocation struct {
	id      string
	payload []byte
	done    chan outcome
}

// outcome is the function's answer: a response body, or an error (type and JSON body).
type outcome struct {
	body    []byte
	errType string
}

func newRuntimeAPI(functionName string) *runtimeAPI {
	rt := &runtimeAPI{
		arn:       "arn:aws:lambda:eu-west-1:123456789012:function:" + functionName,
		queue:     make(chan *invocation),
		pending:   map[string]*invocation{},
		firstNext: make(chan struct{}),
		initErr:   make(chan string, 1),
	}
	m := http.NewServeMux()
	m.HandleFunc("GET /2018-06-01/runtime/invocation/next", rt.next)
	m.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/response", func(w http.ResponseWriter, r *http.Request) {
		rt.finish(w, r, "")
	})
	m.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/error", func(w http.ResponseWriter, r *http.Request) {
		t := r.Header.Get("Lambda-Runtime-Function-Error-Type")
		if t == "" {
			t = "Unknown"
		}
		rt.finish(w, r, t)
	})
	m.HandleFunc("POST /2018-06-01/runtime/init/error", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		select {
		case rt.initErr <- r.Header.Get("Lambda-Runtime-Function-Error-Type") + ": " + string(b):
		default:
		}
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"status":"OK"}`)
	})
	rt.srv = httptest.NewServer(m)
	return rt
}

// address is what AWS_LAMBDA_RUNTIME_API holds: host:port, no scheme.
func (rt *runtimeAPI) address() string { return strings.TrimPrefix(rt.srv.URL, "http://") }

func (rt *runtimeAPI) close() { rt.srv.Close() }

func (rt *runtimeAPI) next(w http.ResponseWriter, r *http.Request) {
	rt.nextOnce.Do(func() {
		rt.firstNextAt = time.Now()
		close(rt.firstNext)
	})
	select {
	case inv := <-rt.queue:
		h := w.Header()
		h.Set("Lambda-Runtime-Aws-Request-Id", inv.id)
		h.Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(30*time.Second).UnixMilli(), 10))
		h.Set("Lambda-Runtime-Invoked-Function-Arn", rt.arn)
		h.Set("Lambda-Runtime-Trace-Id", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(inv.payload)
	case <-r.Context().Done():
	}
}

func (rt *runtimeAPI) finish(w http.ResponseWriter, r *http.Request, errType string) {
	id := r.PathValue("id")
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rt.mu.Lock()
	inv, ok := rt.pending[id]
	delete(rt.pending, id)
	rt.mu.Unlock()
	if !ok {
		// Lambda answers an unknown or already answered request id with 400.
		http.Error(w, `{"errorType":"InvalidRequestID"}`, http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusAccepted)
	_, _ = io.WriteString(w, `{"status":"OK"}`)
	inv.done <- outcome{body: body, errType: errType}
}

// function is one bootstrap process under a runtimeAPI.
type function struct {
	name    string
	rt      *runtimeAPI
	cmd     *exec.Cmd
	out     *syncBuffer
	exited  chan struct{}
	waitErr error
	started time.Time
	// initCPU is the CPU time the process used during init; cpu and invocations add up
	// what each invocation used (read around it, so it includes the runtime loop's next
	// poll, which Lambda bills too).
	initCPU     time.Duration
	mu          sync.Mutex
	cpu         time.Duration
	invocations int
	// durations are the invocations' times from hand-off to answer, as Lambda bills them.
	durations []time.Duration
}

// syncBuffer collects the process's stdout and stderr (its CloudWatch log).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startFunction execs the bootstrap with env (and the variables Lambda itself sets) and waits
// for its first /next: the end of its init phase.
func startFunction(ctx context.Context, name, bin string, env map[string]string) (*function, error) {
	rt := newRuntimeAPI(name)
	f := &function{name: name, rt: rt, out: &syncBuffer{}, exited: make(chan struct{})}
	f.cmd = exec.Command(bin)
	f.cmd.Dir = os.TempDir()
	f.cmd.Stdout, f.cmd.Stderr = f.out, f.out
	lambdaEnv := map[string]string{
		"AWS_LAMBDA_RUNTIME_API":          rt.address(),
		"AWS_LAMBDA_FUNCTION_NAME":        name,
		"AWS_LAMBDA_FUNCTION_VERSION":     "$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256",
		"AWS_LAMBDA_LOG_GROUP_NAME":       "/aws/lambda/authserver-test/" + name,
		"AWS_EXECUTION_ENV":               "AWS_Lambda_provided.al2023",
		"_HANDLER":                        "bootstrap",
		"TZ":                              ":UTC",
	}
	for k, v := range env {
		lambdaEnv[k] = v
	}
	for k, v := range lambdaEnv {
		f.cmd.Env = append(f.cmd.Env, k+"="+v)
	}
	f.started = time.Now()
	if err := f.cmd.Start(); err != nil {
		rt.close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		f.waitErr = f.cmd.Wait()
		close(f.exited)
	}()
	select {
	case <-rt.firstNext:
		f.initCPU, _ = f.cpuTime()
		return f, nil
	case <-f.exited:
		f.stop()
		return nil, fmt.Errorf("%s exited during init (%v): %s", name, f.waitErr, f.out.String())
	case msg := <-rt.initErr:
		f.stop()
		return nil, fmt.Errorf("%s reported an init error: %s\n%s", name, msg, f.out.String())
	case <-ctx.Done():
		f.stop()
		return nil, fmt.Errorf("%s did not finish init: %w\n%s", name, ctx.Err(), f.out.String())
	}
}

// initDuration is exec to first /next.
func (f *function) initDuration() time.Duration { return f.rt.firstNextAt.Sub(f.started) }

// invoke hands payload to the function and returns its answer.
func (f *function) invoke(ctx context.Context, payload []byte) (outcome, error) {
	inv := &invocation{id: fmt.Sprintf("req-%d", f.rt.seq.Add(1)), payload: payload, done: make(chan outcome, 1)}
	before, cpuErr := f.cpuTime()
	start := time.Now()
	f.rt.mu.Lock()
	f.rt.pending[inv.id] = inv
	f.rt.mu.Unlock()
	select {
	case f.rt.queue <- inv:
	case <-f.exited:
		return outcome{}, fmt.Errorf("%s has exited (%v): %s", f.name, f.waitErr, f.out.String())
	case <-ctx.Done():
		return outcome{}, ctx.Err()
	}
	select {
	case o := <-inv.done:
		took := time.Since(start)
		if after, err := f.cpuTime(); err == nil && cpuErr == nil {
			f.mu.Lock()
			f.cpu += after - before
			f.invocations++
			f.durations = append(f.durations, took)
			f.mu.Unlock()
		}
		return o, nil
	case <-f.exited:
		return outcome{}, fmt.Errorf("%s exited during an invocation (%v): %s", f.name, f.waitErr, f.out.String())
	case <-ctx.Done():
		return outcome{}, fmt.Errorf("%s did not answer: %w", f.name, ctx.Err())
	}
}

// cpuTime is the CPU time the process's threads have used so far: the sum of the first field
// of /proc/<pid>/task/*/schedstat (nanoseconds on a CPU; the process's own schedstat counts
// only its main thread, and Go runs goroutines on several), or utime+stime of
// /proc/<pid>/stat (clock ticks of 10 ms) where the kernel has no schedstat.
func (f *function) cpuTime() (time.Duration, error) {
	pid := f.cmd.Process.Pid
	if tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid)); err == nil && len(tasks) > 0 {
		var total time.Duration
		for _, task := range tasks {
			b, err := os.ReadFile(task)
			if err != nil {
				continue // the thread ended between the glob and the read
			}
			if fields := strings.Fields(string(b)); len(fields) > 0 {
				ns, err := strconv.ParseInt(fields[0], 10, 64)
				if err != nil {
					return 0, err
				}
				total += time.Duration(ns)
			}
		}
		return total, nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces) end with ')'.
	_, rest, _ := strings.Cut(string(b), ") ")
	fields := strings.Fields(rest)
	if len(fields) < 13 {
		return 0, errors.New("short /proc stat")
	}
	ut, err1 := strconv.ParseInt(fields[11], 10, 64)
	st, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("bad /proc stat")
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// cpuPerInvocation is the mean CPU time of the invocations so far, and their number.
func (f *function) cpuPerInvocation() (time.Duration, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.invocations == 0 {
		return 0, 0
	}
	return f.cpu / time.Duration(f.invocations), f.invocations
}

// spent is the CPU time of the invocations so far and their number, so a caller can tell
// what a group of invocations used (the difference of two readings).
func (f *function) spent() (time.Duration, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cpu, f.invocations
}

// peakRSS is the process's high-water resident set (VmHWM), in bytes.
func (f *function) peakRSS() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", f.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("no VmHWM in /proc status")
}

// stop ends the process (SIGKILL, as Lambda ends an environment) and the runtime API.
func (f *function) stop() {
	select {
	case <-f.exited:
	default:
		_ = f.cmd.Process.Signal(syscall.SIGKILL)
		<-f.exited
	}
	f.rt.close()
}
