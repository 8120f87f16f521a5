package config

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/policy"
)

// PolicyBundle takes the policy from an OPA bundle server (policy.bundle,
// policy.shadow.bundle), polled by OPA's bundle plugin with ETags, its
// signature verified when a public key is given, status reported by OPA's
// status plugin.
type PolicyBundle struct {
	// The bundle's full URL (a `.tar.gz` built by `opa build`), polled by
	// OPA's bundle plugin through OPA's plugin manager with `If-None-Match`:
	// a `304` keeps the active bundle. A new bundle is compiled with the
	// declarations and swapped in atomically; one that fails to download,
	// verify, parse or compile keeps the previous policy
	// (`mcpgate_policy_reloads_total{result="failure"}`, logged). Until the
	// first bundle is active every message is denied (`policy_not_loaded`)
	// and `/readyz` answers 503.
	//
	// Required.
	URL string `yaml:"url"`
	// Shortest wait between polls; whole seconds, 1s–24h.
	//
	// Default: `60s` (OPA's).
	MinDelay Duration `yaml:"min_delay"`
	// Longest wait between polls; not below `min_delay`.
	//
	// Default: `120s` (OPA's).
	MaxDelay Duration `yaml:"max_delay"`
	// A token sent as `Authorization: Bearer` to the bundle (and status)
	// server.
	//
	// Default: none.
	BearerTokenFile string `yaml:"bearer_token_file"`
	// PEM public key (or HMAC secret) the bundle's `.signatures.json` must
	// verify against (OPA bundle signing); an unsigned bundle or a bad
	// signature or file digest is refused. Recommended.
	//
	// Default: none: unsigned bundles accepted.
	PublicKeyFile string `yaml:"public_key_file"`
	// The signature's `keyid`. Needs `public_key_file`.
	//
	// Default: `mcpgate`.
	KeyID string `yaml:"key_id"`
	// JWS algorithm of the signature (`RS*`, `PS*`, `ES*`, `HS*`
	// 256/384/512). Needs `public_key_file`.
	//
	// Default: `RS256`.
	Algorithm string `yaml:"algorithm"`
	// If set, the signature's `scope` claim must equal it. Needs
	// `public_key_file`.
	//
	// Default: none.
	Scope string `yaml:"scope"`
	// A service OPA's status plugin reports bundle status to (`POST
	// <status_url>/status`, OPA's status format).
	//
	// Default: none: status is logged.
	StatusURL string `yaml:"status_url"`
}

// DecisionLogs sends every policy decision to OPA's decision-log plugin,
// masked (policy.decision_logs).
type DecisionLogs struct {
	// Where gzipped batches of events are POSTed (OPA's logs service API).
	//
	// Default: none.
	URL string `yaml:"url"`
	// A token sent as `Authorization: Bearer` to `url`.
	//
	// Default: none.
	BearerTokenFile string `yaml:"bearer_token_file"`
	// Also write each masked event to mcpgate's log.
	Console bool `yaml:"console"`
	// Shortest wait between uploads; 1s–24h.
	//
	// Default: `300s` (OPA's).
	MinDelay Duration `yaml:"min_delay"`
	// Longest wait between uploads.
	//
	// Default: `600s` (OPA's).
	MaxDelay Duration `yaml:"max_delay"`
	// A Rego file replacing the default mask policy: `package system.log`, a
	// set rule `mask` of JSON pointers (OPA's mask format). Checked at start
	// and by `mcpgate validate`.
	//
	// Default: none: rego/mask.rego.
	MaskPolicyFile string `yaml:"mask_policy_file"`
	// Decisions waiting to be logged (off the request path); beyond it new
	// ones are dropped and counted in `mcpgate_decision_logs_dropped_total`.
	//
	// Default: `10000`.
	QueueSize int `yaml:"queue_size"`
}

