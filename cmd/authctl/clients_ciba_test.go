package main

import (
	"strings"
	"testing"
)

// TestClients_CIBASettings: --grant-types with the ciba grant, --backchannel-delivery-mode and
// --backchannel-notification-endpoint register a ping client (shown by clients show -o json);
// an update back to poll removes the endpoint; a ping client over http is refused and nothing
// changes.
func TestClients_CIBASettings(t *testing.T) {
	tl := embeddedTool(t)
	var v clientView
	tl.ok("", "clients", "create", "--id", "bank-app", "--name", "Decoupled", "--scope", "openid",
		"--grant-types", "urn:openid:params:grant-type:ciba", "--backchannel-delivery-mode", "ping",
		"--backchannel-notification-endpoint", "https://tpp.example/ciba")
	tl.okJSON(&v, "", "clients", "show", "bank-app", "-o", "json")
	if v.BackchannelTokenDeliveryMode != "ping" || v.BackchannelClientNotificationEndpoint != "https://tpp.example/ciba" {
		t.Fatalf("after create: %+v", v)
	}
	if _, errOut, code := tl.run("", "clients", "update", "bank-app", "--backchannel-notification-endpoint", "http://tpp.example/ciba"); code != exitUsage ||
		!strings.Contains(errOut, "backchannel_client_notification_endpoint") {
		t.Fatalf("an http endpoint: exit %d %q, want a usage error", code, errOut)
	}
	v = clientView{}
	tl.okJSON(&v, "", "clients", "update", "bank-app", "--backchannel-delivery-mode", "poll", "--backchannel-notification-endpoint", "")
	if v.BackchannelTokenDeliveryMode != "poll" || v.BackchannelClientNotificationEndpoint != "" {
		t.Fatalf("after update: %+v", v)
	}
}
