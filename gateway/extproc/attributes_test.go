package extproc

import (
	"strconv"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
)

func metadataAttrs(text string) *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{routeMetadataAttribute: structpb.NewStringValue(text)}}
}

func upstreamText(name string) string {
	return `filter_metadata { key: "mcpgate" value { fields { key: "upstream" value { string_value: "` + name + `" } } } }`
}

// The memo of textRouteUpstream answers exactly what parsing answers: a
// text seen before, a text without an upstream, malformed text, and texts
// beyond the memo's bound (parsed every time).
func TestRouteUpstreamMemo(t *testing.T) {
	for range 2 { // the second round answers from the memo
		if got := routeUpstream(metadataAttrs(upstreamText("tickets"))); got != "tickets" {
			t.Fatalf("upstream = %q, want tickets", got)
		}
		if got := routeUpstream(metadataAttrs(`filter_metadata { key: "other" value { } }`)); got != "" {
			t.Fatalf("no mcpgate metadata: upstream = %q, want none", got)
		}
		if got := routeUpstream(metadataAttrs(`filter_metadata {`)); got != "" {
			t.Fatalf("malformed text: upstream = %q, want none", got)
		}
	}
	for i := range maxRouteNames + 10 {
		name := "u" + strconv.Itoa(i)
		if got := routeUpstream(metadataAttrs(upstreamText(name))); got != name {
			t.Fatalf("text %d: upstream = %q, want %q", i, got, name)
		}
	}
	if n := routeNames.n.Load(); n > maxRouteNames {
		t.Fatalf("memo holds %d texts, bound %d", n, maxRouteNames)
	}
	if got := routeUpstream(metadataAttrs(upstreamText("beyond-the-bound"))); got != "beyond-the-bound" {
		t.Fatalf("beyond the bound: upstream = %q", got)
	}
}

// BenchmarkRouteUpstream: the route's upstream from Envoy's text form of
// xds.route_metadata, memoised (sent with every request of a route).
func BenchmarkRouteUpstream(b *testing.B) {
	a := metadataAttrs(upstreamText("bench"))
	b.ReportAllocs()
	for b.Loop() {
		if routeUpstream(a) != "bench" {
			b.Fatal("wrong upstream")
		}
	}
}
