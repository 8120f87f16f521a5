package gateway

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/mcpgate/mcpgate/gateway/mcp"
)

// decodeBody undoes a request's Content-Encoding so the pipeline never
// inspects compressed bytes as JSON: identity passes, gzip is decoded within
// the body limit, anything else is refused with 415.
func decodeBody(encoding string, body []byte, limit int64) ([]byte, bool, *mcp.Error) {
	if limit > 0 && int64(len(body)) > limit {
		return nil, false, tooLarge(limit)
	}
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "", "identity":
		return body, false, nil
	case "gzip", "x-gzip":
		out, err := gunzip(body, limit)
		if err != nil {
			if errors.Is(err, errTooLarge) {
				return nil, false, tooLarge(limit)
			}
			return nil, false, &mcp.Error{Status: 400, Code: mcp.CodeParseError, Message: "request body is not valid gzip: " + err.Error()}
		}
		return out, true, nil
	}
	return nil, false, &mcp.Error{Status: 415, Code: mcp.CodeInvalidRequest, Message: "Content-Encoding " + quote(encoding) + " is not supported; send identity or gzip"}
}

var errTooLarge = errors.New("decoded body exceeds the limit")

// gunzip decodes a gzip body, refusing more than limit decoded bytes (a
// small compressed body can expand enormously).
func gunzip(body []byte, limit int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	var r io.Reader = zr
	if limit > 0 {
		r = io.LimitReader(zr, limit+1)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if limit > 0 && int64(len(out)) > limit {
		return nil, errTooLarge
	}
	return out, nil
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

// CORS: the request headers an MCP client sends cross-origin, and the
// response headers it must be able to read.
const (
	corsAllowMethods  = "GET, POST, DELETE, OPTIONS"
	corsAllowHeaders  = "Authorization, Content-Type, Accept, Last-Event-ID, Mcp-Method, Mcp-Name, Mcp-Protocol-Version, Mcp-Session-Id"
	corsExposeHeaders = "WWW-Authenticate, Mcp-Session-Id, Mcp-Protocol-Version"
	corsMaxAge        = "600"
)

// preflight answers a CORS preflight (the Origin gate ran before). Requested
// Mcp-Param-* headers are allowed too: they carry tool arguments.
func preflight(h mcp.Header) *Local {
	allow := corsAllowHeaders
	for _, req := range h.Values("access-control-request-headers") {
		for _, name := range strings.Split(req, ",") {
			name = strings.TrimSpace(name)
			if strings.HasPrefix(strings.ToLower(name), mcp.HeaderParamPrefix) {
				allow += ", " + name
			}
		}
	}
	l := &Local{Status: 204, Header: mcp.Header{
		"access-control-allow-methods": {corsAllowMethods},
		"access-control-allow-headers": {allow},
		"access-control-max-age":       {corsMaxAge},
	}}
	return l
}

// corsResponseHeader returns the header fields added to every answer to an
// allowed cross-origin request.
func corsResponseHeader(origin string) mcp.Header {
	return mcp.Header{
		"access-control-allow-origin":   {origin},
		"access-control-expose-headers": {corsExposeHeaders},
		"vary":                          {"Origin"},
	}
}
