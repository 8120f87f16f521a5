package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/internal/demo"
	"github.com/mcpgate/mcpgate/internal/sealing"
)

// elicitBody is a raw 2026-07-28 tools/call whose client declares form
// elicitation; extra are further params members ("requestState":…,).
func elicitBody(id, tool, args, extra string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `,` + extra +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}}}`)
}

func elicitRetry(state, answer string) string {
	return `"requestState":` + strconv.Quote(state) + `,"inputResponses":{"io.mcpgate/confirm":` + answer + `},`
}

// TestElicitedApproval: a 2026-07-28 client that declares elicitation is
// asked to approve a notify tool through input_required, with a
// requestState mcpgate seals with the keys file; the approved retry runs
// the tool once, a replayed or forged requestState is refused and runs
// nothing, a declined one rejects the action, and a requestState sealed
// before a key rotation (staged, promoted, reloaded) still opens. Through
// the standalone proxy and the Envoy driver.
func TestElicitedApproval(t *testing.T) {
	e := startContractEnv(t)
	ks, err := sealing.GenerateKeySet()
	if err != nil {
		t.Fatal(err)
	}
	keysFile := filepath.Join(t.TempDir(), "sealing-keys.json")
	writeKeys := func(ks *sealing.KeySet) {
		data, err := ks.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(keysFile, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeKeys(ks)
	g := e.startGateway(t, "elicit", func(c *config.Config) { c.WriteSafety.SealingKeysFile = keysFile })
	tool := demo.ToolSendBookingConfirmation
	send := func(t *testing.T, url, token, id, args, extra string) ctAnswer {
		t.Helper()
		a, _ := exchange(t, "POST", url, bearer(token, "tools/call", tool), elicitBody(id, tool, args, extra))
		if a.Status != 200 {
			t.Fatalf("status %d: %.500s", a.Status, a.Body)
		}
		return ctAnswer{idAnswer: a, Msg: rpcMessage(a)}
	}
	ask := func(t *testing.T, url, token, id, args string) string {
		t.Helper()
		a := send(t, url, token, id, args, "")
		var m struct {
			Result struct {
				ResultType    string `json:"resultType"`
				RequestState  string `json:"requestState"`
				InputRequests map[string]struct {
					Method string `json:"method"`
					Params struct {
						Mode    string `json:"mode"`
						Message string `json:"message"`
					} `json:"params"`
				} `json:"inputRequests"`
			} `json:"result"`
		}
		if err := json.Unmarshal(a.Msg, &m); err != nil {
			t.Fatal(err)
		}
		r := m.Result.InputRequests["io.mcpgate/confirm"]
		if m.Result.ResultType != "input_required" || !strings.HasPrefix(m.Result.RequestState, "mcpgs1.") ||
			r.Method != "elicitation/create" || r.Params.Mode != "form" || !strings.Contains(r.Params.Message, args) {
			t.Fatalf("no approval request: %.1000s", a.Body)
		}
		return m.Result.RequestState
	}
	approve := `{"action":"accept","content":{"approve":true}}`
	for i, v := range g.vias("demo") {
		token := []string{g.token, g.token2}[i]
		t.Run(v.name, func(t *testing.T) {
			e.demo.Reset()
			args := `{"booking_id":"B-1001"}`
			state := ask(t, v.url, token, "1", args)
			if n := e.demo.Calls(tool); n != 0 {
				t.Fatalf("the approval request ran the tool %d times", n)
			}
			// Forged: the sealed part altered.
			forged := state[:len(state)-4] + "AAAA"
			if forged == state {
				forged = state[:len(state)-4] + "BBBB"
			}
			send(t, v.url, token, "2", args, elicitRetry(forged, approve)).refusal(t, "request_state_invalid")
			// Arguments edited between the request and the retry.
			send(t, v.url, token, "3", `{"booking_id":"B-1002"}`, elicitRetry(state, approve)).refusal(t, "arguments_changed")
			// The other adapter's connection cannot use it.
			other := []string{g.token2, g.token}[i]
			send(t, v.url, other, "4", args, elicitRetry(state, approve)).refusal(t, "request_state_mismatch")
			if n := e.demo.Calls(tool); n != 0 {
				t.Fatalf("refused retries ran the tool %d times", n)
			}
			ok := send(t, v.url, token, "5", args, elicitRetry(state, approve))
			if r := ok.result(t); r.IsError || !strings.Contains(string(r.StructuredContent), "B-1001") {
				t.Fatalf("approved call: %.800s", ok.Body)
			}
			if n := e.demo.Calls(tool); n != 1 {
				t.Fatalf("approved tool ran %d times, want 1", n)
			}
			// Replayed requestState: nothing runs again.
			send(t, v.url, token, "6", args, elicitRetry(state, approve)).refusal(t, "request_state_used")
			if n := e.demo.Calls(tool); n != 1 {
				t.Fatalf("a replayed requestState ran the tool again (%d)", n)
			}
			// Declined: rejected, and approving afterwards does not run it.
			state2 := ask(t, v.url, token, "7", args)
			if r := send(t, v.url, token, "8", args, elicitRetry(state2, `{"action":"decline"}`)).result(t); r.IsError || !strings.Contains(string(r.StructuredContent), `"rejected"`) {
				t.Fatalf("decline: %+v", r)
			}
			send(t, v.url, token, "9", args, elicitRetry(state2, approve)).refusal(t, "action_rejected")
			if n := e.demo.Calls(tool); n != 1 {
				t.Fatalf("a declined action ran (%d)", n)
			}
		})
	}

	// Rotation: stage a key, promote it, reload (SIGHUP); a requestState
	// sealed under the old key still opens, and new ones use the new key.
	e.demo.Reset()
	args := `{"booking_id":"B-1003"}`
	state := ask(t, g.proxy+ctRoutes["demo"], g.token, "20", args)
	staged, kid, err := ks.Stage()
	if err != nil {
		t.Fatal(err)
	}
	promoted, err := staged.Promote(kid)
	if err != nil {
		t.Fatal(err)
	}
	writeKeys(promoted)
	if err := g.app.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := send(t, g.proxy+ctRoutes["demo"], g.token, "21", args, elicitRetry(state, approve)).result(t); r.IsError {
		t.Fatalf("a requestState sealed before the rotation: %+v", r)
	}
	if n := e.demo.Calls(tool); n != 1 {
		t.Fatalf("ran %d times, want 1", n)
	}
	if s := ask(t, g.proxy+ctRoutes["demo"], g.token, "22", `{"booking_id":"B-1004"}`); !strings.HasPrefix(s, "mcpgs1."+kid+".") {
		t.Errorf("new requestStates are not sealed with the promoted key %s: %.40s", kid, s)
	}
}
