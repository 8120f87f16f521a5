package extproc_test

import (
	"context"
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/extproc"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/policy"
)

// slowAuth is a test double for the pipeline's Authenticator that takes
// delay to answer, as an authentication that fetches a JWKS or asks a
// rights source would (those parts are tested in their own packages). It
// admits everyone anonymously, as running without authentication does; if
// the message's deadline ends first it answers 503, as internal/authn
// does when a dependency cannot answer in time.
type slowAuth struct{ delay time.Duration }

func (a slowAuth) Authenticate(ctx context.Context, _ *gateway.Request) (*policy.Principal, *gateway.AuthFailure) {
	t := time.NewTimer(a.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return &policy.Principal{}, nil
	case <-ctx.Done():
		return nil, &gateway.AuthFailure{Status: 503, Code: gateway.AuthUnavailable, Message: "The credential cannot be checked now."}
	}
}

func (slowAuth) InsufficientScope(*gateway.Request, []string) *gateway.AuthFailure { return nil }

// overrideServer serves a pipeline whose authentication takes delay, with
// the given budgets, and returns a client and the override counts.
func overrideServer(t *testing.T, delay, budget, maxBudget time.Duration) (extprocv3.ExternalProcessorClient, func(phase string) float64) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := gateway.NewMetrics(reg)
	p := gatewaytest.New(t, gatewaytest.WithDecls(decls), serverBounds, gatewaytest.WithAuth(slowAuth{delay}), gatewaytest.With(gateway.Options{Metrics: m}))
	s, err := extproc.New(extproc.Options{
		Pipeline:         p,
		Upstreams:        []extproc.Upstream{{Name: "crm", Route: "/crm/mcp"}},
		MessageBudget:    budget,
		MaxMessageBudget: maxBudget,
		Metrics:          m,
	})
	if err != nil {
		t.Fatal(err)
	}
	count := func(phase string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != gateway.MetricExtProcOverrides {
				continue
			}
			for _, s := range mf.GetMetric() {
				for _, l := range s.GetLabel() {
					if l.GetName() == "phase" && l.GetValue() == phase {
						return s.GetCounter().GetValue()
					}
				}
			}
		}
		t.Fatalf("%s{phase=%q} not exported", gateway.MetricExtProcOverrides, phase)
		return 0
	}
	return serveServer(t, s), count
}

const callBody = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_booking","arguments":{},` + meta + `}}`

// sendCall sends the request headers and body of a tools/call and returns
// every message the stream answers the body with, in order: an override
// (if any) and then the answer.
func sendCall(t *testing.T, c extprocv3.ExternalProcessorClient) []*extprocv3.ProcessingResponse {
	t.Helper()
	got, _ := sendCallTimed(t, c)
	return got
}

