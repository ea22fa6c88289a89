package template_test

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/acmebank/authserver/test/template/cfn"
)

// The region health checks' rows of docs/scale.md section 4 ("Region health checks"):
//
//	| item | quantity a month, per region | `key` | $N |
//	| **total, …** | | | **$N** |
//
// one row per price key, so the test finds each part by its key.
var healthCostRow = regexp.MustCompile("(?m)^\\| ([^|*]+?) \\| ([0-9.,]+) \\| `([a-z0-9-]+)` \\| \\$([0-9.,]+) \\|$")

const (
	healthCostHeading = "### Region health checks"
	totalPerRegion    = "total per region, multi-region with a hosted zone"
	totalPerPair      = "total for the pair"
)

// The figures the template cannot give, each stated in docs/scale.md with its source:
const (
	// healthCheckers is how many of Route 53's checkers each send one request per interval:
	// at the 30 s interval the endpoint receives a request "about every two seconds" (AWS, an
	// average: the checkers do not coordinate), 30 / 2.
	healthCheckers = 15
	// healthCheckMs is a check's billed Lambda duration: ≈ 3 ms of CPU measured by
	// TestHealth_EveryCheckOverwritesTheRegionsOneItem (test/lambda), plus two sequential
	// DynamoDB round trips (the PutItem, then the consistent GetItem) at section 4's assumed 5 ms.
	healthCheckMs = 13
	// healthItemWrites and healthItemReads are a check's capacity units: one PutItem and one
	// strongly consistent GetItem of one item of about 150 bytes (1 KB and 4 KB per unit).
	healthItemWrites, healthItemReads = 1, 1
	healthItemBytes                   = 150
	// healthLogGB is a check's log lines: section 4's ≈ 1 KB per request (function + access log).
	healthLogGB = 0.000001
)

// healthChecks is what the transformed template creates for params: its Route 53 health checks,
// the optional (priced) features of each, and the shortest request interval among them.
type healthChecks struct {
	count     int
	features  []string // per check, e.g. "HTTPS"; one price each
	interval  int
	perSecond float64 // the requests all their checkers send, on average
}

func countHealthChecks(t *testing.T, out *cfn.Template, params map[string]string) healthChecks {
	t.Helper()
	ev := out.NewEvaluator(params)
	var hc healthChecks
	for id, r := range out.Resources {
		if r["Type"] != "AWS::Route53::HealthCheck" {
			continue
		}
		created, err := ev.Creates(id)
		if err != nil {
			t.Fatal(err)
		}
		if !created {
			continue
		}
		hc.count++
		cfg := cfn.AsMap(cfn.Path(r, "Properties", "HealthCheckConfig"))
		typ := fmt.Sprint(cfg["Type"])
		interval := 30 // Route 53's default
		if v, ok := cfg["RequestInterval"]; ok {
			interval = int(number(t, fmt.Sprint(v)))
		}
		if hc.interval == 0 || interval < hc.interval {
			hc.interval = interval
		}
		hc.perSecond += float64(healthCheckers) / float64(interval)
		// The optional features of the Route 53 pricing page, as the check's configuration
		// turns them on.
		var features []string
		if strings.HasPrefix(typ, "HTTPS") {
			features = append(features, "HTTPS")
		}
		if strings.HasSuffix(typ, "_STR_MATCH") {
			features = append(features, "string matching")
		}
		if interval == 10 {
			features = append(features, "fast interval")
		}
		if fmt.Sprint(cfg["MeasureLatency"]) == "true" {
			features = append(features, "latency measurement")
		}
		if hc.count > 1 && !slices.Equal(features, hc.features) {
			t.Fatalf("%s has features %v, another check %v: price them apart", id, features, hc.features)
		}
		hc.features = features
	}
	return hc
}

