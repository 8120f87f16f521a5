package sse_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/mcpgate/mcpgate/gateway/mcp/sse"
)

// A relay rewrites the answer to request 2 and passes every other byte on
// unchanged, whatever the upstream's chunking.
func ExampleSplitter() {
	upstream := ": ping\r\n\r\n" +
		"id: 1\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\r\n\r\n" +
		"id: 2\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\r\ndata: \"result\":{\"token\":\"s3cret\"}}\r\n\r\n"

	var out, scratch []byte
	emit := func(raw []byte) error {
		if ev := sse.Parse(raw); ev.HasData && bytes.Contains(ev.Data, []byte(`"id":2,`)) {
			ev.Data = []byte(`{"jsonrpc":"2.0","id":2,"result":{}}`)
			scratch = sse.AppendEvent(scratch[:0], ev)
			raw = scratch
		}
		out = append(out, raw...) // raw is only valid during emit
		return nil
	}
	s := sse.NewSplitter(1 << 20)
	for chunk := range slicesOf(upstream, 7) {
		if err := s.Write(chunk, emit); err != nil {
			panic(err)
		}
	}
	if err := s.Flush(emit); err != nil {
		panic(err)
	}
	fmt.Printf("%q\n", out)
	// Output:
	// ": ping\r\n\r\nid: 1\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\r\n\r\nid: 2\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n\n"
}

func ExampleReader() {
	r := sse.NewReader(strings.NewReader("event: endpoint\ndata: /mcp\n\nid: 9\ndata: {}\n\ndata: cut"), 1<<20)
	for {
		raw, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			panic(err)
		}
		ev := sse.Parse(raw)
		fmt.Printf("complete=%v type=%q id=%q data=%q\n", sse.Complete(raw), ev.Type, ev.ID, ev.Data)
	}
	// Output:
	// complete=true type="endpoint" id="" data="/mcp"
	// complete=true type="" id="9" data="{}"
	// complete=false type="" id="" data=""
}

// slicesOf yields s in pieces of n bytes.
func slicesOf(s string, n int) func(func([]byte) bool) {
	return func(yield func([]byte) bool) {
		for b := []byte(s); len(b) > 0; {
			k := min(n, len(b))
			if !yield(b[:k]) {
				return
			}
			b = b[k:]
		}
	}
}