// sendCallTimed is sendCall that also returns when each message arrived.
func sendCallTimed(t *testing.T, c extprocv3.ExternalProcessorClient) ([]*extprocv3.ProcessingResponse, []time.Time) {
	t.Helper()
	s, err := c.Process(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r := exchange(t, s, reqHeaders("/crm/mcp", nil, "mcp-protocol-version", "2026-07-28", "mcp-method", "tools/call", "mcp-name", "get_booking")); r.GetRequestHeaders() == nil {
		t.Fatalf("want a headers response, got %v", r)
	}
	return answersTimed(t, s, reqBody(callBody))
}

// answers sends req and receives up to the first message that answers it
// (one with a response case set).
func answers(t *testing.T, s extprocv3.ExternalProcessor_ProcessClient, req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
	t.Helper()
	got, _ := answersTimed(t, s, req)
	return got
}

// answersTimed is answers that also returns when each message arrived.
func answersTimed(t *testing.T, s extprocv3.ExternalProcessor_ProcessClient, req *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, []time.Time) {
	t.Helper()
	if err := s.Send(req); err != nil {
		t.Fatal(err)
	}
	var (
		got []*extprocv3.ProcessingResponse
		at  []time.Time
	)
	for {
		r, err := s.Recv()
		if err != nil {
			t.Fatalf("after %d messages: %v", len(got), err)
		}
		got, at = append(got, r), append(at, time.Now())
		if r.GetResponse() != nil {
			return got, at
		}
		if len(got) > 1 {
			t.Fatalf("more than one message without an answer: %v", got)
		}
	}
}

// isOverride reports whether r is only an override_message_timeout of d.
func isOverride(r *extprocv3.ProcessingResponse, d time.Duration) bool {
	return r.GetResponse() == nil && r.GetModeOverride() == nil && r.GetDynamicMetadata() == nil &&
		r.GetOverrideMessageTimeout() != nil && r.GetOverrideMessageTimeout().AsDuration() == d
}

// TestOverrideMessageTimeout: work on a request message that outlasts half
// of MessageBudget gets one override_message_timeout of MaxMessageBudget,
// sent before the answer; work within the budget sends none; work beyond
// MaxMessageBudget fails closed with 503 and Retry-After; a MaxMessageBudget
// of 0 never extends.
func TestOverrideMessageTimeout(t *testing.T) {
	t.Parallel()
	const budget, maxBudget = 100 * time.Millisecond, time.Second

	t.Run("slow body: override, then continue", func(t *testing.T) {
		t.Parallel()
		c, count := overrideServer(t, 300*time.Millisecond, budget, maxBudget)
		got := sendCall(t, c)
		if len(got) != 2 || !isOverride(got[0], maxBudget) {
			t.Fatalf("want an override of %v then the answer, got %v", maxBudget, got)
		}
		if got[1].GetRequestBody() == nil {
			t.Fatalf("want the request body continued, got %v", got[1])
		}
		if n := count(gateway.PhaseRequestBody); n != 1 {
			t.Errorf("overrides counted for request_body: %v", n)
		}
		if n := count(gateway.PhaseRequestHeaders); n != 0 {
			t.Errorf("overrides counted for request_headers: %v", n)
		}
	})

	t.Run("slow request without a body: override, then continue", func(t *testing.T) {
		t.Parallel()
		c, count := overrideServer(t, 300*time.Millisecond, budget, maxBudget)
		s, err := c.Process(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		get := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
			Headers: headers(":method", "GET", ":path", "/crm/mcp", ":authority", "gw", ":scheme", "http", "accept", "text/event-stream"), EndOfStream: true,
		}}}
		got := answers(t, s, get)
		if len(got) != 2 || !isOverride(got[0], maxBudget) || got[1].GetRequestHeaders() == nil {
			t.Fatalf("want an override then the headers continued, got %v", got)
		}
		if n := count(gateway.PhaseRequestHeaders); n != 1 {
			t.Errorf("overrides counted for request_headers: %v", n)
		}
	})

	t.Run("fast: no override", func(t *testing.T) {
		t.Parallel()
		// A budget far above the work, so that a loaded machine does not
		// make the test flaky: the override would come at 2.5s.
		c, count := overrideServer(t, 0, 5*time.Second, 10*time.Second)
		for range 20 {
			got := sendCall(t, c)
			if len(got) != 1 || got[0].GetRequestBody() == nil {
				t.Fatalf("want only the answer, got %v", got)
			}
		}
		if n := count(gateway.PhaseRequestBody); n != 0 {
			t.Errorf("overrides counted: %v", n)
		}
	})

	t.Run("beyond the max: override, then 503 with Retry-After", func(t *testing.T) {
		t.Parallel()
		// A larger budget: the override comes at 200ms, so mcpgate's 503
		// must come 200ms before Envoy's restarted timer would end.
		const budget = 400 * time.Millisecond
		c, count := overrideServer(t, time.Minute, budget, maxBudget)
		start := time.Now()
		got, at := sendCallTimed(t, c)
		took := time.Since(start)
		if len(got) != 2 || !isOverride(got[0], maxBudget) {
			t.Fatalf("want an override then the answer, got %v", got)
		}
		ir := got[1].GetImmediateResponse()
		if ir.GetStatus().GetCode() != 503 || !strings.Contains(string(ir.GetBody()), `"id":1`) {
			t.Fatalf("want ImmediateResponse 503 for id 1, got %v", got[1])
		}
		if ra, _ := header(ir.GetHeaders(), "retry-after"); ra != gateway.RetryAfterSeconds {
			t.Errorf("retry-after %q", ra)
		}
		if took < maxBudget {
			t.Errorf("answered after %v, before the extended deadline %v", took, maxBudget)
		}
		// Envoy restarts its timer with maxBudget when the override
		// arrives: the answer must come before that ends.
		if gap := at[1].Sub(at[0]); gap >= maxBudget {
			t.Errorf("answer %v after the override: Envoy would have answered 504 first", gap)
		}
		if n := count(gateway.PhaseRequestBody); n != 1 {
			t.Errorf("overrides counted: %v", n)
		}
	})

	t.Run("max 0: never extended, 503 at the budget", func(t *testing.T) {
		t.Parallel()
		c, count := overrideServer(t, 300*time.Millisecond, budget, 0)
		start := time.Now()
		got := sendCall(t, c)
		took := time.Since(start)
		if len(got) != 1 || got[0].GetImmediateResponse().GetStatus().GetCode() != 503 {
			t.Fatalf("want only ImmediateResponse 503, got %v", got)
		}
		if ra, _ := header(got[0].GetImmediateResponse().GetHeaders(), "retry-after"); ra != gateway.RetryAfterSeconds {
			t.Errorf("retry-after %q", ra)
		}
		if took >= 300*time.Millisecond {
			t.Errorf("answered after %v: the work was not cut at the budget %v", took, budget)
		}
		if n := count(gateway.PhaseRequestBody); n != 0 {
			t.Errorf("overrides counted: %v", n)
		}
	})
}

