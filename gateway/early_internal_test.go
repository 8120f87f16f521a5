package gateway

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/gateway/shape"
)

// earlyAnswer is the bench upstream's answer to get_status (the Go MCP
// SDK's bytes).
const earlyAnswer = `{"jsonrpc":"2.0","id":7,"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcpgate-bench-upstream","version":"1"}},"content":[{"type":"text","text":"{\"checked_at\":\"2026-01-02T03:04:05Z\",\"region\":\"eu-west\",\"service\":\"db\",\"state\":\"ok\"}"}],"structuredContent":{"checked_at":"2026-01-02T03:04:05Z","region":"eu-west","service":"db","state":"ok"},"resultType":"complete"}}`

// earlyShapers are the shapers the differential tests run: the bench's
// declaration of get_status, untrusted text, secret names only.
func earlyShapers(t testing.TB) []*shape.Shaper {
	var out []*shape.Shaper
	for _, r := range []shape.Rules{
		{ResultFields: []string{"service", "state", "checked_at"}, SecretNames: []string{"password"}},
		{UntrustedText: []string{"state", "items[*].body"}, SecretNames: []string{"password", "*token*"}},
		{SecretNames: []string{"password"}},
		{ResultFields: []string{"a.b"}, MaxResultBytes: 64},
	} {
		s, err := shape.Compile(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// answerOutcome is what the response side makes of an answer to a
// tools/call: the parse error, or for a result the response written (the
// shaped result framed) or the shaper's error; isError as the shaper
// reports it.
func answerOutcome(msg *mcp.Message, perr *mcp.Error, shaped []byte, isError bool, err error, f *answerFrame) string {
	switch {
	case perr != nil:
		return fmt.Sprintf("parse error %d %q", perr.Code, perr.Message)
	case msg.Kind != mcp.KindResponse || msg.Result == nil:
		return fmt.Sprintf("kind %d", msg.Kind)
	case err != nil:
		return "shape error " + err.Error()
	case shaped == nil:
		return fmt.Sprintf("unchanged isError=%v", isError)
	}
	return fmt.Sprintf("relayed %s framed %s isError=%v", shaped, f.response(shaped), isError)
}

// oldAnswer is the two-pass path: ParseInto, then the shaper on the
// result.
func oldAnswer(s *shape.Shaper, reqID, body []byte, depth int) string {
	msg, perr := mcp.ParseInto(nil, body, depth)
	var f answerFrame
	if perr != nil || msg.Kind != mcp.KindResponse || msg.Result == nil {
		return answerOutcome(msg, perr, nil, false, nil, &f)
	}
	f.id = msg.ID
	out, isError, err := f.shapeToolResult(s, msg.Result, nil)
	return answerOutcome(msg, perr, out, isError, err, &f)
}

// newAnswer is the one-pass path the exchange takes (parse).
func newAnswer(s *shape.Shaper, reqID, body []byte, depth int) (string, bool) {
	x := &Exchange{shaper: s, msg: &mcp.Message{Kind: mcp.KindRequest, Method: mcp.MethodToolsCall, ID: reqID}}
	msg, perr := mcp.ParseResultInto(&x.answerMsg, body, depth, (*earlyReader)(x))
	var f answerFrame
	if perr != nil || msg.Kind != mcp.KindResponse || msg.Result == nil {
		return answerOutcome(msg, perr, nil, false, nil, &f), false
	}
	f.id = msg.ID
	var early *earlyResult
	if e, ok := x.takeEarly(msg.Result); ok {
		early = &e
	}
	out, isError, err := f.shapeToolResult(s, msg.Result, early)
	return answerOutcome(msg, perr, out, isError, err, &f), early != nil
}

// earlyCorpus are valid and hostile answers: the bench's answer, its
// every truncation, and its bytes replaced one at a time by bytes that
// break JSON, UTF-8 or nesting, plus hand-made cases.
func earlyCorpus() []string {
	corpus := []string{
		earlyAnswer,
		strings.Replace(earlyAnswer, `"id":7`, `"id":7.0`, 1),
		strings.Replace(earlyAnswer, `"id":7`, `"id":"a-very-long-request-identifier-that-does-not-fit-the-reserve-of-the-frame"`, 1),
		`{"result":{"content":[]},"jsonrpc":"2.0","id":7}`,
		`{"jsonrpc":"2.0","id":7,"result":{"content":[],"content":[]}}`,
		`{"jsonrpc":"2.0","id":7,"result":{"content":[],"\u0063ontent":[]}}`,
		`{"jsonrpc":"2.0","id":7,"result":{"structuredContent":{"a":1,"a":2}}}`,
		`{"jsonrpc":"2.0","id":7,"result":{"structuredContent":{"password":{"x":1,"x":2}}}}`,
		`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"x","text":"y"}]}}`,
		`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"\ud800"}]}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"\xff\"}]}}",
		"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"\xffpassword\":1}}",
		"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"password\":\"\xff\"}}",
		`{"jsonrpc":"2.0","id":7,"result":{"structuredContent":[[[[[[[[[[[[1]]]]]]]]]]]]}}`,
		`{"jsonrpc":"2.0","id":7,"result":{"structuredContent":{"a":{"b":{"c":{"d":{}}}}}}}`,
		`{"jsonrpc":"2.0","id":7,"result":{"password":[[[[[[[[[[[[1]]]]]]]]]]]]}}`,
		`{"jsonrpc":"2.0","id":7,"result":{"structuredContent":"s"}}`,
		`{"jsonrpc":"2.0","id":7,"result":{"structuredContent":{"a":{"b":"` + strings.Repeat("x", 80) + `"}}}}`,
		`{"jsonrpc":"2.0","id":7,"result":{},"result":{}}`,
		`{"jsonrpc":"2.0","id":7,"result":{}} x`,
		`{"jsonrpc":"2.0","id":7,"result":{},"error":{}}`,
		`{"jsonrpc":"2.0","id":7,"result":{},"params":{}}`,
		`{"jsonrpc":"2.0","result":{}}`,
		`{"jsonrpc":"1.0","id":7,"result":{}}`,
		`{"jsonrpc":"2.0","id":7,"result":[]}`,
		`{"jsonrpc":"2.0","id":7,"result":{"isError":true,"content":[]}}`,
		`{"jsonrpc":"2.0","id":7,"result":{"task":{"taskId":"t"}}}`,
		`{"jsonrpc":"2.0","id":7,"result" : { "content" : [ ] } , "x":1}`,
		`{"jsonrpc":"2.0","id":7,"method":"notifications/progress","params":{}}`,
	}
	for i := range earlyAnswer {
		corpus = append(corpus, earlyAnswer[:i])
		for _, c := range []string{`"`, `{`, `}`, `[`, `]`, `,`, `:`, `\`, "\xff", "\xc3", " ", "x", "0"} {
			corpus = append(corpus, earlyAnswer[:i]+c+earlyAnswer[i+1:])
		}
	}
	return corpus
}

// TestEarlyResultDifferential: shaping the result as the answer is parsed
// relays the same bytes, or fails with the same error, as parsing first
// and shaping then, for valid and hostile answers, at two depth limits.
func TestEarlyResultDifferential(t *testing.T) {
	reqID := []byte("7")
	early := 0
	for _, s := range earlyShapers(t) {
		for _, depth := range []int{64, 5} {
			for _, body := range earlyCorpus() {
				want := oldAnswer(s, reqID, []byte(body), depth)
				got, used := newAnswer(s, reqID, []byte(body), depth)
				if got != want {
					t.Fatalf("depth %d, answer %q:\n one pass: %s\n two passes: %s", depth, body, got, want)
				}
				if used {
					early++
				}
			}
		}
	}
	if early == 0 {
		t.Fatal("no answer was shaped in one pass")
	}
}

// TestEarlyResultHostile: answers a strict parse refuses are refused in
// one pass too, and with ParseInto's error, not a shaped result.
func TestEarlyResultHostile(t *testing.T) {
	s := earlyShapers(t)[0]
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":7,"result":{"content":[],"content":[]}}`,
		`{"jsonrpc":"2.0","id":7,"result":{"structuredContent":{"password":{"x":1,"x":2}}}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"\xff\"}]}}",
		`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"\udc00"}]}}`,
		`{"jsonrpc":"2.0","id":7,"result":{"password":[[[[[[[[[[[[1]]]]]]]]]]]]}}`,
		`{"jsonrpc":"2.0","id":7,"result":{"content":[]}`,
		`{"jsonrpc":"2.0","id":7,"result":{"content":[]}}}`,
	} {
		got, _ := newAnswer(s, []byte("7"), []byte(body), 8)
		if !strings.HasPrefix(got, "parse error -32700") {
			t.Errorf("%q: %s; want a parse error", body, got)
		}
	}
}

// FuzzEarlyResult is TestEarlyResultDifferential for generated answers.
func FuzzEarlyResult(f *testing.F) {
	for _, body := range earlyCorpus()[:40] {
		f.Add([]byte(body), uint8(0), uint8(64))
	}
	shapers := earlyShapers(f)
	f.Fuzz(func(t *testing.T, body []byte, which, depth uint8) {
		s := shapers[int(which)%len(shapers)]
		d := int(depth%70) + 1
		want := oldAnswer(s, []byte("7"), body, d)
		got, _ := newAnswer(s, []byte("7"), bytes.Clone(body), d)
		if got != want {
			t.Fatalf("depth %d, answer %q:\n one pass: %s\n two passes: %s", d, body, got, want)
		}
	})
}

// TestMayHoldTask: a result that may be a task handle is looked at, its
// member's name escaped or not, with and without the early shaping.
func TestMayHoldTask(t *testing.T) {
	s := earlyShapers(t)[0]
	taskShaper, err := shape.Compile(shape.Rules{SecretNames: []string{"task"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		result string
		want   bool // the early shaping's answer; the look may say true more often
	}{
		{`{"task":{"taskId":"t"}}`, true},
		{`{"t\u0061sk":{"taskId":"t"}}`, true},
		{`{"\u0074\u0061\u0073\u006b":1}`, true},
		{`{"content":[],"task":null}`, true},
		{`{"content":[{"type":"text","text":"task"}]}`, false},
		{`{"structuredContent":{"task":{}}}`, false},
		{`{"content":[]}`, false},
	} {
		for _, sh := range []*shape.Shaper{s, taskShaper} {
			body := []byte(`{"jsonrpc":"2.0","id":7,"result":` + c.result + `}`)
			x := &Exchange{shaper: sh, msg: &mcp.Message{Kind: mcp.KindRequest, Method: mcp.MethodToolsCall, ID: []byte("7")}}
			msg, perr := mcp.ParseResultInto(&x.answerMsg, body, 64, (*earlyReader)(x))
			if perr != nil || !x.earlyFor(msg.Result) {
				t.Fatalf("%s: %v, early %v", c.result, perr, x.earlyFor(msg.Result))
			}
			if got := x.mayHoldTask(msg.Result); got != c.want {
				t.Errorf("%s: early: %v, want %v", c.result, got, c.want)
			}
			x.early = earlyResult{}
			if got := x.mayHoldTask(msg.Result); c.want && !got {
				t.Errorf("%s: look: %v, want true", c.result, got)
			}
		}
	}
}
