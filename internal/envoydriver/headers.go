package envoydriver

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// Limits of Envoy's HTTP connection manager that header mutations are checked
// against (max_request_headers_count default 100, max_request_headers_kb
// default 60), see MutationUtils::responseHeaderSizeCheck and
// headerMutationResultCheck in source/extensions/filters/http/ext_proc/mutation_utils.cc.
const (
	maxHeadersCount = 100
	maxHeadersBytes = 60 * 1024
)

// header is one entry of a headerMap; key is lower case, as in Envoy.
type header struct {
	key, value string
}

// headerMap models Envoy's Http::HeaderMap: an ordered multimap with lower
// case keys where pseudo-headers (":name") come before regular headers.
type headerMap struct {
	entries []header
}

func (h *headerMap) first(key string) (string, bool) {
	for _, e := range h.entries {
		if e.key == key {
			return e.value, true
		}
	}
	return "", false
}

func (h *headerMap) has(key string) bool {
	_, ok := h.first(key)
	return ok
}

func (h *headerMap) remove(key string) {
	out := h.entries[:0]
	for _, e := range h.entries {
		if e.key != key {
			out = append(out, e)
		}
	}
	clear(h.entries[len(out):])
	h.entries = out
}

// add appends an entry; a pseudo-header goes after the last pseudo-header.
func (h *headerMap) add(key, value string) {
	if !strings.HasPrefix(key, ":") {
		h.entries = append(h.entries, header{key, value})
		return
	}
	i := 0
	for i < len(h.entries) && strings.HasPrefix(h.entries[i].key, ":") {
		i++
	}
	h.entries = append(h.entries, header{})
	copy(h.entries[i+1:], h.entries[i:])
	h.entries[i] = header{key, value}
}

// set replaces every value of key with one value (HeaderMapImpl::setCopy with
// the remove-all-then-add behaviour of current Envoy).
func (h *headerMap) set(key, value string) {
	h.remove(key)
	h.add(key, value)
}

func (h *headerMap) byteSize() int {
	n := 0
	for _, e := range h.entries {
		n += len(e.key) + len(e.value)
	}
	return n
}

// proto encodes the map as Envoy does when send_header_raw_value is on (the
// default): every value in raw_value, keys lower case, in map order.
func (h *headerMap) proto() *corev3.HeaderMap {
	out := &corev3.HeaderMap{Headers: make([]*corev3.HeaderValue, 0, len(h.entries))}
	for _, e := range h.entries {
		out.Headers = append(out.Headers, &corev3.HeaderValue{Key: e.key, RawValue: []byte(e.value)})
	}
	return out
}

// contentLength reports the content-length header when it parses as Envoy's
// absl::SimpleAtoi would (a non-negative decimal).
func (h *headerMap) contentLength() (int64, bool) {
	v, ok := h.first("content-length")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// hopByHop lists the connection-level headers Envoy's codecs and connection
// manager strip; they never reach the ext_proc server or the other side.
var hopByHop = map[string]bool{
	"connection":        true,
	"keep-alive":        true,
	"proxy-connection":  true,
	"transfer-encoding": true,
	"upgrade":           true,
}

// fromHTTP appends the regular headers of an http.Header, lower-cased, in
// sorted key order (Go does not keep the wire order).
func (h *headerMap) fromHTTP(hdr http.Header) {
	for _, k := range sortedKeys(hdr) {
		lk := strings.ToLower(k)
		if hopByHop[lk] {
			continue
		}
		if lk == "te" {
			// Envoy keeps TE only as "trailers" (Utility::sanitizeConnectionHeader).
			for _, v := range hdr[k] {
				if strings.Contains(strings.ToLower(v), "trailers") {
					h.add("te", "trailers")
					break
				}
			}
			continue
		}
		for _, v := range hdr[k] {
			h.add(lk, v)
		}
	}
}

// toHTTP copies the regular (non-pseudo) headers except those in skip.
func (h *headerMap) toHTTP(dst http.Header, skip map[string]bool) {
	for _, e := range h.entries {
		if strings.HasPrefix(e.key, ":") || skip[e.key] {
			continue
		}
		k := http.CanonicalHeaderKey(e.key)
		dst[k] = append(dst[k], e.value)
	}
}

// mutationOp is Filters::Common::MutationRules::CheckOperation.
type mutationOp int

const (
	opSet mutationOp = iota
	opAppend
	opRemove
)

// mutationAllowed applies Envoy's default HeaderMutationRules (the filter's
// mutation_rules left unset), see Checker::isAllowed and Checker::isValidValue
// in source/extensions/filters/common/mutation_rules/mutation_rules.cc:
//   - "host" and any ":" header can never be removed;
//   - the routing headers host, :authority, :method and :scheme are never
//     changed (allow_all_routing defaults to false);
//   - ":" headers cannot be appended to (they are single valued);
//   - "x-envoy-*" headers are never changed (allow_envoy defaults to false);
//   - set values must be valid (and :status a number >= 200).
//
// A disallowed mutation is ignored and counted (disallow_is_error is false).
func mutationAllowed(op mutationOp, name, value string) bool {
	if op == opRemove && (strings.HasPrefix(name, ":") || name == "host") {
		return false
	}
	switch name {
	case "host", ":authority", ":method", ":scheme":
		return false
	}
	if strings.HasPrefix(name, ":") && op == opAppend {
		return false
	}
	if strings.HasPrefix(name, "x-envoy") {
		return false
	}
	if op == opRemove {
		return true
	}
	if !strings.HasPrefix(name, ":") && !validHeaderValue(value) {
		return false
	}
	if name == ":status" {
		n, err := strconv.ParseUint(value, 10, 32)
		if err != nil || n < 200 {
			return false
		}
	}
	return true
}

// validHeaderName mirrors HeaderUtility::headerNameIsValid: a pseudo-header
// name after ":" and any other name must be made of token characters.
func validHeaderName(name string) bool {
	name = strings.TrimPrefix(name, ":")
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !isTokenChar(name[i]) {
			return false
		}
	}
	return true
}

