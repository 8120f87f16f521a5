package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/gateway/shape"
	"github.com/mcpgate/mcpgate/internal/demo"
	"github.com/mcpgate/mcpgate/policy"
)

// shapeInjection is the third-party text the shaping upstream plants.
const shapeInjection = demo.InjectedInstruction

// shapingUpstream is a hand-written MCP server whose answers carry remote
// text outside a tool's result: it chooses by the tool name (or the
// method, for resources/read).
func shapingUpstream(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	long := strings.Repeat("L", 5000)
	switch {
	case req.Method == "resources/read":
		// A JSON-RPC error for another method: control characters, a
		// long message, secret names in data.
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":"read failed \u001b[2J\u202e%s","data":{"portal_password":"pw-read","info":{"Home-Address":"pw-home"}}}}`, req.ID, long)
	case req.Params.Name == "notes_error":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32001,"message":"Lookup failed: %s \u0007\u200b%s",`+
			`"data":{"detail":"%s","records":[{"portal_password":"pw-data","note":"x"}],"internalCost":"pw-cost"}}}`, req.ID, shapeInjection, long, shapeInjection)
	case req.Params.Name == "notes_stream":
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		fmt.Fprint(w, `data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":{"msg":"`+shapeInjection+`","portal_password":"pw-log","deep":[{"home_address":"pw-addr"}]}}}`+"\n\n")
		fmt.Fprint(w, `data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1,"message":"`+shapeInjection+`","_meta":{"internal_cost":"pw-progress"}}}`+"\n\n")
		f.Flush()
		fmt.Fprint(w, `data: {"jsonrpc":"2.0","id":"s-1","method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"`+shapeInjection+`"}}],`+
			`"systemPrompt":"`+shapeInjection+`","maxTokens":50,"metadata":{"portal_password":"pw-sampling"}}}`+"\n\n")
		f.Flush()
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"done\"}]}}\n\n", req.ID)
	case req.Params.Name == "notes_shape":
		// structuredContent.notes is an object where notes[*].text
		// declares an array; other text the model may read is outside
		// text blocks.
		sc := `{"notes":{"a":{"text":"` + shapeInjection + `"},"b":"` + shapeInjection + `"}}`
		text, _ := json.Marshal(sc)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":%s},`+
			`{"type":"resource_link","uri":"file:///n","name":"%s","description":"%s"},{"type":"Text","text":"%s"}],`+
			`"structuredContent":%s,"summary":"%s","_meta":{"trace":"t-1","portal_password":"pw-meta"}}}`,
			req.ID, text, shapeInjection, shapeInjection, shapeInjection, sc, shapeInjection)
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{}}`, req.ID)
	}
}

// TestDifferentialShape: every message kind an upstream answers with is
// shaped, through the standalone proxy and through Envoy + ext_proc alike,
// under revision 2026-07-28 and 2025-06-18: JSON-RPC errors (tools/call
// and resources/read), notifications in a stream, server-to-client requests in a
// stream, a result whose shape does not match its untrusted_text path.
func TestDifferentialShape(t *testing.T) {
	decl := policy.ToolDeclaration{Effect: policy.EffectRead, UntrustedText: []string{"notes[*].text"}}
	e := startDifferential(t, differentialUpstream{name: "shaping", handler: http.HandlerFunc(shapingUpstream),
		tools: map[string]policy.ToolDeclaration{"notes_error": decl, "notes_stream": decl, "notes_shape": decl}})

	for _, version := range []string{"2026-07-28", "2025-06-18"} {
		hdr := func(method, name string) http.Header {
			if version == "2026-07-28" {
				return toHeader(v26(method, name))
			}
			return http.Header{"Mcp-Protocol-Version": {version}}
		}
		meta := ""
		if version == "2026-07-28" {
			meta = meta26
		}
		toolCall := func(id, tool string) []byte {
			// Arguments differ per revision: the loop brake refuses a
			// third identical failing call.
			return []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"v":"` + version + `"}` + comma(meta) + `}}`)
		}
		t.Run(version, func(t *testing.T) {
			t.Run("tools/call error", func(t *testing.T) {
				got, _ := e.both(t, "shaping", hdr("tools/call", "notes_error"), toolCall("12345678901234567890", "notes_error"))
				msgs := messagesOf(t, got)
				if len(msgs) != 1 {
					t.Fatalf("%d messages: %.300s", len(msgs), got.Body)
				}
				m := msgs[0]
				noSecrets(t, got.Body)
				noUnwrapped(t, m)
				if !strings.Contains(got.Body, `"id":12345678901234567890`) || !strings.Contains(got.Body, `"code":-32001`) {
					t.Errorf("id or code changed: %.300s", got.Body)
				}
				msg, _ := pick(m, "error", "message").(string)
				if !strings.HasPrefix(msg, shape.TextPrefix) || strings.ContainsAny(msg, "\u0007\u200b") || len(msg) > shape.DefaultMaxTextBytes+200 {
					t.Errorf("message not marked, sanitised and bounded (%d bytes): %.200q", len(msg), msg)
				}
			})
			t.Run("resources/read error", func(t *testing.T) {
				got, _ := e.both(t, "shaping", hdr("resources/read", "file:///n"), []byte(`{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"file:///n"`+comma(meta)+`}}`))
				noSecrets(t, got.Body)
				m := messagesOf(t, got)[0]
				msg, _ := pick(m, "error", "message").(string)
				if strings.ContainsAny(msg, "\u001b\u202e") || len(msg) > shape.DefaultMaxTextBytes+200 || pick(m, "error", "code") != -32000.0 {
					t.Errorf("resources/read error: %.300s", got.Body)
				}
			})
			t.Run("stream", func(t *testing.T) {
				got, _ := e.both(t, "shaping", hdr("tools/call", "notes_stream"), toolCall("21", "notes_stream"))
				noSecrets(t, got.Body)
				msgs := messagesOf(t, got)
				methods := []string{}
				for _, m := range msgs {
					noUnwrapped(t, m)
					s, _ := pick(m, "method").(string)
					if s == "" {
						s = "answer"
						if pick(m, "error") != nil {
							s = "error"
						}
					}
					methods = append(methods, s)
				}
				want := "notifications/message,notifications/progress,sampling/createMessage,answer"
				if version == "2026-07-28" {
					// The client cannot answer the request on this
					// stream: an error for its call ends the answer.
					want = "notifications/message,notifications/progress,error"
					if pick(msgs[2], "id") != 21.0 {
						t.Errorf("the error is not for the request: %v", msgs[2])
					}
				}
				if strings.Join(methods, ",") != want {
					t.Errorf("messages %v, want %s\n%.600s", methods, want, got.Body)
				}
			})
			t.Run("result of another shape", func(t *testing.T) {
				got, _ := e.both(t, "shaping", hdr("tools/call", "notes_shape"), toolCall("31", "notes_shape"))
				noSecrets(t, got.Body)
				m := messagesOf(t, got)[0]
				noUnwrapped(t, m)
				if pick(m, "result", "_meta", "trace") != "t-1" || pick(m, "result", "content", 1, "uri") != "file:///n" {
					t.Errorf("protocol values changed: %.400s", got.Body)
				}
			})
		})
	}
	// Every driver must have carried a stream for checkStreams.
	list := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta26 + `}}`)
	e.both(t, "demo", toHeader(v26("tools/list", "")), list)
	e.both(t, "synthetic", toHeader(v26("tools/list", "")), list)
	e.checkStreams(t)
}

