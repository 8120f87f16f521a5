package config

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestSlowShapes(t *testing.T) {
	var b strings.Builder
	b.WriteString("upstreams:\n- &u {name: a, url: 'http://a', tools: {t: {effect: read, rights: &r [" + strings.Repeat("a,", 999) + "a]}")
	for i := range 1000 {
		fmt.Fprintf(&b, ", t%d: {effect: read, rights: *r}", i)
	}
	b.WriteString("}}\n")
	for range 1000 {
		b.WriteString("- *u\n")
	}
	in := b.String()
	start := time.Now()
	_, err := Parse([]byte(in), "x")
	t.Logf("len %d: %v, %d chars of error: %.600s", len(in), time.Since(start), len(fmt.Sprint(err)), err)

	in = "upstreams:\n- name: a\n  url: http://a\n  tools:\n" + strings.Repeat("    t: {effect: read}\n", 1)
	for _, n := range []int{1, 100, 1000} {
		var b strings.Builder
		b.WriteString("upstreams:\n- name: a\n  url: http://a\n  tools:\n")
		for i := range n {
			fmt.Fprintf(&b, "    t%d: {effect: read}\n", i)
		}
		start := time.Now()
		_, err := Parse([]byte(b.String()), "x")
		t.Logf("%d tools: %v %v", n, time.Since(start), err)
	}
}

func TestSlowRights(t *testing.T) {
	for _, n := range []int{1000, 10000, 50000} {
		in := "upstreams:\n- name: a\n  url: http://a\n  tools:\n    t:\n      effect: read\n      rights: [" + strings.Repeat("a,", n) + "a]\n"
		start := time.Now()
		_, err := Parse([]byte(in), "x")
		t.Logf("%d rights: %v %d", n, time.Since(start), len(fmt.Sprint(err)))
		in = "upstreams:\n- name: a\n  url: http://a\n  tools:\n    t:\n      effect: read\n      rights: [" 
		for i := range n { in += fmt.Sprintf("a%d,", i) }
		in += "a]\n"
		start = time.Now()
		_, err = Parse([]byte(in), "x")
		t.Logf("%d distinct rights: %v %d", n, time.Since(start), len(fmt.Sprint(err)))
	}
}
