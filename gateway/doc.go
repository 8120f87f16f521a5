// Package gateway is mcpgate's transport-neutral pipeline. Adapters (the
// standalone proxy in gateway/proxy, the Envoy ext_proc service in
// gateway/extproc) translate their transport into a Request, ask the
// Pipeline for a Verdict, forward or answer, and feed the upstream's
// response back through the Exchange.
//
// The package never imports net/http or gRPC: it sees method, path, header
// fields and body bytes, and answers with data.
//
// # Request stages
//
// Pipeline.HandleRequest runs the stages of requestStages (stages.go) in
// this order; the first that answers or forwards the request ends the
// request side. Stages that do not apply to a request pass it on.
//
//	transport      transport.go      repeated or joined header fields, Connection, Origin
//	documents      documents.go      protected resource metadata (RFC 9728), assertion keys (JWKSPath)
//	query          query.go          a query parameter that would choose a tenant
//	method         transport.go      OPTIONS preflight, GET/DELETE without a message, 405
//	parse          parse.go          Content-Type, content coding, body size, JSON-RPC, method, MCP headers
//	expose         expose.go         the name a tools/call calls its tool by → the tool's own name
//	authenticate   authenticate.go   the credential (Authenticator), the toolset it is bound to
//	kill_switch    killswitch.go     global and tenant kill switches (503)
//	session        session.go        Mcp-Session-Id bound to its principal (older revisions)
//	capabilities   extensions.go     client capabilities mcpgate does not relay
//	federation     federation.go     federated route: unknown names, ping, methods not federated
//	relay          forward.go        GET stream, DELETE, a client's response: forwarded undecided
//	gateway_tools  confirm.go        confirm_action, reject_action, list_recent_changes, approvals
//	catalog        catalog.go        the catalog's entry of the tool, or the list for tools/list
//	policy         decide.go         the policy decision (phase "request"); refusals, audit
//	tasks          tasks.go          task-augmented calls and the tasks/* methods
//	tools_list     catalog.go        tools/list answered from the catalog
//	federated      federation.go     federated route: lists, initialize, server/discover answered
//	arguments      catalog.go        Mcp-Param-* against the arguments, coerced arguments
//	shaping        response.go       how the answer will be inspected and shaped
//	limits         limits.go         rate buckets, concurrency, loop brake, deadline
//	write_safety   writes.go         replay window, two-step confirmation
//	forward        forward.go        header mutations, identity assertion (assertion.go), audit (audit.go)
//
// # Response phases
//
// HandleRequest returns the Exchange, which carries the request's state to
// the answer. An adapter drives it through the Phases interface
// (phases.go), one call per phase:
//
//	ResponseHeaders  response.go   how the body is relayed: untouched, buffered JSON, or event by event
//	ResponseBody     response.go   a buffered JSON answer, decoded and shaped
//	ResponseEvents   phases.go     a chunk of an event stream, shaped event by event (EventRewriter),
//	                               ended by a kill switch (killswitch.go)
//	End              phases.go     metrics, slots and claims released; the answer in place of a failed
//	                               upstream's (failure.go)
//
// An adapter that is done with the exchange after End may give it back
// with Release (stages.go) for a later request to reuse; the ext_proc
// adapter does when its stream ends.
package gateway
