package gateway

import (
	"testing"

	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/policy"
)

// bucketKeys cuts the credential's and the tenant's key from one string:
// the keys are still exactly c␟bucket␟connection and t␟bucket␟tenant (the
// names buckets have in Redis), wake has only the tenant's, notify adds
// the object's, and a call costs one allocation.
func TestBucketKeysExact(t *testing.T) {
	pr := &policy.Principal{Tenant: "acme", Connection: "conn-1"}
	x := &Exchange{msg: &mcp.Message{Name: "email_customer", Arguments: []byte(`{"customer_id":"C-1"}`)}}
	x.input.Tool = &policy.Tool{ToolDeclaration: policy.ToolDeclaration{NotifyObject: "customer_id"}}
	var kb [3]bucketKey
	for _, c := range []struct {
		name string
		want []bucketKey
	}{
		{"reads", []bucketKey{{"c\x1freads\x1fconn-1", false}, {"t\x1freads\x1facme", true}}},
		{"wake", []bucketKey{{"t\x1fwake\x1facme", true}}},
		{"notify", []bucketKey{{"c\x1fnotify\x1fconn-1", false}, {"t\x1fnotify\x1facme", true}, {"o\x1facme\x1femail_customer\x1fC-1", false}}},
	} {
		got := bucketKeys(&kb, c.name, pr, connectionOf(pr), x)
		if len(got) != len(c.want) {
			t.Fatalf("%s: %+v, want %+v", c.name, got, c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: key %d is %+q, want %+q", c.name, i, got[i].key, c.want[i].key)
			}
		}
	}
	if n := testing.AllocsPerRun(50, func() { bucketKeys(&kb, "reads", pr, "conn-1", x) }); n > 1 {
		t.Errorf("bucketKeys: %v allocations, want at most 1", n)
	}
}
