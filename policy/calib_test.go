package policy

import (
	"context"
	"testing"
	"encoding/json"
	"strconv"
)

func BenchmarkCalibTrivialPolicy(b *testing.B) {
	e, err := New(context.Background(), Options{Dirs: []string{policyDir(b, "package mcpgate\n\ndecision := {\"allow\": true}\n")}})
	if err != nil { b.Fatal(err) }
	in := callInput("search_contacts", alice)
	b.ReportAllocs()
	for b.Loop() { e.Decide(context.Background(), in) }
}

var sink any
func BenchmarkCalibJSON(b *testing.B) {
	in := callInput("search_contacts", alice)
	b.ReportAllocs()
	for b.Loop() { x, _ := json.Marshal(in); var v any; json.Unmarshal(x, &v); sink = v }
}
func BenchmarkCalibItoa(b *testing.B) {
	for i := 0; b.Loop(); i++ { sink = strconv.Itoa(i) }
}
