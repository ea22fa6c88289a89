package template_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/acmebank/authserver/test/template/cfn"
)

// The template gates run the real tools: cfn-lint (AWS's linter, with the CloudFormation
// resource schemas) and aws-sam-translator (the SAM transform itself). Both are Python; the
// machine image preinstalls them. Outside CI a machine without them skips these tests with
// what to install; in CI (CI=true) a missing tool fails the build, so the gates never go
// silently unrun. scripts/test.sh also checks for them before it runs anything.
const installTools = "pip install cfn-lint==1.51.0 aws-sam-translator==1.110.0"

// tool returns the command line of a template gate, or skips (fails in CI) when it is missing.
func tool(t *testing.T, name string, probe ...string) {
	t.Helper()
	out, err := exec.Command(probe[0], probe[1:]...).CombinedOutput()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("%s is not usable (%v: %s); install it: %s", name, err, bytes.TrimSpace(out), installTools)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

func TestTemplate_CfnLintIsClean(t *testing.T) {
	tool(t, "cfn-lint", "cfn-lint", "--version")
	cmd := exec.Command("cfn-lint", "template.yaml")
	cmd.Dir = rootDir(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cfn-lint template.yaml: %v\n%s", err, out)
	}
}

// TestTemplate_SuppressedChecksSayWhy keeps every cfn-lint suppression honest: the line above
// each ignore_checks is a comment giving the reason.
func TestTemplate_SuppressedChecksSayWhy(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(rootDir(t), "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if strings.Contains(l, "ignore_checks") && (i == 0 || !strings.HasPrefix(strings.TrimSpace(lines[i-1]), "#")) {
			t.Errorf("template.yaml:%d suppresses %s with no comment above it saying why", i+1, strings.TrimSpace(l))
		}
	}
}

// transformed is the SAM transform's output, run once for the tests that read it.
var transformed struct {
	once   sync.Once
	tpl    *cfn.Template
	failed string
}

// samTransform runs test/template/samtranslate.py: the SAM transform over the template with
// its CodeUris replaced by S3 URIs, as `sam package` leaves it.
func samTransform(t *testing.T) *cfn.Template {
	t.Helper()
	tool(t, "aws-sam-translator", "python3", "-c", "import samtranslator")
	root := rootDir(t)
	transformed.once.Do(func() {
		cmd := exec.Command("python3", filepath.Join(root, "test", "template", "samtranslate.py"), filepath.Join(root, "template.yaml"))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			transformed.failed = fmt.Sprintf("SAM transform failed: %v\n%s", err, stderr.String())
			return
		}
		if transformed.tpl, err = cfn.Parse(out); err != nil { // JSON is YAML
			transformed.failed = fmt.Sprintf("SAM transform printed no template: %v", err)
		}
	})
	if transformed.failed != "" {
		t.Fatal(transformed.failed)
	}
	return transformed.tpl
}

func TestTemplate_SAMTransformSucceedsOnThePackagedTemplate(t *testing.T) {
	out := samTransform(t)
	src := load(t)
	for id, r := range out.Resources {
		if strings.HasPrefix(fmt.Sprint(r["Type"]), "AWS::Serverless::") {
			t.Errorf("%s is still %v after the transform", id, r["Type"])
		}
	}
	for id := range src.Functions() {
		fn := out.Resources[id]
		if fn["Type"] != "AWS::Lambda::Function" {
			t.Errorf("%s: transformed to %v, want AWS::Lambda::Function", id, fn["Type"])
			continue
		}
		if cfn.Path(fn, "Properties", "Code", "S3Bucket") == nil {
			t.Errorf("%s: Code = %v, want the packaged S3 object", id, cfn.Path(fn, "Properties", "Code"))
		}
	}
	if !reflect.DeepEqual(cfn.Path(out.Resources["InitialKey"], "Properties", "ServiceToken"), map[string]any{"Fn::GetAtt": []any{"RotateKeysFunction", "Arn"}}) {
		t.Errorf("InitialKey's ServiceToken = %v, want RotateKeysFunction's ARN", cfn.Path(out.Resources["InitialKey"], "Properties", "ServiceToken"))
	}
	if _, ok := out.Raw["Rules"]; !ok {
		t.Error("the transform dropped the Rules")
	}
}

// TestTemplate_TransformGivesEveryFunctionTheSameTiming checks the same on what the SAM
// transform itself produced (Globals merged into each function by SAM, not by our reading).
func TestTemplate_TransformGivesEveryFunctionTheSameTiming(t *testing.T) {
	out := samTransform(t)
	var first map[string]any
	var firstID string
	for id := range load(t).GoFunctions() {
		env := cfn.AsMap(cfn.Path(out.Resources[id], "Properties", "Environment", "Variables"))
		timing := map[string]any{}
		for k, v := range env {
			if timingSetting(k) {
				timing[k] = v
			}
		}
		if len(timing) == 0 {
			t.Fatalf("%s: no timing variables after the transform", id)
		}
		if first == nil {
			first, firstID = timing, id
			continue
		}
		if !reflect.DeepEqual(timing, first) {
			t.Errorf("%s's timing %v differs from %s's %v", id, timing, firstID, first)
		}
	}
}
