package gateway

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/gateway/refusal"
	"github.com/mcpgate/mcpgate/gateway/shape"
	"github.com/mcpgate/mcpgate/policy"
	"github.com/mcpgate/mcpgate/store"
)

// Tasks (MCP 2025-11-25, basic/utilities/tasks).
//
// A client asks for a task by adding params.task ({ttl?: ms}) to
// tools/call; the upstream answers with a CreateTaskResult
// ({task: {taskId, status, statusMessage?, createdAt, lastUpdatedAt, ttl,
// pollInterval?}}) and the client later calls tasks/get, tasks/result
// (the tool's CallToolResult), tasks/cancel and tasks/list with the task
// id. Upstreams may push notifications/tasks/status ({...Task}).
//
// Off (the default), every task path is refused with an error the model
// can act on, and the upstream's tasks capability is stripped (see
// extensions.go). On:
//
//   - the task id of a CreateTaskResult is bound, per upstream, to the
//     principal that started it (connection, tenant, subject) and the tool,
//     in the store (store.TaskStore), for the task's ttl capped by
//     TaskOptions.MaxTTL; an answer whose task cannot be bound is withheld;
//   - tasks/get, tasks/result and tasks/cancel for a task bound to another
//     principal, or to none, get one and the same -32602 "task not found"
//     error (the spec's code for an unknown task id): the caller learns
//     nothing, and nothing is forwarded;
//   - tasks/list shows only the caller's tasks;
//   - a result fetched with tasks/result is shaped by the tool's shaper,
//     exactly like its direct tools/call result (untrusted text wrapped,
//     fields outside the allowlist and secrets dropped, size bound);
//   - statusMessage (CreateTaskResult, tasks/get, tasks/cancel, tasks/list,
//     notifications/tasks/status) and the CreateTaskResult's
//     _meta["io.modelcontextprotocol/model-immediate-response"] are
//     third-party text, shaped like a progress notification's message.
//
// Revision 2026-07-28 moved tasks to an extension (SEP-2663: tasks/update,
// results inline in tasks/get, no tasks/result or tasks/list); mcpgate
// does not handle it yet: the extension is stripped and task paths are
// refused for every revision other than 2025-11-25.

// TaskOptions configure tasks (Options.Tasks).
type TaskOptions struct {
	// Enabled turns tasks on (with Store set).
	Enabled bool
	// Store keeps the task bindings; required when Enabled.
	Store store.TaskStore
	// MaxTTL bounds a binding's life (DefaultTaskMaxTTL when 0).
	MaxTTL time.Duration
}

// DefaultTaskMaxTTL is TaskOptions.MaxTTL's default.
const DefaultTaskMaxTTL = time.Hour

// Refusal codes of the task paths (details error.code).
const (
	CodeTasksDisabled     = "tasks_disabled"      // tasks are off
	CodeTasksUnsupported  = "tasks_unsupported"   // on, but not in this protocol revision
	CodeTaskNotFound      = "task_not_found"      // unknown, expired or someone else's task
	CodeTaskInvalidParams = "task_invalid_params" // no taskId
)

// metaModelImmediateResponse is the _meta key of a CreateTaskResult whose
// string value hosts may hand to the model at once (2025-11-25, "Creating
// Tasks").
const metaModelImmediateResponse = "io.modelcontextprotocol/model-immediate-response"

// taskState is an exchange's task handling.
type taskState struct {
	create  bool   // tools/call with params.task: the answer's task is bound
	method  string // a tasks/* request that passed the binding check
	inspect bool   // the answer is read (capabilities, task results)
	watch   bool   // a GET stream: notifications/tasks/status shaped
}

// tasksOn reports whether task paths are served for the revision.
func (p *Pipeline) tasksOn(version string) bool {
	t := p.opts.Tasks
	return t.Enabled && t.Store != nil && version == mcp.Version20251125
}

// tasksReason is why task paths are refused for the revision.
func (p *Pipeline) tasksReason(version string, tool bool) policy.Reason {
	fix := "Do not use tasks here: call the tool again without the task parameter; its result comes back in the answer."
	if !tool {
		fix = "Do not use tasks here: call tools without the task parameter and use the results they return."
	}
	if p.opts.Tasks.Enabled {
		return policy.Reason{Code: CodeTasksUnsupported, Cause: "This gateway runs tool calls as tasks only with MCP protocol revision " + mcp.Version20251125 + ", not " + quote(version) + ".", Fix: fix, NextTool: "tools/call"}
	}
	return policy.Reason{Code: CodeTasksDisabled, Cause: "This gateway does not run tool calls as tasks.", Fix: fix, NextTool: "tools/call"}
}

