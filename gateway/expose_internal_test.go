package gateway

import (
	"testing"

	"github.com/mcpgate/mcpgate/policy"
)

func TestResolveTool(t *testing.T) {
	decls := map[string]map[string]policy.ToolDeclaration{
		"crm": {
			"create_event": {Effect: policy.EffectSilentWrite, Expose: &policy.ToolExposure{Name: "book_room", Title: "Book a room"}},
			"find_rooms":   {Effect: policy.EffectRead, Expose: &policy.ToolExposure{Description: "Rooms free now."}},
			"same_name":    {Effect: policy.EffectRead, Expose: &policy.ToolExposure{Name: "same_name"}},
			"a":            {Effect: policy.EffectRead, Expose: &policy.ToolExposure{Name: "twice"}},
			"b":            {Effect: policy.EffectRead, Expose: &policy.ToolExposure{Name: "twice"}},
		},
		"plain": {"create_event": {Effect: policy.EffectSilentWrite}},
	}
	e := newExposure(decls)
	for _, tc := range []struct {
		name, upstream, called, want string
		ok                           bool
	}{
		{"exposed name resolves to the original", "crm", "book_room", "create_event", true},
		{"renamed original is not callable", "crm", "create_event", "", false},
		{"text-only override keeps its name", "crm", "find_rooms", "find_rooms", true},
		{"rename onto its own name is no rename", "crm", "same_name", "same_name", true},
		{"undeclared name passes as it is", "crm", "other", "other", true},
		{"a name exposed twice resolves to neither", "crm", "twice", "", false},
		{"other upstream unaffected", "plain", "create_event", "create_event", true},
		{"unknown upstream", "none", "book_room", "book_room", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := e.resolveTool(tc.upstream, tc.called)
			if got != tc.want || ok != tc.ok {
				t.Errorf("resolveTool(%q, %q) = %q, %v; want %q, %v", tc.upstream, tc.called, got, ok, tc.want, tc.ok)
			}
		})
	}
	if n := e.exposedName("crm", "create_event"); n != "book_room" {
		t.Errorf("exposedName = %q", n)
	}
	if !e.shadowed("crm", "book_room") || e.shadowed("crm", "create_event") || e.shadowed("crm", "find_rooms") {
		t.Error("shadowed: wrong answer")
	}
	if newExposure(map[string]map[string]policy.ToolDeclaration{"x": {"t": {Effect: policy.EffectRead}}}) != nil {
		t.Error("no renames: want a nil exposure (nothing to do per call)")
	}
}
