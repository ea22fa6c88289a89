package resource

import (
	"strings"
	"testing"
)

// New refuses a check without its store ports or clock, naming every missing dependency.
func TestNew_NamesEveryMissingDependency(t *testing.T) {
	_, err := New(Deps{})
	if err == nil {
		t.Fatal("New accepted no dependencies")
	}
	for _, name := range []string{"Grants", "Replay", "Clock"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("the error %q does not name %s", err, name)
		}
	}
}
