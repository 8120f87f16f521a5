// Package envoydriver plays Envoy's part of the ext_proc protocol so that
// mcpgate's ext_proc server can be tested end to end without Envoy: a Driver
// is an http.Handler that behaves like the HTTP filter chain
// "envoy.filters.http.ext_proc → router", the router forwarding to one
// upstream or choosing among routes (Config.Routes). For every HTTP
// request it opens one ExternalProcessor.Process stream (a real gRPC client),
// sends the messages Envoy would send, applies the answers with Envoy's
// rules, forwards to the real upstream over HTTP and relays the response back
// through the processor.
//
//	client ──HTTP──► Driver ──gRPC──► ext_proc server (mcpgate)
//	                   └─────HTTP──► upstream MCP server
//
// The rules follow Envoy's source (source/extensions/filters/http/ext_proc/
// ext_proc.cc, processor_state.cc, mutation_utils.cc, client_impl.cc;
// source/extensions/filters/common/mutation_rules/mutation_rules.cc;
// source/common/http/filter_manager.cc and utility.cc for local replies;
// conn_manager_impl.cc and router/config_impl.cc for choosing routes) with
// the runtime guards at their defaults, and the ext_proc protos of
// go-control-plane envoy v1.40.0. In short:
//
//   - Request headers go with the pseudo-headers (:authority, :path, :method,
//     :scheme first), values in raw_value, end_of_stream when there is no
//     body, the x-request-id and x-forwarded-proto the connection manager
//     adds, protocol_config in the first message and attributes in the first
//     message of each direction. Response headers carry :status and the
//     router's x-envoy-upstream-service-time.
//   - Each message has one timer (message_timeout, default 200ms).
//     override_message_timeout restarts it once per message when within
//     [1ms, max_message_timeout]; otherwise it is ignored. Expiry answers 504,
//     or continues unprocessed with failure_mode_allow.
//   - BUFFERED sends the whole body in one message with end_of_stream; the
//     headers are held until it is answered, header mutations in the body
//     answer apply, and a body mutation whose length differs from a
//     content-length header still present is answered 500. A body over the
//     buffer limit is answered 413 (request) or 500 (response). If the whole
//     body arrived while the headers were being processed it goes in one
//     message, handled as buffered, whatever the mode.
//   - STREAMED sends each chunk as it arrives, without waiting for earlier
//     answers, and applies answers in order; header mutations in body answers
//     are ignored; content-length is removed (after the headers message was
//     built, so the processor still sees it) and set_headers of
//     content-length are skipped. Processed response chunks are flushed to
//     the client at once.
//   - CONTINUE_AND_REPLACE in a headers answer replaces the body with
//     body_mutation, removes content-length, may change :method and skips the
//     body phase.
//   - mode_override is honoured only with allow_mode_override and only while
//     a headers message is outstanding; header and trailer modes left DEFAULT
//     keep the configured mode, both body modes are always taken as given.
//   - Header mutations: removals then sets; only the deprecated append flag
//     counts (default false: overwrite), append_action is ignored; values come
//     from raw_value; host, :authority, :method, :scheme and x-envoy-* are
//     never changed, ":" headers and host never removed; such mutations are
//     ignored and counted, while invalid names or values, or value and
//     raw_value both set, are answered 500.
//   - A response for a phase that is not outstanding (or with no case set) is
//     spurious: 500, or continue unprocessed with failure_mode_allow. A
//     non-OK gRPC status is answered 500 (or continues); an OK status before
//     the end makes the filter continue unprocessed even without
//     failure_mode_allow.
//   - ImmediateResponse: status (default and minimum 200), header mutations
//     under the same rules, body; a non-empty body gets content-length and
//     text/plain unless a content-type was set, an empty one loses both.
//     Once response headers were sent to the client, any local reply resets
//     the stream instead (the handler panics with http.ErrAbortHandler).
//     Local replies of the filter manager and router (413, 503) go through
//     the ext_proc encoder like any response; ext_proc's own do not.
//   - Routes (Config.Routes) are matched in order on :path (query left
//     out) and exact header values; the connection manager chooses the
//     route on the client's headers before any filter runs (conn_manager_impl.cc
//     ActiveStream::decodeHeaders → refreshCachedRoute) and the router uses
//     the cached route, choosing again on the headers as they are then only
//     after the cache was cleared. No route: 404 route_not_found; a direct
//     response route answers itself; a route's request_headers_to_remove
//     are removed from what the router forwards. An answer clears the cache as
//     DecodingProcessorState::clearRouteCache does: request direction only,
//     only with a header mutation, clear_route_cache under DEFAULT, always
//     under CLEAR, never under RETAIN (disable_clear_route_cache: RETAIN).
//   - The stream is half-closed once nothing more will be sent (the
//     stream-close optimisation) or when the request ends, and reset at once
//     after errors, timeouts and spurious messages.
//   - Client connections are kept alive between requests (HTTP/1.1); a
//     response that starts before the request's body has ended carries
//     "Connection: close" and the connection is closed after it, as the
//     HTTP/1 codec does with a request not complete when its response is.
//
// Not modelled: route matching beyond exact paths and exact header values
// (prefixes, regular expressions, virtual host domains, weighted clusters),
// BUFFERED_PARTIAL, FULL_DUPLEX_STREAMED and GRPC body modes,
// trailers (never sent), observability_mode, send_body_without_waiting_for_
// header_response, per-route overrides other than gRPC initial metadata,
// dynamic metadata, route timeouts, retries, HTTP/2 downstream.
package envoydriver
