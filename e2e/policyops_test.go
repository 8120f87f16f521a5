package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/internal/demo"
)

// TestPolicyReloadUnderLoad: the policy is swapped many times while calls
// run through both adapters (the standalone proxy and ext_proc behind the
// Envoy driver); every call gets a decision of the old or the new policy,
// none fails or is decided by a half-loaded one.
func TestPolicyReloadUnderLoad(t *testing.T) {
	up := httptest.NewServer(demo.New(demo.Options{}).Handler())
	defer up.Close()
	dir, pol, transparent := transparentPolicyDir(t)
	cfgFile := filepath.Join(dir, "mcpgate.yaml")
	writeFile(t, cfgFile, "listeners:\n  proxy: {address: 127.0.0.1:0}\n  admin: {address: 127.0.0.1:0}\n  extproc: {address: 127.0.0.1:0}\n"+
		"upstreams:\n  - name: demo\n    url: "+up.URL+"\npolicy:\n  dirs: [policy]\n  watch: false\n"+
		// Rate, concurrency and loop limits would refuse this load; they are not under test.
		"rate_limits:\n  disabled: true\n")
	cfg, err := config.Load(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	a := startApp(t, cfg)
	envoy, _ := startEnvoy(t, a.ExtProcAddr, up.URL, "demo", 2*time.Second)
	endpoints := []string{"http://" + a.ProxyAddr + "/mcp", envoy.URL + "/mcp"}

	call := func(endpoint string) (int, string, error) {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_technicians","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		req, _ := http.NewRequest("POST", endpoint, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "list_technicians")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	for _, ep := range endpoints {
		if code, got, err := call(ep); err != nil || code != 200 || !strings.Contains(got, "technicians") {
			t.Fatalf("%s before reloads: %d %v %s", ep, code, err, got)
		}
	}

	const workersPerAdapter, callsPerWorker, reloads = 3, 120, 60
	var allowed, denied atomic.Int64
	var mu sync.Mutex
	var failures []string
	fail := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		if len(failures) < 10 {
			failures = append(failures, s)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, ep := range endpoints {
		for range workersPerAdapter {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range callsPerWorker {
					code, got, err := call(ep)
					switch {
					case err != nil || code != 200:
						fail(fmt.Sprintf("%s: %d %v %.300s", ep, code, err, got))
					case strings.Contains(got, `"maintenance"`):
						denied.Add(1)
					case strings.Contains(got, "technicians") && !strings.Contains(got, `"isError":true`):
						allowed.Add(1)
					default:
						fail(fmt.Sprintf("%s: neither policy's decision: %.300s", ep, got))
					}
				}
			}()
		}
	}
	reloadErrs := make(chan error, 1)
	go func() {
		defer close(reloadErrs)
		for i := range reloads {
			select {
			case <-stop:
				return
			default:
			}
			src := transparent
			if i%2 == 0 {
				src = denyAll
			}
			if err := os.WriteFile(filepath.Join(pol, "policy.rego"), []byte(src), 0o644); err != nil {
				reloadErrs <- err
				return
			}
			if err := a.Engine.Reload(context.Background()); err != nil {
				reloadErrs <- err
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	wg.Wait()
	close(stop)
	if err := <-reloadErrs; err != nil {
		t.Fatalf("reload: %v", err)
	}
	if len(failures) > 0 {
		t.Fatalf("%d+ calls failed during reloads, e.g.:\n%s", len(failures), strings.Join(failures, "\n"))
	}
	total := allowed.Load() + denied.Load()
	if total != 2*workersPerAdapter*callsPerWorker {
		t.Fatalf("%d decisions, want %d", total, 2*workersPerAdapter*callsPerWorker)
	}
	t.Logf("%d calls: %d allowed by the transparent policy, %d denied by the maintenance policy", total, allowed.Load(), denied.Load())
	if !strings.Contains(scrape(t, "http://"+a.AdminAddr), `mcpgate_policy_reloads_total{result="success"}`) {
		t.Fatal("reloads not counted")
	}
}
