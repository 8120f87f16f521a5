package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/internal/envoydriver"
	"github.com/mcpgate/mcpgate/policy"
)

// argsUpstream is a hand-written 2026-07-28 upstream that records the
// arguments of every tools/call it executes, byte for byte. "ask" asks
// for input first (an InputRequiredResult with requestState "up-1") and
// executes only the retry that carries that state.
type argsUpstream struct {
	mu   sync.Mutex
	runs map[string][]string // tool → raw arguments of each execution
}

func (u *argsUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID     jsontext.Value `json:"id"`
		Method string         `json:"method"`
		Params struct {
			Name         string         `json:"name"`
			Arguments    jsontext.Value `json:"arguments"`
			RequestState *string        `json:"requestState"`
		} `json:"params"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil || req.Method != "tools/call" {
		http.Error(w, "not a tools/call", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if req.Params.Name == "ask" && (req.Params.RequestState == nil || *req.Params.RequestState != "up-1") {
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":{"resultType":"input_required",`+
			`"inputRequests":{"q":{"method":"elicitation/create","params":{"mode":"form","message":"Which colour?",`+
			`"requestedSchema":{"type":"object","properties":{"c":{"type":"string"}}}}}},"requestState":"up-1"}}`)
		return
	}
	u.mu.Lock()
	if u.runs == nil {
		u.runs = map[string][]string{}
	}
	u.runs[req.Params.Name] = append(u.runs[req.Params.Name], string(req.Params.Arguments))
	n := len(u.runs[req.Params.Name])
	u.mu.Unlock()
	text, _ := json.Marshal(req.Params.Name + " run " + string(rune('0'+n)))
	io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":{"resultType":"complete","content":[{"type":"text","text":`+string(text)+`}]}}`)
}

func (u *argsUpstream) ran(tool string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.runs[tool]...)
}

// argsEnv is a differential env with write safety on (a bbolt store) and
// one argsUpstream per path, so the two adapters never share a replay
// window: "argsp" is called through the proxy, "argse" through Envoy.
type argsEnv struct {
	*differentialEnv
	up map[string]*argsUpstream // "proxy", "extproc"
}

func startArgsEnv(t *testing.T) *argsEnv {
	t.Helper()
	cfg, err := config.Parse(config.Quickstart, "quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listeners.Proxy.Address = "127.0.0.1:0"
	cfg.Listeners.Admin.Disabled = true
	cfg.Listeners.ExtProc.Address = "127.0.0.1:0"
	cfg.Store = &config.Store{Bolt: &config.BoltStore{Path: filepath.Join(t.TempDir(), "state.db")}}
	cfg.Catalog.Disabled = true    // a hand-written upstream: no tools/list
	cfg.RateLimits.Disabled = true // many writes in a row, on purpose
	cfg.Audit.Log = config.AuditLogOff
	tools := map[string]policy.ToolDeclaration{
		"save":   {Effect: policy.EffectSilentWrite},
		"ask":    {Effect: policy.EffectSilentWrite},
		"notify": {Effect: policy.EffectNotify},
	}
	env := &argsEnv{up: map[string]*argsUpstream{}}
	targets := map[string]string{}
	for path, name := range map[string]string{"proxy": "argsp", "extproc": "argse"} {
		u := &argsUpstream{}
		srv := httptest.NewServer(u)
		t.Cleanup(srv.Close)
		env.up[path] = u
		cfg.Upstreams = append(cfg.Upstreams, config.Upstream{Name: name, URL: srv.URL + "/mcp", Route: "/" + name + "/mcp", Tools: tools})
		targets[name] = srv.URL
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	a := startApp(t, cfg)
	env.differentialEnv = &differentialEnv{proxy: "http://" + a.ProxyAddr, drivers: map[string]*httptest.Server{}, stats: map[string]*envoydriver.Driver{}}
	srv, d := startEnvoy(t, a.ExtProcAddr, targets["argse"], "argse", 5*time.Second)
	env.drivers["argse"], env.stats["argse"] = srv, d
	return env
}

// pair sends one request through the proxy (to argsp) and through Envoy +
// ext_proc (to argse), fails when the client would see a different
// status, content type or body (timestamps aside), and returns both.
func (e *argsEnv) pair(t *testing.T, tool string, body []byte) [2]seen {
	t.Helper()
	hdr := toHeader(v26("tools/call", tool))
	p := doHeader(t, "POST", e.proxy+"/argsp/mcp", hdr, body)
	x := doHeader(t, "POST", e.drivers["argse"].URL+"/argse/mcp", hdr, body)
	if p.Status != 200 {
		t.Errorf("%s: status %d: %.400s", tool, p.Status, p.Body)
	}
	pb, xb := ctVolatile.ReplaceAllString(p.Body, "…"), ctVolatile.ReplaceAllString(x.Body, "…")
	if p.Status != x.Status || p.ContentType != x.ContentType || pb != xb {
		t.Errorf("proxy and ext_proc differ:\nproxy:    %d %q %.600s\next_proc: %d %q %.600s", p.Status, p.ContentType, p.Body, x.Status, x.ContentType, x.Body)
	}
	return [2]seen{p, x}
}

// callWith is a tools/call whose params carry extra members (each
// `"name":value,`) before _meta.
func callWith(id, tool, args, extra string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `,` + extra + meta26 + `}}`)
}

// literals maps each member of a JSON object to its raw value, as written.
func literals(t *testing.T, obj string) map[string]string {
	t.Helper()
	out := map[string]string{}
	dec := jsontext.NewDecoder(strings.NewReader(obj))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		t.Fatalf("not an object: %s", obj)
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			t.Fatalf("%s: %v", obj, err)
		}
		name := tok.String()
		v, err := dec.ReadValue()
		if err != nil {
			t.Fatalf("%s: %v", obj, err)
		}
		out[name] = string(v)
	}
	return out
}