// taskRPCError is a JSON-RPC error for a refused task request, with the
// same details as a policy refusal (refusal.Details).
func taskRPCError(id jsontext.Value, code int, r policy.Reason) []byte {
	msg := r.Cause
	if r.Fix != "" {
		msg += " " + r.Fix
	}
	return mcp.ErrorResponse(id, &mcp.Error{Code: code, Message: msg,
		Data: refusal.Details{Error: refusal.DetailsError{Code: r.Code, Cause: r.Cause, Fix: r.Fix, NextTool: r.NextTool}}})
}

// taskNotFound is the one answer to a task id the caller may not use:
// unknown, expired, or bound to someone else.
func taskNotFound(id jsontext.Value) []byte {
	return taskRPCError(id, mcp.CodeInvalidParams, policy.Reason{Code: CodeTaskNotFound,
		Cause: "Failed to retrieve task: Task not found.",
		Fix:   "Use a task id you received from your own tool call; tasks/list shows your tasks.", NextTool: "tasks/list"})
}

// taskPrincipal is the principal a task is bound to: the verified caller,
// or one shared anonymous principal when the gateway runs without
// authentication.
func taskPrincipal(pr *policy.Principal) store.SessionBinding {
	if !pr.Authenticated || pr.Connection == "" {
		return store.SessionBinding{Connection: "anonymous"}
	}
	return bindingOf(pr)
}

// paramMember is member(m.Params, name): from what mcp.Parse recorded on
// its pass over the body when it did (Message.Param), so a tools/call
// without the member costs no second scan of its params.
func paramMember(m *mcp.Message, name string) (jsontext.Value, bool) {
	if v, ok, recorded := m.Param(name); recorded {
		return v, ok
	}
	v, ok, _ := member(m.Params, name)
	return v, ok
}

// taskRequest runs the task gate on a request the policy allowed. It
// returns the answer of a refused request, or nil (the exchange marked for
// the answer's handling).
func (p *Pipeline) taskRequest(ctx context.Context, x *Exchange) *Local {
	msg := x.msg
	switch msg.Method {
	case mcp.MethodInitialize, mcp.MethodServerDiscover:
		x.task.inspect = true // the upstream's capabilities are stripped
		return nil
	case mcp.MethodToolsCall:
		if _, has := paramMember(msg, mcp.ParamTask); !has {
			return nil
		}
		if !p.tasksOn(x.version) {
			x.outcome = OutcomeDeny
			return local(200, refusal.ToolError(msg.ID, []policy.Reason{p.tasksReason(x.version, true)}, x.decision.ID))
		}
		x.task.create, x.task.inspect = true, true
		return nil
	case mcp.NotificationTasksStatus:
		// Client-hosted tasks are not relayed (the client's tasks
		// capability is stripped), so the upstream asked for none.
		x.outcome = OutcomeDeny
		return local(403, nil)
	case mcp.MethodTasksGet, mcp.MethodTasksResult, mcp.MethodTasksCancel, mcp.MethodTasksList:
	default:
		return nil
	}
	if !p.tasksOn(x.version) {
		x.outcome = OutcomeDeny
		return local(200, taskRPCError(msg.ID, mcp.CodeMethodNotFound, p.tasksReason(x.version, false)))
	}
	x.task.method, x.task.inspect = msg.Method, true
	if msg.Method == mcp.MethodTasksList {
		return nil
	}
	var params struct {
		TaskID string `json:"taskId"`
	}
	if err := json.Unmarshal(msg.Params, &params, json.RejectUnknownMembers(false)); err != nil || params.TaskID == "" {
		x.outcome = OutcomeInvalid
		return local(200, taskRPCError(msg.ID, mcp.CodeInvalidParams, policy.Reason{Code: CodeTaskInvalidParams,
			Cause: msg.Method + " needs params.taskId, the task id a tool call returned.", Fix: "Send the taskId as a string.", NextTool: "tasks/list"}))
	}
	b, err := p.opts.Tasks.Store.Task(ctx, x.req.Upstream, params.TaskID)
	switch {
	case err == nil && b.Principal() == taskPrincipal(&x.input.Principal):
	case err == nil || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInvalid):
		x.outcome = OutcomeDeny
		return local(200, taskNotFound(msg.ID))
	default:
		p.log.LogAttrs(ctx, slog.LevelError, "task store unavailable; request refused", slog.Any("error", err))
		x.outcome = OutcomeError
		return unavailable(msg, "The gateway cannot check the task right now.")
	}
	if msg.Method == mcp.MethodTasksResult {
		// The result is the tool's CallToolResult: shaped by its shaper.
		x.shaper = p.shaper(x.req.Upstream, b.Tool)
	}
	return nil
}

