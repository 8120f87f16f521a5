package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// TaskStore binds the task ids an upstream issues (MCP 2025-11-25, "Tasks":
// a tools/call with params.task answered by a CreateTaskResult) to the
// principal that started the task and the tool it runs. The gateway checks
// the binding on every tasks/get, tasks/result and tasks/cancel and filters
// tasks/list with it, so a task handle is useless to anyone else: the spec
// leaves binding tasks to an authorisation context to the receiver, and an
// upstream behind mcpgate sees every caller as the gateway.
//
// Task ids are scoped by upstream: two upstreams may issue the same id.
type TaskStore interface {
	// BindTask binds the task taskID of upstream to b for ttl (rounded up
	// to whole milliseconds). Binding a task again to an equal binding
	// renews the ttl; binding a live task to a different binding returns
	// ErrExists and changes nothing. ErrInvalid if CheckTaskBinding
	// fails.
	BindTask(ctx context.Context, upstream, taskID string, b TaskBinding, ttl time.Duration) error
	// Task returns the live binding of upstream's task taskID. ErrNotFound
	// if there is none or it expired.
	Task(ctx context.Context, upstream, taskID string) (TaskBinding, error)
}

// TaskBinding is who started a task and with which tool. Another principal
// presenting the task id must learn nothing: the gateway answers "not
// found", as for an id nobody issued.
type TaskBinding struct {
	// Connection is required: the principal's connection id (a gateway
	// token's id, or authn.ConnectionID of an OAuth principal).
	Connection string
	Tenant     string
	Subject    string
	// Tool is the name of the tool whose call created the task (required):
	// the result fetched through tasks/result is shaped as that tool's.
	Tool string
}

// Principal is the binding's principal part, comparable with a
// SessionBinding.
func (b TaskBinding) Principal() SessionBinding {
	return SessionBinding{Connection: b.Connection, Tenant: b.Tenant, Subject: b.Subject}
}

// CheckTaskBinding validates the arguments of TaskStore.BindTask: a valid
// upstream name and task id (CheckID), a connection and a tool, no NUL
// byte anywhere, and a positive ttl; the error wraps ErrInvalid. Backends
// call it before writing.
func CheckTaskBinding(upstream, taskID string, b TaskBinding, ttl time.Duration) error {
	if err := CheckID("task upstream", upstream); err != nil {
		return err
	}
	if err := CheckID("task id", taskID); err != nil {
		return err
	}
	if err := CheckID("task connection", b.Connection); err != nil {
		return err
	}
	if err := CheckID("task tool", b.Tool); err != nil {
		return err
	}
	if strings.IndexByte(b.Tenant, 0) >= 0 || strings.IndexByte(b.Subject, 0) >= 0 {
		return fmt.Errorf("%w: task binding contains a NUL byte", ErrInvalid)
	}
	if ttl <= 0 {
		return fmt.Errorf("%w: task ttl %s is not positive", ErrInvalid, ttl)
	}
	return nil
}

// CheckTaskKey validates the arguments of TaskStore.Task (ErrInvalid).
func CheckTaskKey(upstream, taskID string) error {
	if err := CheckID("task upstream", upstream); err != nil {
		return err
	}
	return CheckID("task id", taskID)
}
