package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestDemoExtProc: `mcpgate demo --extproc unix:/…` serves ext_proc and the
// gRPC health service on a Unix socket (the sidecar setup); a client with
// a demo token goes through Envoy (the driver) to the demo upstream, which
// accepts the call only with mcpgate's identity assertion.
func TestDemoExtProc(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "extproc.sock")
	d := startDemo(t, "--extproc", "unix:"+sock)
	if d.ExtProc != "unix:"+sock {
		t.Fatalf("ready line names ext_proc %q, want unix:%s", d.ExtProc, sock)
	}

	conn, err := grpc.NewClient("unix:"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, svc := range []string{"", "envoy.service.ext_proc.v3.ExternalProcessor"} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		cancel()
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health %q: %v %v", svc, resp, err)
		}
	}

	srv, drv := startEnvoy(t, "unix:"+sock, strings.TrimSuffix(d.Upstream, "/mcp"), "", 500*time.Millisecond)
	cs := connectSDK(t, srv.URL+"/mcp", d.Tokens["alice"], "")
	if names := toolNames(t, cs); len(names) != 12 {
		t.Fatalf("tools/list through Envoy: %q, want 9 tools and the gateway's 3", names)
	}
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "find_customers", Arguments: map[string]any{"query": "a"}})
	if err != nil || res.IsError {
		t.Fatalf("find_customers through Envoy: %v %+v", err, res)
	}
	if drv.Stats().StreamsStarted == 0 {
		t.Fatal("no ext_proc stream was opened")
	}
	// Without a token Envoy gets mcpgate's 401 as an immediate response.
	if a := send(t, "POST", srv.URL+"/mcp", bearer("", "tools/list", ""), listBody); a.Status != 401 || !strings.Contains(a.Body, `"missing_token"`) {
		t.Errorf("tools/list without a token through Envoy: %+v", a)
	}
}
