package lambda_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/acmebank/authserver/shared/store/dynamo"
	"github.com/acmebank/authserver/test/template/cfn"
)

// kmsAccess is one KMS request as IAM authorizes it: the action, the key ARN it acts on ("*"
// for CreateKey) and the condition keys the request itself carries (kms:KeySpec,
// kms:KeyUsage, aws:RequestTag/<key>). The key's own tags (aws:ResourceTag/<key>) are read
// from local-kms when the access is checked.
type kmsAccess struct {
	Action   string
	Resource string
	Request  map[string]string
}

func (a kmsAccess) String() string {
	keys := make([]string, 0, len(a.Request))
	for k, v := range a.Request {
		keys = append(keys, k+"="+v)
	}
	sort.Strings(keys)
	return a.Action + " " + a.Resource + " " + strings.Join(keys, ",")
}

// kmsRecorder sits between one function and local-kms and records every KMS request, so the
// test can check the function's template policy allows each of them (local-kms does not
// enforce IAM either).
type kmsRecorder struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []kmsAccess
	// refuse, when set, is asked before a request is forwarded: true answers it
	// AccessDeniedException, as KMS does a request the caller's policies refuse.
	refuse func(kmsAccess) bool
	// calls are the requests (not the TagResource a CreateKey implies) in the order they
	// arrived, with when the proxy received each and had answered it.
	calls []dynamo.Span
	// latency (nanoseconds) holds each request that long before it is answered: the network
	// between a function and KMS, which local-kms on the same machine does not have.
	latency atomic.Int64
}

type kmsRequestKey struct{}

// kmsRequest is the part of a KMS request body IAM conditions look at.
type kmsRequest struct {
	KeyId, KeySpec, KeyUsage, SigningAlgorithm string
	Tags                                       []struct{ TagKey, TagValue string }
	// Data-key mode: Decrypt and GenerateDataKeyPairWithoutPlaintext.
	KeyPairSpec       string
	EncryptionContext map[string]string
}

