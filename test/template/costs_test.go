package template_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/acmebank/authserver/test/template/cfn"
)

// The cost model of docs/scale.md section 4 (and its copy in docs/deploy.md section 7) is three
// kinds of Markdown rows this file reads back:
//
//	| `key` | item | price in $ | per N unit | source |                    the unit prices
//	| operation | part | quantity | `key` | $ per million |             one part of an operation
//	| operation | **$ per million** |                                     an operation's total
//
// and docs/scale.md section 5's worked examples and section 3's route-throttle ceilings. The
// tests recompute every figure from the prices and the template, so a changed price without
// its totals, or a wrong sum, fails here.
var (
	priceRow = regexp.MustCompile("(?m)^\\| `([a-z0-9-]+)` \\| [^|]+ \\| ([0-9.]+) \\| ([0-9,]+) [^|]+ \\| [^|]+ \\|$")
	partRow  = regexp.MustCompile("(?m)^\\| ([^|`*]+?) \\| ([^|]+?) \\| ([0-9.]+) \\| `([a-z0-9-]+)` \\| ([0-9.]+) \\|$")
	totalRow = regexp.MustCompile(`(?m)^\| ([^|*]+?) \| \*\*([0-9.]+)\*\* \|$`)
	// | 100 | 259 million | $5,780 | $8,890 | $5,000 | … |
	exampleRow = regexp.MustCompile(`(?m)^\| ([0-9,]+) \| [^|]+ \| \$([0-9,]+) \| \$([0-9,]+) \| \$([0-9,]+) \| [^|]+ \|$`)
	// | `POST /v2/authentication/oauth2/authorize` | `AuthorizeRateLimit` | 50 | 2 | **25** sign-ins/s |
	throttleRow = regexp.MustCompile("(?m)^\\| `([A-Z]+ [^`]+)` \\| `(\\w+)` \\| ([0-9,]+) \\| ([0-9]+) \\| \\*\\*([0-9,]+)\\*\\* [^|]+ \\|$")
)

// secondsPerMonth is the month of the worked examples: 30 days.
const secondsPerMonth = 30 * 24 * 3600

// The operations of the worked examples: one sign-in and one code exchange per exchange, in
// the order of the examples' columns.
const (
	opSignIn       = "sign-in (3 pages)"
	opExchangeRSA  = "code exchange, kms-sign, RS256 or PS256 client"
	opExchangeEC   = "code exchange, kms-sign, ES256 client"
	opExchangeData = "code exchange, data-key"
)

func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rootDir(t), "docs", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func number(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return f
}

// unitPrices reads the price table: key -> $ per single unit.
func unitPrices(t *testing.T, doc string) map[string]float64 {
	t.Helper()
	prices := map[string]float64{}
	for _, m := range priceRow.FindAllStringSubmatch(doc, -1) {
		prices[m[1]] = number(t, m[2]) / number(t, m[3])
	}
	if len(prices) == 0 {
		t.Fatal("docs/scale.md: no unit price rows")
	}
	return prices
}

// checkCostTables recomputes every part row of doc from prices, and every total row from its
// parts; it returns the totals.
func checkCostTables(t *testing.T, name, doc string, prices map[string]float64) map[string]float64 {
	t.Helper()
	sums := map[string]float64{}
	for _, m := range partRow.FindAllStringSubmatch(doc, -1) {
		op, part, key := m[1], m[2], m[4]
		price, ok := prices[key]
		if !ok {
			t.Errorf("%s: %s, %s: no price `%s` in docs/scale.md", name, op, part, key)
			continue
		}
		want := number(t, m[3]) * price * 1e6
		got := number(t, m[5])
		if math.Abs(got-want) > 0.005+1e-9 {
			t.Errorf("%s: %s, %s: $%s per million, want %.2f (%s × %s)", name, op, part, m[5], want, m[3], key)
		}
		sums[op] += got
	}
	totals := map[string]float64{}
	for _, m := range totalRow.FindAllStringSubmatch(doc, -1) {
		op, got := m[1], number(t, m[2])
		totals[op] = got
		sum, ok := sums[op]
		if !ok {
			t.Errorf("%s: total of %q has no part rows", name, op)
			continue
		}
		if math.Abs(got-sum) > 0.005 {
			t.Errorf("%s: total of %q is $%s per million, its parts add up to %.2f", name, op, m[2], sum)
		}
	}
	for op := range sums {
		if _, ok := totals[op]; !ok {
			t.Errorf("%s: %q has part rows but no total row", name, op)
		}
	}
	return totals
}

