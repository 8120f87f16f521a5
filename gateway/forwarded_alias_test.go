package gateway_test

import (
	"context"
	"slices"
	"testing"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
)

// TestUnderscoreCopiesOfSetFields: a client's underscore spelling of a
// field the gateway or its adapter sets on the forwarded request
// (Accept-Encoding, X-Forwarded-*) is removed, as the assertion's is:
// servers that map header names to variables read X_Forwarded_For as
// X-Forwarded-For.
func TestUnderscoreCopiesOfSetFields(t *testing.T) {
	p := gatewaytest.New(t, identityOpts(gateway.Options{})...)
	fields := []string{"x_forwarded_for", "x_forwarded_host", "x_forwarded_proto", "accept_encoding"}
	var kv []string
	for _, k := range fields {
		kv = append(kv, k, "client")
	}
	_, v := p.HandleRequest(context.Background(), gateReq(append(kv, "x_other", "kept")...))
	if v.Local != nil {
		t.Fatalf("refused: %d %s", v.Local.Status, v.Local.Body)
	}
	for _, k := range fields {
		if !slices.Contains(v.RemoveHeader, k) {
			t.Errorf("%s not removed: %v", k, v.RemoveHeader)
		}
	}
	if slices.Contains(v.RemoveHeader, "x_other") {
		t.Errorf("x_other removed: %v", v.RemoveHeader)
	}
}
