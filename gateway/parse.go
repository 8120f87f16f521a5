package gateway

import (
	"context"
	"errors"
	"mime"
	"strconv"
	"strings"

	"github.com/mcpgate/mcpgate/gateway/mcp"
)

// parseMessage reads the JSON-RPC message of a POST: Content-Type, the
// body's content coding and size, strict JSON, the JSON-RPC shape, a
// method of the request's protocol revision and the standard MCP
// headers against the body. Other methods carry no message.
func (p *Pipeline) parseMessage(_ context.Context, x *Exchange) *Verdict {
	r := x.req
	if r.Method != "POST" {
		return nil
	}
	if !isJSON(r.Header.Get("content-type")) {
		return x.answerAs(OutcomeInvalid, local(415, mcp.ErrorResponse(nil, &mcp.Error{Code: mcp.CodeInvalidRequest, Message: "Content-Type must be application/json"})))
	}
	body, changed, ferr := decodeBody(r.Header.Get("content-encoding"), r.Body, p.opts.MaxBodyBytes)
	if ferr != nil {
		return x.answerAs(OutcomeInvalid, local(ferr.Status, mcp.ErrorResponse(nil, ferr)))
	}
	msg, perr := mcp.ParseInto(&x.reqMsg, body, p.opts.MaxJSONDepth)
	if perr != nil && perr.Code == mcp.CodeInvalidParams && msg != nil && msg.Method != "" &&
		!mcp.KnownMethodIn(mcp.EffectiveVersion(r.Header, msg), msg.Method, msg.Kind) {
		// JSON-RPC: a method that does not exist is reported as such
		// before its params are judged.
		perr = nil
	}
	if perr != nil {
		var id = jsonNull
		if msg != nil && msg.ID != nil {
			id = msg.ID
		}
		return x.answerAs(OutcomeInvalid, local(perr.Status, mcp.ErrorResponse(id, perr)))
	}
	x.msg, x.body, x.bodyChanged = msg, body, changed
	x.label = MethodLabel(msg)
	x.version = mcp.EffectiveVersion(r.Header, msg)
	x.shapeMessages = msg.Kind == mcp.KindRequest && p.shapesMessages()
	if msg.Kind != mcp.KindResponse && !mcp.KnownMethodIn(x.version, msg.Method, msg.Kind) {
		if msg.Kind == mcp.KindNotification {
			return x.answerAs(OutcomeInvalid, local(404, nil))
		}
		return x.answerAs(OutcomeInvalid, local(404, mcp.ErrorResponse(msg.ID, &mcp.Error{Status: 404, Code: mcp.CodeMethodNotFound, Message: "Method not found: " + quote(msg.Method)})))
	}
	if herr := mcp.CheckHeaders(r.Header, msg); herr != nil {
		if msg.Kind == mcp.KindNotification {
			return x.answerAs(OutcomeInvalid, local(herr.Status, nil))
		}
		return x.answerAs(OutcomeInvalid, local(herr.Status, mcp.ErrorResponse(idOrNull(msg.ID), herr)))
	}
	if msg.Kind == mcp.KindResponse && x.version >= mcp.Version20260728 {
		// Revision 2026-07-28 has no server-to-client requests a client
		// could answer on this endpoint.
		return x.answerAs(OutcomeInvalid, local(400, mcp.ErrorResponse(idOrNull(msg.ID), &mcp.Error{Code: mcp.CodeInvalidRequest, Message: "clients do not send JSON-RPC responses in protocol revision " + x.version})))
	}
	return nil
}

// decodeBody undoes a request's Content-Encoding (decodeContent) so the
// pipeline never inspects compressed bytes as JSON: identity passes, gzip
// and deflate (stacked too) are decoded within the body limit (413 above
// it), corrupt data is 400 and any other coding 415.
func decodeBody(encoding string, body []byte, limit int64) ([]byte, bool, *mcp.Error) {
	if limit > 0 && int64(len(body)) > limit {
		return nil, false, tooLarge(limit)
	}
	codings := contentCodings([]string{encoding})
	if len(codings) == 0 {
		return body, false, nil
	}
	out, err := decodeContent(codings, body, limit)
	var ce *codingError
	switch {
	case err == nil:
		return out, true, nil
	case errors.Is(err, errTooLarge):
		return nil, false, tooLarge(limit)
	case errors.Is(err, errUnsupportedCoding) && errors.As(err, &ce):
		return nil, false, &mcp.Error{Status: 415, Code: mcp.CodeInvalidRequest, Message: "Content-Encoding " + quote(ce.Coding) + " is not supported; send identity, gzip or deflate"}
	case errors.As(err, &ce):
		return nil, false, &mcp.Error{Status: 400, Code: mcp.CodeParseError, Message: "request body is not valid " + strings.ToLower(ce.Coding) + ": " + ce.Err.Error()}
	}
	return nil, false, &mcp.Error{Status: 400, Code: mcp.CodeParseError, Message: "request body cannot be decoded"}
}

// TooLarge is the 413 answer for a body over limit bytes; adapters that
// enforce the limit while reading use it too.
func TooLarge(limit int64) *Local {
	e := tooLarge(limit)
	return local(e.Status, mcp.ErrorResponse(jsonNull, e))
}

func tooLarge(limit int64) *mcp.Error {
	return &mcp.Error{Status: 413, Code: mcp.CodeInvalidRequest, Message: "request body exceeds " + strconv.FormatInt(limit, 10) + " bytes"}
}

// isJSON reports whether a Content-Type is application/json (parameters
// and case tolerated) in UTF-8, the only encoding JSON-RPC bodies are
// parsed in (RFC 8259 §8.1).
func isJSON(contentType string) bool {
	if plainMediaType(contentType, "application/json") {
		return true // what mime.ParseMediaType makes of it: no charset
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "application/json" {
		return false
	}
	cs, ok := params["charset"]
	return !ok || strings.EqualFold(cs, "utf-8") || strings.EqualFold(cs, "utf8")
}

// plainMediaType reports whether the field value v is the media type mt
// (lower case) alone, in any ASCII case, without parameters or spaces: the
// common form, which mime.ParseMediaType parses to mt and no parameters,
// recognised without its allocations. Anything else is left to
// mime.ParseMediaType.
func plainMediaType(v, mt string) bool {
	if len(v) != len(mt) {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != mt[i] {
			return false
		}
	}
	return true
}
