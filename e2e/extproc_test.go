package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
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
// gRPC health service on a Unix socket (the sidecar setup); a client goes
// through Envoy (the driver) to the demo upstream.
func TestDemoExtProc(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "extproc.sock")
	cmd := exec.Command(bin, "demo", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--upstream-listen", "127.0.0.1:0", "--extproc", "unix:"+sock)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	var m []string
	var upstream string
	for sc.Scan() && (m == nil || upstream == "") {
		if m == nil {
			m = readyLine.FindStringSubmatch(sc.Text())
		}
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "demo upstream (direct, naive):"); ok {
			upstream = strings.TrimSpace(rest)
		}
	}
	if m == nil || m[3] != "unix:"+sock || upstream == "" {
		t.Fatalf("ready line %v, upstream %q", m, upstream)
	}
	go func() {
		for sc.Scan() {
		}
	}()

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

	srv, d := startEnvoy(t, "unix:"+sock, strings.TrimSuffix(upstream, "/mcp"), "", 500*time.Millisecond)
	c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) != 9 {
		t.Fatalf("tools/list through Envoy: %v (%d tools)", err, len(tools.Tools))
	}
	if d.Stats().StreamsStarted == 0 {
		t.Fatal("no ext_proc stream was opened")
	}
}
