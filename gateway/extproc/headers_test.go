package extproc

import (
	"slices"
	"strconv"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/mcpgate/mcpgate/gateway/mcp"
)

// fromHeaderMap keeps repeated fields in order, lower-cases names, prefers
// raw_value, takes the three pseudo-headers apart, and hands out value
// slices that share one array without aliasing: appending to one field
// (as the pipeline's Header.Add does) never changes another.
func TestFromHeaderMap(t *testing.T) {
	hm := &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
		{Key: ":method", RawValue: []byte("POST")},
		{Key: ":path", RawValue: []byte("/mcp?x=1")},
		{Key: ":authority", RawValue: []byte("gw")},
		{Key: "Accept", RawValue: []byte("application/json")},
		{Key: "x-a", Value: "old-style"},
		{Key: "accept", RawValue: []byte("text/event-stream")},
		{Key: "x-b", RawValue: []byte("b")},
		{Key: "x-c", Value: "ignored", RawValue: []byte("raw wins")},
		{Key: ":status", RawValue: []byte("200")},
	}}
	hdr, p := fromHeaderMap(hm, nil)
	if p != (pseudoHeaders{method: "POST", path: "/mcp?x=1", status: "200"}) {
		t.Fatalf("pseudo-headers %+v", p)
	}
	want := mcp.Header{"accept": {"application/json", "text/event-stream"}, "x-a": {"old-style"}, "x-b": {"b"}, "x-c": {"raw wins"}}
	if len(hdr) != len(want) {
		t.Fatalf("header %v, want %v", hdr, want)
	}
	for k, v := range want {
		if !slices.Equal(hdr[k], v) {
			t.Fatalf("%s: %q, want %q", k, hdr[k], v)
		}
	}
	hdr.Add("x-a", "added")
	if !slices.Equal(hdr["x-b"], []string{"b"}) || !slices.Equal(hdr["x-a"], []string{"old-style", "added"}) {
		t.Fatalf("Add changed another field: %v", hdr)
	}
}

// mutation sets every value of every header, the first overwriting and the
// rest appended, and its messages marshal to what one message per header
// marshals to.
func TestMutation(t *testing.T) {
	if mutation(nil, nil) != nil {
		t.Fatal("empty mutation not nil")
	}
	m := mutation(mcp.Header{"x-one": {"1"}, "x-two": {"a", "", "c"}}, []string{"content-length"})
	got := map[string][]string{}
	for _, o := range m.GetSetHeaders() {
		k := o.GetHeader().GetKey()
		if o.GetAppend().GetValue() != (len(got[k]) > 0) {
			t.Fatalf("%s value %d: append %v", k, len(got[k]), o.GetAppend().GetValue())
		}
		got[k] = append(got[k], string(o.GetHeader().GetRawValue()))
	}
	if !slices.Equal(got["x-one"], []string{"1"}) || !slices.Equal(got["x-two"], []string{"a", "", "c"}) || len(got) != 2 {
		t.Fatalf("set headers %v", got)
	}
	if !slices.Equal(m.GetRemoveHeaders(), []string{"content-length"}) {
		t.Fatalf("remove %v", m.GetRemoveHeaders())
	}
	// Wire form equal to a mutation built one message per header.
	ref := &extprocv3.HeaderMutation{RemoveHeaders: []string{"content-length"}}
	for _, o := range m.GetSetHeaders() {
		ref.SetHeaders = append(ref.SetHeaders, &corev3.HeaderValueOption{
			Header: &corev3.HeaderValue{Key: o.GetHeader().GetKey(), RawValue: append([]byte(nil), o.GetHeader().GetRawValue()...)},
			Append: proto.Clone(o.GetAppend()).(*wrapperspb.BoolValue),
		})
	}
	a, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(ref)
	if string(a) != string(b) {
		t.Fatal("wire form differs from one message per header")
	}
	if overwriteFlag.GetValue() || !appendFlag.GetValue() {
		t.Fatal("shared append flags changed")
	}
}

// contentLength marshals to what mutation builds for the same header.
func TestContentLength(t *testing.T) {
	for _, n := range []int{0, 7, 1234567890} {
		a, err := proto.MarshalOptions{Deterministic: true}.Marshal(new(answers).contentLength(n, contentEncoding))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(mutation(mcp.Header{"content-length": {strconv.Itoa(n)}}, contentEncoding))
		if string(a) != string(b) {
			t.Fatalf("%d: contentLength differs from mutation", n)
		}
	}
}

// A stream's answers reuse one header storage: each mutation built in it
// marshals to what a mutation built apart marshals to, whatever was built
// in it before, and so after the set went back to the pool.
func TestMutationStorageReused(t *testing.T) {
	wire := func(m *extprocv3.HeaderMutation) string {
		t.Helper()
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	many := mcp.Header{"x-a": {"1", "2"}, "x-b": {"3"}, "x-c": {"4"}}
	one := mcp.Header{"x-d": {"5"}}
	a := answerSets.Get().(*answers)
	for round := range 2 {
		for _, step := range []struct {
			build func() *extprocv3.HeaderMutation
			want  *extprocv3.HeaderMutation
		}{
			{func() *extprocv3.HeaderMutation { return a.mutation(many, nil) }, mutation(many, nil)},
			{func() *extprocv3.HeaderMutation { return a.mutation(one, []string{"x-e"}) }, mutation(one, []string{"x-e"})},
			{func() *extprocv3.HeaderMutation { return a.contentLength(12, contentEncoding) }, mutation(mcp.Header{"content-length": {"12"}}, contentEncoding)},
			{func() *extprocv3.HeaderMutation { return a.mutation(many, nil) }, mutation(many, nil)},
		} {
			got := step.build()
			// Map order varies: compare header by header.
			if len(got.GetSetHeaders()) != len(step.want.GetSetHeaders()) || !slices.Equal(got.GetRemoveHeaders(), step.want.GetRemoveHeaders()) {
				t.Fatalf("round %d: %v, want %v", round, got, step.want)
			}
			byKey := func(m *extprocv3.HeaderMutation) map[string][]string {
				out := map[string][]string{}
				for _, o := range m.GetSetHeaders() {
					out[o.GetHeader().GetKey()] = append(out[o.GetHeader().GetKey()], wire(&extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{o}}))
				}
				return out
			}
			g, w := byKey(got), byKey(step.want)
			for k := range w {
				if !slices.Equal(g[k], w[k]) {
					t.Fatalf("round %d: %s: %q, want %q", round, k, g[k], w[k])
				}
			}
		}
		a.release()
		a = answerSets.Get().(*answers)
	}
}
