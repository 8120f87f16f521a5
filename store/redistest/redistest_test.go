package redistest_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/mcpgate/mcpgate/store/redistest"
)

func TestStartStop(t *testing.T) {
	var pid int
	t.Run("start", func(t *testing.T) {
		s := redistest.Start(t)
		pid = s.Pid()
		rdb := s.Client(t)
		if err := rdb.Ping(t.Context()).Err(); err != nil {
			t.Fatalf("PING: %v", err)
		}
		// No persistence, no eviction.
		cfg, err := rdb.ConfigGet(t.Context(), "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for k, want := range map[string]string{"save": "", "appendonly": "no", "maxmemory-policy": "noeviction", "port": "0"} {
			if cfg[k] != want {
				t.Errorf("config %s = %q, want %q", k, cfg[k], want)
			}
		}
	})
	if pid == 0 {
		t.Skip("redis-server did not start")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("redis-server (pid %d) still exists after cleanup: kill(0) = %v", pid, err)
	}
}

// fakeTB records Skip and Fatal instead of stopping the goroutine.
type fakeTB struct {
	testing.TB
	skipped, failed bool
	cleanups        []func()
}

type stop struct{}

func (f *fakeTB) Helper()                      {}
func (f *fakeTB) Cleanup(fn func())            { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Skipf(string, ...any)         { f.skipped = true; panic(stop{}) }
func (f *fakeTB) Fatalf(string, ...any)        { f.failed = true; panic(stop{}) }
func (f *fakeTB) Logf(format string, a ...any) {}

func run(tb *fakeTB) {
	defer func() {
		if r := recover(); r != nil && r != (stop{}) {
			panic(r)
		}
		for i := len(tb.cleanups) - 1; i >= 0; i-- {
			tb.cleanups[i]()
		}
	}()
	redistest.Start(tb)
}

func TestMissingBinary(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv(redistest.EnvBinary, "")

	t.Setenv(redistest.EnvRequire, "")
	tb := &fakeTB{TB: t}
	run(tb)
	if !tb.skipped || tb.failed {
		t.Errorf("without %s: skipped=%v failed=%v, want a skip", redistest.EnvRequire, tb.skipped, tb.failed)
	}

	t.Setenv(redistest.EnvRequire, "1")
	tb = &fakeTB{TB: t}
	run(tb)
	if tb.skipped || !tb.failed {
		t.Errorf("with %s=1: skipped=%v failed=%v, want a failure", redistest.EnvRequire, tb.skipped, tb.failed)
	}
}
