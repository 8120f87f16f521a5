package sse

import (
	"bytes"
	"testing"
)

func equalEvent(a, b Event) bool {
	return a.ID == b.ID && a.HasID == b.HasID && a.Type == b.Type &&
		bytes.Equal(a.Data, b.Data) && a.HasData == b.HasData && a.Retry == b.Retry
}

func data(s string) []byte { return []byte(s) }

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want Event
	}{
		{"data", "data: hello\n\n", Event{Data: data("hello"), HasData: true}},
		{"multi-line data", "data: a\ndata: b\ndata: c\n\n", Event{Data: data("a\nb\nc"), HasData: true}},
		{"empty data without colon", "data\n\n", Event{Data: data(""), HasData: true}},
		{"empty data with colon", "data:\n\n", Event{Data: data(""), HasData: true}},
		{"empty data with space", "data: \n\n", Event{Data: data(""), HasData: true}},
		{"two empty data lines", "data\ndata:\n\n", Event{Data: data("\n"), HasData: true}},
		{"empty then non-empty data", "data:\ndata: {}\n\n", Event{Data: data("\n{}"), HasData: true}},
		{"no space after colon", "data:x\n\n", Event{Data: data("x"), HasData: true}},
		{"only one space stripped", "data:  x \n\n", Event{Data: data(" x "), HasData: true}},
		{"tab kept", "data:\tx\n\n", Event{Data: data("\tx"), HasData: true}},
		{"colon in value", "data: a:b: c\n\n", Event{Data: data("a:b: c"), HasData: true}},
		{"comment only", ": keep-alive\n\n", Event{}},
		{"bare colon comment", ":\n\n", Event{}},
		{"comments around data", ":a\ndata: x\n: data: y\n\n", Event{Data: data("x"), HasData: true}},
		{"blank block", "\n", Event{}},
		{"empty input", "", Event{}},
		{"id only", "id: 42\n\n", Event{ID: "42", HasID: true}},
		{"empty id", "id\n\n", Event{HasID: true}},
		{"last id wins", "id: 1\nid: 2\ndata: x\n\n", Event{ID: "2", HasID: true, Data: data("x"), HasData: true}},
		{"id with NUL ignored", "id: 1\nid: a\x00b\n\n", Event{ID: "1", HasID: true}},
		{"only id with NUL", "id: \x00\n\n", Event{}},
		{"retry only", "retry: 3000\n\n", Event{Retry: "3000"}},
		{"retry not digits", "retry: 3s\n\n", Event{}},
		{"retry negative", "retry: -1\n\n", Event{}},
		{"retry two spaces", "retry:  10\n\n", Event{}},
		{"retry empty", "retry:\n\n", Event{}},
		{"retry last valid wins", "retry: 1\nretry: 2\nretry: x\n\n", Event{Retry: "2"}},
		{"event type", "event: endpoint\ndata: /mcp?s=1\n\n", Event{Type: "endpoint", Data: data("/mcp?s=1"), HasData: true}},
		{"last event type wins", "event: a\nevent: b\ndata\n\n", Event{Type: "b", Data: data(""), HasData: true}},
		{"empty event resets type", "event: a\nevent\ndata: x\n\n", Event{Data: data("x"), HasData: true}},
		{"field without colon ignored", "foo\ndata: x\n\n", Event{Data: data("x"), HasData: true}},
		{"unknown field ignored", "foo: bar\n\n", Event{}},
		{"field names case-sensitive", "Data: x\nEVENT: y\n\n", Event{}},
		{"leading space in name", " data: x\n\n", Event{}},
		{"CRLF", "id: 1\r\ndata: a\r\ndata: b\r\n\r\n", Event{ID: "1", HasID: true, Data: data("a\nb"), HasData: true}},
		{"CR", "data: a\rdata: b\r\r", Event{Data: data("a\nb"), HasData: true}},
		{"mixed endings", "data: a\rdata: b\r\ndata: c\n\r\n", Event{Data: data("a\nb\nc"), HasData: true}},
		{"CR then LF is one ending", "data: a\r\n\n", Event{Data: data("a"), HasData: true}},
		{"stops at first blank line", "data: a\n\ndata: b\n\n", Event{Data: data("a"), HasData: true}},
		{"unterminated line ignored", "data: a\ndata: b", Event{Data: data("a"), HasData: true}},
		{"unterminated only", "data: a", Event{}},
		{"BOM is part of the name", "\xEF\xBB\xBFdata: x\n\n", Event{}},
		{"BOM alone", "\xEF\xBB\xBF", Event{}},
		{"NUL in data kept", "data: a\x00b\n\n", Event{Data: data("a\x00b"), HasData: true}},
		{"invalid UTF-8 kept", "data: \xff\n\n", Event{Data: data("\xff"), HasData: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Parse([]byte(tt.raw))
			if !equalEvent(got, tt.want) {
				t.Fatalf("Parse(%q)\n got %+v\nwant %+v", tt.raw, got, tt.want)
			}
		})
	}
}