func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// validHeaderValue mirrors HeaderUtility::headerValueIsValid (nghttp2's
// check): no control characters other than horizontal tab.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c != '\t' && (c < 0x20 || c == 0x7f) {
			return false
		}
	}
	return true
}

// errMutation marks an invalid mutation: Envoy answers it with a 500 local
// reply (it is not "spurious").
var errMutation = errors.New("invalid header mutation")

// applyHeaderMutation applies a HeaderMutation the way
// MutationUtils::applyHeaderMutations does in current Envoy:
//   - removals first, then sets, in order;
//   - only the deprecated "append" BoolValue is honoured (default false, i.e.
//     overwrite); append_action is ignored by ext_proc (envoyproxy/envoy
//     issue #36982, PRs #29862 and #37139 were closed unmerged);
//   - the value is read from raw_value (send_header_raw_value is on by
//     default); setting both value and raw_value is an error;
//   - with skipContentLength (ProcessorState::shouldRemoveContentLength)
//     content-length sets are skipped silently;
//   - when replacing (CONTINUE_AND_REPLACE) :method may be changed.
//
// It returns the number of mutations ignored by the rules and an error
// wrapping errMutation for mutations Envoy rejects outright.
func applyHeaderMutation(m *extprocv3.HeaderMutation, h *headerMap, replacing, skipContentLength bool) (ignored int, err error) {
	if m == nil {
		return 0, nil
	}
	if len(m.GetRemoveHeaders()) > maxHeadersCount || len(m.GetSetHeaders()) > maxHeadersCount {
		return 1, fmt.Errorf("%w: %d removals or %d sets exceed the header count limit %d",
			errMutation, len(m.GetRemoveHeaders()), len(m.GetSetHeaders()), maxHeadersCount)
	}
	for _, name := range m.GetRemoveHeaders() {
		if !validHeaderName(name) {
			return ignored + 1, fmt.Errorf("%w: invalid character in remove_headers %q", errMutation, name)
		}
		name = strings.ToLower(name)
		if !mutationAllowed(opRemove, name, "") {
			ignored++
			continue
		}
		h.remove(name)
	}
	for _, opt := range m.GetSetHeaders() {
		hv := opt.GetHeader()
		if hv == nil {
			continue
		}
		if skipContentLength && strings.EqualFold(hv.GetKey(), "content-length") {
			continue
		}
		if hv.GetValue() != "" && len(hv.GetRawValue()) > 0 {
			return ignored + 1, fmt.Errorf("%w: both value and raw_value set for %q", errMutation, hv.GetKey())
		}
		value := string(hv.GetRawValue())
		if !validHeaderName(hv.GetKey()) || !validHeaderValue(value) {
			return ignored + 1, fmt.Errorf("%w: invalid character in set_headers %q", errMutation, hv.GetKey())
		}
		name := strings.ToLower(hv.GetKey())
		appendValue := opt.GetAppend().GetValue()
		op := opSet
		if appendValue && h.has(name) {
			op = opAppend
		}
		ok := mutationAllowed(op, name, value)
		if replacing && name == ":method" {
			ok = true
		}
		if !ok {
			ignored++
			continue
		}
		if appendValue {
			h.add(name, value)
		} else {
			h.set(name, value)
		}
	}
	if h.byteSize() > maxHeadersBytes || len(h.entries) > maxHeadersCount {
		return ignored + 1, fmt.Errorf("%w: headers exceed the size limits after mutation", errMutation)
	}
	return ignored, nil
}
