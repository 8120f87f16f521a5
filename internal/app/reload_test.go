package app

import (
	"time"

	"slices"
	"testing"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/policy"
)

func reloadBase(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Parse(config.Quickstart, "quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestDiffConfig: run-time keys and restart keys are told apart, by their
// YAML paths, and mergeHot takes only the run-time ones.
func TestDiffConfig(t *testing.T) {
	prev, next := reloadBase(t), reloadBase(t)
	if hot, restart := diffConfig(prev, next); len(hot)+len(restart) != 0 {
		t.Fatalf("same file: hot %v restart %v", hot, restart)
	}
	d := next.Upstreams[0].Tools["list_technicians"]
	d.Effect = policy.EffectSilentWrite
	next.Upstreams[0].Tools = map[string]policy.ToolDeclaration{"list_technicians": d}
	next.RateLimits.Buckets = map[string]config.Bucket{"reads": {Rate: 1, Per: config.DurationOf(time.Hour), Burst: 1}}
	next.RateLimits.Backend = "redis"
	next.Policy.SecretNames = []string{"password"}
	next.Limits.MaxJSONDepth = 7
	next.Limits.MaxBodyBytes = 99
	next.Listeners.Proxy.Address = "127.0.0.1:1"
	next.Upstreams[0].URL = "http://127.0.0.1:2/mcp"
	next.WriteSafety.ConfirmTTL = config.DurationOf(next.WriteSafety.ConfirmTTL.D() + time.Second)
	next.Limits.ReadTimeout = config.DurationOf(0) // set to 0s: a change from the default
	hot, restart := diffConfig(prev, next)
	wantHot := []string{"upstreams[demo].tools", "policy.secret_names", "limits.max_json_depth", "rate_limits.buckets", "write_safety.confirm_ttl"}
	wantRestart := []string{"listeners.proxy.address", "upstreams[demo].url", "limits.max_body_bytes", "rate_limits.backend", "limits.read_timeout"}
	slices.Sort(hot)
	slices.Sort(restart)
	slices.Sort(wantHot)
	slices.Sort(wantRestart)
	if !slices.Equal(hot, wantHot) || !slices.Equal(restart, wantRestart) {
		t.Fatalf("hot %v (want %v)\nrestart %v (want %v)", hot, wantHot, restart, wantRestart)
	}

	eff := mergeHot(prev, next)
	if eff.Upstreams[0].Tools["list_technicians"].Effect != policy.EffectSilentWrite || eff.Limits.MaxJSONDepth != 7 ||
		!slices.Equal(eff.Policy.SecretNames, []string{"password"}) || eff.RateLimits.Buckets["reads"].Burst != 1 {
		t.Fatalf("run-time settings not taken: %+v", eff)
	}
	if eff.Upstreams[0].URL != prev.Upstreams[0].URL || eff.Listeners != prev.Listeners ||
		eff.Limits.MaxBodyBytes != prev.Limits.MaxBodyBytes || eff.RateLimits.Backend != prev.RateLimits.Backend {
		t.Fatal("a restart key changed at run time")
	}
	if prev.Upstreams[0].Tools["list_technicians"].Effect == policy.EffectSilentWrite {
		t.Fatal("mergeHot changed the running configuration")
	}
	// Upstreams added or removed: one restart key.
	next = reloadBase(t)
	next.Upstreams = append(next.Upstreams, config.Upstream{Name: "other"})
	if hot, restart := diffConfig(prev, next); len(hot) != 0 || !slices.Equal(restart, []string{"upstreams"}) {
		t.Fatalf("added upstream: hot %v restart %v", hot, restart)
	}
}