// ShadowPolicy is a candidate policy evaluated beside the live one
// (policy.shadow).
type ShadowPolicy struct {
	// The candidate's policy directories (like `policy.dirs`); reloaded with
	// the live policy (SIGHUP, file changes).
	//
	// Default: none.
	Dirs []string `yaml:"dirs"`
	// The candidate from an OPA bundle: keys as `policy.bundle`.
	//
	// Default: none.
	Bundle *PolicyBundle `yaml:"bundle" json:",omitempty"`
	// Decisions waiting for the candidate; beyond it they are not shadowed
	// and are counted in `mcpgate_policy_shadow_dropped_total`.
	//
	// Default: `1024`.
	QueueSize int `yaml:"queue_size"`
}

func resolvePolicyOpsPaths(c *Config, baseDir string) {
	resolve := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(baseDir, *p)
		}
	}
	resolveBundle := func(b *PolicyBundle) {
		if b != nil {
			resolve(&b.BearerTokenFile)
			resolve(&b.PublicKeyFile)
		}
	}
	resolveBundle(c.Policy.Bundle)
	if d := c.Policy.DecisionLogs; d != nil {
		resolve(&d.BearerTokenFile)
		resolve(&d.MaskPolicyFile)
	}
	if s := c.Policy.Shadow; s != nil {
		for i := range s.Dirs {
			resolve(&s.Dirs[i])
		}
		resolveBundle(s.Bundle)
	}
}

func (c *Config) validatePolicyOps(p *problems) {
	if b := c.Policy.Bundle; b != nil {
		if len(c.Policy.Dirs) > 0 {
			p.add("policy.bundle", "policy.dirs and policy.bundle cannot be used together: the policy comes from one of them")
		}
		validateBundle(p, "policy.bundle", b)
	}
	if d := c.Policy.DecisionLogs; d != nil {
		if d.URL == "" && !d.Console {
			p.add("policy.decision_logs", "set url, console or both")
		}
		if d.URL != "" {
			checkHTTPURL(p, "policy.decision_logs.url", d.URL)
		}
		checkDelays(p, "policy.decision_logs", d.MinDelay, d.MaxDelay)
		if d.BearerTokenFile != "" {
			checkFile(p, "policy.decision_logs.bearer_token_file", d.BearerTokenFile, "a token file")
		}
		if d.MaskPolicyFile != "" {
			checkFile(p, "policy.decision_logs.mask_policy_file", d.MaskPolicyFile, "a Rego file")
			if src, err := os.ReadFile(d.MaskPolicyFile); err == nil {
				if err := policy.CheckMaskPolicy(string(src)); err != nil {
					p.addErr("policy.decision_logs.mask_policy_file", err, "%v", err)
				}
			}
		}
		if d.QueueSize < 0 {
			p.add("policy.decision_logs.queue_size", "must not be negative, got %d", d.QueueSize)
		}
	}
	if s := c.Policy.Shadow; s != nil {
		switch {
		case len(s.Dirs) == 0 && s.Bundle == nil:
			p.add("policy.shadow", "set dirs or bundle: the candidate policy")
		case len(s.Dirs) > 0 && s.Bundle != nil:
			p.add("policy.shadow", "dirs and bundle cannot be used together")
		}
		for i, dir := range s.Dirs {
			at := indexPath("policy.shadow.dirs", i)
			if fi, err := os.Stat(dir); err != nil {
				p.addErr(at, err, "directory %q: %v", dir, err)
			} else if !fi.IsDir() {
				p.add(at, "%q is not a directory", dir)
			}
		}
		if s.Bundle != nil {
			validateBundle(p, "policy.shadow.bundle", s.Bundle)
		}
		if s.QueueSize < 0 {
			p.add("policy.shadow.queue_size", "must not be negative, got %d", s.QueueSize)
		}
	}
}

