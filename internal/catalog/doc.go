// Package catalog is mcpgate's own listing of each upstream's tools: the
// tool catalog, and the pinned manifest that protects against a tool whose
// definition changes after it was approved (a "rug pull").
//
// # Listing
//
// List connects to an upstream with the official MCP Go SDK client over
// the streamable HTTP transport, speaking the newest protocol revision the
// SDK supports (2026-07-28, server/discover) and falling back the way the
// SDK does (initialize with 2025-11-25 and older). Every request carries
// the header fields of Upstream.Header: mcpgate's identity assertion for
// the catalog's own identity (see Identity and SignedHeader), never a
// client's credential. It reads every page of tools/list with explicit
// cursors (MCP specification, "Pagination": a result's nextCursor is
// opaque and is sent back as params.cursor until a result has none) and
// stops with an error when a cursor comes back a second time (the
// upstream's pagination does not advance) or when more than
// ListOptions.MaxPages pages would be needed.
//
// Each tool object is kept exactly as the upstream listed it (the raw JSON
// of the tools/list result, not the SDK's decoding of it, which drops
// unknown members and rewrites annotations), together with its definition
// hash (see Tool.Hash): RFC 8785 canonical JSON, so that member order,
// white space and number spelling do not change it and any change to the
// name, title, description, schemas or annotations does.
//
// # Catalog
//
// A Catalog keeps the latest successful listing (a Snapshot) of every
// configured upstream, refreshes it on a timer and on demand (Refresh, e.g.
// when the pipeline sees notifications/tools/list_changed from the
// upstream), and keeps the previous snapshot when a listing fails. Reading
// a snapshot (Catalog.Snapshot) is one atomic load.
//
// # Pinning
//
// A Manifest (written by `mcpgate manifest pin`, a JSON file) pins the
// approved definition hash of every tool of every upstream. Manifest.State
// tells whether a listed tool is approved (its hash equals its pin),
// changed (it differs) or unpinned (no pin); Manifest.Diff also reports
// pins whose tool the upstream no longer lists (missing). The Catalog logs
// each change of a tool's state once, counts it, and reports it to
// Options.OnDrift for the audit log.
//
// Metrics (all labelled by upstream name, from the configuration):
//
//	mcpgate_catalog_refreshes_total{upstream,result}           listings, result "ok" or "failure"
//	mcpgate_catalog_tools{upstream}                            tools in the latest snapshot
//	mcpgate_catalog_refused_tools{upstream}                    tools left out of the latest snapshot (bad names, invalid x-mcp-header)
//	mcpgate_catalog_last_success_timestamp_seconds{upstream}   Unix time of the latest successful listing
//	mcpgate_catalog_drift_total{upstream,state}                tools that entered state "changed", "unpinned" or "missing"
//	mcpgate_catalog_unapproved_tools{upstream,state}           tools now in state "changed", "unpinned" or "missing"
package catalog
