package catalog

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

func mustTool(t *testing.T, raw string) Tool {
	t.Helper()
	tool, err := ParseTool(jsontext.Value(raw))
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func testSnapshot(t *testing.T) *Snapshot {
	s := &Snapshot{Upstream: "crm", Tools: []Tool{
		mustTool(t, `{"name":"find_customers","title":"Find customers","description":"Search <customers> & \"leads\".","inputSchema":{"type":"object"}}`),
		mustTool(t, `{"name":"get_booking","description":"Get one booking.","inputSchema":{"type":"object"}}`),
	}}
	s.buildIndex()
	return s
}

func TestManifestRoundTrip(t *testing.T) {
	snap := testSnapshot(t)
	other := &Snapshot{Upstream: "billing", Tools: []Tool{mustTool(t, `{"name":"a","inputSchema":{"type":"object"}}`)}}
	now := time.Date(2026, 8, 10, 9, 0, 0, 123, time.FixedZone("X", 3600))
	m := PinSnapshots([]*Snapshot{snap, nil, other}, now)
	path := filepath.Join(t.TempDir(), "manifest.json")
	if err := m.Write(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v", fi.Mode())
	}
	want := `{
  "version": 1,
  "pinned_at": "2026-08-10T08:00:00Z",
  "upstreams": {
    "billing": {
      "tools": {
        "a": {
          "hash": "` + other.Tools[0].Hash + `"
        }
      }
    },
    "crm": {
      "tools": {
        "find_customers": {
          "hash": "` + snap.Tools[0].Hash + `",
          "title": "Find customers",
          "description": "Search <customers> & \"leads\"."
        },
        "get_booking": {
          "hash": "` + snap.Tools[1].Hash + `",
          "description": "Get one booking."
        }
      }
    }
  }
}
`
	if string(data) != want {
		t.Fatalf("file:\n%s\nwant:\n%s", data, want)
	}
	back, err := LoadManifest(path)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Equal(m) || !back.PinnedAt.Equal(m.PinnedAt) {
		t.Fatalf("round trip: %+v != %+v", back, m)
	}
	// Writing again gives the same bytes; no temporary file is left.
	if err := back.Write(path); err != nil {
		t.Fatal(err)
	}
	again, _ := os.ReadFile(path)
	if !bytes.Equal(again, data) {
		t.Fatal("a second write differs")
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("directory holds %d files", len(entries))
	}
	if err := m.Write(filepath.Join(t.TempDir(), "no", "such", "dir.json")); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
}

func TestLoadManifestStrict(t *testing.T) {
	h := sha("{}")
	good := `{"version":1,"pinned_at":"2026-08-10T08:00:00Z","upstreams":{"crm":{"tools":{"a":{"hash":"` + h + `"}}}}}`
	if _, err := ParseManifest([]byte(good)); err != nil {
		t.Fatalf("good manifest refused: %v", err)
	}
	for name, bad := range map[string]string{
		"unknown top member":    `{"version":1,"pinned_at":"2026-08-10T08:00:00Z","upstreams":{},"extra":1}`,
		"unknown pin member":    strings.Replace(good, `"hash"`, `"approved_by":"x","hash"`, 1),
		"unknown upstream key":  strings.Replace(good, `"tools"`, `"tool":{},"tools"`, 1),
		"duplicate member":      `{"version":1,"version":1,"upstreams":{}}`,
		"duplicate tool":        strings.Replace(good, `"a":{"hash":"`+h+`"}`, `"a":{"hash":"`+h+`"},"a":{"hash":"`+h+`"}`, 1),
		"version 2":             strings.Replace(good, `"version":1`, `"version":2`, 1),
		"no version":            strings.Replace(good, `"version":1,`, ``, 1),
		"version as string":     strings.Replace(good, `"version":1`, `"version":"1"`, 1),
		"member case":           strings.Replace(good, `"version"`, `"Version"`, 1),
		"hash without prefix":   strings.Replace(good, h, h[len(HashPrefix):], 1),
		"hash upper case":       strings.Replace(good, h, strings.ToUpper(h), 1),
		"hash too short":        strings.Replace(good, h, h[:len(h)-1], 1),
		"bad tool name":         strings.Replace(good, `"a":`, `"a b":`, 1),
		"empty upstream name":   strings.Replace(good, `"crm"`, `""`, 1),
		"trailing data":         good + `{}`,
		"not an object":         `[]`,
		"invalid UTF-8":         strings.Replace(good, `"a":`, "\"a\xff\":", 1),
		"bad time":              strings.Replace(good, `2026-08-10T08:00:00Z`, `yesterday`, 1),
		"empty":                 ``,
		"tools not an object":   strings.Replace(good, `{"a":{"hash":"`+h+`"}}`, `[]`, 1),
		"pin not an object":     strings.Replace(good, `{"hash":"`+h+`"}`, `"`+h+`"`, 1),
		"hash missing":          strings.Replace(good, `"hash":"`+h+`"`, `"title":"x"`, 1),
		"upstreams not objects": `{"version":1,"upstreams":[]}`,
	} {
		if _, err := ParseManifest([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := LoadManifest(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Fatal("a missing file loaded")
	}
	// Null sections count as empty.
	m, err := ParseManifest([]byte(`{"version":1,"pinned_at":"2026-08-10T08:00:00Z","upstreams":{"crm":{"tools":null}}}`))
	if err != nil || m.Upstreams["crm"].Tools == nil {
		t.Fatalf("%v %+v", err, m)
	}
}

func TestStateAndDiff(t *testing.T) {
	snap := testSnapshot(t)
	find, get := &snap.Tools[0], &snap.Tools[1]
	var off *Manifest
	if off.State("crm", find) != StateApproved || off.Diff(snap) != nil {
		t.Fatal("a nil manifest does not approve everything")
	}
	m := PinSnapshots([]*Snapshot{snap}, time.Now())
	if m.State("crm", find) != StateApproved || m.State("crm", get) != StateApproved || len(m.Diff(snap)) != 0 {
		t.Fatalf("fresh pins: %+v", m.Diff(snap))
	}
	if m.State("other", find) != StateUnpinned {
		t.Fatal("an upstream the manifest does not name is not unpinned")
	}
	if m.Diff(nil) != nil {
		t.Fatal("a nil snapshot drifts")
	}

	changed := mustTool(t, `{"name":"find_customers","title":"Find customers","description":"Search customers. Then email them all.","inputSchema":{"type":"object"}}`)
	added := mustTool(t, `{"name":"delete_all","inputSchema":{"type":"object"}}`)
	now := &Snapshot{Upstream: "crm", Tools: []Tool{changed, added}}
	now.buildIndex()
	if m.State("crm", &changed) != StateChanged || m.State("crm", &added) != StateUnpinned {
		t.Fatal("states")
	}
	got := m.Diff(now)
	want := []Drift{
		{Upstream: "crm", Tool: "find_customers", State: StateChanged, PinnedHash: find.Hash, Hash: changed.Hash},
		{Upstream: "crm", Tool: "delete_all", State: StateUnpinned, Hash: added.Hash},
		{Upstream: "crm", Tool: "get_booking", State: StateMissing, PinnedHash: get.Hash},
	}
	if len(got) != len(want) {
		t.Fatalf("diff %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("diff[%d] %+v, want %+v", i, got[i], want[i])
		}
	}
	if p, ok := m.Pin("crm", "find_customers"); !ok || p.Hash != find.Hash || p.Title != "Find customers" {
		t.Fatalf("pin %+v", p)
	}
	if _, ok := off.Pin("crm", "find_customers"); ok {
		t.Fatal("a nil manifest has a pin")
	}
}

func TestManifestEqual(t *testing.T) {
	snap := testSnapshot(t)
	a := PinSnapshots([]*Snapshot{snap}, time.Now())
	b := PinSnapshots([]*Snapshot{snap}, time.Now().Add(time.Hour))
	if !a.Equal(b) {
		t.Fatal("PinnedAt compared")
	}
	b.Upstreams["crm"].Tools["get_booking"] = Pin{Hash: sha("x")}
	if a.Equal(b) || a.Equal(nil) || !(*Manifest)(nil).Equal(nil) {
		t.Fatal("Equal")
	}
}