// TestOverrideReusesTimer: many streams, some slow and some fast, one after
// another and at once on one server: every slow one gets exactly one
// override before its answer, no fast one gets any (timers that never
// fired are reused; those that fired are not).
func TestOverrideReusesTimer(t *testing.T) {
	t.Parallel()
	const budget, maxBudget = 200 * time.Millisecond, 2 * time.Second
	// The test double sleeps when the request carries x-slow (see slowAuth).
	p := gatewaytest.New(t, gatewaytest.WithDecls(decls), serverBounds, gatewaytest.WithAuth(headerSlowAuth{}))
	s, err := extproc.New(extproc.Options{Pipeline: p, Upstreams: []extproc.Upstream{{Name: "crm", Route: "/crm/mcp"}},
		MessageBudget: budget, MaxMessageBudget: maxBudget})
	if err != nil {
		t.Fatal(err)
	}
	c := serveServer(t, s)
	run := func(t *testing.T, slow bool) {
		st, err := c.Process(context.Background())
		if err != nil {
			t.Error(err)
			return
		}
		kv := []string{"mcp-protocol-version", "2026-07-28", "mcp-method", "tools/call", "mcp-name", "get_booking"}
		if slow {
			kv = append(kv, "x-slow", "1")
		}
		if err := st.Send(reqHeaders("/crm/mcp", nil, kv...)); err != nil {
			t.Error(err)
			return
		}
		if _, err := st.Recv(); err != nil {
			t.Error(err)
			return
		}
		if err := st.Send(reqBody(callBody)); err != nil {
			t.Error(err)
			return
		}
		want := 1
		if slow {
			want = 2
		}
		for i := range want {
			r, err := st.Recv()
			if err != nil {
				t.Error(err)
				return
			}
			if last := i == want-1; last && r.GetRequestBody() == nil || !last && !isOverride(r, maxBudget) {
				t.Errorf("slow=%v message %d: %v", slow, i, r)
				return
			}
		}
		_ = st.CloseSend()
		if _, err := st.Recv(); err == nil {
			t.Errorf("slow=%v: more than the answer", slow)
		}
	}
	for i := range 6 {
		run(t, i%3 == 0)
	}
	done := make(chan struct{})
	for i := range 24 {
		go func() {
			defer func() { done <- struct{}{} }()
			run(t, i%4 == 0)
		}()
	}
	for range 24 {
		<-done
	}
}

