package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/store"
)

// taskCases are the TaskStore cases of the suite (registered in Run).
var taskCases = []struct {
	name string
	fn   func(*testing.T, suite)
}{
	{"Tasks", testTasks},
	{"TaskExpiry", testTaskExpiry},
	{"TaskInvalid", testTaskInvalid},
	{"ConcurrentBindTask", testConcurrentBindTask},
	{"TaskReopen", testTaskReopen},
}

var (
	taskAlice   = store.TaskBinding{Connection: "tok-1", Tenant: "acme", Subject: "alice", Tool: "export_report"}
	taskMallory = store.TaskBinding{Connection: "tok-2", Tenant: "acme", Subject: "mallory", Tool: "export_report"}
)

// testTasks: a binding is returned as stored, scoped by upstream; another
// principal or another tool cannot take a live task id; an equal binding
// renews.
func testTasks(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	_, err := st.Task(ctx, "lab", "t-1")
	wantErr(t, "Task before binding", err, store.ErrNotFound)

	must(t, "BindTask", st.BindTask(ctx, "lab", "t-1", taskAlice, time.Hour))
	if got, err := st.Task(ctx, "lab", "t-1"); err != nil || got != taskAlice {
		t.Fatalf("Task = %+v, %v; want %+v", got, err, taskAlice)
	}
	// The same id on another upstream is another task.
	_, err = st.Task(ctx, "demo", "t-1")
	wantErr(t, "Task of another upstream", err, store.ErrNotFound)
	must(t, "BindTask other upstream", st.BindTask(ctx, "demo", "t-1", taskMallory, time.Hour))
	if got, _ := st.Task(ctx, "demo", "t-1"); got != taskMallory {
		t.Errorf("demo Task = %+v, want %+v", got, taskMallory)
	}
	// Keys that would collide if upstream and id were simply joined.
	must(t, "BindTask a:b/c", st.BindTask(ctx, "a:b", "c", taskAlice, time.Hour))
	_, err = st.Task(ctx, "a", "b:c")
	wantErr(t, "Task a/b:c", err, store.ErrNotFound)

	wantErr(t, "BindTask by another principal", st.BindTask(ctx, "lab", "t-1", taskMallory, time.Hour), store.ErrExists)
	other := taskAlice
	other.Tool = "delete_everything"
	wantErr(t, "BindTask with another tool", st.BindTask(ctx, "lab", "t-1", other, time.Hour), store.ErrExists)
	if got, _ := st.Task(ctx, "lab", "t-1"); got != taskAlice {
		t.Errorf("Task after refused rebinds = %+v, want %+v", got, taskAlice)
	}
	must(t, "BindTask renew", st.BindTask(ctx, "lab", "t-1", taskAlice, 2*time.Hour))
	if got := taskAlice.Principal(); got != (store.SessionBinding{Connection: "tok-1", Tenant: "acme", Subject: "alice"}) {
		t.Errorf("Principal = %+v", got)
	}
}

func testTaskExpiry(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	const short = 50 * time.Millisecond
	must(t, "BindTask expiring", st.BindTask(ctx, "lab", "expiring", taskAlice, short))
	must(t, "BindTask renewed", st.BindTask(ctx, "lab", "renewed", taskAlice, short))
	must(t, "BindTask renew", st.BindTask(ctx, "lab", "renewed", taskAlice, time.Hour))
	must(t, "BindTask tiny", st.BindTask(ctx, "lab", "tiny", taskAlice, time.Nanosecond))

	time.Sleep(3 * short)

	for _, id := range []string{"expiring", "tiny"} {
		_, err := st.Task(ctx, "lab", id)
		wantErr(t, "Task "+id+" after its ttl", err, store.ErrNotFound)
	}
	if got, err := st.Task(ctx, "lab", "renewed"); err != nil || got != taskAlice {
		t.Errorf("renewed Task = %+v, %v; want %+v", got, err, taskAlice)
	}
	// An expired binding no longer holds the id.
	must(t, "BindTask over expired", st.BindTask(ctx, "lab", "expiring", taskMallory, time.Hour))
	if got, _ := st.Task(ctx, "lab", "expiring"); got != taskMallory {
		t.Errorf("Task = %+v, want %+v", got, taskMallory)
	}
}

func testTaskInvalid(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	noTool := taskAlice
	noTool.Tool = ""
	nul := taskAlice
	nul.Subject = "al\x00ice"
	for _, c := range []struct {
		what     string
		upstream string
		id       string
		b        store.TaskBinding
		ttl      time.Duration
	}{
		{"zero ttl", "lab", "t", taskAlice, 0},
		{"negative ttl", "lab", "t", taskAlice, -time.Second},
		{"empty task id", "lab", "", taskAlice, time.Hour},
		{"empty upstream", "", "t", taskAlice, time.Hour},
		{"NUL in task id", "lab", "t\x00", taskAlice, time.Hour},
		{"long task id", "lab", strings.Repeat("x", store.MaxIDLen+1), taskAlice, time.Hour},
		{"empty connection", "lab", "t", store.TaskBinding{Tenant: "acme", Tool: "x"}, time.Hour},
		{"empty tool", "lab", "t", noTool, time.Hour},
		{"NUL in subject", "lab", "t", nul, time.Hour},
	} {
		wantErr(t, c.what, st.BindTask(ctx, c.upstream, c.id, c.b, c.ttl), store.ErrInvalid)
	}
	_, err := st.Task(ctx, "lab", "t")
	wantErr(t, "Task after invalid binds", err, store.ErrNotFound)
	_, err = st.Task(ctx, "lab", "")
	wantErr(t, "Task with an empty id", err, store.ErrInvalid)
}

// testConcurrentBindTask: of many principals binding one task id at once,
// exactly one wins and every reader sees that one.
func testConcurrentBindTask(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	const n = 16
	bindings := make([]store.TaskBinding, n)
	for i := range bindings {
		bindings[i] = store.TaskBinding{Connection: fmt.Sprintf("tok-%d", i), Tenant: "acme", Subject: fmt.Sprint("user-", i), Tool: "export_report"}
	}
	errs := parallel(n, func(i int) error { return st.BindTask(ctx, "lab", "race", bindings[i], time.Hour) })
	won := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if won >= 0 {
				t.Fatalf("BindTask: both %d and %d won", won, i)
			}
			won = i
		case !errors.Is(err, store.ErrExists):
			t.Fatalf("BindTask %d: %v", i, err)
		}
	}
	if won < 0 {
		t.Fatal("BindTask: nobody won")
	}
	if got, err := st.Task(ctx, "lab", "race"); err != nil || got != bindings[won] {
		t.Errorf("Task = %+v, %v; want the winner %+v", got, err, bindings[won])
	}
}

// testTaskReopen: bindings survive a restart (or are seen by another
// replica).
func testTaskReopen(t *testing.T, s suite) {
	ctx := t.Context()
	st, name := s.fresh(t)
	must(t, "BindTask", st.BindTask(ctx, "lab", "t-1", taskAlice, time.Hour))
	must(t, "Close", st.Close())
	_, err := st.Task(ctx, "lab", "t-1")
	wantErr(t, "Task after Close", err, store.ErrClosed)
	wantErr(t, "BindTask after Close", st.BindTask(ctx, "lab", "t-2", taskAlice, time.Hour), store.ErrClosed)
	st = s.open(t, name)
	if got, err := st.Task(ctx, "lab", "t-1"); err != nil || got != taskAlice {
		t.Errorf("Task after reopen = %+v, %v; want %+v", got, err, taskAlice)
	}
}