// TestDifferentialArgs: what a person approves, what a fingerprint covers
// and what the upstream receives are the same arguments, numbers exactly
// as written; a repeated silent write cannot be made new with
// client-made requestState, _meta or progressToken; an upstream's own
// input_required round still continues. Through both adapters.
func TestDifferentialArgs(t *testing.T) {
	e := startArgsEnv(t)
	runs := func(tool string) [2][]string {
		return [2][]string{e.up["proxy"].ran(tool), e.up["extproc"].ran(tool)}
	}

	t.Run("silent writes differing beyond float64 both run", func(t *testing.T) {
		sent := []string{
			`{"n":9007199254740993}`, `{"n":9007199254740992}`,
			`{"n":0.1000000000000000000001}`, `{"n":0.1}`,
			`{"n":1e400}`, `{"n":1.7976931348623157e308}`,
			`{"n":100}`, `{"n":1e2}`, `{"n":100.0}`,
			`{"n":-0}`, `{"n":0}`,
		}
		for i, args := range sent {
			e.pair(t, "save", call(`"`+string(rune('a'+i))+`"`, "save", args))
		}
		// The same arguments with other whitespace and member order:
		// answered from the replay window.
		r := e.pair(t, "save", call(`"again"`, "save", ` { "n" : 9007199254740993 } `))
		if !strings.Contains(r[0].Body, `io.mcpgate/replayed`) {
			t.Errorf("a repeat of the same write was not replayed: %.400s", r[0].Body)
		}
		for i, got := range runs("save") {
			if strings.Join(got, " ") != strings.Join(sent, " ") {
				t.Errorf("path %d: the upstream executed\n%q\nwant\n%q", i, got, sent)
			}
		}
	})

	t.Run("confirm_summary shows the literal the upstream receives", func(t *testing.T) {
		args := `{"to":"ops","n":9007199254740993,"f":0.1000000000000000000001,"e":1E400,"z":-0,"h":100.0}`
		var summaries [2]string
		for i, path := range []string{"/argsp/mcp", "/argse/mcp"} {
			base := e.proxy
			if i == 1 {
				base = e.drivers["argse"].URL
			}
			hdr := toHeader(v26("tools/call", "notify"))
			pv := doHeader(t, "POST", base+path, hdr, call("1", "notify", args))
			var prev struct {
				Result struct {
					StructuredContent struct {
						ConfirmToken   string `json:"confirm_token"`
						ConfirmSummary string `json:"confirm_summary"`
					} `json:"structuredContent"`
				} `json:"result"`
			}
			if err := json.Unmarshal([]byte(pv.Body), &prev); err != nil || prev.Result.StructuredContent.ConfirmToken == "" {
				t.Fatalf("no preview: %.600s", pv.Body)
			}
			sc := prev.Result.StructuredContent
			summaries[i] = sc.ConfirmSummary
			confirm, _ := json.Marshal(map[string]string{"confirm_token": sc.ConfirmToken, "confirm_summary": sc.ConfirmSummary})
			c := doHeader(t, "POST", base+path, toHeader(v26("tools/call", "confirm_action")), call("2", "confirm_action", string(confirm)))
			if c.Status != 200 || !strings.Contains(c.Body, "notify run 1") {
				t.Fatalf("confirm_action: %d %.600s", c.Status, c.Body)
			}
		}
		if summaries[0] != summaries[1] {
			t.Errorf("the adapters summarise differently:\n%s\n%s", summaries[0], summaries[1])
		}
		for i, got := range runs("notify") {
			if len(got) != 1 {
				t.Fatalf("path %d: notify ran %d times, want 1", i, len(got))
			}
			_, shown, ok := strings.Cut(summaries[i], " with ")
			if !ok {
				t.Fatalf("no arguments in the summary %q", summaries[i])
			}
			want, have := literals(t, got[0]), literals(t, shown)
			if len(want) != len(have) {
				t.Errorf("path %d: the summary shows %s, the upstream received %s", i, shown, got[0])
			}
			for k, v := range want {
				if have[k] != v {
					t.Errorf("path %d: %s is %s in the summary, %s upstream", i, k, have[k], v)
				}
			}
			if !strings.Contains(shown, `"n":9007199254740993`) || !strings.Contains(shown, `"e":1E400`) || !strings.Contains(shown, `"z":-0`) {
				t.Errorf("path %d: the summary does not carry the literals: %s", i, shown)
			}
		}
	})

	t.Run("client-made requestState, _meta and progressToken do not make a repeat new", func(t *testing.T) {
		args := `{"k":"state"}`
		extras := []string{
			``,
			`"requestState":"made-up-1",`,
			`"requestState":"made-up-2","inputResponses":{"q":{"action":"accept","content":{"c":"red"}}},`,
			`"requestState":"mcpgs0.not-sealed",`,
		}
		for i, extra := range extras {
			e.pair(t, "save", callWith(`"s`+string(rune('0'+i))+`"`, "save", args, extra))
		}
		// Another _meta (a progressToken, a member of another namespace).
		other := []byte(`{"jsonrpc":"2.0","id":"s9","method":"tools/call","params":{"name":"save","arguments":` + args +
			`,"_meta":{"progressToken":"p-9","example.com/x":1,"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
		r := e.pair(t, "save", other)
		if !strings.Contains(r[0].Body, `io.mcpgate/replayed`) {
			t.Errorf("a repeat with another _meta was not replayed: %.400s", r[0].Body)
		}
		for i, got := range runs("save") {
			n := 0
			for _, a := range got {
				if a == args {
					n++
				}
			}
			if n != 1 {
				t.Errorf("path %d: the same write ran %d times, want 1", i, n)
			}
		}
	})

	t.Run("the upstream's input_required round continues", func(t *testing.T) {
		args := `{"k":"ask"}`
		r := e.pair(t, "ask", call(`"a1"`, "ask", args))
		if !strings.Contains(r[0].Body, `"requestState":"up-1"`) || strings.Contains(r[0].Body, "replayed") {
			t.Fatalf("first round: %.600s", r[0].Body)
		}
		answers := `"requestState":"up-1","inputResponses":{"q":{"action":"accept","content":{"c":"red"}}},`
		r = e.pair(t, "ask", callWith(`"a2"`, "ask", args, answers))
		if !strings.Contains(r[0].Body, "ask run 1") || strings.Contains(r[0].Body, "replayed") {
			t.Fatalf("the retry with the upstream's requestState did not run: %.600s", r[0].Body)
		}
		// Done: a repeat, whatever state it carries, is answered from
		// the window.
		for i, extra := range []string{answers, `"requestState":"made-up",`, ``} {
			r = e.pair(t, "ask", callWith(`"a`+string(rune('3'+i))+`"`, "ask", args, extra))
			if !strings.Contains(r[0].Body, `io.mcpgate/replayed`) {
				t.Errorf("repeat %d was not replayed: %.400s", i, r[0].Body)
			}
		}
		for i, got := range runs("ask") {
			if len(got) != 1 {
				t.Errorf("path %d: ask ran %d times, want 1", i, len(got))
			}
		}
	})
	e.checkStreams(t)
}
