package policy

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// logReceiver is a real HTTP decision-log service: it keeps the gzipped
// JSON batches OPA's logs plugin uploads.
type logReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	raw    []string
	events []map[string]any
}

func newLogReceiver(t testing.TB) *logReceiver {
	r := &logReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		b, _ := io.ReadAll(zr)
		var batch []map[string]any
		if err := json.Unmarshal(b, &batch); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		r.mu.Lock()
		r.raw = append(r.raw, string(b))
		r.events = append(r.events, batch...)
		r.mu.Unlock()
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *logReceiver) snapshot() (string, []map[string]any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.raw, "\n"), append([]map[string]any(nil), r.events...)
}

// TestDecisionLogsMasked: decisions reach a real HTTP receiver in OPA's
// event format, and the default mask policy keeps the arguments, the
// credential id and secret-looking fields out of them.
func TestDecisionLogsMasked(t *testing.T) {
	rcv := newLogReceiver(t)
	logs := &logBuffer{}
	e, err := New(t.Context(), Options{
		Declarations: testDeclarations,
		Logger:       logs.logger(),
		DecisionLogs: &DecisionLogOptions{URL: rcv.URL + "/v1/logs", Console: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	in := callInput("search_contacts", oauthToken("crm.read"))
	in.Message.Arguments = jsontext.Value(`{"query":"BAIT-ARGUMENT","api_token":"BAIT-ARG-TOKEN"}`)
	in.Principal.CredentialID = "BAIT-JTI"
	d, err := e.Decide(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := e.FlushDecisionLogs(ctx); err != nil {
		t.Fatal(err)
	}
	raw, events := rcv.snapshot()
	if len(events) != 1 {
		t.Fatalf("got %d events, want 1: %s", len(events), raw)
	}
	ev := events[0]
	if ev["decision_id"] != d.ID || ev["path"] != DecisionLogPath {
		t.Fatalf("event id/path: %v", ev)
	}
	if res, _ := ev["result"].(map[string]any); res["allow"] != d.Allow {
		t.Fatalf("event result %v, decision allow %t", ev["result"], d.Allow)
	}
	input, _ := ev["input"].(map[string]any)
	msg, _ := input["message"].(map[string]any)
	if msg["name"] != "search_contacts" {
		t.Fatalf("tool name missing from the logged input: %v", input)
	}
	erased, _ := json.Marshal(ev["erased"])
	if !strings.Contains(string(erased), "/input/message/arguments") {
		t.Fatalf("erased = %s", erased)
	}
	for _, bait := range []string{"BAIT-ARGUMENT", "BAIT-ARG-TOKEN", "BAIT-JTI"} {
		if strings.Contains(raw, bait) {
			t.Errorf("uploaded decision log contains %s: %s", bait, raw)
		}
		if strings.Contains(logs.String(), bait) {
			t.Errorf("console decision log contains %s", bait)
		}
	}
	if !strings.Contains(logs.String(), d.ID) {
		t.Errorf("console decision log lacks the decision id:\n%s", logs)
	}
}

// TestDecisionLogsMaskPolicyChecked: a mask policy that does not compile
// is refused at start.
func TestDecisionLogsMaskPolicyChecked(t *testing.T) {
	_, err := New(t.Context(), Options{DecisionLogs: &DecisionLogOptions{Console: true, MaskPolicy: "package system.log\n\nmask contains x if {"}})
	if err == nil || !strings.Contains(err.Error(), "mask policy") {
		t.Fatalf("err = %v", err)
	}
}
