package stdio

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/time/rate"
)

// stderr drain bounds: a line longer than maxStderrLine is logged cut; more
// than stderrRate lines a second (bursts of stderrBurst) are counted, not
// logged. The pipe is always read, so a chatty child never blocks on it.
const (
	maxStderrLine = 4 << 10
	stderrRate    = 50
	stderrBurst   = 200
)

// process is one run of the child: its process group, its pipes and the
// goroutines that drain them.
type process struct {
	cmd    *exec.Cmd
	stdin  *os.File
	stdout *os.File
	stderr *os.File
	// exited is closed when the child has been reaped (Wait returned);
	// err is Wait's error then.
	exited chan struct{}
	err    error
	// drained is closed when standard error reached EOF.
	drained chan struct{}
}

// startProcess starts argv in dir with env, in a process group of its own
// (so that signals reach grandchildren such as npx → node), with its
// standard input and output on pipes and its standard error drained into
// log. The pipes are os.File pairs rather than exec's own, so that reaping
// the child never races reading what it wrote last.
func startProcess(argv []string, dir string, env []string, log *slog.Logger, dropped func()) (*process, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		closeAll(inR, inW, outR, outW, errR, errW)
		return nil, err
	}
	// The child holds its own copies; ours would keep EOF from coming.
	closeAll(inR, outW, errW)
	p := &process{cmd: cmd, stdin: inW, stdout: outR, stderr: errR, exited: make(chan struct{}), drained: make(chan struct{})}
	go func() {
		defer close(p.drained)
		drainStderr(errR, log, dropped)
	}()
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// pid is the child's process id, which is also its process group id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// signalGroup sends sig to the child's process group (the child and every
// descendant that did not leave it).
func (p *process) signalGroup(sig syscall.Signal) {
	_ = syscall.Kill(-p.pid(), sig)
}

// stop ends the child: standard input is closed (the stdio transport's
// signal to exit), then after grace SIGTERM, then after grace again
// SIGKILL, each to the whole process group. It returns once the child is
// reaped; whatever else is left of the group is killed then too.
func (p *process) stop(grace time.Duration) {
	_ = p.stdin.Close()
	steps := []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}
	for _, sig := range steps {
		select {
		case <-p.exited:
			p.signalGroup(syscall.SIGKILL)
			return
		case <-time.After(grace):
		}
		p.signalGroup(sig)
	}
	<-p.exited
}

// exitReason describes how the child ended, for logs and errors.
func (p *process) exitReason() string {
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "signal: " + ws.Signal().String()
		}
		return fmt.Sprintf("exit status %d", ee.ExitCode())
	}
	if p.err != nil {
		return p.err.Error()
	}
	return "exit status 0"
}

// drainStderr logs each line the child writes to standard error (cut at
// maxStderrLine) until EOF, within a rate; lines over the rate are counted
// with dropped instead.
func drainStderr(r io.Reader, log *slog.Logger, dropped func()) {
	br := bufio.NewReaderSize(r, maxStderrLine)
	lim := rate.NewLimiter(stderrRate, stderrBurst)
	for {
		line, err := br.ReadSlice('\n')
		cut := errors.Is(err, bufio.ErrBufferFull)
		if len(line) > 0 {
			if lim.Allow() {
				log.Info("stdio server stderr", slog.String("line", string(bytes.TrimRight(line, "\r\n"))), slog.Bool("cut", cut))
			} else {
				dropped()
			}
		}
		for cut {
			// The rest of an overlong line is read and discarded.
			_, err = br.ReadSlice('\n')
			cut = errors.Is(err, bufio.ErrBufferFull)
		}
		if err != nil {
			return
		}
	}
}
