// Package rights answers, for every call, what a person may do now: the
// live rights of subject S in tenant T and whether S is still active.
//
// The gateway computes effective rights on every tools/list and
// tools/call as
//
//	effective = Intersect(token rights, live rights)
//
// where the live rights come from a [Source]. A subject whose [Live] says
// Active == false (deactivated, or unknown to the source) makes every
// credential they created fail: the gateway answers 401. An error from a
// source means "the answer is not known now"; every such error wraps
// [ErrUnavailable] and the gateway fails closed (503 with Retry-After).
// A removed subject is never an error: it is Live{Active: false}.
//
// # Sources
//
//   - [HTTPSource] ([NewHTTP]) asks the product that owns the people and
//     their rights, one GET per lookup. The wire contract a product team
//     implements is documented on [HTTPSource].
//   - [FileSource] ([NewFile]) reads a YAML or JSON file and re-reads it
//     when it changes on disk, so an edit takes effect on the next call.
//     The format is documented on [FileSource].
//   - [Static] is an in-memory source for fixed deployments, the demo and
//     tests of the packages that consume rights.
//
// [Cached] ([NewCached]) wraps any source with a bounded cache and
// [Instrument] wraps any source with Prometheus metrics.
//
// # Staleness and revocation
//
// Without [Cached], every lookup asks the source, so a change is seen on
// the next call. With [Cached], an answer (active or inactive) is reused
// for at most CacheOptions.MaxStaleness, counted from the moment the
// source was asked; MaxStaleness zero disables caching entirely. An
// explicit revocation ([Cached.Invalidate], [Cached.InvalidateAll])
// takes effect on the next lookup, including lookups that would otherwise
// have joined a source call already in flight. Errors are never cached.
//
// # Failing closed
//
// Sources never guess: a timeout, a refused connection, an unexpected
// HTTP status, a malformed answer, an unreadable or invalid rights file
// all return an error wrapping [ErrUnavailable] whose message names the
// source and the reason (never credentials). In particular a rights file
// edited into an invalid state does not keep serving its previous content:
// lookups fail until the file is valid again.
package rights
