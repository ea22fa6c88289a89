// Command testcount reads the output of `go test -json` on its standard input, prints what a
// reader needs (each package's result line and the output of every failed test) and counts
// the tests that passed, failed and were skipped, subtests included. scripts/test.sh pipes
// every go test of `make test` through it and adds its counts to the run's closing total.
//
//	go test -json ./... | go run ./scripts/testcount -counts "$COUNTS" -label "go test"
//
// It exits 1 when a test or a package failed (a package that fails to build, or dies without
// reporting a failed test, counts as one failed test), so a pipeline under `set -o pipefail`
// fails even when go test's own status is lost.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string
}

// counts are the totals of one run.
type counts struct {
	Passed, Failed, Skipped int
}

func main() {
	countsFile := flag.String("counts", "", "append \"passed failed skipped\" to this file")
	label := flag.String("label", "go test", "the name of the run in the summary line")
	flag.Parse()
	c, err := count(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testcount:", err)
		os.Exit(2)
	}
	fmt.Printf("%s: %d passed, %d failed, %d skipped\n", *label, c.Passed, c.Failed, c.Skipped)
	if *countsFile != "" {
		f, err := os.OpenFile(*countsFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			_, err = fmt.Fprintf(f, "%d %d %d\n", c.Passed, c.Failed, c.Skipped)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "testcount:", err)
			os.Exit(2)
		}
	}
	if c.Failed > 0 {
		os.Exit(1)
	}
}

// count reads a `go test -json` stream from in, writes the package lines, build errors and
// failed tests' output to out, and returns the totals. Lines that are not JSON (go's own
// messages) are passed through.
func count(in io.Reader, out io.Writer) (counts, error) {
	var c counts
	held := map[string]*strings.Builder{} // output of running tests, by package and test
	failedIn := map[string]bool{}         // packages with a failed test
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(out, "%s\n", line)
			continue
		}
		key := e.Package + "\x00" + e.Test
		switch {
		case e.Action == "build-output":
			fmt.Fprint(out, e.Output)
		case e.Action == "build-fail":
			// Reported again as the package's fail event below.
		case e.Test == "" && e.Action == "output":
			if !strings.HasPrefix(e.Output, "=== ") && e.Output != "PASS\n" {
				fmt.Fprint(out, e.Output)
			}
		case e.Test == "" && e.Action == "fail":
			if !failedIn[e.Package] {
				c.Failed++ // failed to build, or died with no failed test of its own
			}
		case e.Test == "":
		case e.Action == "output":
			b := held[key]
			if b == nil {
				b = &strings.Builder{}
				held[key] = b
			}
			b.WriteString(e.Output)
		case e.Action == "pass":
			c.Passed++
			delete(held, key)
		case e.Action == "skip":
			c.Skipped++
			delete(held, key)
		case e.Action == "fail":
			c.Failed++
			failedIn[e.Package] = true
			if b := held[key]; b != nil {
				fmt.Fprint(out, b.String())
			}
			delete(held, key)
		}
	}
	return c, sc.Err()
}