// TestCosts_EveryTotalFollowsFromTheUnitPrices: each part of docs/scale.md's and
// docs/deploy.md's cost tables is its quantity times a unit price of docs/scale.md's price
// table, each total the sum of its parts, an operation priced in both documents has one total,
// and the worked examples are the rate times a month times a sign-in and an exchange.
func TestCosts_EveryTotalFollowsFromTheUnitPrices(t *testing.T) {
	scale, deploy := readDoc(t, "scale.md"), readDoc(t, "deploy.md")
	prices := unitPrices(t, scale)
	totals := checkCostTables(t, "docs/scale.md", scale, prices)
	for _, op := range []string{opSignIn, opExchangeRSA, opExchangeEC, opExchangeData} {
		if _, ok := totals[op]; !ok {
			t.Fatalf("docs/scale.md: no total for %q", op)
		}
	}
	deployTotals := checkCostTables(t, "docs/deploy.md", deploy, prices)
	if len(deployTotals) == 0 {
		t.Error("docs/deploy.md: no cost table")
	}
	for op, got := range deployTotals {
		if want, ok := totals[op]; ok && got != want {
			t.Errorf("docs/deploy.md prices %q at $%.2f per million, docs/scale.md at $%.2f", op, got, want)
		}
	}

	examples := exampleRow.FindAllStringSubmatch(scale, -1)
	if len(examples) == 0 {
		t.Fatal("docs/scale.md: no worked examples")
	}
	for _, m := range examples {
		rate := number(t, m[1])
		for i, op := range []string{opExchangeRSA, opExchangeEC, opExchangeData} {
			want := rate * secondsPerMonth * (totals[opSignIn] + totals[op]) / 1e6
			got := number(t, m[2+i])
			if math.Abs(got-want) > 0.005*want {
				t.Errorf("docs/scale.md: %s exchanges/s, %s: $%s a month, want about $%.0f", m[1], op, m[2+i], want)
			}
		}
	}
}

// TestCosts_ThrottleCeilingsFollowFromTheTemplateDefaults: the route-throttle ceilings of
// docs/scale.md section 3 use the template's default throttles, and each ceiling is the
// default divided by the route's requests per sign-in or exchange.
func TestCosts_ThrottleCeilingsFollowFromTheTemplateDefaults(t *testing.T) {
	tpl, scale := load(t), readDoc(t, "scale.md")
	rows := throttleRow.FindAllStringSubmatch(scale, -1)
	if len(rows) == 0 {
		t.Fatal("docs/scale.md: no route throttle rows")
	}
	for _, m := range rows {
		route, param := m[1], m[2]
		def := fmtDefault(tpl, param)
		if def == "" {
			t.Errorf("docs/scale.md: %s: no template parameter %s", route, param)
			continue
		}
		if number(t, m[3]) != number(t, def) {
			t.Errorf("docs/scale.md: %s: %s default %s, the template's is %s", route, param, m[3], def)
		}
		if want := number(t, def) / number(t, m[4]); number(t, m[5]) != math.Floor(want) {
			t.Errorf("docs/scale.md: %s: ceiling %s, want %.0f (%s / %s)", route, m[5], math.Floor(want), def, m[4])
		}
	}
}

// fmtDefault is a parameter's default as the template writes it ("" without the parameter).
func fmtDefault(tpl *cfn.Template, param string) string {
	p, ok := tpl.Parameters[param]
	if !ok || p["Default"] == nil {
		return ""
	}
	return fmt.Sprint(p["Default"])
}