// taskAnswer handles the result of an exchange the task gate marked. done
// is false when the ordinary shaping applies (a direct tools/call result).
func (x *Exchange) taskAnswer(result jsontext.Value) (out []byte, done bool, err error) {
	p := x.p
	switch m := x.msg.Method; {
	case m == mcp.MethodInitialize || m == mcp.MethodServerDiscover:
		out, err = p.stripServerCapabilities(result)
		if note := p.instructions(x.req.Upstream); err == nil && note != "" {
			// The gateway's note on hidden or confirmed tools joins the
			// upstream's instructions.
			in := out
			if in == nil {
				in = result
			}
			var noted []byte
			if noted, err = withInstructions(in, note); noted != nil {
				out = noted
			}
		}
	case m == mcp.MethodToolsCall:
		task, ok, _ := member(result, "task")
		if !ok || task.Kind() != '{' {
			return nil, false, nil // a direct result: shaped as the tool's
		}
		if !x.task.create {
			// An answer the client cannot use (it asked for no task) and
			// mcpgate did not bind: withheld.
			return nil, true, errors.Join(ErrUpstreamResponse, errors.New("a task handle answers a tools/call that asked for none"))
		}
		out, err = x.bindTask(result, task)
		// A write started as a task is settled with its handle.
		switch {
		case err != nil:
			// The upstream accepted the call (it answered with a task):
			// its outcome is unknown to the client, never "not run".
			x.abandon()
		case out != nil:
			x.settle(out)
		default:
			x.settle(result)
		}
	case m == mcp.MethodTasksResult:
		out, _, err = x.shapeToolResult(result)
	case m == mcp.MethodTasksGet || m == mcp.MethodTasksCancel:
		out, _, err = shapeStatusMessage(result)
	case m == mcp.MethodTasksList:
		out, err = x.filterTasks(result)
	default:
		return nil, false, nil
	}
	if err != nil {
		return nil, true, errors.Join(ErrUpstreamResponse, err)
	}
	return out, true, nil
}

// taskHandle is the part of a Task the gateway reads.
type taskHandle struct {
	TaskID string   `json:"taskId"`
	TTL    *float64 `json:"ttl"` // ms; null or absent: unlimited
}

// bindTask binds the task of a CreateTaskResult to the caller and the
// called tool, and shapes the result's third-party text.
func (x *Exchange) bindTask(result, task jsontext.Value) ([]byte, error) {
	var h taskHandle
	if err := json.Unmarshal(task, &h, json.RejectUnknownMembers(false)); err != nil || h.TaskID == "" {
		return nil, errors.Join(errors.New("CreateTaskResult without a task id"), err)
	}
	p := x.p
	ttl := p.opts.Tasks.MaxTTL
	if ttl <= 0 {
		ttl = DefaultTaskMaxTTL
	}
	if h.TTL != nil && *h.TTL > 0 && time.Duration(*h.TTL)*time.Millisecond < ttl {
		ttl = time.Duration(*h.TTL) * time.Millisecond
	}
	pr := taskPrincipal(&x.input.Principal)
	b := store.TaskBinding{Connection: pr.Connection, Tenant: pr.Tenant, Subject: pr.Subject, Tool: x.msg.Name}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(x.ctx), 5*time.Second)
	defer cancel()
	if err := p.opts.Tasks.Store.BindTask(ctx, x.req.Upstream, h.TaskID, b, ttl); err != nil {
		p.log.LogAttrs(ctx, slog.LevelError, "task binding failed; answer withheld", slog.String("upstream", x.req.Upstream), slog.Any("error", err))
		return nil, err
	}
	shapedTask, _, err := shapeStatusMessage(task)
	if err != nil {
		return nil, err
	}
	out := []byte(result)
	changed := false
	if shapedTask != nil {
		if out, err = withMember(out, "task", shapedTask); err != nil {
			return nil, err
		}
		changed = true
	}
	if meta, ok, _ := member(out, "_meta"); ok && meta.Kind() == '{' {
		if text, ok, _ := member(meta, metaModelImmediateResponse); ok && text.Kind() == '"' {
			nm, err := withMember(meta, metaModelImmediateResponse, untrustedString(text))
			if err == nil {
				out, err = withMember(out, "_meta", nm)
			}
			if err != nil {
				return nil, err
			}
			changed = true
		}
	}
	if !changed {
		return nil, nil
	}
	return out, nil
}

