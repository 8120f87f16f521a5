package catalog

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// ManifestVersion is the only manifest format version.
const ManifestVersion = 1

// MaxManifestBytes bounds the manifest file LoadManifest reads (64 MiB).
const MaxManifestBytes = 64 << 20

// Manifest is the pinned, approved definition of every tool of every
// upstream, written by `mcpgate manifest pin` and reviewed like code. The
// file is JSON:
//
//	{
//	  "version": 1,
//	  "pinned_at": "2026-08-10T09:00:00Z",
//	  "upstreams": {
//	    "crm": {
//	      "tools": {
//	        "find_customers": {
//	          "hash": "sha256:<64 hex digits>",
//	          "title": "Find customers",
//	          "description": "Search customers by name."
//	        }
//	      }
//	    }
//	  }
//	}
//
// Only "hash" decides (see Tool.Hash); "title" and "description" are kept
// so a person reviewing a diff of the file sees what changed.
type Manifest struct {
	// Version is ManifestVersion (1).
	Version int `json:"version"`
	// PinnedAt is when the manifest was pinned (RFC 3339, UTC).
	PinnedAt time.Time `json:"pinned_at"`
	// Upstreams are the pins by upstream name.
	Upstreams map[string]UpstreamPins `json:"upstreams"`
}

// UpstreamPins are the pins of one upstream.
type UpstreamPins struct {
	// Tools are the pins by tool name.
	Tools map[string]Pin `json:"tools"`
}

// Pin is the approved definition of one tool.
type Pin struct {
	// Hash is the approved Tool.Hash ("sha256:" and 64 lower-case hex
	// digits).
	Hash string `json:"hash"`
	// Title and Description are the tool's title and description when it
	// was pinned, for people reviewing changes; they are not compared.
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
}

// State is a listed tool's standing against the manifest.
type State string

// States of a tool.
const (
	// StateApproved: the tool's hash equals its pin, or pinning is off
	// (nil manifest).
	StateApproved State = "approved"
	// StateChanged: the tool is pinned with another hash; its definition
	// changed after approval (a rug pull, or an upgrade to review).
	StateChanged State = "changed"
	// StateUnpinned: the upstream lists the tool and the manifest has no
	// pin for it (a new tool, or an upstream the manifest does not name).
	StateUnpinned State = "unpinned"
	// StateMissing: the manifest pins the tool and the upstream no longer
	// lists it (Diff only).
	StateMissing State = "missing"
)

// Drift is one tool whose state is not approved (Manifest.Diff), or, in
// Options.OnDrift, one change of a tool's state.
type Drift struct {
	Upstream, Tool string
	State          State
	// PinnedHash is the pin's hash ("" when unpinned); Hash is the listed
	// tool's hash ("" when missing).
	PinnedHash, Hash string
}

// LoadManifest reads and checks a manifest file. Decoding is strict: the
// file must be one JSON object (I-JSON, RFC 7493: no duplicate member
// names at any depth, valid UTF-8) with no unknown members, version 1,
// every hash of the Tool.Hash form and every tool name valid
// (ValidToolName). Null upstreams or tools count as empty.
func LoadManifest(path string) (*Manifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxManifestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if len(data) > MaxManifestBytes {
		return nil, fmt.Errorf("manifest %s: larger than %d bytes", path, MaxManifestBytes)
	}
	m, err := ParseManifest(data)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", path, err)
	}
	return m, nil
}

