package main

import (
	"net"
	"os/exec"
	"strings"
	"testing"
)

// TestDemoProxyAddress: the demo's public origin is a loopback URL with
// the port the proxy listens on, whatever --listen says.
func TestDemoProxyAddress(t *testing.T) {
	for _, c := range []struct{ addr, listen, base string }{
		{"127.0.0.1:8080", "127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"localhost:8080", "localhost:8080", "http://localhost:8080"},
		{":8080", ":8080", "http://127.0.0.1:8080"},
		{"0.0.0.0:8080", "0.0.0.0:8080", "http://127.0.0.1:8080"},
		{"[::]:8080", "[::]:8080", "http://127.0.0.1:8080"},
		{"[::1]:8080", "[::1]:8080", "http://[::1]:8080"},
	} {
		listen, base, err := demoProxyAddress(c.addr)
		if err != nil || listen != c.listen || base != c.base {
			t.Errorf("demoProxyAddress(%q) = %q, %q, %v; want %q, %q", c.addr, listen, base, err, c.listen, c.base)
		}
	}
	// Port 0: a free port, named in both.
	listen, base, err := demoProxyAddress("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(listen)
	if port == "0" || port == "" || base != "http://127.0.0.1:"+port || !strings.HasPrefix(listen, "127.0.0.1:") {
		t.Errorf("port 0: %q, %q", listen, base)
	}
	if _, _, err := demoProxyAddress("8080"); err == nil {
		t.Error("an address without a port was accepted")
	}
}

// TestShellQuote: a value comes back from the shell as written, quotes,
// spaces and dollars included.
func TestShellQuote(t *testing.T) {
	for _, s := range []string{"", "mcpg_abc-_", "/tmp/a b/rights.yaml", `it's $HOME "x" \n`} {
		out, err := exec.Command("sh", "-c", "printf %s "+shellQuote(s)).Output()
		if err != nil {
			t.Skipf("sh: %v", err)
		}
		if string(out) != s {
			t.Errorf("shellQuote(%q) read back as %q", s, out)
		}
	}
}
