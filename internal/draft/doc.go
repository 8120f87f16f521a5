// Package draft writes a draft configuration for one live MCP upstream
// (`mcpgate init`): a declaration per listed tool with a proposed effect
// class, right and untrusted_text paths, each marked in a YAML comment as a
// guess with its reason, and the lint findings of the tool definitions.
//
// The guesses read the tool's name, its annotations (hints only) and its
// schemas. Where they disagree or say nothing, the most guarded class
// (MostGuarded) is proposed: a person confirms every call until a
// reviewer says otherwise.
package draft