func TestParseAliasesSingleDataLine(t *testing.T) {
	raw := []byte("id: 1\ndata: hello\n\n")
	ev := Parse(raw)
	raw[len("id: 1\ndata: ")] = 'J'
	if string(ev.Data) != "Jello" {
		t.Fatalf("single data line not aliased: %q", ev.Data)
	}
	if ev.ID != "1" {
		t.Fatalf("ID changed with raw: %q", ev.ID)
	}
}

func TestComplete(t *testing.T) {
	tests := []struct {
		raw  string
		want bool
	}{
		{"", false},
		{"\n", true},
		{"\r", true},
		{"\r\n", true},
		{"data: a\n\n", true},
		{"data: a\r\n\r\n", true},
		{"data: a\r\r", true},
		{"data: a\n\r", true},
		{"data: a\r\n\r", true},
		{"data: a\r\r\n", true},
		{"data: a\n", false},
		{"data: a\r\n", false},
		{"data: a\r", false},
		{"data: a", false},
		{utf8BOM, false},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			if got := Complete([]byte(tt.raw)); got != tt.want {
				t.Fatalf("Complete(%q) = %v, want %v", tt.raw, got, tt.want)
			}
		})
	}
}

func TestAppendEvent(t *testing.T) {
	tests := []struct {
		name string
		ev   Event
		want string
		// parsed is what Parse gives back from the output; ev when zero.
		parsed *Event
	}{
		{"data", Event{Data: data("x"), HasData: true}, "data: x\n\n", nil},
		{"all fields", Event{ID: "7", HasID: true, Type: "message", Retry: "10", Data: data(`{"a":1}`), HasData: true},
			"id: 7\nevent: message\nretry: 10\ndata: {\"a\":1}\n\n", nil},
		{"multi-line data", Event{Data: data("a\nb\n"), HasData: true}, "data: a\ndata: b\ndata:\n\n", nil},
		{"empty data", Event{Data: data(""), HasData: true}, "data:\n\n", nil},
		{"nil data", Event{HasData: true}, "data:\n\n", nil},
		{"data without HasData", Event{Data: data("x")}, "data: x\n\n", &Event{Data: data("x"), HasData: true}},
		{"no data", Event{ID: "1", HasID: true}, "id: 1\n\n", nil},
		{"empty id", Event{HasID: true}, "id:\n\n", nil},
		{"id without HasID", Event{ID: "1"}, "\n", &Event{}},
		{"nothing", Event{}, "\n", nil},
		{"leading spaces kept", Event{ID: " i", HasID: true, Type: " t", Data: data(" d\n  e"), HasData: true},
			"id:  i\nevent:  t\ndata:  d\ndata:   e\n\n", nil},
		{"CR and CRLF in data", Event{Data: data("a\rb\r\nc\n\rd"), HasData: true},
			"data: a\ndata: b\ndata: c\ndata:\ndata: d\n\n", &Event{Data: data("a\nb\nc\n\nd"), HasData: true}},
		{"trailing CRLF in data", Event{Data: data("a\r\n"), HasData: true}, "data: a\ndata:\n\n", &Event{Data: data("a\n"), HasData: true}},
		{"newline in id", Event{ID: "1\ndata: injected", HasID: true}, "id: 1\n\n", &Event{ID: "1", HasID: true}},
		{"CR in type", Event{Type: "x\r\rdata: y", Data: data("z"), HasData: true}, "event: x\ndata: z\n\n", &Event{Type: "x", Data: data("z"), HasData: true}},
		{"newline first in type", Event{Type: "\nevent: y"}, "\n", &Event{}},
		{"NUL in id", Event{ID: "a\x00", HasID: true}, "\n", &Event{}},
		{"invalid retry", Event{Retry: "1\n\n"}, "\n", &Event{}},
		{"non-digit retry", Event{Retry: "soon"}, "\n", &Event{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AppendEvent([]byte("prefix"), tt.ev)
			if string(got) != "prefix"+tt.want {
				t.Fatalf("AppendEvent(%+v)\n got %q\nwant %q", tt.ev, got[len("prefix"):], tt.want)
			}
			want := tt.ev
			if tt.parsed != nil {
				want = *tt.parsed
			}
			if back := Parse(got[len("prefix"):]); !equalEvent(back, want) {
				t.Fatalf("Parse(AppendEvent(ev))\n got %+v\nwant %+v", back, want)
			}
		})
	}
}

func TestAppendEventReusesBuffer(t *testing.T) {
	ev := Event{ID: "1", HasID: true, Data: data("x"), HasData: true}
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() { buf = AppendEvent(buf[:0], ev) }); n > 0 {
		t.Fatalf("AppendEvent into a large enough buffer allocates %v times", n)
	}
}
