package e2e

import (
	"context"
	"html"
	"io"
	"maps"
	"mime"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"golang.org/x/oauth2"

	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/keys/kmstest"
	"github.com/acmebank/authserver/shared/oauth"
)

// The customer's consent receipt (issue 29, item 6): each grant on the Connected apps page
// links its signed consent receipt, which the session's user downloads for their own live
// grants only.

// receiptLinkRe finds the apps page's receipt download links (href, HTML-escaped).
var receiptLinkRe = regexp.MustCompile(`href="(` + regexp.QuoteMeta(httpapi.PathAppsReceipt) + `\?[^"]+)"`)

// receiptLinks opens the Connected apps page in b and returns its receipt links, by grant id.
func (e *env) receiptLinks(t *testing.T, b *browser) map[string]string {
	t.Helper()
	e.appsPage(t, b)
	links := map[string]string{}
	for _, m := range receiptLinkRe.FindAllStringSubmatch(b.last, -1) {
		u := html.UnescapeString(m[1])
		id := u[strings.Index(u, "grant=")+len("grant="):]
		if i := strings.IndexByte(id, '&'); i >= 0 {
			id = id[:i]
		}
		links[id] = u
	}
	return links
}

// download is a GET of the receipt of grant id in browser b: the response and its body.
func (e *env) download(t *testing.T, b *browser, id string) (*http.Response, string) {
	t.Helper()
	resp, err := b.client.Get(e.url(httpapi.PathAppsReceipt + "?grant=" + id))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// checkDownload checks that resp is a receipt download of grant id: 200 application/jwt, an
// attachment named with the grant id, not to be stored.
func checkDownload(t *testing.T, resp *http.Response, id string) {
	t.Helper()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/jwt" {
		t.Fatalf("receipt download: %d %q, want 200 application/jwt", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	disp, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition"))
	if err != nil || disp != "attachment" || !strings.Contains(params["filename"], id) {
		t.Errorf("Content-Disposition %q, want an attachment whose filename names %s", resp.Header.Get("Content-Disposition"), id)
	}
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", resp.Header.Get("Cache-Control"))
	}
}

// jwsRe is anything shaped like a compact JWS.
var jwsRe = regexp.MustCompile(`eyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+`)

// TestConnectedApps_ReceiptDownloadVerifiesWithTheJWKSAndMatchesTheGrantAPIsReceipt: alice's
// apps page links her grant's consent receipt; the download is an application/jwt attachment
// named with the grant id, not to be stored, of typ consent-receipt+jwt, verifying against the
// served JWKS, naming her grant, the client, the scopes and authorization_details, with the
// same pairwise subject as the receipt the grant API answers the client for the same grant.
// The receipt is not in the logs. On both stores.
func TestConnectedApps_ReceiptDownloadVerifiesWithTheJWKSAndMatchesTheGrantAPIsReceipt(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		details := "[" + rarAccounts + "]"
		conf := e.oauth2Config(append([]string{"openid"}, strings.Fields(gmScopes)...)...)
		alice := newBrowser(t)
		tok := e.grantThrough(t, alice, conf, username, password, oauth2.SetAuthURLParam("authorization_details", details),
			oauth2.SetAuthURLParam("grant_management_action", "create"))
		id, _ := tok.Extra("grant_id").(string)
		if id == "" {
			t.Fatal("the token response of a create carries no grant_id")
		}
		links := e.receiptLinks(t, alice)
		link, ok := links[id]
		if !ok || !strings.Contains(alice.last, "Download consent receipt for Acceptance App") {
			t.Fatalf("alice's apps page links receipts %v, want one for her grant %s", links, id)
		}
		resp, err := alice.client.Get(e.url(link))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		checkDownload(t, resp, id)
		claims := e.checkReceipt(t, string(body), id, details)
		q := e.grantAPI(t, http.MethodGet, id, "Bearer "+tok.AccessToken)
		apiJWS, _ := q.json["consent_receipt"].(string)
		if q.status != http.StatusOK || apiJWS == "" {
			t.Fatalf("grant query: %d %s, want 200 with a consent_receipt", q.status, q.raw)
		}
		_, apiClaims := e.verifiedReceipt(t, apiJWS)
		if sub, _ := claims["sub"].(string); sub == "" || sub == "uid-alice" || sub != apiClaims["sub"] {
			t.Errorf("the downloaded receipt's sub %q, want the pairwise subject of the grant API's receipt %v", sub, apiClaims["sub"])
		}
		if strings.Contains(e.logs.String(), string(body)) {
			t.Error("a consent receipt reached the logs")
		}
	})
}

