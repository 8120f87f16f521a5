package auth_test

import (
	"errors"
	"testing"

	"github.com/mcpgate/mcpgate/auth"
)

// wantReason asserts err is an *auth.Error with the reason, wrapping the
// sentinel. The tests against a real OpenID provider (module
// github.com/mcpgate/mcpgate/e2e, e2e/authtest) hold the same helper.
func wantReason(t testing.TB, err error, reason auth.Reason, sentinel error) *auth.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", reason)
	}
	var ae *auth.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v is not an *auth.Error", err)
	}
	if ae.Reason != reason {
		t.Fatalf("reason = %s, want %s (error: %v)", ae.Reason, reason, err)
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %v does not wrap %v", err, sentinel)
	}
	return ae
}