func newKMSRecorder(target string) (*kmsRecorder, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	rec := &kmsRecorder{}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host // the SigV4 signature covers the Host header
		},
		// CreateKey with Tags also needs kms:TagResource on the new key, whose ARN only the
		// answer tells.
		ModifyResponse: func(resp *http.Response) error {
			req, _ := resp.Request.Context().Value(kmsRequestKey{}).(*kmsRequest)
			if req == nil || len(req.Tags) == 0 || resp.StatusCode != http.StatusOK {
				return nil
			}
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				return err
			}
			resp.Body = io.NopCloser(bytes.NewReader(body))
			var out struct{ KeyMetadata struct{ Arn string } }
			_ = json.Unmarshal(body, &out)
			rec.add(kmsAccess{Action: "kms:TagResource", Resource: out.KeyMetadata.Arn, Request: requestTags(req)})
			return nil
		},
	}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "TrentService.")
		req := &kmsRequest{}
		_ = json.Unmarshal(body, req)
		a := kmsAccess{Action: "kms:" + op, Resource: req.KeyId, Request: map[string]string{}}
		if a.Resource != "" && !strings.HasPrefix(a.Resource, "arn:") {
			// IAM authorizes the key's ARN, whichever form of its id the request names.
			a.Resource = "arn:aws:kms:" + templateParams["AWS::Region"] + ":" + templateParams["AWS::AccountId"] + ":key/" + a.Resource
		}
		for k, v := range req.EncryptionContext {
			a.Request["kms:EncryptionContext:"+k] = v
		}
		if req.KeyPairSpec != "" {
			a.Request["kms:DataKeyPairSpec"] = req.KeyPairSpec
		}
		if op == "CreateKey" {
			a.Resource = "*"
			a.Request = requestTags(req)
			a.Request["kms:KeySpec"], a.Request["kms:KeyUsage"] = req.KeySpec, req.KeyUsage
			r = r.WithContext(context.WithValue(r.Context(), kmsRequestKey{}, req))
		}
		if op == "Sign" {
			a.Request["kms:SigningAlgorithm"] = req.SigningAlgorithm
		}
		rec.add(a)
		i := rec.arrived(op)
		time.Sleep(time.Duration(rec.latency.Load()))
		aw := &answerWriter{ResponseWriter: w, answered: func() { rec.answered(i) }}
		defer aw.done()
		w = aw
		if rec.refuse != nil && rec.refuse(a) {
			w.Header().Set("Content-Type", "application/x-amz-json-1.1")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"__type":"AccessDeniedException","message":"refused by the template's IAM or key policy"}`)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	return rec, nil
}

// requestTags are a request's aws:RequestTag/<key> values and its aws:TagKeys (the keys,
// joined by commas: a multi-valued condition key, which ForAllValues reads as a set).
func requestTags(req *kmsRequest) map[string]string {
	m := map[string]string{}
	var keys []string
	for _, t := range req.Tags {
		m["aws:RequestTag/"+t.TagKey] = t.TagValue
		keys = append(keys, t.TagKey)
	}
	if len(keys) > 0 {
		m["aws:TagKeys"] = strings.Join(keys, ",")
	}
	return m
}

func (k *kmsRecorder) add(a kmsAccess) {
	k.mu.Lock()
	k.got = append(k.got, a)
	k.mu.Unlock()
}

// arrived notes a request as it comes in and returns its index in calls, for answered.
func (k *kmsRecorder) arrived(op string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.calls) >= maxCalls {
		return -1
	}
	k.calls = append(k.calls, dynamo.Span{Op: op, Start: time.Now()})
	return len(k.calls) - 1
}

// answered notes that the request arrived numbered i has had its answer.
func (k *kmsRecorder) answered(i int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if i >= 0 && i < len(k.calls) {
		k.calls[i].End = time.Now()
	}
}

// requests is how many requests the function has sent (a mark for callsSince).
func (k *kmsRecorder) requests() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.calls)
}

// callsSince returns the requests from the n-th on (n is a requests() taken before them).
func (k *kmsRecorder) callsSince(n int) []dynamo.Span {
	k.mu.Lock()
	defer k.mu.Unlock()
	if n >= len(k.calls) {
		return nil
	}
	return slices.Clone(k.calls[n:])
}

func (k *kmsRecorder) url() string { return k.srv.URL }

// total is how many KMS requests the function made.
func (k *kmsRecorder) total() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.got)
}

// count is how many requests of action ("kms:Sign") the function made.
func (k *kmsRecorder) count(action string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, a := range k.got {
		if a.Action == action {
			n++
		}
	}
	return n
}
func (k *kmsRecorder) close() { k.srv.Close() }

// accesses returns what was recorded so far, deduplicated.
func (k *kmsRecorder) accesses() []kmsAccess {
	k.mu.Lock()
	defer k.mu.Unlock()
	seen := map[string]bool{}
	var out []kmsAccess
	for _, a := range k.got {
		if s := a.String(); !seen[s] {
			seen[s] = true
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// iamPattern turns an IAM resource pattern into a regexp: * matches any run of characters
// ('/' included), ? one character.
func iamPattern(p string) *regexp.Regexp {
	q := regexp.QuoteMeta(p)
	q = strings.ReplaceAll(q, `\*`, `.*`)
	q = strings.ReplaceAll(q, `\?`, `.`)
	return regexp.MustCompile("^" + q + "$")
}

// kmsAllowedBy reports whether one of the statements allows the access: the action, a
// resource pattern that matches the key ARN, and every condition satisfied. resourceTags are
// the tags of the key acted on, plus its kms:KeySpec and kms:KeyUsage (the condition keys of a
// key resource operation; no tag key starts with "kms:" here). Only the
// condition operators the template uses (StringEquals, StringLike) are understood; any other
// makes the statement not apply, so a new operator fails here rather than passing unchecked.
func kmsAllowedBy(ev *cfn.Evaluator, stmts []cfn.Statement, a kmsAccess, resourceTags map[string]string) (bool, error) {
	for _, s := range stmts {
		if s.Effect != "Allow" || !contains(s.Actions, a.Action) {
			continue
		}
		resourceOK := false
		for _, r := range s.Resources {
			p, err := ev.Eval(r)
			if err != nil {
				return false, err
			}
			if p == "*" || (a.Resource != "*" && iamPattern(p).MatchString(a.Resource)) {
				resourceOK = true
			}
		}
		if !resourceOK {
			continue
		}
		condOK := true
		for op, kv := range s.Condition {
			for key, want := range cfn.AsMap(kv) {
				got, ok := a.Request[key]
				if tag, isTag := strings.CutPrefix(key, "aws:ResourceTag/"); isTag {
					got, ok = resourceTags[tag]
				}
				if !ok && (key == "kms:KeySpec" || key == "kms:KeyUsage") {
					// Not a request parameter: the key's own (a key resource operation).
					got, ok = resourceTags[key]
				}
				wants := cfn.AsSlice(want)
				if len(wants) == 0 {
					wants = []any{want}
				}
				var vals []string
				for _, w := range wants {
					v, err := ev.Eval(w)
					if err != nil {
						return false, err
					}
					vals = append(vals, v)
				}
				match := false
				switch op {
				case "StringEquals":
					match = ok && slices.Contains(vals, got)
				case "StringLike":
					match = ok && slices.ContainsFunc(vals, func(v string) bool { return iamPattern(v).MatchString(got) })
				case "ForAllValues:StringEquals": // every value of a multi-valued key (none: true)
					match = true
					for _, g := range strings.Split(got, ",") {
						match = match && (!ok || slices.Contains(vals, g))
					}
				}
				condOK = condOK && match
			}
		}
		if condOK {
			return true, nil
		}
	}
	return false, nil
}

// checkKMSIAM fails when the function made a KMS request its template policy does not allow
// (AccessDenied in AWS), and logs what it did. Key tags come from local-kms through inspect.
func checkKMSIAM(t *testing.T, params map[string]string, name string, rec *kmsRecorder, inspect *kms.Client) {
	t.Helper()
	tpl, err := cfn.Load()
	if err != nil {
		t.Fatal(err)
	}
	ev := tpl.NewEvaluator(params)
	stmts, err := tpl.StatementsIn(ev, tpl.Resources[functions[name]])
	if err != nil {
		t.Fatal(err)
	}
	var used []string
	for _, a := range rec.accesses() {
		tags, err := keyTags(inspect, a)
		if err != nil {
			t.Fatal(err)
		}
		ok, err := kmsAllowedBy(ev, stmts, a, tags)
		if err != nil {
			t.Fatalf("%s: evaluating the policy: %v", name, err)
		}
		if !ok {
			t.Errorf("%s: %s (key tags %v) is not allowed by %s's policy in template.yaml", name, a, tags, functions[name])
		}
		if onWrapKey(params, a) {
			allowed, err := wrapKeyAllows(tpl, ev, cfn.KMSRequest{Principal: roleARN(functions[name] + "Role"), IAMAllows: ok, Action: a.Action, Context: a.Request})
			if err != nil {
				t.Fatalf("%s: evaluating the wrapping key's policy: %v", name, err)
			}
			if !allowed {
				t.Errorf("%s: %s is refused by the wrapping key's policy (SigningKeyWrapKey in template.yaml)", name, a)
			}
		}
		used = append(used, a.Action)
	}
	sort.Strings(used)
	t.Logf("%s KMS requests: %s", name, strings.Join(compact(used), ", "))
}

// keyTags are the tags of the key a acts on, plus its kms:KeySpec and kms:KeyUsage (the
// condition keys of key resource operations, kept apart from the tags by their kms: prefix),
// read from local-kms through inspect; none for a request on no key (CreateKey).
func keyTags(inspect *kms.Client, a kmsAccess) (map[string]string, error) {
	tags := map[string]string{}
	if a.Resource == "*" || a.Resource == "" {
		return tags, nil
	}
	out, err := inspect.ListResourceTags(context.Background(), &kms.ListResourceTagsInput{KeyId: aws.String(a.Resource)})
	if err != nil {
		return nil, fmt.Errorf("tags of %s: %w", a.Resource, err)
	}
	for _, tg := range out.Tags {
		tags[aws.ToString(tg.TagKey)] = aws.ToString(tg.TagValue)
	}
	desc, err := inspect.DescribeKey(context.Background(), &kms.DescribeKeyInput{KeyId: aws.String(a.Resource)})
	if err != nil {
		return nil, fmt.Errorf("describe %s: %w", a.Resource, err)
	}
	tags["kms:KeySpec"], tags["kms:KeyUsage"] = string(desc.KeyMetadata.KeySpec), string(desc.KeyMetadata.KeyUsage)
	return tags, nil
}

// refusedAs returns the check the KMS recorder applies to a function running as fnID's role
// (s.enforceAs): a request fnID's IAM policies in template.yaml do not allow, or (on the
// wrapping key) the key's policy refuses that role, is refused; so is one that cannot be
// evaluated.
func (s *stack) refusedAs(fnID string) func(kmsAccess) bool {
	return func(a kmsAccess) bool {
		tpl, err := cfn.Load()
		if err != nil {
			return true
		}
		ev := tpl.NewEvaluator(s.params)
		stmts, err := tpl.StatementsIn(ev, tpl.Resources[fnID])
		if err != nil {
			return true
		}
		tags, err := keyTags(s.kms, a)
		if err != nil {
			return true
		}
		iam, err := kmsAllowedBy(ev, stmts, a, tags)
		if err != nil || !iam {
			return true
		}
		if !onWrapKey(s.params, a) {
			return false
		}
		allowed, err := wrapKeyAllows(tpl, ev, cfn.KMSRequest{Principal: roleARN(fnID + "Role"), IAMAllows: true, Action: a.Action, Context: a.Request})
		return err != nil || !allowed
	}
}

// roleARN is the ARN of a role of the stack, by logical id, as the key policy checks name it.
func roleARN(logicalID string) string {
	return "arn:aws:iam::" + templateParams["AWS::AccountId"] + ":role/" + logicalID
}

// onWrapKey reports whether the access is to the data-key wrapping key (params name it by
// its key ID, as !Ref gives it).
func onWrapKey(params map[string]string, a kmsAccess) bool {
	wrap := params["SigningKeyWrapKey"]
	return wrap != "" && strings.HasSuffix(a.Resource, ":key/"+wrap)
}

// wrapKeyAllows evaluates the wrapping key's policy in template.yaml for the request, as KMS
// does on top of the caller's IAM policies (cfn.KeyPolicyAllows).
func wrapKeyAllows(tpl *cfn.Template, ev *cfn.Evaluator, r cfn.KMSRequest) (bool, error) {
	stmts, err := ev.KeyPolicy(tpl.Resources["SigningKeyWrapKey"], roleARN)
	if err != nil {
		return false, err
	}
	return cfn.KeyPolicyAllows(stmts, r)
}

// TestWrapKeyPolicy_AdministratorsAreRefusedItsUse: the policy the harness checks every
// request to the wrapping key against refuses an administrator role (AdministratorAccess,
// named in KeyAdminRoleArns or not) every use of the key, and the rotation its deletion, while
// it allows the two functions what they do (their real requests are checked by checkKMSIAM in
// the data-key flows).
func TestWrapKeyPolicy_AdministratorsAreRefusedItsUse(t *testing.T) {
	tpl, err := cfn.Load()
	if err != nil {
		t.Fatal(err)
	}
	admin := roleARN("Admin")
	ctx := map[string]string{"kms:EncryptionContext:authserver:purpose": "id-token-signing"}
	for _, admins := range []string{"", admin} {
		params := maps.Clone(templateParams)
		params["SigningMode"], params["KeyAdminRoleArns"] = "data-key", admins
		ev := tpl.NewEvaluator(params)
		for _, tc := range []struct {
			name string
			r    cfn.KMSRequest
			want bool
		}{
			{"token function unwraps", cfn.KMSRequest{Principal: roleARN("TokenFunctionRole"), IAMAllows: true, Action: "kms:Decrypt", Context: ctx}, true},
			{"rotation wraps", cfn.KMSRequest{Principal: roleARN("RotateKeysFunctionRole"), IAMAllows: true, Action: "kms:GenerateDataKeyPairWithoutPlaintext", Context: ctx}, true},
			{"administrator unwraps", cfn.KMSRequest{Principal: admin, IAMAllows: true, Action: "kms:Decrypt", Context: ctx}, false},
			{"administrator wraps", cfn.KMSRequest{Principal: admin, IAMAllows: true, Action: "kms:GenerateDataKeyPairWithoutPlaintext", Context: ctx}, false},
			{"administrator grants itself use", cfn.KMSRequest{Principal: admin, IAMAllows: true, Action: "kms:CreateGrant"}, false},
			{"rotation schedules the key's deletion", cfn.KMSRequest{Principal: roleARN("RotateKeysFunctionRole"), IAMAllows: true, Action: "kms:ScheduleKeyDeletion"}, false},
		} {
			got, err := wrapKeyAllows(tpl, ev, tc.r)
			if err != nil || got != tc.want {
				t.Errorf("KeyAdminRoleArns %q: %s: allowed %v (%v), want %v", admins, tc.name, got, err, tc.want)
			}
		}
	}
}

func compact(ss []string) []string {
	var out []string
	for i, s := range ss {
		if i == 0 || s != ss[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// TestKMSAllowedBy_MatchesActionResourceAndTags evaluates the template's own KMS statements:
// the token function may Sign with a key tagged for this stack, with the three id_token signing
// algorithms only, and nothing else; the rotation may create only tagged RSA_2048 and
// ECC_NIST_P256 signing keys.
func TestKMSAllowedBy_MatchesActionResourceAndTags(t *testing.T) {
	tpl, err := cfn.Load()
	if err != nil {
		t.Fatal(err)
	}
	ev := tpl.NewEvaluator(templateParams)
	tag, err := ev.Eval(cfn.Path(tpl.Globals, "Environment", "Variables", "AUTH_KMS_KEY_TAG"))
	if err != nil {
		t.Fatal(err)
	}
	key := "arn:aws:kms:" + templateParams["AWS::Region"] + ":" + templateParams["AWS::AccountId"] + ":key/1234abcd-12ab-34cd-56ef-1234567890ab"
	ours := map[string]string{"authserver:purpose": tag}
	// A signing key the rotation made, and the data-key wrapping key, both tagged for the stack.
	signingKey := map[string]string{"authserver:purpose": tag, "kms:KeySpec": "RSA_2048", "kms:KeyUsage": "SIGN_VERIFY"}
	wrappingKey := map[string]string{"authserver:purpose": tag, "kms:KeySpec": "SYMMETRIC_DEFAULT", "kms:KeyUsage": "ENCRYPT_DECRYPT"}
	tagging := func(tags map[string]string) kmsAccess {
		a := kmsAccess{Action: "kms:TagResource", Resource: key, Request: map[string]string{}}
		var keys []string
		for k, v := range tags {
			a.Request["aws:RequestTag/"+k] = v
			keys = append(keys, k)
		}
		sort.Strings(keys)
		a.Request["aws:TagKeys"] = strings.Join(keys, ",")
		return a
	}
	create := func(spec, usage string, tags map[string]string) kmsAccess {
		a := kmsAccess{Action: "kms:CreateKey", Resource: "*", Request: map[string]string{"kms:KeySpec": spec, "kms:KeyUsage": usage}}
		for k, v := range tags {
			a.Request["aws:RequestTag/"+k] = v
		}
		return a
	}
	sign := func(key, alg string) kmsAccess {
		return kmsAccess{Action: "kms:Sign", Resource: key, Request: map[string]string{"kms:SigningAlgorithm": alg}}
	}
	for _, tc := range []struct {
		name, fn string
		a        kmsAccess
		keyTags  map[string]string
		want     bool
	}{
		{"token signs RS256 with a stack key", "token", sign(key, "RSASSA_PKCS1_V1_5_SHA_256"), ours, true},
		{"token signs PS256 with a stack key", "token", sign(key, "RSASSA_PSS_SHA_256"), ours, true},
		{"token signs ES256 with a stack key", "token", sign(key, "ECDSA_SHA_256"), ours, true},
		{"token signs with another algorithm", "token", sign(key, "RSASSA_PKCS1_V1_5_SHA_512"), ours, false},
		{"token signs without an algorithm", "token", kmsAccess{Action: "kms:Sign", Resource: key}, ours, false},
		{"token signs with another stack's key", "token", sign(key, "ECDSA_SHA_256"), map[string]string{"authserver:purpose": "other"}, false},
		{"token signs with an untagged key", "token", sign(key, "RSASSA_PSS_SHA_256"), nil, false},
		{"token signs with a key of another account", "token", sign(strings.Replace(key, templateParams["AWS::AccountId"], "999999999999", 1), "RSASSA_PKCS1_V1_5_SHA_256"), ours, false},
		{"token reads a public key", "token", kmsAccess{Action: "kms:GetPublicKey", Resource: key}, ours, false},
		{"jwks signs", "jwks", sign(key, "RSASSA_PKCS1_V1_5_SHA_256"), ours, false},
		{"rotation creates a tagged RSA signing key", "rotatekeys", create("RSA_2048", "SIGN_VERIFY", ours), nil, true},
		{"rotation creates a tagged P-256 signing key", "rotatekeys", create("ECC_NIST_P256", "SIGN_VERIFY", ours), nil, true},
		{"rotation creates a P-384 key", "rotatekeys", create("ECC_NIST_P384", "SIGN_VERIFY", ours), nil, false},
		{"rotation creates an RSA 4096 key", "rotatekeys", create("RSA_4096", "SIGN_VERIFY", ours), nil, false},
		{"rotation creates an encryption key", "rotatekeys", create("RSA_2048", "ENCRYPT_DECRYPT", ours), nil, false},
		{"rotation creates an untagged key", "rotatekeys", create("RSA_2048", "SIGN_VERIFY", nil), nil, false},
		{"rotation schedules a stack signing key's deletion", "rotatekeys", kmsAccess{Action: "kms:ScheduleKeyDeletion", Resource: key}, signingKey, true},
		{"rotation schedules the wrapping key's deletion", "rotatekeys", kmsAccess{Action: "kms:ScheduleKeyDeletion", Resource: key}, wrappingKey, false},
		{"rotation tags its new signing key", "rotatekeys", tagging(ours), signingKey, true},
		{"rotation tags a symmetric key", "rotatekeys", tagging(ours), wrappingKey, false},
		{"rotation adds another tag", "rotatekeys", tagging(map[string]string{"authserver:purpose": tag, "owner": "x"}), signingKey, false},
		{"rotation reads a stack signing key's public key", "rotatekeys", kmsAccess{Action: "kms:GetPublicKey", Resource: key}, signingKey, true},
		{"rotation schedules another key's deletion", "rotatekeys", kmsAccess{Action: "kms:ScheduleKeyDeletion", Resource: key}, nil, false},
		{"rotation signs", "rotatekeys", sign(key, "RSASSA_PKCS1_V1_5_SHA_256"), ours, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stmts, err := tpl.Statements(tpl.Resources[functions[tc.fn]])
			if err != nil {
				t.Fatal(err)
			}
			got, err := kmsAllowedBy(ev, stmts, tc.a, tc.keyTags)
			if err != nil || got != tc.want {
				t.Errorf("kmsAllowedBy(%s) = %v, %v, want %v", tc.a, got, err, tc.want)
			}
		})
	}
}