func validateBundle(p *problems, at string, b *PolicyBundle) {
	checkHTTPURL(p, at+".url", b.URL)
	checkDelays(p, at, b.MinDelay, b.MaxDelay)
	if b.BearerTokenFile != "" {
		checkFile(p, at+".bearer_token_file", b.BearerTokenFile, "a token file")
	}
	if b.PublicKeyFile != "" {
		checkFile(p, at+".public_key_file", b.PublicKeyFile, "a PEM public key")
	}
	switch b.Algorithm {
	case "", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "HS256", "HS384", "HS512":
	default:
		p.add(at+".algorithm", "%q is not a JWS algorithm OPA verifies bundles with (RS256, PS256, ES256, HS256, … )", b.Algorithm)
	}
	if (b.KeyID != "" || b.Algorithm != "" || b.Scope != "") && b.PublicKeyFile == "" {
		p.add(at+".public_key_file", "required when key_id, algorithm or scope is set")
	}
	if b.StatusURL != "" {
		checkHTTPURL(p, at+".status_url", b.StatusURL)
	}
}

func checkHTTPURL(p *problems, at, raw string) {
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		p.add(at, "required (an http or https URL)")
	case err != nil:
		p.addErr(at, err, "%q is not a URL", raw)
	case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		p.add(at, "%q is not an http or https URL", raw)
	}
}

func checkDelays(p *problems, at string, minD, maxD Duration) {
	var lo, hi time.Duration
	var okLo, okHi bool
	if minD.IsSet() {
		lo, okLo = checkDurationIn(p, at+".min_delay", minD, durationRange{positive: true, min: time.Second, max: 24 * time.Hour})
	}
	if maxD.IsSet() {
		hi, okHi = checkDurationIn(p, at+".max_delay", maxD, durationRange{positive: true, min: time.Second, max: 24 * time.Hour})
	}
	if okLo && okHi && hi < lo {
		p.add(at+".max_delay", "%s is below min_delay %s", maxD, minD)
	}
}

// BundleOptions turns a bundle section into the policy engine's options,
// reading the key and token files.
func (b *PolicyBundle) BundleOptions() (*policy.BundleOptions, error) {
	if b == nil {
		return nil, nil
	}
	o := &policy.BundleOptions{URL: b.URL, KeyID: b.KeyID, Algorithm: b.Algorithm, Scope: b.Scope, StatusURL: b.StatusURL,
		MinDelay: b.MinDelay.D(), MaxDelay: b.MaxDelay.D()}
	var err error
	if o.BearerToken, err = readSecret(b.BearerTokenFile); err != nil {
		return nil, err
	}
	if b.PublicKeyFile != "" {
		k, err := os.ReadFile(b.PublicKeyFile)
		if err != nil {
			return nil, fmt.Errorf("policy bundle public key: %w", err)
		}
		o.PublicKey = string(k)
	}
	return o, nil
}

// DecisionLogOptions turns policy.decision_logs into the engine's options.
func (d *DecisionLogs) DecisionLogOptions() (*policy.DecisionLogOptions, error) {
	if d == nil {
		return nil, nil
	}
	o := &policy.DecisionLogOptions{URL: d.URL, Console: d.Console, QueueSize: d.QueueSize,
		MinDelay: d.MinDelay.D(), MaxDelay: d.MaxDelay.D()}
	var err error
	if o.BearerToken, err = readSecret(d.BearerTokenFile); err != nil {
		return nil, err
	}
	if d.MaskPolicyFile != "" {
		src, err := os.ReadFile(d.MaskPolicyFile)
		if err != nil {
			return nil, fmt.Errorf("decision-log mask policy: %w", err)
		}
		o.MaskPolicy = string(src)
	}
	return o, nil
}

// ShadowOptions turns policy.shadow into the engine's options.
func (s *ShadowPolicy) ShadowOptions() (*policy.ShadowOptions, error) {
	if s == nil {
		return nil, nil
	}
	b, err := s.Bundle.BundleOptions()
	if err != nil {
		return nil, err
	}
	return &policy.ShadowOptions{Dirs: s.Dirs, Bundle: b, QueueSize: s.QueueSize}, nil
}

func readSecret(file string) (string, error) {
	if file == "" {
		return "", nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
