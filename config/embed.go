package config

import _ "embed"

// Quickstart is config/examples/quickstart.yaml, the configuration of
// `mcpgate demo`, embedded so the demo needs no files.
//
//go:embed examples/quickstart.yaml
var Quickstart []byte
