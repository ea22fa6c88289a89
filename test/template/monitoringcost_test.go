package template_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/metrics"
	"github.com/acmebank/authserver/shared/tokenendpoint"
	"github.com/acmebank/authserver/test/template/cfn"
)

// The monitoring rows of docs/scale.md section 4 ("Monitoring"):
//
//	| item | quantity | `key` | $ a month |
//	| **total, …** | | | **$N** |
var (
	monitoringRow      = regexp.MustCompile("(?m)^\\| ([^|*]+?) \\| ([0-9,]+) \\| `([a-z0-9-]+)` \\| \\$([0-9.,]+) \\|$")
	monitoringTotalRow = regexp.MustCompile(`(?m)^\| \*\*([^|*]+?)\*\* \| \| \| \*\*\$([0-9.,]+)\*\* \|$`)
)

// The rows' items, and the totals of the two stacks priced.
const (
	rowAlarms          = "alarm metrics, one region at the defaults"
	rowAlarmsTrail     = "alarm metrics, with `CloudTrailLogGroupName`"
	rowDashboards      = "dashboards"
	rowFilters         = "metric filters' metrics, at the defaults"
	rowFiltersTrail    = "metric filters' metrics, with `CloudTrailLogGroupName`"
	rowExchanges       = "EMF `Exchanges` (token: one per grant type)"
	rowSignIns         = "EMF `SignIns` (authorize: factor × result)"
	rowRefusals        = "EMF `Refusals`, at most (each HTTP function × each reason)"
	totalDefaults      = "total, one region at the defaults, at most"
	totalWithTrail     = "total, with `CloudTrailLogGroupName`, at most"
	keyAlarmMetric     = "cw-alarm-metric"
	keyDashboard       = "cw-dashboard"
	keyCustomMetric    = "cw-custom-metric"
	monitoringHeading  = "### Monitoring"
	monitoringEndMarks = "\n## "
)

// monitoringQuantities counts, on the SAM transform's output, what a stack deployed with
// params is billed for each month: the metrics its alarms read (metric math: each metric), its
// dashboards, the distinct metrics its metric filters publish.
func monitoringQuantities(t *testing.T, out *cfn.Template, params map[string]string) (alarmMetricCount, dashboards, filterMetrics int) {
	t.Helper()
	ev := out.NewEvaluator(params)
	published := map[string]bool{}
	for id, r := range out.Resources {
		created, err := ev.Creates(id)
		if err != nil {
			t.Fatal(err)
		}
		if !created {
			continue
		}
		switch r["Type"] {
		case "AWS::CloudWatch::Alarm":
			alarmMetricCount += len(alarmMetrics(r))
		case "AWS::CloudWatch::Dashboard":
			dashboards++
		case "AWS::Logs::MetricFilter":
			tr := cfn.AsMap(cfn.AsSlice(cfn.Path(r, "Properties", "MetricTransformations"))[0])
			published[tr["MetricName"].(string)] = true
		}
	}
	return alarmMetricCount, dashboards, len(published)
}

