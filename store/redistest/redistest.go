// Package redistest starts a throwaway redis-server for tests: no
// persistence (--save "" --appendonly no), listening only on a Unix socket
// in a fresh temporary directory, stopped and removed at the test's
// cleanup.
//
// When redis-server is not installed, Start skips the test, unless the
// environment sets MCPGATE_REQUIRE_REDIS=1 (CI does), in which case the
// test fails. MCPGATE_REDIS_SERVER names another binary than the
// redis-server found on PATH.
package redistest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Environment variables Start reads.
const (
	EnvRequire = "MCPGATE_REQUIRE_REDIS"
	EnvBinary  = "MCPGATE_REDIS_SERVER"
)

const (
	startTimeout = 10 * time.Second
	stopTimeout  = 5 * time.Second
)

// Server is a running redis-server.
type Server struct {
	// Socket is the Unix socket path.
	Socket string
	// URL is the go-redis URL of the server (unix://…).
	URL string

	cmd  *exec.Cmd
	done chan struct{}
	out  *syncBuffer
}

// Start starts a redis-server for tb and stops it at tb's cleanup.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin := os.Getenv(EnvBinary)
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("redis-server"); err != nil {
			if os.Getenv(EnvRequire) == "1" {
				tb.Fatalf("redis-server not found and %s=1: %v", EnvRequire, err)
			}
			tb.Skipf("redis-server not installed (set %s=1 to fail instead): %v", EnvRequire, err)
		}
	}
	// A short directory: Unix socket paths are limited to ~108 bytes, and
	// t.TempDir's names grow with the test's name.
	dir, err := os.MkdirTemp("", "mcpgate-redis-")
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })

	s := &Server{
		Socket: filepath.Join(dir, "redis.sock"),
		done:   make(chan struct{}),
		out:    &syncBuffer{},
	}
	s.URL = "unix://" + s.Socket
	s.cmd = exec.Command(bin,
		"--port", "0",
		"--unixsocket", s.Socket,
		"--unixsocketperm", "700",
		"--dir", dir,
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--maxmemory-policy", "noeviction",
		"--loglevel", "warning",
	)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	s.cmd.SysProcAttr = &syscall.SysProcAttr{}
	setParentDeathSignal(s.cmd.SysProcAttr)
	if err := s.cmd.Start(); err != nil {
		tb.Fatalf("redistest: start %s: %v", bin, err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	tb.Cleanup(func() { s.stop(tb) })

	if err := s.waitReady(); err != nil {
		tb.Fatalf("redistest: %v\nredis-server output:\n%s", err, s.out.String())
	}
	return s
}

func (s *Server) waitReady() error {
	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: s.Socket, MaxRetries: -1, DialTimeout: time.Second})
	defer rdb.Close()
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-s.done:
			return fmt.Errorf("redis-server exited before answering PING (%v)", s.cmd.ProcessState)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server did not answer PING within %s: %v", startTimeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop sends SIGTERM, waits, then SIGKILL.
func (s *Server) stop(tb testing.TB) {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(stopTimeout):
		_ = s.cmd.Process.Kill()
		<-s.done
		tb.Logf("redistest: redis-server ignored SIGTERM for %s; killed", stopTimeout)
	}
}

// Client returns a new client of the server, closed at tb's cleanup.
func (s *Server) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: s.Socket})
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Pid is the server's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
