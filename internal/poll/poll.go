// Package poll waits in tests for a condition another goroutine or
// process makes true: a reload applied, a watcher caught up, a stream
// started. Only tests import it.
package poll

import (
	"testing"
	"time"
)

// Interval is how long Until sleeps between two looks at the condition.
const Interval = 10 * time.Millisecond

// Until calls cond every Interval until it reports true, and fails the
// test naming what it waited for when within passes first.
func Until(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(Interval)
	}
}