// headerSlowAuth is a test double: like slowAuth with a delay of 400ms
// for requests that carry x-slow, the duration in x-delay if set, none
// for others.
type headerSlowAuth struct{}

func (headerSlowAuth) Authenticate(ctx context.Context, r *gateway.Request) (*policy.Principal, *gateway.AuthFailure) {
	var d time.Duration
	if r.Header.Get("x-slow") != "" {
		d = 400 * time.Millisecond
	}
	if v := r.Header.Get("x-delay"); v != "" {
		d, _ = time.ParseDuration(v)
	}
	return slowAuth{d}.Authenticate(ctx, r)
}

// TestOverrideRacesAnswer: work that ends around the moment the override
// is due (half the budget) gets either the answer alone or one override
// and then the answer, never an override after the answer, and never two
// messages sent at once (the race detector would see it).
func TestOverrideRacesAnswer(t *testing.T) {
	t.Parallel()
	const budget, maxBudget = 20 * time.Millisecond, time.Second
	p := gatewaytest.New(t, gatewaytest.WithDecls(decls), serverBounds, gatewaytest.WithAuth(headerSlowAuth{}))
	s, err := extproc.New(extproc.Options{Pipeline: p, Upstreams: []extproc.Upstream{{Name: "crm", Route: "/crm/mcp"}},
		MessageBudget: budget, MaxMessageBudget: maxBudget})
	if err != nil {
		t.Fatal(err)
	}
	c := serveServer(t, s)
	const n = 200
	done := make(chan int, n) // overrides seen per stream
	for i := range n {
		go func() {
			overrides := 0
			defer func() { done <- overrides }()
			st, err := c.Process(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			delay := budget/2 - 2*time.Millisecond + time.Duration(i%9)*500*time.Microsecond
			if err := st.Send(reqHeaders("/crm/mcp", nil, "mcp-protocol-version", "2026-07-28", "mcp-method", "tools/call", "mcp-name", "get_booking", "x-delay", delay.String())); err != nil {
				t.Error(err)
				return
			}
			if _, err := st.Recv(); err != nil {
				t.Error(err)
				return
			}
			if err := st.Send(reqBody(callBody)); err != nil {
				t.Error(err)
				return
			}
			for {
				r, err := st.Recv()
				if err != nil {
					t.Error(err)
					return
				}
				if r.GetRequestBody() != nil {
					break
				}
				if !isOverride(r, maxBudget) || overrides > 0 {
					t.Errorf("unexpected message before the answer: %v", r)
					return
				}
				overrides++
			}
			_ = st.CloseSend()
			if r, err := st.Recv(); err == nil {
				t.Errorf("a message after the answer: %v", r)
			}
		}()
	}
	total := 0
	for range n {
		total += <-done
	}
	t.Logf("%d of %d streams got an override", total, n)
}

func (headerSlowAuth) InsufficientScope(*gateway.Request, []string) *gateway.AuthFailure { return nil }

// TestMaxMessageBudgetBelowBudget: a MaxMessageBudget between 0 and
// MessageBudget is refused.
func TestMaxMessageBudgetBelowBudget(t *testing.T) {
	for _, o := range []extproc.Options{
		{MessageBudget: time.Second, MaxMessageBudget: time.Millisecond},
		{MaxMessageBudget: -time.Second},
	} {
		if _, err := extproc.New(o); err == nil {
			t.Errorf("%v accepted", o)
		}
	}
	if _, err := extproc.New(extproc.Options{MessageBudget: time.Second, MaxMessageBudget: time.Second}); err != nil {
		t.Errorf("MaxMessageBudget = MessageBudget refused: %v", err)
	}
}
