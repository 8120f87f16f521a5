package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// Load reads the configuration file at path and returns it decoded,
// defaulted and validated, as Parse does. Relative paths (policy.dirs,
// store.bolt.path, rights.file.path, assertion.keys_file) are resolved
// against the directory of path (not the working directory), and the
// returned Config holds the resolved paths.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return parse(data, path, filepath.Dir(path))
}

// Parse decodes a configuration from data and returns it defaulted and
// validated. source names the data in error messages (e.g. its file name).
// Relative paths (policy.dirs, store.bolt.path, rights.file.path,
// assertion.keys_file) stay relative to the working directory.
//
// Decoding is strict: an unknown key, a duplicate key, a value of the
// wrong type (a number where a string belongs: quote it), more than one
// YAML document, YAML tags and merge keys (<<) are errors; anchors and
// aliases are allowed. Then ApplyDefaults fills unset keys, and Validate
// checks the result.
//
// The error is an errors.Join of *FieldError, one per problem, each with
// source, line, column and key path, in order of position. Every problem
// is reported, not only the first; a value that cannot be decoded is
// reported once (what Validate would say about it is left out).
func Parse(data []byte, source string) (*Config, error) {
	return parse(data, source, "")
}

func parse(data []byte, source, baseDir string) (*Config, error) {
	r := decodeConfig(data)
	errs := r.errs
	if r.cfg != nil {
		resolvePaths(r.cfg, baseDir)
		r.cfg.ApplyDefaults()
		for _, e := range r.cfg.validate() {
			if r.hasFailed(e.Path) || r.failedBelow(e.Path) {
				continue
			}
			if pos, ok := r.dec.position(e.Path); ok {
				e.Line, e.Column = pos.Line, pos.Column
			}
			errs = append(errs, e)
		}
	}
	if len(errs) == 0 {
		return r.cfg, nil
	}
	slices.SortStableFunc(errs, func(a, b *FieldError) int {
		// Positioned problems in document order, then the rest.
		if (a.Line == 0) != (b.Line == 0) {
			return cmp.Compare(b.Line, a.Line)
		}
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
	if len(errs) > maxProblems {
		more := &FieldError{Msg: fmt.Sprintf("%d more problems not shown", len(errs)-maxProblems)}
		errs = append(errs[:maxProblems:maxProblems], more)
	}
	for _, e := range errs {
		e.Source = source
	}
	return nil, errs.join()
}

// resolvePaths makes the relative paths of the configuration (policy
// directories, the bolt file, the rights file, the assertion keys file)
// relative to baseDir.
func resolvePaths(c *Config, baseDir string) {
	if baseDir == "" {
		return
	}
	for i, d := range c.Policy.Dirs {
		if d != "" && !filepath.IsAbs(d) {
			c.Policy.Dirs[i] = filepath.Join(baseDir, d)
		}
	}
	resolveIdentityPaths(c, baseDir)
	resolvePolicyOpsPaths(c, baseDir)
	resolveCredentialPaths(c, baseDir)
	resolveCommandPaths(c, baseDir)
}

// decodeResult is the outcome of decoding, before defaults and validation.
type decodeResult struct {
	// cfg is the decoded configuration, nil when nothing could be decoded
	// (a syntax error, an empty file). When errs is not empty it holds
	// what could be decoded, so that Validate can report problems
	// elsewhere in the file at the same time.
	cfg  *Config
	errs problems
	dec  *decoder
	// checked is the walker's result, kept for tests that compare it with
	// goccy/go-yaml's (they must agree whenever both succeed).
	checked *Config
}

// hasFailed reports whether path is at or below a value that could not be
// decoded.
func (r *decodeResult) hasFailed(path string) bool {
	for _, f := range r.dec.failed {
		if under(path, f) {
			return true
		}
	}
	return false
}

// failedBelow reports whether a value below path could not be decoded:
// then what Validate says about path as a whole (e.g. a tool declaration
// one of whose rights is a number) is a consequence, not news.
func (r *decodeResult) failedBelow(path string) bool {
	for _, f := range r.dec.failed {
		if under(f, path) {
			return true
		}
	}
	return false
}

var utf8BOM = []byte("\xef\xbb\xbf")

// decodeConfig parses data as one YAML document and decodes it into a
// Config. It runs the document through two decoders: the schema walker in
// decode.go, which reports every unknown key and mistyped value with its
// path and records positions, and then, if the walker found nothing,
// goccy/go-yaml's own decoder in strict mode (unknown fields are errors),
// whose result is the one returned.
func decodeConfig(data []byte) (r decodeResult) {
	r.dec = newDecoder()
	data = bytes.TrimPrefix(data, utf8BOM)
	if e := precheck(data); e != nil {
		r.errs = append(r.errs, e)
		return r
	}
	defer func() {
		// The YAML library is third-party code run on operator input: a
		// panic in it becomes a problem report, not a crash.
		if v := recover(); v != nil {
			r.cfg = nil
			r.errs = append(r.errs, &FieldError{Msg: fmt.Sprintf("YAML decoder failed: %v", v)})
		}
	}()
	// Duplicate keys are allowed by the parser only so that the walker can
	// report each one with its key path; the walker rejects them all.
	file, err := parser.ParseBytes(data, 0, parser.AllowDuplicateMapKey())
	if err != nil {
		r.errs = append(r.errs, yamlProblem(err))
		return r
	}
	var body ast.Node
	for _, doc := range file.Docs {
		if doc == nil || doc.Body == nil {
			continue
		}
		if _, ok := doc.Body.(*ast.DirectiveNode); ok {
			continue // %YAML or %TAG before ---: the parser returns it as a document of its own
		}
		if body != nil {
			e := &FieldError{Msg: "more than one YAML document (---); put the whole configuration in one"}
			if p, ok := nodePos(doc.Body); ok {
				e.Line, e.Column = p.Line, p.Column
			}
			r.errs = append(r.errs, e)
			return r
		}
		body = doc.Body
	}
	if body == nil {
		r.errs = append(r.errs, &FieldError{Msg: "the configuration is empty; at least one upstream is required"})
		return r
	}
	if _, isNull := body.(*ast.NullNode); isNull {
		r.errs = append(r.errs, &FieldError{Msg: "the configuration is empty (null); at least one upstream is required"})
		return r
	}

	checked := new(Config)
	r.dec.decodeRoot(body, checked)
	r.checked = checked
	if len(r.dec.errs) > 0 {
		r.errs = append(r.errs, r.dec.errs...)
		if r.dec.nodes <= maxNodes {
			// Validate what could be decoded, to report its problems too;
			// but not a configuration cut short by the size bound.
			r.cfg = checked
		}
		return r
	}
	strict := new(Config)
	if err := yaml.NodeToValue(body, strict, yaml.Strict()); err != nil {
		e := yamlProblem(err)
		r.errs = append(r.errs, e)
		r.dec.failed = append(r.dec.failed, "")
		return r
	}
	r.cfg = strict
	return r
}

// yamlProblem turns an error of goccy/go-yaml into a positioned problem.
func yamlProblem(err error) *FieldError {
	e := &FieldError{Msg: err.Error(), Err: err}
	var ye yaml.Error
	if errors.As(err, &ye) {
		e.Msg = ye.GetMessage()
		if tk := ye.GetToken(); tk != nil && tk.Position != nil {
			e.Line, e.Column = tk.Position.Line, tk.Position.Column
		}
	}
	if strings.Contains(e.Msg, "already defined at") {
		e.Msg = "duplicate key: " + e.Msg
	}
	return e
}
