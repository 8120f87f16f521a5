package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// pprofHook is added to the gateway's build by -profile (a build overlay):
// it serves CPU and allocation profiles on MCPGATE_BENCH_PPROF.
//
//go:embed pprofhook/hook.go
var pprofHook []byte

// profileBuild writes the hook and the overlay into dir and returns the
// extra go build flags that add the hook to cmd/mcpgate.
func profileBuild(ctx context.Context, dir string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-f", "{{.Dir}}", "github.com/mcpgate/mcpgate/cmd/mcpgate").Output()
	if err != nil {
		return nil, fmt.Errorf("go list cmd/mcpgate: %w", err)
	}
	hook := filepath.Join(dir, "pprofhook.go")
	if err := os.WriteFile(hook, pprofHook, 0o644); err != nil {
		return nil, err
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {
		filepath.Join(strings.TrimSpace(string(out)), "zz_bench_pprof.go"): hook,
	}})
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(file, overlay, 0o644); err != nil {
		return nil, err
	}
	return []string{"-tags", "mcpgate_bench_pprof", "-overlay", file}, nil
}

// profiler asks the gateway for its profiles around each measured run.
type profiler struct {
	dir, base string
	files     []string // CPU profiles written, in order
}

// newProfiler picks the hook's address and sets MCPGATE_BENCH_PPROF for
// the gateway started next.
func newProfiler(dir string) (*profiler, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	if err := os.Setenv("MCPGATE_BENCH_PPROF", addr); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	return &profiler{dir: abs, base: "http://" + addr}, nil
}

func (p *profiler) name(mode string, c int, kind string) string {
	return filepath.Join(p.dir, fmt.Sprintf("%s-c%d.%s.pprof", mode, c, kind))
}

func (p *profiler) get(path, file string) error {
	u := p.base + path
	if file != "" {
		u += "?file=" + file
	}
	resp, err := http.Get(u)
	if err != nil {
		return fmt.Errorf("profile %s: %w", path, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile %s: %s %s", path, resp.Status, msg)
	}
	return nil
}

// start takes the allocation profile before the run and starts the CPU
// profile.
func (p *profiler) start(mode string, c int) error {
	if err := p.get("/allocs", p.name(mode, c, "allocs-before")); err != nil {
		return err
	}
	return p.get("/cpu/start", p.name(mode, c, "cpu"))
}

// stop ends the CPU profile and takes the allocation profile after the run.
func (p *profiler) stop(mode string, c int) error {
	if err := p.get("/cpu/stop", ""); err != nil {
		return err
	}
	p.files = append(p.files, p.name(mode, c, "cpu"))
	return p.get("/allocs", p.name(mode, c, "allocs"))
}

// report prints the top of each CPU profile and how to read the rest.
func (p *profiler) report(w io.Writer) {
	fmt.Fprintf(w, "\nprofiles of the gateway in %s (allocations of a run: go tool pprof -sample_index=alloc_space -base X.allocs-before.pprof X.allocs.pprof):\n", p.dir)
	for _, f := range p.files {
		out, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount", "25", f).CombinedOutput()
		if err != nil {
			fmt.Fprintf(w, "%s: %v\n", f, err)
			continue
		}
		fmt.Fprintf(w, "\n%s\n%s", filepath.Base(f), out)
	}
}
