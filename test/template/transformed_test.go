package template_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/test/template/cfn"
)

// The tests of this file read the template as CloudFormation receives it: the SAM transform's
// output (samTransform), rendered for each deployment (deployments) with its conditions
// evaluated, so a property the transform rewrites (SAM turns a schedule event's
// `Enabled: !If [...]` into `State: ENABLED`, since the !If object is truthy) is seen as it
// will be deployed, not as it was written.

// describe names a deployment in a message by the parameters that tell deployments apart.
func describe(ev *cfn.Evaluator) string {
	p := ev.Params()
	var parts []string
	for _, k := range []string{"AWS::Region", "SecondaryRegion", "SigningMode", "KeyTag", "DPoPNonces", "PublicDomainName", "CustomDomainName", "Environment"} {
		if p[k] != "" {
			parts = append(parts, k+"="+p[k])
		}
	}
	return strings.Join(parts, " ")
}

func TestTransform_DeploymentsGiveEveryConditionBothValues(t *testing.T) {
	out := samTransform(t)
	evs := deployments(out)
	if len(out.Conditions) == 0 {
		t.Fatal("the transformed template has no Conditions")
	}
	for name := range out.Conditions {
		seen := map[bool]bool{}
		for _, ev := range evs {
			v, err := ev.Cond(name)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			seen[v] = true
		}
		if len(seen) != 2 {
			t.Errorf("condition %s is only ever %v in the %d deployments checked: add one giving it the other value", name, seen, len(evs))
		}
	}
}

// rotationSchedules are the rendered EventBridge rules and EventBridge Scheduler schedules
// that invoke RotateKeysFunction, and whether each is enabled.
func rotationSchedules(t *testing.T, r *cfn.Rendered) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for id, res := range r.Resources {
		var targets []any
		switch res["Type"] {
		case "AWS::Events::Rule":
			targets = cfn.AsSlice(cfn.Path(res, "Properties", "Targets"))
		case "AWS::Scheduler::Schedule":
			targets = []any{cfn.Path(res, "Properties", "Target")}
		default:
			continue
		}
		if !slices.ContainsFunc(targets, func(tg any) bool { return cfn.Refs(cfn.AsMap(tg)["Arn"], "RotateKeysFunction") }) {
			continue
		}
		state := cfn.Path(res, "Properties", "State")
		if state == nil {
			state = "ENABLED" // both resource types' default
		}
		s, ok := state.(string)
		if !ok {
			t.Fatalf("%s: State %v is not a value after the conditions are evaluated", id, state)
		}
		out[id] = s == "ENABLED"
	}
	return out
}

// TestTransform_RotationScheduleRunsOnlyInTheRegionThatRotates: in a single region and in a
// multi-region pair's primary, one enabled schedule runs the rotation on RotationSchedule and
// InitialKey runs it at deploy; in the secondary (whose rotation refuses every run: the key
// registry has one writer) nothing runs it, so no failing run every hour keeps an alarm on.
func TestTransform_RotationScheduleRunsOnlyInTheRegionThatRotates(t *testing.T) {
	out := samTransform(t)
	checked := map[string]bool{}
	failures := map[string]int{} // each failure once, with the number of deployments it has
	for _, ev := range deployments(out) {
		r, err := ev.Render()
		if err != nil {
			t.Fatalf("%s: %v", describe(ev), err)
		}
		rotation, err := ev.Eval(cfn.Path(r.Resources["RotateKeysFunction"], "Properties", "Environment", "Variables", config.EnvKeyRotation))
		if err != nil {
			t.Fatalf("%s: %s: %v", describe(ev), config.EnvKeyRotation, err)
		}
		rotates := rotation == "on"
		checked[rotation] = true
		var enabled []string
		for id, on := range rotationSchedules(t, r) {
			if on {
				enabled = append(enabled, id)
				if !cfn.Refs(cfn.Path(r.Resources[id], "Properties", "ScheduleExpression"), "RotationSchedule") {
					t.Errorf("%s: %s runs on %v, want the RotationSchedule parameter", describe(ev), id, cfn.Path(r.Resources[id], "Properties", "ScheduleExpression"))
				}
			}
		}
		_, initial := r.Resources["InitialKey"]
		var msg string
		switch {
		case rotates && (len(enabled) != 1 || !initial):
			msg = fmt.Sprintf("the rotation writes the registry, but enabled schedules %v, InitialKey %v: want one schedule and InitialKey", enabled, initial)
		case !rotates && (len(enabled) != 0 || initial):
			msg = fmt.Sprintf("%s=off, but enabled schedules %v, InitialKey %v: every run would fail", config.EnvKeyRotation, enabled, initial)
		}
		if msg != "" {
			failures[msg]++
			if failures[msg] == 1 {
				t.Errorf("%s: %s", describe(ev), msg)
			}
		}
	}
	for msg, n := range failures {
		if n > 1 {
			t.Logf("%d deployments in all: %s", n, msg)
		}
	}
	if !checked["on"] || !checked["off"] {
		t.Errorf("the deployments gave %s only %v: check both", config.EnvKeyRotation, checked)
	}
}

