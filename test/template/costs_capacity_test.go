package template_test

import (
	"math"
	"regexp"
	"strings"
	"testing"
)

// docs/scale.md section 1 has a table of the capacity units each operation consumes, measured
// on DynamoDB Local (index writes included) by TestCapacity_IndexWritesPerOperationAreTheFiguresOfScaleMD
// (test/e2e), with the write units by AWS's rules in its last column:
//
//	| code exchange | 0 | 5 | 2 | 2 | 9 | 7 | 2 | **9** |
//
// The tests below hold the cost model to that table: every DynamoDB quantity of a cost row,
// the write ceilings of section 3, the replicated writes and the worked examples' write rates.
var (
	capacityRow = regexp.MustCompile(`(?m)^\| ([a-z][^|]*?) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \| \*\*([0-9.]+)\*\* \|$`)
	// | DynamoDB on-demand, per table (per replica of a global table) | 40,000 read and 40,000 write request units/s | …
	tableQuotaRow = regexp.MustCompile(`(?m)^\| DynamoDB on-demand, per table [^|]*\| ([0-9,]+) read and ([0-9,]+) write request units/s \|`)
	// | DynamoDB table writes | 10 WRU (sign-in) + 9 WRU (…) = 19 WRU (…) | **2,105 exchanges/s** | … (4,000 WRU at once otherwise: 210 exchanges/s) |
	writeCeilingRow = regexp.MustCompile(`(?m)^\| DynamoDB table writes \| ([0-9]+) WRU \(sign-in\) \+ ([0-9]+) WRU \([^|]*\) = ([0-9]+) WRU [^|]*\| \*\*([0-9,]+) exchanges/s\*\* \|[^|]*\(([0-9,]+) WRU at once otherwise: ([0-9,]+) exchanges/s\) \|$`)
	// | DynamoDB table reads | 8 RRU (…) | 5,000 exchanges/s | … |
	readCeilingRow = regexp.MustCompile(`(?m)^\| DynamoDB table reads \| ([0-9]+) RRU [^|]*\| ([0-9,]+) exchanges/s \|`)
)

// capacity is one operation's row of the measured table: its read units and its write units by
// AWS's rules.
type capacity struct{ reads, writes float64 }

func measuredCapacity(t *testing.T, scale string) map[string]capacity {
	t.Helper()
	rows := map[string]capacity{}
	for _, m := range capacityRow.FindAllStringSubmatch(scale, -1) {
		rows[m[1]] = capacity{reads: number(t, m[2]), writes: number(t, m[9])}
	}
	if len(rows) == 0 {
		t.Fatal("docs/scale.md: no table of measured capacity (section 1)")
	}
	return rows
}

// capacityOf finds the measured row a cost row's operation is priced from: the row of the same
// name, or of the operation it qualifies ("code exchange" for "code exchange, data-key",
// "bearer check" for "bearer check (authorizer)").
func capacityOf(rows map[string]capacity, op string) (capacity, bool) {
	best, found := "", false
	for name := range rows {
		if (op == name || strings.HasPrefix(op, name+", ") || strings.HasPrefix(op, name+" (")) && len(name) > len(best) {
			best, found = name, true
		}
	}
	return rows[best], found
}

