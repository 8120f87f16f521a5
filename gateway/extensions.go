package gateway

import (
	"bytes"
	"context"
	"errors"
	"slices"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/gateway/mcp"
)

// Capability extensions.
//
// An extension changes what messages mean: new methods, new result shapes,
// new members the policy never sees. A gateway that does not understand an
// extension cannot enforce policy on the messages it changes, so mcpgate
// removes every extension it does not handle from the capabilities that
// pass between client and upstream; neither side then uses it (both
// revisions: a peer uses an extension only when the other declared it).
//
// What is stripped, on both sides:
//
//   - members of capabilities.extensions (2026-07-28 schema,
//     ClientCapabilities/ServerCapabilities "extensions"; SEP-2133) whose
//     key is not in Options.Extensions. The tasks extension of
//     2026-07-28, "io.modelcontextprotocol/tasks" (SEP-2663), is always
//     stripped: mcpgate handles only the tasks of revision 2025-11-25;
//   - members of capabilities.experimental ("experimental, non-standard
//     capabilities", every revision) not in Options.Extensions;
//   - capabilities.tasks of a client (2025-11-25: the client runs
//     task-augmented sampling and elicitation requests; mcpgate does not
//     relay client-hosted tasks), and of an upstream unless tasks are on
//     (Options.Tasks).
//
// Where: the client's capabilities in initialize params and, in revision
// 2026-07-28, in every request's _meta
// "io.modelcontextprotocol/clientCapabilities"; the upstream's in the
// initialize and server/discover results. A message is rewritten only when
// something is removed.

// extensionTasks2026 is the identifier of the 2026-07-28 tasks extension.
const extensionTasks2026 = "io.modelcontextprotocol/tasks"

// extensionAllowed reports whether the extension or experimental
// capability name passes.
func (p *Pipeline) extensionAllowed(name string) bool {
	return name != extensionTasks2026 && slices.Contains(p.opts.Extensions, name)
}

// stripCapabilities returns caps (a ClientCapabilities or
// ServerCapabilities object) without the members described above, or nil
// when nothing is removed. client tells the side.
func (p *Pipeline) stripCapabilities(caps []byte, client bool) ([]byte, error) {
	dropTasks := client || !p.opts.Tasks.Enabled
	var strip bool
	err := eachMember(caps, func(name string, v jsontext.Value) bool {
		switch name {
		case "tasks":
			strip = strip || dropTasks
		case "extensions", "experimental":
			if v.Kind() != '{' {
				strip = true // malformed: dropped whole (fail closed)
				break
			}
			_ = eachMember(v, func(key string, _ jsontext.Value) bool {
				if !p.extensionAllowed(key) {
					strip = true
				}
				return strip
			})
		}
		return strip
	})
	if err != nil {
		return nil, err
	}
	if !strip {
		return nil, nil
	}
	var inner error
	out, err := mapMembers(caps, func(name string, v jsontext.Value) (jsontext.Value, bool) {
		switch name {
		case "tasks":
			return v, !dropTasks
		case "extensions", "experimental":
			if v.Kind() != '{' {
				return nil, false
			}
			kept, err := mapMembers(v, func(key string, ev jsontext.Value) (jsontext.Value, bool) {
				return ev, p.extensionAllowed(key)
			})
			inner = errors.Join(inner, err)
			return kept, true
		}
		return v, true
	})
	if err = errors.Join(err, inner); err != nil {
		return nil, err
	}
	return out, nil
}

// stripClientCapabilities returns the request body with the client's
// unhandled extensions removed (initialize params.capabilities; the
// per-request clientCapabilities _meta), or nil when nothing is removed.
// It is called before the body is forwarded; a body the pipeline parsed
// cannot fail here, but if it does the request is refused (fail closed).
func (p *Pipeline) stripClientCapabilities(msg *mcp.Message, body []byte) ([]byte, error) {
	if msg.Kind != mcp.KindRequest || (msg.Method != mcp.MethodInitialize && msg.Meta.ClientCapabilities == nil) {
		return nil, nil
	}
	if !bytes.Contains(msg.Params, []byte(`"tasks"`)) && !bytes.Contains(msg.Params, []byte(`"extensions"`)) &&
		!bytes.Contains(msg.Params, []byte(`"experimental"`)) && !bytes.Contains(msg.Params, []byte(`\u`)) {
		return nil, nil // nothing to strip (escaped member names are checked the long way)
	}
	params := []byte(msg.Params)
	changed := false
	if msg.Method == mcp.MethodInitialize {
		caps, ok, err := member(params, "capabilities")
		if err != nil {
			return nil, err
		}
		if ok && caps.Kind() == '{' {
			stripped, err := p.stripCapabilities(caps, true)
			if err != nil {
				return nil, err
			}
			if stripped != nil {
				if params, err = withMember(params, "capabilities", stripped); err != nil {
					return nil, err
				}
				changed = true
			}
		}
	}
	if msg.Meta.ClientCapabilities != nil {
		stripped, err := p.stripCapabilities(msg.Meta.ClientCapabilities, true)
		if err != nil {
			return nil, err
		}
		if stripped != nil {
			meta, _, err := member(params, "_meta")
			if err != nil {
				return nil, err
			}
			if meta, err = withMember(meta, mcp.MetaKeyClientCapabilities, stripped); err != nil {
				return nil, err
			}
			if params, err = withMember(params, "_meta", meta); err != nil {
				return nil, err
			}
			changed = true
		}
	}
	if !changed {
		return nil, nil
	}
	return withMember(body, "params", params)
}

// stripServerCapabilities returns an initialize or server/discover result
// with the upstream's unhandled extensions removed from its capabilities,
// or nil when nothing is removed.
func (p *Pipeline) stripServerCapabilities(result []byte) ([]byte, error) {
	caps, ok, err := member(result, "capabilities")
	if err != nil || !ok || caps.Kind() != '{' {
		return nil, err
	}
	stripped, err := p.stripCapabilities(caps, false)
	if err != nil || stripped == nil {
		return nil, err
	}
	return withMember(result, "capabilities", stripped)
}

// clientCapabilities is the stage that strips the client's unhandled
// capabilities from the body (stripClientCapabilities).
func (p *Pipeline) clientCapabilities(_ context.Context, x *Exchange) *Verdict {
	if x.msg == nil {
		return nil
	}
	nb, err := p.stripClientCapabilities(x.msg, x.body)
	if err != nil {
		return x.answerAs(OutcomeInvalid, local(400, mcp.ErrorResponse(idOrNull(x.msg.ID), &mcp.Error{Code: mcp.CodeInvalidParams, Message: "The client capabilities cannot be read."})))
	}
	if nb != nil {
		x.body, x.bodyChanged = nb, true
	}
	return nil
}