// TestTransform_EveryReferenceResolvesInEveryDeployment: in every deployment, every Ref,
// Fn::GetAtt, Fn::Sub variable and DependsOn of a created resource or output names a
// parameter, a pseudo parameter or a resource that this deployment creates (CloudFormation
// refuses a template that refers to a resource whose condition is false).
func TestTransform_EveryReferenceResolvesInEveryDeployment(t *testing.T) {
	out := samTransform(t)
	reported := map[string]bool{}
	for _, ev := range deployments(out) {
		r, err := ev.Render()
		if err != nil {
			t.Fatalf("%s: %v", describe(ev), err)
		}
		known := func(name string) bool {
			_, res := r.Resources[name]
			_, param := out.Parameters[name]
			return res || param || strings.HasPrefix(name, "AWS::")
		}
		check := func(kind, id string, v map[string]any) {
			refs := cfn.References(v)
			refs = append(refs, cfn.Strs(v["DependsOn"])...)
			sort.Strings(refs)
			for _, name := range refs {
				if key := kind + id + name; !known(name) && !reported[key] {
					reported[key] = true
					t.Errorf("%s: %s %s refers to %s, which this deployment does not create", describe(ev), kind, id, name)
				}
			}
		}
		for id, res := range r.Resources {
			check("resource", id, res)
		}
		for id, o := range r.Outputs {
			check("output", id, o)
		}
	}
}

// TestTransform_KeepsEveryConditionOfTheServerlessResources: what a SAM resource (or one of
// a function's events) chooses by a condition is still chosen by it in the resources the
// transform makes of it. SAM evaluates some properties itself (a schedule event's Enabled
// becomes State: ENABLED for any !If), and then the choice is silently gone.
func TestTransform_KeepsEveryConditionOfTheServerlessResources(t *testing.T) {
	src, out := load(t), samTransform(t)
	conditionsOf := func(prefix string, skip func(string) bool) map[string]bool {
		got := map[string]bool{}
		for id, res := range out.Resources {
			if !strings.HasPrefix(id, prefix) || skip(id) {
				continue
			}
			for _, c := range cfn.ConditionsIn(res) {
				got[c] = true
			}
			if c, ok := res["Condition"].(string); ok {
				got[c] = true
			}
		}
		return got
	}
	checked := 0
	for id, res := range src.Resources {
		typ, _ := res["Type"].(string)
		if !strings.HasPrefix(typ, "AWS::Serverless::") {
			continue
		}
		props := cfn.AsMap(res["Properties"])
		events := cfn.AsMap(props["Events"])
		eventPrefixes := map[string]bool{}
		for name, e := range events {
			eventPrefixes[id+name] = true
			got := conditionsOf(id+name, func(string) bool { return false })
			for _, c := range cfn.ConditionsIn(e) {
				checked++
				if !got[c] {
					t.Errorf("%s's event %s chooses by %s, which no resource the transform made of it (%s*) does", id, name, c, id+name)
				}
			}
		}
		rest := map[string]any{}
		for k, v := range props {
			if k != "Events" {
				rest[k] = v
			}
		}
		got := conditionsOf(id, func(gen string) bool {
			for p := range eventPrefixes {
				if strings.HasPrefix(gen, p) {
					return true
				}
			}
			return false
		})
		for _, c := range cfn.ConditionsIn(rest) {
			checked++
			if !got[c] {
				t.Errorf("%s chooses by %s, which no resource the transform made of it does", id, c)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no condition of a Serverless resource was checked")
	}
	t.Logf("%d conditional choices of Serverless resources checked", checked)
}