// TestCosts_DynamoDBQuantitiesAreTheMeasuredCapacity: every DynamoDB read and write quantity of
// docs/scale.md's and docs/deploy.md's cost tables is the measured figure of section 1 (the
// write units by AWS's rules, index writes included), so a cost row cannot leave out the index
// writes or drift from the store.
func TestCosts_DynamoDBQuantitiesAreTheMeasuredCapacity(t *testing.T) {
	scale := readDoc(t, "scale.md")
	rows := measuredCapacity(t, scale)
	checked := 0
	for _, doc := range []struct{ name, text string }{{"docs/scale.md", scale}, {"docs/deploy.md", readDoc(t, "deploy.md")}} {
		for _, m := range partRow.FindAllStringSubmatch(doc.text, -1) {
			op, part, quantity, key := m[1], m[2], number(t, m[3]), m[4]
			if key != "ddb-wru" && key != "ddb-rru" {
				continue
			}
			c, ok := capacityOf(rows, op)
			if !ok {
				t.Errorf("%s: %q prices DynamoDB units but docs/scale.md section 1 measures no such operation", doc.name, op)
				continue
			}
			want := c.writes
			if key == "ddb-rru" {
				want = c.reads
			}
			if quantity != want {
				t.Errorf("%s: %s, %s: %v units, the measured figure is %v", doc.name, op, part, quantity, want)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no DynamoDB cost rows checked")
	}
}

// TestCosts_WriteCeilingsFollowFromTheMeasuredCapacity: section 3's DynamoDB ceilings are the
// table quota of section 2 divided by a sign-in's and an exchange's measured units; the
// multi-region replicated writes, the worked examples' write rates and section 7's FAPI share
// use the same per-exchange figure.
func TestCosts_WriteCeilingsFollowFromTheMeasuredCapacity(t *testing.T) {
	scale := readDoc(t, "scale.md")
	rows := measuredCapacity(t, scale)
	signIn, exchange := rows["sign-in (3 pages)"], rows["code exchange"]
	perExchange := signIn.writes + exchange.writes

	q := tableQuotaRow.FindStringSubmatch(scale)
	if q == nil {
		t.Fatal("docs/scale.md: no DynamoDB table quota row (section 2)")
	}
	readQuota, writeQuota := number(t, q[1]), number(t, q[2])

	w := writeCeilingRow.FindStringSubmatch(scale)
	if w == nil {
		t.Fatal("docs/scale.md: no DynamoDB table writes ceiling row (section 3)")
	}
	if number(t, w[1]) != signIn.writes || number(t, w[2]) != exchange.writes || number(t, w[3]) != perExchange {
		t.Errorf("docs/scale.md section 3: %s + %s = %s WRU, measured %v + %v = %v", w[1], w[2], w[3], signIn.writes, exchange.writes, perExchange)
	}
	if got, want := number(t, w[4]), math.Floor(writeQuota/perExchange); got != want {
		t.Errorf("docs/scale.md section 3: write ceiling %s exchanges/s, want %.0f (%.0f / %v)", w[4], want, writeQuota, perExchange)
	}
	if got, want := number(t, w[6]), math.Floor(number(t, w[5])/perExchange/10)*10; got != want {
		t.Errorf("docs/scale.md section 3: at launch %s exchanges/s, want about %.0f (%s / %v)", w[6], want, w[5], perExchange)
	}
	r := readCeilingRow.FindStringSubmatch(scale)
	if r == nil {
		t.Fatal("docs/scale.md: no DynamoDB table reads ceiling row (section 3)")
	}
	if number(t, r[1]) != signIn.reads+exchange.reads {
		t.Errorf("docs/scale.md section 3: %s RRU per exchange, measured %v", r[1], signIn.reads+exchange.reads)
	}
	if got, want := number(t, r[2]), math.Floor(readQuota/(signIn.reads+exchange.reads)/100)*100; got != want {
		t.Errorf("docs/scale.md section 3: read ceiling %s exchanges/s, want about %.0f", r[2], want)
	}

	// The per-exchange figure wherever the text repeats it.
	ceiling := w[4]
	for _, c := range []struct {
		what string
		re   *regexp.Regexp
		want float64
	}{
		{"the replica's share", regexp.MustCompile(`carries the ([0-9]+) WRU of\s+every exchange`), perExchange},
		{"all regions' ceiling", regexp.MustCompile(`\*\*([0-9,]+) exchanges/s for all regions together\*\*`), number(t, ceiling)},
		{"the replicated writes", regexp.MustCompile(`the ([0-9]+) WRU of an exchange with its sign-in`), perExchange},
		{"the replicated writes per region", regexp.MustCompile(`plus ([0-9]+) replicated write units per further region`), perExchange},
		{"the FAPI share", regexp.MustCompile(`than section 3's\s+([0-9]+) per exchange`), perExchange},
		{"data-key mode's ceiling", regexp.MustCompile(`\*\*([0-9,]+)/s in\s+data-key mode\*\*`), number(t, ceiling)},
	} {
		m := c.re.FindStringSubmatch(scale)
		if m == nil {
			t.Errorf("docs/scale.md: %s not found", c.what)
			continue
		}
		if number(t, m[1]) != c.want {
			t.Errorf("docs/scale.md: %s is %s, want %v", c.what, m[1], c.want)
		}
	}
	// A FAPI exchange writes what a DPoP exchange writes (measured: its proof's jti in the code's
	// consuming transaction) and its client assertion's jti, one more transactional item (2 WRU,
	// AWS's rule in the ddb-wru row).
	const transactionalItem = 2
	dpop, ok := rows["code exchange with DPoP"]
	if !ok {
		t.Fatal("docs/scale.md section 1 measures no code exchange with DPoP")
	}
	fapiExtra := dpop.writes - exchange.writes + transactionalItem
	if m := regexp.MustCompile(`\(([0-9]+) % more than section 3's`).FindStringSubmatch(scale); m == nil {
		t.Error("docs/scale.md: the FAPI share's percentage not found")
	} else if want := math.Round(fapiExtra * 100 / perExchange); number(t, m[1]) != want {
		t.Errorf("docs/scale.md section 7: the jtis add %s %%, want %.0f (%v / %v)", m[1], want, fapiExtra, perExchange)
	}
	if m := regexp.MustCompile(`At 1,000 FAPI exchanges/s the .* add ([0-9,]+) WRU/s`).FindStringSubmatch(scale); m == nil {
		t.Error("docs/scale.md: the FAPI exchanges' added writes not found")
	} else if number(t, m[1]) != fapiExtra*1000 {
		t.Errorf("docs/scale.md section 7: 1,000 FAPI exchanges/s add %s WRU/s, want %v", m[1], fapiExtra*1000)
	}

	// The worked examples' write rates: rate × units per exchange.
	examples := regexp.MustCompile(`(?m)^\| ([0-9,]+) \| [^|]+ \| \$[0-9,]+ \| \$[0-9,]+ \| \$[0-9,]+ \| ([^|]+) \|$`).FindAllStringSubmatch(scale, -1)
	if len(examples) == 0 {
		t.Fatal("docs/scale.md: no worked examples")
	}
	wru := regexp.MustCompile(`DynamoDB[^0-9;]*?([0-9,]+) WRU/s`)
	for _, m := range examples {
		x := wru.FindStringSubmatch(m[2])
		if x == nil {
			t.Errorf("docs/scale.md: %s exchanges/s: no DynamoDB write rate", m[1])
			continue
		}
		if got, want := number(t, x[1]), number(t, m[1])*perExchange; got != want {
			t.Errorf("docs/scale.md: %s exchanges/s: DynamoDB %s WRU/s, want %.0f", m[1], x[1], want)
		}
	}
}