// TestCosts_RegionHealthChecksFollowFromTheTemplate: the "Region health checks" rows of
// docs/scale.md count what the SAM-transformed template creates in a multi-region stack with
// a hosted zone (its Route 53 health checks and their optional features, the requests their
// checkers send at the check's interval, the health function's memory, the other replicas the
// check's write is replicated to), each priced from the unit price table; the totals are the
// sums of the rows, docs/deploy.md and docs/multiregion.md repeat them, and a single-region
// stack or one without a hosted zone creates no check. A changed interval, feature or price
// without its figures fails here.
func TestCosts_RegionHealthChecksFollowFromTheTemplate(t *testing.T) {
	out := samTransform(t)
	scale := readDoc(t, "scale.md")
	prices := unitPrices(t, scale)
	start := strings.Index(scale, healthCostHeading)
	if start < 0 {
		t.Fatalf("docs/scale.md has no %q section", healthCostHeading)
	}
	section := scale[start+len(healthCostHeading):]
	if end := strings.Index(section, "\n#"); end > 0 {
		section = section[:end]
	}

	// Both values of the check's condition (RoutesByLatency): none without a second region or
	// without a hosted zone, one per region with both.
	noZone := withHostedZone(multiRegion("eu-west-1"))
	delete(noZone, "HostedZoneId")
	for name, params := range map[string]map[string]string{
		"single region with a hosted zone":   withHostedZone(map[string]string{}),
		"multi-region without a hosted zone": noZone,
	} {
		if hc := countHealthChecks(t, out, params); hc.count != 0 {
			t.Errorf("%s: %d health checks, want none (docs/scale.md prices none)", name, hc.count)
		}
	}
	var hc healthChecks
	for _, region := range []string{"eu-west-1", "eu-central-1"} {
		got := countHealthChecks(t, out, withHostedZone(multiRegion(region)))
		if got.count == 0 {
			t.Fatalf("%s: the multi-region stack with a hosted zone creates no health check", region)
		}
		if region != "eu-west-1" && (got.count != hc.count || got.perSecond != hc.perSecond || !slices.Equal(got.features, hc.features)) {
			t.Errorf("%s creates %+v, the primary %+v: price each region apart", region, got, hc)
		}
		hc = got
	}

	// The template's other figures: the health function's memory, the health API's throttle
	// (which the checkers' requests must stay under, or Route 53 would see 429s), and the
	// replicas of the global table (the primary's stack creates it).
	memGB := number(t, fmt.Sprint(cfn.Path(out.Resources["HealthFunction"], "Properties", "MemorySize"))) / 1024
	throttle := number(t, fmt.Sprint(cfn.Path(out.Resources["HealthApiApiGatewayDefaultStage"], "Properties", "DefaultRouteSettings", "ThrottlingRateLimit")))
	_, primary := render(t, out, withHostedZone(multiRegion("eu-west-1")))
	regions := len(cfn.AsSlice(cfn.Path(primary.Resources["GlobalTable"], "Properties", "Replicas")))
	if regions < 2 {
		t.Fatalf("the global table has %d replicas", regions)
	}
	perSecond := hc.perSecond
	if perSecond > throttle {
		t.Errorf("the checkers send %.2f requests/s, above the health API's throttle of %v/s", perSecond, throttle)
	}
	requests := perSecond * secondsPerMonth

	type want struct {
		quantity float64
		text     []string // what the row's item must say
	}
	rows := map[string]want{
		"r53-health-check":         {float64(hc.count), []string{"`RegionHealthCheck`", "AWS endpoint"}},
		"r53-health-check-feature": {float64(hc.count * len(hc.features)), hc.features},
		"http-api-request":         {requests, []string{fmt.Sprintf("%d checkers", healthCheckers), fmt.Sprintf("every %d s", hc.interval)}},
		"lambda-request":           {requests, nil},
		"lambda-gb-s":              {requests * memGB * healthCheckMs / 1000, []string{fmt.Sprintf("%g GB", memGB), fmt.Sprintf("≈ %d ms", healthCheckMs)}},
		"ddb-wru":                  {requests * healthItemWrites, []string{"`PutItem`"}},
		"ddb-rru":                  {requests * healthItemReads, []string{"`GetItem`"}},
		"ddb-rwru":                 {requests * healthItemWrites * float64(regions-1), []string{fmt.Sprintf("%d other replica", regions-1)}},
		"logs-gb":                  {requests * healthLogGB, []string{"1 KB"}},
	}
	sum := 0.0
	seen := map[string]bool{}
	costs := map[string]float64{}
	for _, m := range healthCostRow.FindAllStringSubmatch(section, -1) {
		item, key := m[1], m[3]
		w, ok := rows[key]
		if !ok {
			t.Errorf("docs/scale.md: health check row %q is priced `%s`, not a part the test counts", item, key)
			continue
		}
		seen[key] = true
		for _, s := range w.text {
			if !strings.Contains(item, s) {
				t.Errorf("docs/scale.md: health check row %q does not say %q", item, s)
			}
		}
		// Quantities are written rounded: to the unit above 1,000, to 3 decimals below.
		q := number(t, m[2])
		if tol := math.Max(0.5, 0.0005*w.quantity); w.quantity < 1000 && math.Abs(q-w.quantity) > 0.0005 || w.quantity >= 1000 && math.Abs(q-w.quantity) > tol {
			t.Errorf("docs/scale.md: %s: quantity %s, the template gives %.3f", item, m[2], w.quantity)
		}
		price, ok := prices[key]
		if !ok {
			t.Fatalf("docs/scale.md: no unit price `%s`", key)
		}
		cost := w.quantity * price
		got := number(t, m[4])
		if math.Abs(got-cost) > 0.005+1e-9 {
			t.Errorf("docs/scale.md: %s: $%s a month, want %.2f (%.3f × `%s`)", item, m[4], cost, w.quantity, key)
		}
		sum += got
		costs[key] = got
	}
	for key := range rows {
		if !seen[key] {
			t.Errorf("docs/scale.md: no region health check row priced `%s`", key)
		}
	}
	totals := map[string]float64{totalPerRegion: sum, totalPerPair: sum * float64(regions)}
	found := 0
	for _, m := range monitoringTotalRow.FindAllStringSubmatch(section, -1) {
		w, ok := totals[m[1]]
		if !ok {
			t.Errorf("docs/scale.md: total %q is not one the test computes", m[1])
			continue
		}
		found++
		if got := number(t, m[2]); math.Abs(got-w) > 0.005 {
			t.Errorf("docs/scale.md: %s: $%s a month, its rows give %.2f", m[1], m[2], w)
		}
	}
	if found != len(totals) {
		t.Errorf("docs/scale.md: %d of the %d region health check totals", found, len(totals))
	}

	// docs/deploy.md section 7 and docs/multiregion.md repeat the totals and the request rate.
	claims := []string{
		fmt.Sprintf("$%.2f a month per region", totals[totalPerRegion]),
		fmt.Sprintf("$%.2f for the pair", totals[totalPerPair]),
		fmt.Sprintf("%s requests a month", commas(requests)),
	}
	check, feature := costs["r53-health-check"], costs["r53-health-check-feature"]
	mem := fmt.Sprintf("%g MB", memGB*1024)
	own := map[string][]string{
		"scale.md": {fmt.Sprintf("The Route 53 check itself is $%.2f of each region's $%.2f", check+feature, totals[totalPerRegion]),
			// Priced as a non-AWS endpoint ($0.75 and $2.00 a feature, the rows' sources).
			fmt.Sprintf("$%.2f a month more per region", float64(hc.count)*(0.75+2.00*float64(len(hc.features)))-check-feature),
			// The replicated item's cross-region transfer: ≈ 150 bytes a request.
			fmt.Sprintf("(≈ %.1f GB a month)", requests*healthItemBytes/1e9)},
		"deploy.md":      {fmt.Sprintf("its HTTPS feature ($%.2f)", check+feature), mem},
		"multiregion.md": {fmt.Sprintf("($%.2f + $%.2f)", check, feature), mem},
	}
	for doc, extra := range own {
		text := readDoc(t, doc)
		if doc == "scale.md" {
			text = section
		} else {
			extra = append(extra, claims...)
		}
		text = strings.Join(strings.Fields(text), " ") // a claim may wrap
		for _, c := range extra {
			if !strings.Contains(text, c) {
				t.Errorf("docs/%s does not say %q (docs/scale.md, %q)", doc, c, healthCostHeading)
			}
		}
	}
}

// commas writes n rounded to the unit with thousands separators: 1296000 -> "1,296,000".
func commas(n float64) string {
	s := fmt.Sprintf("%.0f", n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
