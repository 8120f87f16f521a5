package config

import (
	"strings"
	"testing"
)

// federated is a valid configuration with one virtual server of three
// members; the cases below break it one way each.
const federated = `
upstreams:
  - {name: crm, url: "http://127.0.0.1:3001/mcp"}
  - {name: files, url: "http://127.0.0.1:3002/mcp"}
  - {name: wiki, url: "http://127.0.0.1:3003/mcp", route: /wiki/mcp}
  - {name: alone, url: "http://127.0.0.1:3004/mcp", route: /alone}
servers:
  - name: work
    members:
      - {upstream: crm, prefix: crm}
      - {upstream: files, prefix: files}
      - {upstream: wiki, prefix: wiki}
`

func TestServersValid(t *testing.T) {
	c, err := Parse([]byte(federated), "federated.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Servers[0].Route; got != DefaultRoutePath {
		t.Errorf("server route = %q, want the default %q", got, DefaultRoutePath)
	}
	for _, u := range c.Upstreams {
		want := map[string]string{"crm": "", "files": "", "wiki": "/wiki/mcp", "alone": "/alone"}[u.Name]
		if u.Route != want {
			t.Errorf("upstream %s: route %q, want %q (a member gets no route of its own)", u.Name, u.Route, want)
		}
	}
	if s, ok := c.MemberOf("files"); !ok || s.Name != "work" {
		t.Errorf("MemberOf(files) = %v, %v", s.Name, ok)
	}
	if _, ok := c.MemberOf("alone"); ok {
		t.Error("MemberOf(alone) = true")
	}
}

// TestServersUnprefixed: one member without prefix is valid; its
// declared tools that start with another member's prefix are warned of.
func TestServersUnprefixed(t *testing.T) {
	text := strings.Replace(federated, "{upstream: files, prefix: files}", "{upstream: files, unprefixed: true}", 1)
	text = strings.Replace(text, `{name: files, url: "http://127.0.0.1:3002/mcp"}`,
		`{name: files, url: "http://127.0.0.1:3002/mcp", tools: {read_file: {effect: read}, crm_sync: {effect: read}, wiki: {effect: read}, x: {effect: read, expose: {name: wiki_x}}}}`, 1)
	c, err := Parse([]byte(text), "federated.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if m := c.Servers[0].Members[1]; !m.Unprefixed || m.Prefix != "" {
		t.Errorf("member = %+v", m)
	}
	w := c.FederationWarnings()
	if len(w) != 2 || !strings.Contains(w[0], `tool "crm_sync" of unprefixed upstream "files" starts with member prefix "crm"`) || !strings.Contains(w[1], `"wiki_x"`) {
		t.Errorf("warnings = %q", w)
	}
	for _, tc := range []struct{ name, sep, want string }{
		{"crm_sync", "_", "crm"}, {"crm", "_", ""}, {"files_x", "_", ""}, {"read_file", "_", ""},
		{"crm+file:///a", "+", "crm"}, {"git+ssh://h", "+", ""}, {"crm_file", "+", ""},
	} {
		if got := c.Servers[0].ShadowedBy(tc.name, tc.sep); got != tc.want {
			t.Errorf("ShadowedBy(%q, %q) = %q, want %q", tc.name, tc.sep, got, tc.want)
		}
	}
}

func TestServersInvalid(t *testing.T) {
	tests := []struct {
		name, replace, with string
		want                []string
	}{
		{"unknown upstream", "{upstream: wiki,", "{upstream: wikki,", []string{`servers[0].members[2].upstream: "wikki" is not the name of an upstream (crm, files, wiki, alone)`}},
		{"two servers", "", "  - {name: other, route: /other, members: [{upstream: crm, prefix: c}]}\n",
			[]string{`servers[1].members[0].upstream: upstream "crm" is already a member at servers[0].members[0]; an upstream belongs to at most one server`}},
		{"separator in prefix", "prefix: files}", "prefix: my_files}", []string{`servers[0].members[1].prefix: "my_files" holds the separator "_" or "+"`}},
		{"plus in prefix", "prefix: files}", "prefix: a+b}", []string{`servers[0].members[1].prefix: "a+b" holds the separator`}},
		{"prefix shape", "prefix: files}", "prefix: Files}", []string{`servers[0].members[1].prefix: "Files" must be 1 to 32 characters of a-z, 0-9 and -, starting with a letter`}},
		{"prefix digit first", "prefix: files}", "prefix: 9f}", []string{`servers[0].members[1].prefix: "9f" must be`}},
		{"prefix too long", "prefix: files}", "prefix: " + strings.Repeat("f", 33) + "}", []string{`servers[0].members[1].prefix:`}},
		{"same prefix", "prefix: files}", "prefix: crm}", []string{`servers[0].members[1].prefix: "crm" is also the prefix of members[0]; prefixes must be unique`}},
		{"prefix of a prefix", "prefix: files}", "prefix: crm-eu}", []string{`servers[0].members[1].prefix: "crm-eu" and the prefix of members[0] ("crm") start alike; no prefix may be the start of another`}},
		{"reserved prefix", "prefix: files}", "prefix: confirm}", []string{`servers[0].members[1].prefix: "confirm" is reserved: mcpgate's own tools (confirm_action, reject_action, list_recent_changes) start with it`}},
		{"missing prefix", "prefix: files}", "prefix: \"\"}", []string{`servers[0].members[1].prefix: required`}},
		{"prefix and unprefixed", "prefix: files}", "prefix: files, unprefixed: true}", []string{`servers[0].members[1].prefix: "files" is set but unprefixed is true; set one of them`}},
		{"two unprefixed", "{upstream: files, prefix: files}", "{upstream: files, unprefixed: true}\n      - {upstream: alone, unprefixed: true}",
			[]string{`servers[0].members[2].unprefixed: members[1] is unprefixed already; at most one member of a server is`}},
		{"no members", "    members:\n      - {upstream: crm, prefix: crm}\n      - {upstream: files, prefix: files}\n      - {upstream: wiki, prefix: wiki}\n", "    members: []\n", []string{`servers[0].members: at least one member is required`}},
		{"name taken by an upstream", "- name: work", "- name: alone", []string{`servers[0].name: "alone" is also the name of upstreams[3]; names must be unique across upstreams and servers`}},
		{"bad name", "- name: work", "- name: Work", []string{`servers[0].name: "Work" must be 1 to 63 characters`}},
		{"route taken by an upstream", "- name: work", "- name: work\n    route: /alone", []string{`servers[0].route: "/alone" is also the route of upstreams[3]; routes must be unique`}},
		{"route taken by a non-member", "route: /alone}", "}", []string{`servers[0].route: "/mcp" is also the route of upstreams[3]; routes must be unique`}},
		{"catalog off", "", "catalog: {disabled: true}\n", []string{`servers[0]: needs the catalog`}},
		{"tenant URL on a route without a tenant", `"http://127.0.0.1:3002/mcp"`, `"http://127.0.0.1:3002/t/{tenant}/mcp"`,
			[]string{`servers[0].members[1].upstream: upstream "files" has {tenant} in its URL but the server's route ("/mcp") has none to fill it with`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := federated
			if tt.replace == "" {
				text += tt.with // a section or list element appended
			} else {
				if !strings.Contains(text, tt.replace) {
					t.Fatalf("%q is not in the configuration", tt.replace)
				}
				text = strings.Replace(text, tt.replace, tt.with, 1)
			}
			_, err := Parse([]byte(text), "federated.yaml")
			if err == nil {
				t.Fatalf("valid, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q; got:\n%v", w, err)
				}
			}
		})
	}
}
