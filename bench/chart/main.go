// Command chart draws the token endpoint's figures from the load command's JSON results:
// throughput (token requests per second, both grants) and p99 latency against the number of
// concurrent users, one line per series (the runs' labels, e.g. "embedded, openid").
//
//	(cd bench && go run ./chart -o ../docs/bench/token.png ../docs/bench/load-*.json)
package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "chart:", err)
		os.Exit(1)
	}
}

// result is the part of a load run's JSON the chart reads.
type result struct {
	Label       string  `json:"label"`
	Concurrency int     `json:"concurrency"`
	FlowsPerSec float64 `json:"flows_per_sec"`
	Errors      int64   `json:"errors"`
	Endpoints   map[string]struct {
		PerSec float64 `json:"per_sec"`
		P50    float64 `json:"p50_ms"`
		P99    float64 `json:"p99_ms"`
	} `json:"endpoints"`
	CPU struct {
		ServerMsPerFlow  float64 `json:"server_ms_per_flow"`
		LoadgenMsPerFlow float64 `json:"loadgen_ms_per_flow"`
	} `json:"cpu"`
	StealPct *float64  `json:"cpu_steal_pct"`
	LoadAvg  [2]string `json:"load_avg"`
}

// point is one run of a series.
type point struct {
	c          int
	rps, p99Ms float64
	r          result
}

func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("chart", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "docs/bench/token.png", "PNG to write")
	width := fs.Float64("w", 7, "width in inches")
	dpi := fs.Int("dpi", 80, "dots per inch (keeps the PNG small)")
	md := fs.Bool("md", false, "also print a Markdown table of every run on stdout (for docs/benchmarks.md)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("no JSON files given")
	}
	series, err := load(fs.Args())
	if err != nil {
		return err
	}
	if *md {
		table(os.Stdout, series)
	}
	return draw2(series, *out, vg.Length(*width)*vg.Inch, *dpi)
}

// table prints one row per run: series, concurrency, flows/s, the token endpoint's rate and
// latency, errors, and the machine's 1-minute load average when the run started.
func table(w io.Writer, series map[string][]point) {
	fmt.Fprintln(w, "| series | c | flows/s | token req/s | token p50 ms | token p99 ms | errors | server CPU ms/flow | loadtest CPU ms/flow | CPU steal | load avg |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, label := range slices.Sorted(maps.Keys(series)) {
		for _, p := range series[label] {
			load, _, _ := strings.Cut(p.r.LoadAvg[0], " ")
			steal := "n/a" // results written before the load command measured it
			if p.r.StealPct != nil {
				steal = fmt.Sprintf("%.0f %%", *p.r.StealPct)
			}
			fmt.Fprintf(w, "| %s | %d | %.0f | %.0f | %.2f | %.2f | %d | %.2f | %.2f | %s | %s |\n", label, p.c, p.r.FlowsPerSec,
				p.rps, p.r.Endpoints["token"].P50, p.p99Ms, p.r.Errors, p.r.CPU.ServerMsPerFlow, p.r.CPU.LoadgenMsPerFlow, steal, load)
		}
	}
}

// load reads the results and groups them by label, each series sorted by concurrency.
func load(files []string) (map[string][]point, error) {
	series := map[string][]point{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var r result
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		tok, ok := r.Endpoints["token"]
		if !ok || r.Concurrency < 1 {
			return nil, fmt.Errorf("%s: not a load result (no token endpoint or concurrency)", f)
		}
		label := r.Label
		if label == "" {
			label = filepath.Base(f)
		}
		series[label] = append(series[label], point{c: r.Concurrency, rps: tok.PerSec, p99Ms: tok.P99, r: r})
	}
	for _, s := range series {
		slices.SortFunc(s, func(a, b point) int { return cmp.Compare(a.c, b.c) })
	}
	return series, nil
}

// draw2 writes two stacked charts sharing the concurrency axis (log2 scale).
func draw2(series map[string][]point, out string, width vg.Length, dpi int) error {
	thr := newPlot("Token endpoint throughput", "token requests/s")
	lat := newPlot("Token endpoint p99 latency", "p99 (ms, log scale)")
	lat.X.Label.Text = "concurrent users (-c)"
	palette := []color.Color{
		color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
		color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
		color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
	}
	for i, label := range slices.Sorted(maps.Keys(series)) {
		pts := series[label]
		var rps, p99 plotter.XYs
		for _, p := range pts {
			rps = append(rps, plotter.XY{X: float64(p.c), Y: p.rps})
			if p.p99Ms > 0 { // a run with no successful token request has no latency
				p99 = append(p99, plotter.XY{X: float64(p.c), Y: p.p99Ms})
			}
		}
		col := palette[i%len(palette)]
		for _, pl := range []struct {
			p   *plot.Plot
			xys plotter.XYs
		}{{thr, rps}, {lat, p99}} {
			if len(pl.xys) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(pl.xys)
			if err != nil {
				return fmt.Errorf("series %s: %w", label, err)
			}
			line.Color, points.Color = col, col
			line.Width = vg.Points(1.5)
			points.Shape = draw.CircleGlyph{}
			pl.p.Add(line, points)
			if pl.p == thr {
				pl.p.Legend.Add(label, line, points)
			}
		}
	}
	// Headroom above the highest throughput for the legend; p99 on a log scale, since it
	// spans milliseconds to seconds.
	thr.Y.Min, thr.Y.Max = 0, thr.Y.Max*1.45
	lat.Y.Min *= 0.8
	lat.Y.Scale = plot.LogScale{}
	lat.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	height := width * 9 / 10
	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(dpi))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Points(8), PadTop: vg.Points(4), PadBottom: vg.Points(4),
		PadLeft: vg.Points(4), PadRight: vg.Points(8)}
	canvases := plot.Align([][]*plot.Plot{{thr}, {lat}}, tiles, dc)
	thr.Draw(canvases[0][0])
	lat.Draw(canvases[1][0])
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", out, err)
	}
	return f.Close()
}

func newPlot(title, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.ConstantTicks(powersOfTwo(1, 64))
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	return p
}

func powersOfTwo(from, to int) []plot.Tick {
	var t []plot.Tick
	for c := from; c <= to; c *= 2 {
		t = append(t, plot.Tick{Value: float64(c), Label: fmt.Sprint(c)})
	}
	return t
}
