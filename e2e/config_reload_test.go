package e2e

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/internal/demo"
	"github.com/mcpgate/mcpgate/internal/poll"
)

// reloadConfigYAML is the gateway configuration of TestConfigReloadUnderLoad:
// list_technicians has effect effect, the reads bucket allows reads per hour.
func reloadConfigYAML(upstream, effect, reads string) string {
	return `listeners:
  proxy: {address: 127.0.0.1:0}
  admin: {disabled: true}
  extproc: {address: 127.0.0.1:0}
upstreams:
  - name: demo
    url: ` + upstream + `
    route: /mcp
    tools:
      list_technicians:
        effect: ` + effect + `
        result_fields: ["technicians[*].id", "technicians[*].name"]
      get_booking:
        effect: read
        result_fields: [id, status]
catalog: {disabled: true}
rate_limits:
  buckets:
    reads: {rate: ` + reads + `, per: 1h, burst: ` + reads + `}
`
}

// TestConfigReloadUnderLoad changes a tool's declaration (list_technicians:
// read → notify, which needs a confirmed preview and so is refused without
// write safety) and the reads bucket in the configuration file, and reloads
// it (App.Reload, what SIGHUP runs) while clients call the tool through the
// standalone proxy and through the Envoy driver. Every answer is either
// the old one (the technicians) or the new refusal — no failed call, no
// other answer; after the reload every call gets the new decision and the
// new bucket applies. A configuration that does not validate changes
// nothing and is counted as a failed reload.
func TestConfigReloadUnderLoad(t *testing.T) {
	up := httptest.NewServer(demo.New(demo.Options{}).Handler())
	defer up.Close()
	file := filepath.Join(t.TempDir(), "mcpgate.yaml")
	writeFile(t, file, reloadConfigYAML(up.URL+"/mcp", "read", "1000000"))
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	a := startApp(t, cfg)
	a.SetConfigFile(file, nil)
	envoy, _ := startEnvoy(t, a.ExtProcAddr, up.URL, "demo", 5*time.Second)
	endpoints := []string{"http://" + a.ProxyAddr + "/mcp", envoy.URL + "/mcp"}

	const oldAnswer, newAnswer = "old", "new"
	classify := func(s seen) string {
		switch {
		case s.Status == 200 && strings.Contains(s.Body, "technicians") && !strings.Contains(s.Body, `"isError":true`):
			return oldAnswer
		case s.Status == 200 && strings.Contains(s.Body, `"isError":true`) && strings.Contains(s.Body, "confirm"):
			return newAnswer
		}
		return "unexpected " + s.Body
	}
	body := call("7", "list_technicians", "{}")
	hdr := v26("tools/call", "list_technicians")
	for _, ep := range endpoints {
		if got := classify(do(t, "POST", ep, hdr, body)); got != oldAnswer {
			t.Fatalf("before the reload %s: %s", ep, got)
		}
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[string]int{}
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ep := endpoints[i%2]
			for {
				select {
				case <-stop:
					return
				default:
				}
				got := classify(do(t, "POST", ep, hdr, body))
				mu.Lock()
				counts[got]++
				mu.Unlock()
			}
		}()
	}
	// Let the load run, then reload mid-flight.
	poll.Until(t, 10*time.Second, "calls before the reload", func() bool { mu.Lock(); defer mu.Unlock(); return counts[oldAnswer] >= 200 })
	writeFile(t, file, reloadConfigYAML(up.URL+"/mcp", "notify", "1"))
	if err := a.Reload(context.Background()); err != nil {
		t.Fatalf("reload: %v", err)
	}
	// Calls that started after the reload returned see the new settings.
	for _, ep := range endpoints {
		if got := classify(do(t, "POST", ep, hdr, body)); got != newAnswer {
			t.Fatalf("after the reload %s: %s", ep, got)
		}
	}
	poll.Until(t, 10*time.Second, "calls after the reload", func() bool { mu.Lock(); defer mu.Unlock(); return counts[newAnswer] >= 200 })
	close(stop)
	wg.Wait()
	for k, n := range counts {
		if k != oldAnswer && k != newAnswer {
			t.Errorf("%d calls got an answer that is neither the old nor the new decision: %s", n, k)
		}
	}
	t.Logf("answers: %d old, %d new", counts[oldAnswer], counts[newAnswer])

	// The new reads bucket (1 per hour) applies: a read is soon refused
	// with a wait of the new bucket's order (minutes, not seconds). Bucket
	// levels carry over a reload (GCRA state is kept), so the load above
	// may have left a wait of a second or two to sit out first.
	booking := call("8", "get_booking", `{"id":"b-1"}`)
	bh := v26("tools/call", "get_booking")
	retryIn := regexp.MustCompile(`Retry the same call in (\d+) seconds`)
	limited := false
	for range 5 {
		got := do(t, "POST", endpoints[0], bh, booking)
		m := retryIn.FindStringSubmatch(got.Body)
		if m == nil || !strings.Contains(got.Body, "rate_limited") {
			continue // went through: the next one meets the new bucket
		}
		n, _ := strconv.Atoi(m[1])
		if n >= 60 {
			limited = true
			break
		}
		// The tokens the load took before the reload: wait them out.
		time.Sleep(time.Duration(n)*time.Second + 200*time.Millisecond)
	}
	if !limited {
		t.Fatal("the reloaded reads bucket (1 per hour) does not apply: two reads went through")
	}

	// An invalid file changes nothing.
	writeFile(t, file, reloadConfigYAML(up.URL+"/mcp", "bogus_effect", "1000000"))
	if err := a.Reload(context.Background()); err == nil || !strings.Contains(err.Error(), "config reload") {
		t.Fatalf("reload of an invalid file: %v", err)
	}
	for _, ep := range endpoints {
		if got := classify(do(t, "POST", ep, hdr, body)); got != newAnswer {
			t.Fatalf("after a failed reload %s: %s", ep, got)
		}
	}
	if n := reloadCount(t, a.Registry, "failure"); n != 1 {
		t.Fatalf("mcpgate_config_reloads_total{result=\"failure\"} = %v, want 1", n)
	}
	if n := reloadCount(t, a.Registry, "success"); n != 1 {
		t.Fatalf("mcpgate_config_reloads_total{result=\"success\"} = %v, want 1", n)
	}
	_ = os.Remove(file)
}

func reloadCount(t *testing.T, g interface {
	Gather() ([]*dto.MetricFamily, error)
}, result string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "mcpgate_config_reloads_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}
