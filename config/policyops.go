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
	// URL is the bundle's full http(s) URL.
	URL string `yaml:"url"`
	// MinDelay and MaxDelay bound the wait between polls (Go durations,
	// whole seconds, at least 1s; "" means OPA's 60s and 120s).
	MinDelay string `yaml:"min_delay"`
	MaxDelay string `yaml:"max_delay"`
	// BearerTokenFile holds a token sent as "Authorization: Bearer" to
	// the bundle (and status) server.
	BearerTokenFile string `yaml:"bearer_token_file"`
	// PublicKeyFile is a PEM public key (or HMAC secret) that bundle
	// signatures must verify against; "" accepts unsigned bundles.
	PublicKeyFile string `yaml:"public_key_file"`
	// KeyID is the signature's keyid (default "mcpgate"); Algorithm its
	// JWS algorithm (default RS256); Scope, if set, must match.
	KeyID     string `yaml:"key_id"`
	Algorithm string `yaml:"algorithm"`
	Scope     string `yaml:"scope"`
	// StatusURL is a service OPA's status plugin reports to
	// (POST …/status); "" writes status to the log.
	StatusURL string `yaml:"status_url"`
}

// DecisionLogs sends every policy decision to OPA's decision-log plugin,
// masked (policy.decision_logs).
type DecisionLogs struct {
	// URL is the http(s) endpoint batches are POSTed to.
	URL string `yaml:"url"`
	// BearerTokenFile holds a token sent as "Authorization: Bearer" to URL.
	BearerTokenFile string `yaml:"bearer_token_file"`
	// Console writes each masked event to mcpgate's log.
	Console bool `yaml:"console"`
	// MinDelay and MaxDelay bound the wait between uploads ("" means
	// OPA's 300s and 600s).
	MinDelay string `yaml:"min_delay"`
	MaxDelay string `yaml:"max_delay"`
	// MaskPolicyFile replaces the default mask policy (rego/mask.rego).
	MaskPolicyFile string `yaml:"mask_policy_file"`
	// QueueSize bounds decisions waiting to be logged (default
	// policy.DefaultDecisionLogQueue); beyond it they are dropped and
	// counted.
	QueueSize int `yaml:"queue_size"`
}

// ShadowPolicy is a candidate policy evaluated beside the live one
// (policy.shadow).
type ShadowPolicy struct {
	// Dirs are the candidate's policy directories; or Bundle.
	Dirs   []string      `yaml:"dirs"`
	Bundle *PolicyBundle `yaml:"bundle" json:",omitempty"`
	// QueueSize bounds decisions waiting for the shadow (default
	// policy.DefaultShadowQueue).
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

func checkDelays(p *problems, at, minD, maxD string) {
	var lo, hi time.Duration
	var okLo, okHi bool
	if minD != "" {
		lo, okLo = checkDurationIn(p, at+".min_delay", minD, durationRange{positive: true, min: "1s", max: "24h"})
	}
	if maxD != "" {
		hi, okHi = checkDurationIn(p, at+".max_delay", maxD, durationRange{positive: true, min: "1s", max: "24h"})
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
		MinDelay: durationOr(b.MinDelay, "0s"), MaxDelay: durationOr(b.MaxDelay, "0s")}
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
		MinDelay: durationOr(d.MinDelay, "0s"), MaxDelay: durationOr(d.MaxDelay, "0s")}
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
