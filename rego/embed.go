// Package rego holds mcpgate's default Rego policies and their tests,
// embedded so that the binary needs no files to run.
//
// Default holds, at its root, the default policy (mcpgate.rego) and its
// tests (mcpgate_test.rego), and under examples/ the example policies, each
// in its own directory with its tests. Every policy is `package mcpgate` in
// Rego v1 syntax and defines data.mcpgate.decision; the documents it reads
// and returns are described by policy/input.schema.json and
// policy/decision.schema.json.
//
// The policy engine (package policy) loads the root of Default, leaving out
// examples/ and the _test.rego files.
package rego

import "embed"

// Default is the embedded tree of default and example policies.
//
//go:embed *.rego examples/*/*.rego
var Default embed.FS

// ExamplesDir is the directory of Default that holds the example policies.
const ExamplesDir = "examples"
