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
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"
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
	fmt.Fprintf(w, "\nprofiles of the gateway and the floors in %s (allocations of a run: go tool pprof -sample_index=alloc_space -base X.allocs-before.pprof X.allocs.pprof):\n", p.dir)
	for _, f := range p.files {
		out, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount", "25", f).CombinedOutput()
		if err != nil {
			fmt.Fprintf(w, "%s: %v\n", f, err)
			continue
		}
		fmt.Fprintf(w, "\n%s\n%s", filepath.Base(f), out)
	}
}

// floorArgs are the flags that make a floor process (this program run as
// the HTTP or the ext_proc floor) profile itself on signals; none without
// -profile.
func (p *profiler) floorArgs(name string) []string {
	if p == nil {
		return nil
	}
	return []string{"-floor-profile", filepath.Join(p.dir, name+".cpu.pprof.tmp")}
}

// startFloor starts the CPU profile of the floor process pid.
func (p *profiler) startFloor(pid int) error {
	return syscall.Kill(pid, syscall.SIGUSR1)
}

// stopFloor stops the floor's CPU profile and waits for the floor to
// write it (it renames the file when complete), then names it for the run.
func (p *profiler) stopFloor(pid int, mode string, c int) error {
	if err := syscall.Kill(pid, syscall.SIGUSR2); err != nil {
		return err
	}
	done := filepath.Join(p.dir, mode+".cpu.pprof")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(done); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("floor %s: no CPU profile after SIGUSR2", mode)
		}
	}
	file := p.name(mode, c, "cpu")
	if err := os.Rename(done, file); err != nil {
		return err
	}
	p.files = append(p.files, file)
	return nil
}

// profileOnSignal makes this process (a floor) write a CPU profile into
// file+".tmp" from SIGUSR1 to SIGUSR2, then rename it to file without the
// ".tmp" suffix.
func profileOnSignal(tmp string) {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		var f *os.File
		for s := range sig {
			switch {
			case s == syscall.SIGUSR1 && f == nil:
				var err error
				if f, err = os.Create(tmp); err == nil {
					if err = pprof.StartCPUProfile(f); err != nil {
						_ = f.Close()
						f = nil
					}
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, "floor profile:", err)
				}
			case s == syscall.SIGUSR2 && f != nil:
				pprof.StopCPUProfile()
				_ = f.Close()
				f = nil
				if err := os.Rename(tmp, strings.TrimSuffix(tmp, ".tmp")); err != nil {
					fmt.Fprintln(os.Stderr, "floor profile:", err)
				}
			}
		}
	}()
}
