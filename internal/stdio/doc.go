// Package stdio serves an MCP server that speaks the stdio transport (a
// child process reading JSON-RPC messages on standard input and writing
// them on standard output, one per line) as a streamable-HTTP MCP endpoint
// on loopback: the bridge. mcpgate points an upstream's URL at its bridge,
// so the pipeline, the standalone proxy and Envoy treat a stdio server as
// any HTTP upstream. The bridge answers only requests that carry its
// per-process secret (SecretHeader), which the pipeline's forward stage
// sends as the upstream's credential.
//
// # Process model
//
// One child per bridge, shared by every client. The bridge initializes it
// once (offering revision 2025-11-25) and answers clients' initialize and
// server/discover itself from the child's result. Client requests reach the
// child under ids of the bridge, and progress tokens under tokens of the
// bridge, both restored byte-exact in what comes back; the rest of every
// message is relayed as the child wrote it. A progress notification goes
// to the exchange whose token it names; a log message, and a request of
// the child (elicitation, sampling, roots), to the one call in flight (the
// stdio transport does not say which call they belong to: with several in
// flight a request of the child is refused); other notifications go to the
// open notification streams (GET, subscriptions/listen). For a 2026-07-28
// call a request of the child becomes an input_required round (rounds.go).
//
// # Sessions
//
// For revisions before 2026-07-28 the bridge keeps streamable-HTTP sessions
// per client (session.go): the answer to initialize carries a new
// Mcp-Session-Id, which every later message, GET stream and DELETE of the
// client carries (400 without, 404 unknown or ended); DELETE ends the
// session with its streams and calls in flight. At most
// Options.MaxSessions are held; beyond that the one idle the longest ends.
// Sessions scope exchanges only: they all reach the one child, whose state
// stays shared. 2026-07-28 requests have no session.
//
// # Lifecycle
//
// The child runs in a process group of its own. Readiness waits for its
// initialize answer (Options.StartTimeout); a child that exits is restarted
// with backoff, and the calls it had received fail the way a broken HTTP
// upstream does (the exchange is aborted), so the pipeline records a
// write's outcome as unknown. Standard error is always drained into the log
// within a rate. Close closes the child's standard input, waits
// Options.StopGrace, sends SIGTERM to the group, waits again, then
// SIGKILL, and reaps the child.
package stdio