// TestConnectedApps_EachUserDownloadsOnlyTheirOwnLiveGrantsReceipt: alice and bob each allowed
// the app; a stranger has no session. Alice downloading bob's receipt, an unknown grant's, and
// bob downloading alice's are 404 pages; the stranger gets the signed-out page; no grant id is
// 400 and a POST 405: none carries a receipt and none writes, and asking for another
// customer's is audited (grant_receipt_refused). Each still downloads their own;
// once alice withdraws her grant, its receipt is 404 too. On both stores.
func TestConnectedApps_EachUserDownloadsOnlyTheirOwnLiveGrantsReceipt(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		e.addUser(t, "uid-bob", "bob", "bob-password-123456", cheapHasher)
		conf := e.oauth2Config("openid", "email")
		alice, bob, stranger := newBrowser(t), newBrowser(t), newBrowser(t)
		e.grantThrough(t, alice, conf, username, password)
		e.grantThrough(t, bob, conf, "bob", "bob-password-123456")
		aliceIDs, bobIDs := e.appsPage(t, alice), e.appsPage(t, bob)
		aliceCSRF := func() string { e.appsPage(t, alice); return alice.form.Get("csrf_token") }()
		if len(aliceIDs) != 1 || len(bobIDs) != 1 || aliceIDs[0] == bobIDs[0] {
			t.Fatalf("apps pages list alice %v and bob %v, want one grant each", aliceIDs, bobIDs)
		}

		before, items := e.writes.count(), e.itemCount(t)
		for _, c := range []struct {
			name   string
			b      *browser
			id     string
			status int
			want   string
		}{
			{"alice downloads bob's receipt", alice, bobIDs[0], http.StatusNotFound, "This access is not on your list"},
			{"alice downloads an unknown grant's receipt", alice, oauth.NewID(oauth.PrefixGrant), http.StatusNotFound, "This access is not on your list"},
			{"bob downloads alice's receipt", bob, aliceIDs[0], http.StatusNotFound, "This access is not on your list"},
			{"the stranger downloads alice's receipt", stranger, aliceIDs[0], http.StatusOK, "Sign in to see your connected apps"},
			{"alice without a grant id", alice, "", http.StatusBadRequest, "This request could not be processed"},
		} {
			resp, body := e.download(t, c.b, c.id)
			if resp.StatusCode != c.status || !strings.Contains(body, c.want) {
				t.Errorf("%s: %d, want %d with %q: %.300s", c.name, resp.StatusCode, c.status, c.want, body)
			}
			if resp.Header.Get("Content-Type") == "application/jwt" || jwsRe.MatchString(body) {
				t.Errorf("%s: answered a receipt", c.name)
			}
		}
		resp, err := alice.client.Post(e.url(httpapi.PathAppsReceipt+"?grant="+aliceIDs[0]), "application/x-www-form-urlencoded", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("a POST of the download: %d, want 405", resp.StatusCode)
		}
		if got := e.writes.list()[before:]; len(got) != 0 || e.itemCount(t) != items {
			t.Fatalf("refused downloads wrote %v", got)
		}
		if !strings.Contains(e.logs.String(), `"grant_receipt_refused"`) {
			t.Error("a download of another customer's receipt is not in the audit log")
		}

		for _, own := range []struct {
			b  *browser
			id string
		}{{alice, aliceIDs[0]}, {bob, bobIDs[0]}} {
			resp, body := e.download(t, own.b, own.id)
			checkDownload(t, resp, own.id)
			if _, claims := e.verifiedReceipt(t, body); claims["grant_id"] != own.id {
				t.Errorf("the receipt of %s names grant %v", own.id, claims["grant_id"])
			}
		}

		if resp := e.withdraw(t, alice, aliceIDs[0], aliceCSRF); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("alice's withdrawal: %d", resp.StatusCode)
		}
		if resp, body := e.download(t, alice, aliceIDs[0]); resp.StatusCode != http.StatusNotFound || jwsRe.MatchString(body) {
			t.Fatalf("the withdrawn grant's receipt: %d, want 404 without a receipt", resp.StatusCode)
		}
	})
}

// TestConnectedApps_RacingReceiptDownloadsAllVerifyWithOneSubjectAndWriteNothing: 50 downloads
// of alice's receipt at once each answer a receipt that verifies against the JWKS, all with
// the same pairwise subject, and write nothing (the salt was stored when the service started).
// On both stores.
func TestConnectedApps_RacingReceiptDownloadsAllVerifyWithOneSubjectAndWriteNothing(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		alice := newBrowser(t)
		e.grantThrough(t, alice, e.oauth2Config("openid", "email"), username, password)
		ids := e.appsPage(t, alice)
		if len(ids) != 1 {
			t.Fatalf("alice's page lists %v, want one grant", ids)
		}
		before, items := e.writes.count(), e.itemCount(t)
		const racers = 50
		bodies := make([]string, racers)
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() {
				resp, err := alice.client.Get(e.url(httpapi.PathAppsReceipt + "?grant=" + ids[0]))
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode == http.StatusOK && resp.Header.Get("Content-Type") == "application/jwt" {
					bodies[i] = string(body)
				}
			})
		}
		wg.Wait()
		subs := map[any]int{}
		for i, jws := range bodies {
			if jws == "" {
				t.Fatalf("racing download %d got no receipt", i)
			}
			_, claims := e.verifiedReceipt(t, jws)
			if claims["grant_id"] != ids[0] {
				t.Fatalf("racing download %d names grant %v", i, claims["grant_id"])
			}
			subs[claims["sub"]]++
		}
		if len(subs) != 1 {
			t.Errorf("racing downloads' receipts have %d subjects, want one: %v", len(subs), subs)
		}
		if got := e.writes.list()[before:]; len(got) != 0 || e.itemCount(t) != items {
			t.Fatalf("racing downloads wrote %v", got)
		}
	})
}

