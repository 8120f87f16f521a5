package config

import (
	"fmt"
	"testing"
)

func TestSmoke(t *testing.T) {
	for _, in := range []string{
		"upstreams:\n- name: a\n  url: http://x/mcp\n  tols: 1\n",
		"upstreams:\n- name: a\n  url: http://x/mcp\n  route: /a\n- name: a\n  url: ftp://x\n  route: /a\n  timeout: 5\nlimits:\n  max_body_bytes: -1\nlog: {level: loud, format: xml}\n",
		"",
		"garbage",
		"a:\n\tb: 1\n",
		"upstreams:\n- name: a\n  name: b\n  url: http://x\n",
		"listeners: {proxy: {disabled: yes}}\nupstreams: []\n",
		"upstreams:\n- name: a\n  url: http://x\n  tools:\n    t1: {effect: reed}\n    t2: {effect: read, rights: [1]}\n",
		"upstreams:\n- <<: {name: a}\n  url: http://x\n",
		"upstreams:\n- name: !!str a\n  url: http://x\n",
		"upstreams:\n- name: a\n  url: http://x\n---\nfoo: 1\n",
		"upstreams:\n- name: a\n  url: http://x\ntransport:\n  allowed_origins: ['https://A.com', 'https://a.com:443', 'https://a.com/', '*', 'http://localhost:3000']\n",
	} {
		c, err := Parse([]byte(in), "t.yaml")
		fmt.Printf("=== %q\n%v\n%+v\n", in, err, c)
	}
	c, err := Load("examples/quickstart.yaml")
	fmt.Println(err, c != nil)
}
