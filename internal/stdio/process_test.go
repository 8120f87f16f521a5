package stdio

import (
	"log/slog"
	"os"
	"syscall"
	"testing"
)

func TestExitReason(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv []string
		sig  syscall.Signal
		want string
	}{
		{"status", []string{"sh", "-c", "exit 3"}, 0, "exit status 3"},
		{"SIGKILL", []string{"sleep", "100"}, syscall.SIGKILL, "signal: killed"},
		{"SIGTERM", []string{"sleep", "100"}, syscall.SIGTERM, "signal: terminated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := startProcess(tc.argv, "", []string{"PATH=" + os.Getenv("PATH")}, slog.New(slog.DiscardHandler), func() {})
			if err != nil {
				t.Fatal(err)
			}
			if tc.sig != 0 {
				p.signalGroup(tc.sig)
			}
			<-p.exited
			closeAll(p.stdin, p.stdout, p.stderr)
			if got := p.exitReason(); got != tc.want {
				t.Errorf("exitReason = %q, want %q", got, tc.want)
			}
		})
	}
}
