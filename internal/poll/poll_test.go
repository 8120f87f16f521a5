package poll

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

func TestUntilReturnsOnceTrue(t *testing.T) {
	var n atomic.Int32
	Until(t, 5*time.Second, "the third look", func() bool { return n.Add(1) == 3 })
	if got := n.Load(); got != 3 {
		t.Errorf("cond called %d times, want 3", got)
	}
}

func TestUntilFailsAfterDeadline(t *testing.T) {
	ft := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Until(ft, 30*time.Millisecond, "never", func() bool { return false })
	}()
	<-done
	if !ft.failed {
		t.Error("Until returned without failing the test")
	}
}

// fatalRecorder records Fatalf and ends the goroutine like testing does.
type fatalRecorder struct {
	testing.TB
	failed bool
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(string, ...any) {
	f.failed = true
	runtime.Goexit()
}
