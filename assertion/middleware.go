package assertion

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
)

// RejectionCode is the JSON-RPC error code of the answer Middleware sends
// when an assertion is refused (an implementation-defined server error,
// JSON-RPC 2.0 section 5.1).
const RejectionCode = -32001

// Middleware verifies the assertion in the Header of every request before
// next runs. On success the request reaches next with the Identity in its
// context (FromContext) and without the Header, so the assertion is not
// logged or forwarded further by accident. On failure next does not run and
// the answer is HTTP 401 with Content-Type application/json and a JSON-RPC
// 2.0 error for id null:
//
//	{"jsonrpc":"2.0","id":null,"error":{"code":-32001,
//	 "message":"mcpgate assertion rejected: expired","data":{"reason":"expired"}}}
//
// The message and data name the Reason only, never the token. A request with
// the header more than once is refused as malformed.
func (v *Verifier) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var id *Identity
		var err error
		switch vals := r.Header.Values(Header); len(vals) {
		case 0:
			err = fail(ReasonMissing, "no "+Header+" header", nil)
		case 1:
			id, err = v.Verify(r.Context(), strings.TrimSpace(vals[0]))
		default:
			err = fail(ReasonMalformed, "more than one "+Header+" header", nil)
		}
		if err != nil {
			writeRejection(w, err)
			return
		}
		r2 := r.WithContext(NewContext(r.Context(), id))
		r2.Header = r.Header.Clone()
		r2.Header.Del(Header)
		next.ServeHTTP(w, r2)
	})
}

func writeRejection(w http.ResponseWriter, err error) {
	reason := ReasonMalformed
	var ae *Error
	if errors.As(err, &ae) {
		reason = ae.Reason
	}
	type rpcError struct {
		Code    int               `json:"code"`
		Message string            `json:"message"`
		Data    map[string]Reason `json:"data"`
	}
	body, _ := json.Marshal(struct {
		JSONRPC string   `json:"jsonrpc"`
		ID      *int     `json:"id"`
		Error   rpcError `json:"error"`
	}{
		JSONRPC: "2.0",
		Error: rpcError{
			Code:    RejectionCode,
			Message: "mcpgate assertion rejected: " + string(reason),
			Data:    map[string]Reason{"reason": reason},
		},
	})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write(body)
}

// JWKSHandler serves the signer's current public JWK Set (JWKS) for GET and
// HEAD, with Content-Type application/jwk-set+json (RFC 7517 section 8.5.1)
// and Cache-Control max-age=60; other methods get 405. Mount it at JWKSPath.
func (s *Signer) JWKSHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "application/jwk-set+json")
		h.Set("Cache-Control", "public, max-age=60")
		body := s.JWKS()
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(body)
	})
}
