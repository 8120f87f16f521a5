package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/mcpgate/mcpgate/internal/admin"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// Environment variables of the admin verbs.
const (
	envAdminURL   = "MCPGATE_ADMIN_URL"
	envAdminToken = "MCPGATE_ADMIN_TOKEN"
	// defaultAdminURL is the admin listener's default address.
	defaultAdminURL = "http://127.0.0.1:9090"
	// adminTimeout bounds one admin API call.
	adminTimeout = 30 * time.Second
	// maxAdminAnswer bounds the admin API answers read.
	maxAdminAnswer = 32 << 20
)

// adminFlags are the flags every admin verb takes.
type adminFlags struct {
	url, token string
	json       bool
}

func (f *adminFlags) register(fs *flag.FlagSet) {
	def := os.Getenv(envAdminURL)
	if def == "" {
		def = defaultAdminURL
	}
	fs.StringVar(&f.url, "admin", def, "admin API base `URL` (env "+envAdminURL+")")
	// The token's default is read after parsing, so that -h never prints it.
	fs.StringVar(&f.token, "token", "", "admin API bearer `token` (default $"+envAdminToken+")")
	fs.BoolVar(&f.json, "json", false, "print the API's JSON answer")
}

// client checks the flags and returns a client of the admin API.
func (f *adminFlags) client(stderr io.Writer) (*adminClient, error) {
	if f.token == "" {
		f.token = os.Getenv(envAdminToken)
	}
	if f.token == "" {
		fmt.Fprintf(stderr, "no admin token: pass --token or set %s\n", envAdminToken)
		return nil, errUsage
	}
	u, err := url.Parse(f.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		fmt.Fprintf(stderr, "--admin %q: want the admin listener's base URL, e.g. %s\n", f.url, defaultAdminURL)
		return nil, errUsage
	}
	if u.Scheme == "http" && !loopbackHost(u.Hostname()) {
		fmt.Fprintf(stderr, "warning: sending the admin token over plain http to %s\n", u.Host)
	}
	return &adminClient{
		base:  strings.TrimSuffix(u.String(), "/"),
		token: f.token,
		http: &http.Client{
			Timeout: adminTimeout,
			// A redirect would carry the call somewhere else: refuse.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// parseVerbFlags parses flags that may come before, between and after the
// positional arguments, and returns the positional arguments.
func parseVerbFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, errUsage
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func tokensCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("tokens create", stderr)
	var af adminFlags
	af.register(fs)
	tenant := fs.String("tenant", "", "the token's `tenant` (default: yours)")
	subject := fs.String("subject", "", "the person the token acts for (`subject`; default: you)")
	name := fs.String("name", "", "a `label` for the token")
	rightsFlag := fs.String("rights", "", "comma-separated `rights` (default: all the person holds)")
	expiresIn := fs.String("expires-in", "", "lifetime as a Go `duration`, e.g. 720h (default: the gateway's)")
	toolset := fs.String("toolset", "", "bind the token's connection to this `toolset` of the gateway (default: full, every tool)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	c, err := af.client(stderr)
	if err != nil {
		return err
	}
	body := map[string]any{}
	for k, v := range map[string]string{"tenant": *tenant, "subject": *subject, "name": *name, "expires_in": *expiresIn, "toolset": *toolset} {
		if v != "" {
			body[k] = v
		}
	}
	if *rightsFlag != "" {
		var rs []string
		for _, r := range strings.Split(*rightsFlag, ",") {
			if r = strings.TrimSpace(r); r != "" {
				rs = append(rs, r)
			}
		}
		body["rights"] = rs
	}
	raw, err := c.do(ctx, http.MethodPost, "/v1/tokens", body)
	if err != nil {
		return err
	}
	if af.json {
		return writeRaw(stdout, raw)
	}
	var t apiToken
	if err := json.Unmarshal(raw, &t); err != nil || t.Secret == "" {
		return fmt.Errorf("admin API: unexpected answer to create: %s", snippet(raw))
	}
	fmt.Fprintf(stdout, "token: %s\n", t.Secret)
	fmt.Fprintf(stdout, "id: %s\ntenant: %s\ncreator: %s\n", t.ID, t.Tenant, t.Creator)
	if t.Name != "" {
		fmt.Fprintf(stdout, "name: %s\n", t.Name)
	}
	fmt.Fprintf(stdout, "rights: %s\nexpires: %s\n", strings.Join(t.Rights, ","), formatTime(t.ExpiresAt))
	if t.Toolset != "" {
		fmt.Fprintf(stdout, "toolset: %s\n", t.Toolset)
	}
	fmt.Fprintln(stdout, "This is the only time the token is shown: store it now. It can be revoked, never shown again.")
	return nil
}

func tokensList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("tokens list", stderr)
	var af adminFlags
	af.register(fs)
	tenant := fs.String("tenant", "", "only this `tenant`")
	creator := fs.String("creator", "", "only tokens created for this `subject`")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	c, err := af.client(stderr)
	if err != nil {
		return err
	}
	q := url.Values{}
	if *tenant != "" {
		q.Set("tenant", *tenant)
	}
	if *creator != "" {
		q.Set("creator", *creator)
	}
	path := "/v1/tokens"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	raw, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	if af.json {
		return writeRaw(stdout, raw)
	}
	var l struct {
		Tokens []apiToken `json:"tokens"`
	}
	if err := json.Unmarshal(raw, &l); err != nil {
		return fmt.Errorf("admin API: unexpected answer to list: %s", snippet(raw))
	}
	if len(l.Tokens) == 0 {
		fmt.Fprintln(stdout, "no tokens")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTENANT\tCREATOR\tNAME\tRIGHTS\tEXPIRES\tSTATUS")
	for _, t := range l.Tokens {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Tenant, t.Creator, orDash(t.Name),
			orDash(strings.Join(t.Rights, ",")), formatTime(t.ExpiresAt), t.status())
	}
	return tw.Flush()
}

func tokensRevoke(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("tokens revoke", stderr)
	var af adminFlags
	af.register(fs)
	pos, err := parseVerbFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || pos[0] == "" {
		fmt.Fprintln(stderr, "usage: mcpgate tokens revoke ID (the id from \"mcpgate tokens list\")")
		return errUsage
	}
	c, err := af.client(stderr)
	if err != nil {
		return err
	}
	raw, err := c.do(ctx, http.MethodDelete, "/v1/tokens/"+url.PathEscape(pos[0]), nil)
	if err != nil {
		return err
	}
	if af.json {
		return writeRaw(stdout, raw)
	}
	var t apiToken
	if err := json.Unmarshal(raw, &t); err != nil {
		return fmt.Errorf("admin API: unexpected answer to revoke: %s", snippet(raw))
	}
	fmt.Fprintf(stdout, "revoked %s (tenant %s, creator %s) at %s\n", t.ID, t.Tenant, t.Creator, formatTime(t.RevokedAt))
	return nil
}

// apiToken is a token as the admin API shows it (admin.Token), with the
// CLI's status column.
type apiToken struct{ admin.Token }

func (t apiToken) status() string {
	switch {
	case t.RevokedAt != nil:
		return "revoked"
	case !t.Active:
		return "expired"
	}
	return "active"
}

func formatTime(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.UTC().Format(time.RFC3339)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func writeRaw(w io.Writer, raw []byte) error {
	if _, err := w.Write(bytes.TrimRight(raw, "\n")); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// adminClient calls the admin API.
type adminClient struct {
	base  string
	token string
	http  *http.Client
}

// apiError is an error answer of the admin API.
type apiError struct {
	Status  int
	Code    string `json:"code"`
	Message string `json:"message"`
	Fix     string `json:"fix"`
}

func (e *apiError) Error() string {
	s := fmt.Sprintf("%s (%d %s)", e.Message, e.Status, e.Code)
	if e.Fix != "" {
		s += "\nfix: " + e.Fix
	}
	return s
}

// do sends one call (body, if not nil, as JSON) and returns the answer's
// body, or an *apiError for an error answer.
func (c *adminClient) do(ctx context.Context, method, path string, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is named below already
		}
		return nil, fmt.Errorf("cannot reach the admin API at %s: %v\nfix: check --admin or %s, and that the admin API is on", c.base, err, envAdminURL)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAdminAnswer))
	if err != nil {
		return nil, fmt.Errorf("reading the admin API's answer: %w", err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return raw, nil
	}
	var eb struct {
		Error *apiError `json:"error"`
	}
	if json.Unmarshal(raw, &eb) == nil && eb.Error != nil && eb.Error.Message != "" {
		eb.Error.Status = resp.StatusCode
		return nil, eb.Error
	}
	return nil, fmt.Errorf("the admin API at %s answered %s: %s", c.base, resp.Status, snippet(raw))
}
