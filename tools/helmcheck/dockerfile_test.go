package helmcheck

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestDockerfileMatchesChart: the image the README tells users to build
// runs as the user the chart's securityContext names, and has the mcpgate
// binary as its entrypoint (the chart passes only arguments: serve /
// validate). No Docker daemon runs here, so the Dockerfile is read, not
// built; its build line is the one scripts/test.sh and the e2e tests use.
func TestDockerfileMatchesChart(t *testing.T) {
	df, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(chartDir + "/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		SecurityContext struct {
			RunAsUser int `json:"runAsUser"`
		} `json:"securityContext"`
		PodSecurityContext struct {
			RunAsUser int `json:"runAsUser"`
		} `json:"podSecurityContext"`
	}
	if err := yaml.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	uid := v.SecurityContext.RunAsUser
	if uid == 0 {
		uid = v.PodSecurityContext.RunAsUser
	}
	if uid == 0 {
		t.Fatal("values.yaml names no runAsUser")
	}
	var user, entry, build string
	for _, l := range strings.Split(string(df), "\n") {
		switch f := strings.Fields(l); {
		case len(f) > 1 && f[0] == "USER":
			user = f[1]
		case len(f) > 1 && f[0] == "ENTRYPOINT":
			entry = strings.Join(f[1:], " ")
		case strings.Contains(l, "go build"):
			build = l
		}
	}
	if want := strconv.Itoa(uid); user != want+":"+want && user != want {
		t.Errorf("Dockerfile USER %q, chart runAsUser %d", user, uid)
	}
	if entry != `["/usr/local/bin/mcpgate"]` {
		t.Errorf("Dockerfile ENTRYPOINT %s: the chart passes arguments only, so the binary must be the entrypoint", entry)
	}
	if !strings.Contains(build, "CGO_ENABLED=0") || !strings.Contains(build, "./cmd/mcpgate") {
		t.Errorf("Dockerfile build line %q: want a static (CGO_ENABLED=0) build of ./cmd/mcpgate", build)
	}
	test, err := os.ReadFile("../../scripts/test.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(test), "CGO_ENABLED=0 go build -trimpath") {
		t.Error("scripts/test.sh no longer builds the binary the way the Dockerfile does")
	}
}
