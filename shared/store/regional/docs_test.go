package regional_test

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/regional"
)

// TestDocs_MultiregionListsTheRoutingTable: docs/multiregion.md lists every method of
// oauth.Store with the route and the reason the routing table gives it, so the page cannot
// drift from the code. On a mismatch the test prints the table as it should read.
func TestDocs_MultiregionListsTheRoutingTable(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/multiregion.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(\\w+)` \\| (home|local) \\| (.*) \\|$")
	documented := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = m[2] + " | " + m[3]
	}
	routes := regional.Routes()
	iface := reflect.TypeFor[oauth.Store]()
	var want strings.Builder
	ok := len(documented) == iface.NumMethod()
	for i := range iface.NumMethod() {
		name := iface.Method(i).Name
		r := routes[name]
		line := fmt.Sprintf("%v | %s", r.Route, r.Reason)
		fmt.Fprintf(&want, "| `%s` | %s |\n", name, line)
		if documented[name] != line {
			ok = false
			t.Errorf("docs/multiregion.md on %s: %q, want %q", name, documented[name], line)
		}
	}
	if !ok {
		t.Errorf("docs/multiregion.md's routing table should read:\n| method | route | why |\n|---|---|---|\n%s", want.String())
	}
}
