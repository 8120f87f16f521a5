package admin_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/admin"
)

// The admin API's tests against a real OpenID provider are in the e2e
// module (e2e/admintest).

func TestParseSHA256Hex(t *testing.T) {
	sum := sha256.Sum256([]byte("demo-admin-token"))
	h := hex.EncodeToString(sum[:])
	for _, s := range []string{h, strings.ToUpper(h), " " + h + "\n"} {
		got, err := admin.ParseSHA256Hex(s)
		if err != nil || got != sum {
			t.Errorf("ParseSHA256Hex(%q) = %x, %v", s, got, err)
		}
	}
	for _, s := range []string{"", h[:62], h + "00", "zz" + h[2:]} {
		if _, err := admin.ParseSHA256Hex(s); err == nil {
			t.Errorf("ParseSHA256Hex(%q) succeeded", s)
		}
	}
}