// untrustedString returns a raw JSON string as third-party text that must
// stay a string: shape.TextPrefix and the sanitised, bounded text (as
// gateway/shape does for a progress notification's message).
func untrustedString(raw jsontext.Value) jsontext.Value {
	var s string
	_ = json.Unmarshal(raw, &s) // a string mcp.Parse read: valid UTF-8
	out, _ := json.Marshal(shape.TextPrefix + shape.Sanitise(s, 0))
	return out
}

// shapeStatusMessage returns a Task object (or a result holding one at the
// top level) with its statusMessage shaped as third-party text; nil when
// it has none. changed reports a rewrite.
func shapeStatusMessage(obj []byte) ([]byte, bool, error) {
	msg, ok, err := member(obj, "statusMessage")
	if err != nil {
		return nil, false, err
	}
	if !ok || msg.Kind() != '"' {
		return nil, false, nil
	}
	out, err := withMember(obj, "statusMessage", untrustedString(msg))
	return out, err == nil, err
}

// filterTasks keeps the tasks of a tasks/list result that are bound to the
// caller, their statusMessage shaped. A task whose binding cannot be read
// is left out; a store failure withholds the answer.
func (x *Exchange) filterTasks(result []byte) ([]byte, error) {
	tasks, ok, err := member(result, "tasks")
	if err != nil {
		return nil, err
	}
	if !ok || tasks.Kind() != '[' {
		return nil, errors.New("tasks/list result without a tasks array")
	}
	var raw []jsontext.Value
	if err := json.Unmarshal(tasks, &raw); err != nil {
		return nil, err
	}
	me := taskPrincipal(&x.input.Principal)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(x.ctx), 5*time.Second)
	defer cancel()
	kept := make([]jsontext.Value, 0, len(raw))
	changed := false
	for _, t := range raw {
		var h taskHandle
		if err := json.Unmarshal(t, &h, json.RejectUnknownMembers(false)); err != nil || h.TaskID == "" {
			changed = true
			continue
		}
		b, err := x.p.opts.Tasks.Store.Task(ctx, x.req.Upstream, h.TaskID)
		switch {
		case err == nil && b.Principal() == me:
		case err == nil || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInvalid):
			changed = true
			continue
		default:
			return nil, err
		}
		if shaped, _, err := shapeStatusMessage(t); err != nil {
			return nil, err
		} else if shaped != nil {
			t, changed = shaped, true
		}
		kept = append(kept, t)
	}
	if !changed {
		return nil, nil
	}
	list, err := json.Marshal(kept)
	if err != nil {
		return nil, err
	}
	return withMember(result, "tasks", list)
}

// shapeTaskStatus shapes a notifications/tasks/status from the upstream:
// its statusMessage is third-party text. nil when nothing changes.
func shapeTaskStatus(body []byte, msg *mcp.Message) ([]byte, error) {
	if msg.Params == nil {
		return nil, nil
	}
	params, changed, err := shapeStatusMessage(msg.Params)
	if err != nil || !changed {
		return nil, err
	}
	return withMember(body, "params", params)
}

// watchedTaskStatus shapes a notifications/tasks/status event of a watched
// notification stream (an older revision's GET stream), which is otherwise
// relayed unread: nil for any other event, and for one that cannot be
// parsed (such streams are never withheld).
func (x *Exchange) watchedTaskStatus(body []byte) []byte {
	if !x.task.watch || !containsTaskStatus(body) {
		return nil
	}
	msg, perr := mcp.Parse(body, x.p.opts.MaxJSONDepth)
	if perr != nil || msg.Kind != mcp.KindNotification || msg.Method != mcp.NotificationTasksStatus {
		return nil
	}
	out, err := shapeTaskStatus(body, msg)
	if err != nil {
		return nil
	}
	return out
}

// containsTaskStatus: the method name appears, plainly or possibly
// escaped.
func containsTaskStatus(body []byte) bool {
	return bytes.Contains(body, []byte("notifications/tasks/status")) || bytes.Contains(body, []byte(`\u`))
}

// taskGate is the stage that runs the task gate (taskRequest).
func (p *Pipeline) taskGate(ctx context.Context, x *Exchange) *Verdict {
	if l := p.taskRequest(ctx, x); l != nil {
		return x.answer(l)
	}
	return nil
}