// TestConnectedApps_KeyBackendFailureAtTheDownloadIs503PageAndWritesNothing: when KMS throttles
// the receipt's signature, the download is the 503 unavailable page with Retry-After, no
// receipt and nothing written; the next download gets the receipt.
func TestConnectedApps_KeyBackendFailureAtTheDownloadIs503PageAndWritesNothing(t *testing.T) {
	e, kmsTr, _ := newAWSEnv(t)
	alice := newBrowser(t)
	e.grantThrough(t, alice, e.oauth2Config("openid", "email"), username, password)
	ids := e.appsPage(t, alice)
	if len(ids) != 1 {
		t.Fatalf("alice's page lists %v, want one grant", ids)
	}
	before, items := e.writes.count(), e.itemCount(t)
	kmsTr.Fail("Sign", kmstest.Throttling, 1)
	resp, body := e.download(t, alice, ids[0])
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "temporarily unavailable") {
		t.Fatalf("download while KMS throttles: %d %.300s, want the 503 page with Retry-After", resp.StatusCode, body)
	}
	if resp.Header.Get("Content-Type") == "application/jwt" || resp.Header.Get("Content-Disposition") != "" || jwsRe.MatchString(body) {
		t.Error("the failed download answered (part of) a receipt")
	}
	if got := e.writes.list()[before:]; len(got) != 0 || e.itemCount(t) != items {
		t.Fatalf("the failed download wrote %v", got)
	}
	resp, body = e.download(t, alice, ids[0])
	checkDownload(t, resp, ids[0])
	e.verifiedReceipt(t, body)
}

// TestConnectedApps_ClientOnSeveralHostsHasNoReceiptLinkAndItsDownloadSaysSo: for a client
// whose redirect URIs are on two hosts no receipt can be made (receipt.ErrNoSector): the apps
// page lists the grant without a receipt link, and its download is a 404 page that says so,
// with no receipt.
func TestConnectedApps_ClientOnSeveralHostsHasNoReceiptLinkAndItsDownloadSaysSo(t *testing.T) {
	e := newEnv(t)
	alice := newBrowser(t)
	e.grantThrough(t, alice, e.oauth2Config("openid", "email"), username, password)
	if err := e.app.Store.UpdateClient(context.Background(), clientID, func(c oauth.Client) (oauth.Client, error) {
		c.RedirectURIs = append(c.RedirectURIs, "https://second-host.example/cb")
		return c, nil
	}); err != nil {
		t.Fatal(err)
	}
	if links := e.receiptLinks(t, alice); len(links) != 0 || strings.Contains(alice.last, "Download consent receipt") {
		t.Fatalf("the apps page links receipts %v for a client on two hosts", links)
	}
	ids := grantIDRe.FindAllStringSubmatch(alice.last, -1)
	if len(ids) != 1 {
		t.Fatalf("the apps page lists %d grants, want alice's one", len(ids))
	}
	resp, body := e.download(t, alice, ids[0][1])
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "No consent receipt for this app") || jwsRe.MatchString(body) {
		t.Fatalf("the download of a client on two hosts: %d %.300s, want the 404 page saying there is no receipt", resp.StatusCode, body)
	}
}

// TestConnectedApps_ReceiptDownloadIsReadsAndOneKMSSign: on DynamoDB and KMS, a download (after
// the first, which warms the key cache) is strongly consistent reads only, the session, its
// user, the grant and the client, and one KMS Sign: no write, no Query, no Scan.
func TestConnectedApps_ReceiptDownloadIsReadsAndOneKMSSign(t *testing.T) {
	e, kmsTr, ddbCalls := newAWSEnv(t)
	alice := newBrowser(t)
	e.grantThrough(t, alice, e.oauth2Config("openid", "email"), username, password)
	ids := e.appsPage(t, alice)
	if len(ids) != 1 {
		t.Fatalf("alice's page lists %v, want one grant", ids)
	}
	e.download(t, alice, ids[0])
	ddbCalls.Reset()
	kmsTr.Reset()
	resp, body := e.download(t, alice, ids[0])
	checkDownload(t, resp, ids[0])
	e.verifiedReceipt(t, body)
	got, kms := ddbCalls.Calls(), kmsTr.Counts()
	t.Logf("one receipt download: DynamoDB %v, KMS %v", got, kms)
	if want := map[string]int{"GetItem": 4}; !maps.Equal(got, want) {
		t.Errorf("DynamoDB requests %v, want %v (session, user, grant, client)", got, want)
	}
	if want := map[string]int{"Sign": 1}; !maps.Equal(kms, want) {
		t.Errorf("KMS requests %v, want %v", kms, want)
	}
}