// refusingFunctions are the functions whose main records refusals (meter.Refusals).
func refusingFunctions(t *testing.T) int {
	t.Helper()
	mains, err := filepath.Glob(filepath.Join(rootDir(t), "functions", "*", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range mains {
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "meter.Refusals(") {
			n++
		}
	}
	return n
}

// TestCosts_MonitoringFollowsFromTheTemplateAndTheMetrics: the monitoring rows of docs/scale.md
// count what the template creates (alarm metrics, dashboards, metric filters' metrics, with and
// without a CloudTrail log group) and the EMF metrics the functions can write (the grant types,
// factors and reasons of shared/metrics), each priced from the unit price table, and each total
// is the sum of its rows; a new alarm, filter or reason without its row fails here.
func TestCosts_MonitoringFollowsFromTheTemplateAndTheMetrics(t *testing.T) {
	out := samTransform(t)
	scale := readDoc(t, "scale.md")
	prices := unitPrices(t, scale)
	start := strings.Index(scale, monitoringHeading)
	if start < 0 {
		t.Fatalf("docs/scale.md has no %q section", monitoringHeading)
	}
	section := scale[start:]
	if end := strings.Index(section, monitoringEndMarks); end > 0 {
		section = section[:end]
	}
	if got := tokenendpoint.GrantTypes(); len(got) != len(metrics.GrantTypes) {
		t.Fatalf("the token endpoint accepts %v, the metrics count %v", got, metrics.GrantTypes)
	}
	alarms, dashboards, filters := monitoringQuantities(t, out, map[string]string{"BaseUrl": "https://auth.bank.example"})
	alarmsTrail, _, filtersTrail := monitoringQuantities(t, out, map[string]string{"BaseUrl": "https://auth.bank.example", "CloudTrailLogGroupName": cloudTrail})
	type want struct {
		quantity int
		key      string
	}
	rows := map[string]want{
		rowAlarms:       {alarms, keyAlarmMetric},
		rowAlarmsTrail:  {alarmsTrail, keyAlarmMetric},
		rowDashboards:   {dashboards, keyDashboard},
		rowFilters:      {filters, keyCustomMetric},
		rowFiltersTrail: {filtersTrail, keyCustomMetric},
		rowExchanges:    {len(metrics.GrantTypes), keyCustomMetric},
		rowSignIns:      {len(metrics.Factors) * 2, keyCustomMetric},
		rowRefusals:     {len(metrics.Reasons) * refusingFunctions(t), keyCustomMetric},
	}
	cost := map[string]float64{}
	for _, m := range monitoringRow.FindAllStringSubmatch(section, -1) {
		item, key := m[1], m[3]
		w, ok := rows[item]
		if !ok {
			t.Errorf("docs/scale.md: monitoring row %q is not one the test counts", item)
			continue
		}
		if q := int(number(t, m[2])); q != w.quantity || key != w.key {
			t.Errorf("docs/scale.md: %s: %d × `%s`, the template and the code give %d × `%s`", item, q, key, w.quantity, w.key)
		}
		price, ok := prices[w.key]
		if !ok {
			t.Fatalf("docs/scale.md: no unit price `%s`", w.key)
		}
		wantCost := float64(w.quantity) * price
		if got := number(t, m[4]); math.Abs(got-wantCost) > 0.005 {
			t.Errorf("docs/scale.md: %s: $%s a month, want %.2f (%d × `%s`)", item, m[4], wantCost, w.quantity, w.key)
		}
		cost[item] = wantCost
	}
	for item := range rows {
		if _, ok := cost[item]; !ok {
			t.Errorf("docs/scale.md: no monitoring row %q", item)
		}
	}
	common := cost[rowDashboards] + cost[rowExchanges] + cost[rowSignIns] + cost[rowRefusals]
	totals := map[string]float64{
		totalDefaults:  cost[rowAlarms] + cost[rowFilters] + common,
		totalWithTrail: cost[rowAlarmsTrail] + cost[rowFiltersTrail] + common,
	}
	seen := 0
	for _, m := range monitoringTotalRow.FindAllStringSubmatch(section, -1) {
		wantTotal, ok := totals[m[1]]
		if !ok {
			t.Errorf("docs/scale.md: total %q is not one the test computes", m[1])
			continue
		}
		seen++
		if got := number(t, m[2]); math.Abs(got-wantTotal) > 0.005 {
			t.Errorf("docs/scale.md: %s: $%s a month, its rows add up to %.2f", m[1], m[2], wantTotal)
		}
	}
	if seen != len(totals) {
		t.Errorf("docs/scale.md: %d of the %d monitoring totals", seen, len(totals))
	}
	// docs/deploy.md section 7 repeats both totals and the counts.
	deploy := readDoc(t, "deploy.md")
	for _, v := range []string{fmt.Sprintf("$%.2f a month per region", totals[totalDefaults]), fmt.Sprintf("($%.2f with `CloudTrailLogGroupName`)", totals[totalWithTrail]),
		fmt.Sprintf("%d alarm metrics", alarms), fmt.Sprintf("the metric filters' %d metrics", filters),
		fmt.Sprintf("at most %d EMF metrics", rows[rowExchanges].quantity+rows[rowSignIns].quantity+rows[rowRefusals].quantity)} {
		if !strings.Contains(deploy, v) {
			t.Errorf("docs/deploy.md section 7 does not say %q", v)
		}
	}
}