// ParseManifest decodes and checks a manifest (see LoadManifest).
func ParseManifest(data []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(data, &m, json.RejectUnknownMembers(true)); err != nil {
		return nil, err
	}
	// Unmarshal leaves members that are absent at their zero value; the
	// version check below catches an empty object.
	if m.Version != ManifestVersion {
		return nil, fmt.Errorf("version %d is not supported (want %d)", m.Version, ManifestVersion)
	}
	if m.Upstreams == nil {
		m.Upstreams = map[string]UpstreamPins{}
	}
	var problems []error
	for _, up := range slices.Sorted(maps.Keys(m.Upstreams)) {
		pins := m.Upstreams[up]
		if up == "" {
			problems = append(problems, errors.New("an upstream with an empty name"))
		}
		if pins.Tools == nil {
			pins.Tools = map[string]Pin{}
			m.Upstreams[up] = pins
		}
		for _, name := range slices.Sorted(maps.Keys(pins.Tools)) {
			if !ValidToolName(name) {
				problems = append(problems, fmt.Errorf("upstreams.%s.tools: name %q outside [A-Za-z0-9_.-]{1,128}", up, name))
			}
			if h := pins.Tools[name].Hash; !validHash(h) {
				problems = append(problems, fmt.Errorf("upstreams.%s.tools.%s.hash: %q is not \"sha256:\" and 64 lower-case hex digits", up, name, h))
			}
		}
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	return &m, nil
}

// Marshal returns the manifest's file form: indented JSON with object
// members in a stable order (struct fields as declared, map keys sorted),
// HTML characters not escaped, and a trailing newline.
func (m *Manifest) Marshal() ([]byte, error) {
	b, err := json.Marshal(m, json.Deterministic(true), jsontext.WithIndent("  "), jsontext.EscapeForHTML(false))
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Write writes the manifest to path atomically: to a temporary file in the
// same directory, synced, mode 0644, then renamed over path, so a reader
// (a gateway reloading on SIGHUP) sees the old or the new file, never a
// part of one.
func (m *Manifest) Write(path string) (err error) {
	data, err := m.Marshal()
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("manifest: %w", err)
	}
	if err = f.Chmod(0o644); err != nil {
		f.Close()
		return fmt.Errorf("manifest: %w", err)
	}
	if err = f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("manifest: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	if d, derr := os.Open(dir); derr == nil { // make the rename durable; best effort
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// PinSnapshots returns a manifest that approves every tool of the given
// snapshots as listed (refused tools are not pinned), pinned at now
// (UTC, whole seconds). Nil snapshots are skipped; a later snapshot of the
// same upstream replaces an earlier one.
func PinSnapshots(snaps []*Snapshot, now time.Time) *Manifest {
	m := &Manifest{Version: ManifestVersion, PinnedAt: now.UTC().Truncate(time.Second), Upstreams: map[string]UpstreamPins{}}
	for _, s := range snaps {
		if s == nil {
			continue
		}
		pins := UpstreamPins{Tools: make(map[string]Pin, len(s.Tools))}
		for _, t := range s.Tools {
			pins.Tools[t.Name] = Pin{Hash: t.Hash, Title: t.Title, Description: t.Description}
		}
		m.Upstreams[s.Upstream] = pins
	}
	return m
}

// State returns the state of tool t listed by upstream: StateApproved when
// the manifest is nil (pinning off) or t's hash equals its pin,
// StateChanged when the pin has another hash, StateUnpinned when the
// manifest has no pin for it (including an upstream the manifest does not
// name).
func (m *Manifest) State(upstream string, t *Tool) State {
	if m == nil {
		return StateApproved
	}
	pin, ok := m.Upstreams[upstream].Tools[t.Name]
	switch {
	case !ok:
		return StateUnpinned
	case pin.Hash != t.Hash:
		return StateChanged
	}
	return StateApproved
}

// Pin returns the pin of an upstream's tool, and false when there is none
// (or m is nil).
func (m *Manifest) Pin(upstream, tool string) (Pin, bool) {
	if m == nil {
		return Pin{}, false
	}
	p, ok := m.Upstreams[upstream].Tools[tool]
	return p, ok
}

// Diff returns every tool of the snapshot's upstream that is not approved:
// listed tools in state changed or unpinned, in the snapshot's order, then
// pins whose tool the snapshot does not list (StateMissing), by name. It
// returns nil when m is nil (pinning off) or s is nil (not listed yet:
// nothing is known to be missing).
func (m *Manifest) Diff(s *Snapshot) []Drift {
	if m == nil || s == nil {
		return nil
	}
	var out []Drift
	pins := m.Upstreams[s.Upstream].Tools
	for i := range s.Tools {
		t := &s.Tools[i]
		switch st := m.State(s.Upstream, t); st {
		case StateChanged:
			out = append(out, Drift{Upstream: s.Upstream, Tool: t.Name, State: st, PinnedHash: pins[t.Name].Hash, Hash: t.Hash})
		case StateUnpinned:
			out = append(out, Drift{Upstream: s.Upstream, Tool: t.Name, State: st, Hash: t.Hash})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(pins)) {
		if _, ok := s.Lookup(name); !ok {
			out = append(out, Drift{Upstream: s.Upstream, Tool: name, State: StateMissing, PinnedHash: pins[name].Hash})
		}
	}
	return out
}

// Equal reports whether two manifests pin the same hashes, titles and
// descriptions (PinnedAt is not compared; nil equals nil only).
func (m *Manifest) Equal(o *Manifest) bool {
	if m == nil || o == nil {
		return m == o
	}
	if len(m.Upstreams) != len(o.Upstreams) {
		return false
	}
	for up, pins := range m.Upstreams {
		opins, ok := o.Upstreams[up]
		if !ok || len(pins.Tools) != len(opins.Tools) {
			return false
		}
		for name, p := range pins.Tools {
			if op, ok := opins.Tools[name]; !ok || op != p {
				return false
			}
		}
	}
	return true
}
