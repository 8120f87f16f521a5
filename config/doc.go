// Package config loads and validates mcpgate's YAML configuration.
//
// [Load] reads a file and [Parse] reads bytes; both decode strictly, fill
// unset keys from the Default... constants ([Config.ApplyDefaults]) and
// check the result ([Config.Validate]), reporting every problem at once as
// an errors.Join of [*FieldError], each naming file, line, column and key
// path:
//
//	mcpgate.yaml:7:5: upstreams[0].tols: unknown field (did you mean "tools"?)
//	mcpgate.yaml:9:14: upstreams[0].timeout: "5" is not a duration; use a number with a unit: ms, s, m or h (e.g. "30s", "1m30s")
//
// [Default] is the configuration of the one-line mode
// `mcpgate serve --upstream URL`.
//
// # File format
//
// One YAML document (a mapping). Decoding is strict: an unknown key, a
// duplicate key, a value of the wrong type (a number or true/false where a
// string belongs — quote it; durations are strings such as "30s"), a
// second document after ---, YAML tags (!!str) and merge keys (<<) are
// errors. Anchors (&name) and aliases (*name) may be used to repeat a
// value. An absent key, an empty value (key:), "" and 0 all mean "use the
// default". Durations are Go duration strings ("500ms", "30s", "1m30s",
// "0s"); they must not be negative. The file may be at most
// [MaxConfigBytes] bytes of UTF-8.
//
// Relative paths (policy.dirs, store.bolt.path, rights.file.path,
// assertion.keys_file) are relative to the configuration file's directory
// with [Load], to the working directory with [Parse]. Sections that switch
// something on (auth, auth.gateway_tokens, store, rights, admin_api) are
// off when absent or empty (key:); write {} for one with its defaults.
//
// # Keys
//
// The doc comment of each field of [Config] and the types below it is
// the reference of its key: docs/reference/configuration.md is generated
// from those comments (key path, type, default, meaning) and from
// [Config.ApplyDefaults] by go generate, and a test fails when it is
// stale. A comment states the key's unit; its last paragraph may state
// the default ("Default: …") or that the key is required ("Required.").
//
// # Example
//
// The smallest useful file (see examples/minimal.yaml):
//
//	upstreams:
//	  - name: crm
//	    url: http://127.0.0.1:3000/mcp
package config

//go:generate go test -run ^TestConfigurationReference$ -update .