func comma(s string) string {
	if s == "" {
		return ""
	}
	return "," + s
}

// messagesOf decodes the JSON-RPC messages of an answer (a JSON body or
// the data of each SSE event).
func messagesOf(t *testing.T, s seen) []map[string]any {
	t.Helper()
	var datas []string
	if strings.HasPrefix(s.ContentType, "text/event-stream") {
		for _, ev := range strings.Split(s.Body, "\n\n") {
			var data []string
			for _, line := range strings.Split(ev, "\n") {
				if d, ok := strings.CutPrefix(line, "data:"); ok {
					data = append(data, strings.TrimPrefix(d, " "))
				}
			}
			if len(data) > 0 {
				datas = append(datas, strings.Join(data, "\n"))
			}
		}
	} else {
		datas = []string{s.Body}
	}
	var out []map[string]any
	for _, d := range datas {
		var m map[string]any
		if err := json.Unmarshal([]byte(d), &m); err != nil {
			t.Fatalf("not JSON: %v: %.300s", err, d)
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		t.Fatalf("no message: %d %q %.300s", s.Status, s.ContentType, s.Body)
	}
	return out
}

// noSecrets fails when a secret's value (all start "pw-") reached the client.
func noSecrets(t *testing.T, body string) {
	t.Helper()
	if strings.Contains(body, "pw-") {
		t.Errorf("a secret-named member reached the client: %.600s", body)
	}
}

// noUnwrapped fails when the injected text appears outside a wrapper
// object or a string that starts with the notice (also inside JSON text).
func noUnwrapped(t *testing.T, v any) {
	t.Helper()
	var walk func(v any, path string)
	walk = func(v any, path string) {
		switch v := v.(type) {
		case map[string]any:
			if _, ok := v[shape.UntrustedMember].(string); ok && v[shape.NoticeMember] == shape.Notice && len(v) == 2 {
				return
			}
			for k, e := range v {
				walk(e, path+"."+k)
			}
		case []any:
			for i, e := range v {
				walk(e, fmt.Sprintf("%s[%d]", path, i))
			}
		case string:
			if strings.HasPrefix(v, shape.TextPrefix) {
				return
			}
			var inner any
			if t := strings.TrimSpace(v); (strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[")) && json.Unmarshal([]byte(t), &inner) == nil {
				walk(inner, path+"(json)")
				return
			}
			if strings.Contains(v, shapeInjection) {
				t.Errorf("third-party text passed raw at %s", path)
			}
		}
	}
	walk(v, "")
}

// pick follows member names and array indexes in a decoded value.
func pick(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}
