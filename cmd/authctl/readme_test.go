package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/google/shlex"

	"github.com/acmebank/authserver/shared/httpapi"
)

// readmeSection is the text of README.md's section with the given heading, up to the next one.
func readmeSection(t *testing.T, heading string) string {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i := strings.Index(s, "\n## "+heading+"\n")
	if i < 0 {
		t.Fatalf("README.md has no section %q", heading)
	}
	s = s[i+1:]
	if j := strings.Index(s[3:], "\n## "); j >= 0 {
		s = s[:j+3]
	}
	return s
}

// shellWords splits a command line as a POSIX shell does (google/shlex: quotes, escapes and a
// trailing # comment) once backslash-newline continuations are joined.
func shellWords(line string) []string {
	line = strings.ReplaceAll(line, "\\\n", " ") // a backslash-newline continues the line
	words, err := shlex.Split(line)              // POSIX quoting and comments, as the shell reads it
	if err != nil {
		return nil
	}
	return words
}

// TestREADME_DynamoDBModeStepsSignInWithPKCE follows README.md's DynamoDB mode as written: the
// client registered by its `authctl clients create` line (PKCE required, the default), the
// authorize URL its shell lines print (run with bash and openssl), the sign-in, and the
// exchange with the code_verifier its curl line sends. The same URL without the PKCE
// parameters (the steps of the embedded mode) is refused.
func TestREADME_DynamoDBModeStepsSignInWithPKCE(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl is not installed: the README's PKCE lines use it")
	}
	section := readmeSection(t, "DynamoDB mode")
	create := regexp.MustCompile(`(?m)^go run \./cmd/authctl (clients create [^\n]*\\\n[^\n]*)`).FindStringSubmatch(section)
	if create == nil {
		t.Fatal("README.md's DynamoDB mode has no `authctl clients create` line")
	}
	tl := dynamoTool(t)
	var c createdClient
	tl.okJSON(&c, "", shellWords(create[1])...)
	if !c.Client.RequirePKCE {
		t.Fatal("the README's client does not require PKCE: the default changed")
	}
	tl.ok("correct-horse-battery-staple\n", "users", "create", "demo", "--password-stdin")
	tl.ok("", "keys", "rotate") // what the server's rotation at start does
	s := tl.serve()
	defer s.stop()

	block := regexp.MustCompile("(?s)```sh\n(CLIENT_ID=[^\n]*\n.*?)```").FindStringSubmatch(section)
	if block == nil {
		t.Fatal("README.md's DynamoDB mode has no block computing the PKCE parameters")
	}
	lines := strings.SplitN(block[1], "\n", 2) // the first line is the operator's copy of the client
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", lines[1]+"\necho \"$VERIFIER\"\n")
	cmd.Env = append(os.Environ(), "CLIENT_ID="+c.Client.ClientID)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the README's PKCE lines: %v\n%s", err, out)
	}
	printed := strings.Fields(string(out))
	if len(printed) != 2 {
		t.Fatalf("the README's PKCE lines printed %q, want the URL and the verifier", out)
	}
	authURL := strings.Replace(printed[0], "http://127.0.0.1:8080", s.srv.URL, 1)
	verifier := printed[1]

	// Without the PKCE parameters the client's request is refused before any sign-in.
	u, _ := url.Parse(authURL)
	q := u.Query()
	q.Del("code_challenge")
	q.Del("code_challenge_method")
	u.RawQuery = q.Encode()
	b := newBrowser(t)
	if b.open(u.String()); strings.Contains(b.last, `type="password"`) {
		t.Fatal("the authorize URL without PKCE reached the login page")
	}

	loc := s.signIn(t, authURL, "demo", "correct-horse-battery-staple")
	code := loc.Query().Get("code")
	if code == "" {
		t.Fatalf("no code in the redirect %s", loc.Redacted())
	}
	if !strings.Contains(section, `-d code_verifier="$VERIFIER"`) || !strings.Contains(section, `-u "$CLIENT_ID:$SECRET"`) {
		t.Fatal("the README's token request does not send the verifier with HTTP Basic")
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI}, "code_verifier": {verifier}}
	req, _ := http.NewRequest(http.MethodPost, s.url(httpapi.PathToken), strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(c.Client.ClientID), url.QueryEscape(c.ClientSecret))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&tok)
	if resp.StatusCode != http.StatusOK || tok["access_token"] == nil || tok["id_token"] == nil {
		t.Fatalf("the README's exchange answered %d: %v", resp.StatusCode, tok)
	}
}
