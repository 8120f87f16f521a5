package rights

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// MaxHTTPAnswer is the largest answer body [HTTPSource] reads, in bytes
// (1 MiB). A longer answer is refused as unavailable.
const MaxHTTPAnswer = 1 << 20

// DefaultHTTPTimeout is the time [HTTPSource] waits for a whole answer
// when HTTPOptions.Timeout is zero.
const DefaultHTTPTimeout = 2 * time.Second

// HTTPOptions configure [NewHTTP].
type HTTPOptions struct {
	// URL is the product's rights endpoint, http or https, for example
	// "https://bookings.internal/mcp/rights". It may carry a query of
	// its own (kept), but not the parameters tenant or subject.
	URL string
	// Timeout bounds one lookup: connecting, sending, and reading the
	// whole answer. Zero means DefaultHTTPTimeout (2s); negative is
	// refused.
	Timeout time.Duration
	// Header is sent with every request, for example an Authorization
	// that lets the gateway call the product. It is copied by NewHTTP.
	// Its values never appear in errors.
	Header http.Header
	// Client sends the requests. Nil means a client of its own that
	// uses http.DefaultTransport and does not follow redirects (a
	// redirect is then answered as unavailable).
	Client *http.Client
}

// HTTPSource is a [Source] that asks the product owning people and
// rights, one HTTP request per lookup (wrap it in [Cached] to bound the
// load). It is safe for concurrent use.
//
// # Wire contract
//
// This is what a product implements. For a lookup of subject S in tenant
// T the gateway sends
//
//	GET <URL>?tenant=<T>&subject=<S> HTTP/1.1
//	Accept: application/json
//	<each HTTPOptions.Header field>
//
// with no body. T and S are form-encoded (application/x-www-form-urlencoded:
// tenant "a&b c" is sent as tenant=a%26b+c), so any standard query parser
// gives them back exactly; they are never empty. Parameters the URL
// already has are kept, and all parameters are sorted by name. The
// default client does not follow redirects. The whole exchange must end
// within HTTPOptions.Timeout (default 2s).
//
// The product answers with one of:
//
//   - 200 OK, Content-Type application/json (parameters such as
//     charset allowed), and a body of at most 1 MiB that is exactly one
//     JSON object:
//
//     {"active": true, "rights": ["bookings.read", "bookings.write"]}
//
//     "active" (boolean) is required: false means the person is
//     deactivated and every credential they created fails (401).
//     "rights" (array of strings) is optional: absent or null means no
//     rights. There are at most MaxRights (10000) rights, each non-empty,
//     at most MaxRightLength (256) bytes, without white space or control
//     characters; a right given twice counts once. Member names are
//     case-sensitive. Any other member, a member given twice, invalid
//     UTF-8, or anything after the object makes the answer invalid.
//
//   - 404 Not Found, any body (ignored): no such subject in that tenant,
//     or no such tenant, for example a person who was removed. This is
//     the same as 200 with {"active": false}. Check the URL with care: a
//     path the product does not serve, answered 404 by its router, makes
//     every person look removed (401 for all) rather than the source
//     unavailable.
//
//   - Anything else: 1xx, 204, 3xx, other 4xx (401 and 403 included:
//     the gateway's own credentials were refused) and 5xx, a 200 that
//     breaks the rules above, no complete answer within the timeout, or
//     no connection. The gateway fails closed: the lookup returns an
//     error wrapping ErrUnavailable that names the URL (without query
//     or user information) and the reason, the client gets 503 with
//     Retry-After, and nothing is cached.
//
// An answer states the rights now; the gateway may reuse it for at most
// its configured maximum staleness (see [Cached]).
type HTTPSource struct {
	base    *url.URL
	name    string // scheme://host/path, for errors: never the query or user info
	timeout time.Duration
	header  http.Header
	client  *http.Client
}

// NewHTTP returns an HTTPSource for o. It fails when the URL is not an
// absolute http or https URL, already has a tenant or subject parameter,
// or when Timeout is negative.
func NewHTTP(o HTTPOptions) (*HTTPSource, error) {
	u, err := url.Parse(o.URL)
	if err != nil {
		return nil, errors.New("rights: http source: URL does not parse")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("rights: http source: URL scheme %q: want http or https", u.Scheme)
	}
	if u.Host == "" {
		return nil, errors.New("rights: http source: URL has no host")
	}
	if u.Fragment != "" {
		return nil, errors.New("rights: http source: URL must not have a fragment")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, errors.New("rights: http source: URL query does not parse")
	}
	for _, p := range []string{"tenant", "subject"} {
		if q.Has(p) {
			return nil, fmt.Errorf("rights: http source: URL query must not set %q: the gateway adds it", p)
		}
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("rights: http source: negative timeout %s", o.Timeout)
	}
	s := &HTTPSource{
		base:    u,
		name:    "http " + (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String(),
		timeout: o.Timeout,
		header:  make(http.Header, len(o.Header)),
		client:  o.Client,
	}
	for k, vs := range o.Header {
		for _, v := range vs {
			s.header.Add(k, v) // canonical names, so Accept below replaces any accept
		}
	}
	if s.timeout == 0 {
		s.timeout = DefaultHTTPTimeout
	}
	if s.client == nil {
		s.client = &http.Client{
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return s, nil
}

// String names the source in logs and errors: "http " followed by the
// URL without its query or user information.
func (s *HTTPSource) String() string { return s.name }

// requestURL returns the URL asked for tenant and subject.
func (s *HTTPSource) requestURL(tenant, subject string) string {
	u := *s.base
	q := u.Query()
	q.Set("tenant", tenant)
	q.Set("subject", subject)
	u.RawQuery = q.Encode()
	return u.String()
}

// wireAnswer is the body of a 200 answer.
type wireAnswer struct {
	Active *bool    `json:"active"`
	Rights []string `json:"rights"`
}

// Lookup asks the product about subject in tenant (see the wire contract
// on [HTTPSource]). It returns Live{Active: false} for 404, the decoded
// answer for a valid 200, and otherwise an error wrapping ErrUnavailable
// (and ctx.Err() when ctx ended first). An empty tenant or subject names
// nobody: the answer is Live{Active: false}, without a request.
func (s *HTTPSource) Lookup(ctx context.Context, tenant, subject string) (Live, error) {
	if tenant == "" || subject == "" {
		return Live{}, nil
	}
	if err := ctx.Err(); err != nil {
		return Live{}, unavailable(s.name, "lookup abandoned", err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.requestURL(tenant, subject), nil)
	if err != nil {
		return Live{}, unavailable(s.name, "cannot build the request", nil)
	}
	for k, vs := range s.header {
		req.Header[k] = vs // read only: the transport does not change them
	}
	req.Header.Set("Accept", "application/json")

	resp, err := s.client.Do(req)
	if err != nil {
		return Live{}, s.transportError(ctx, err)
	}
	defer func() {
		// Read a little of what is left so the connection can be reused.
		_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
		_ = resp.Body.Close()
	}()

	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return Live{}, nil
	default:
		return Live{}, unavailable(s.name, fmt.Sprintf("unexpected status %d", resp.StatusCode), nil)
	}
	if why := checkJSONContentType(resp.Header.Get("Content-Type")); why != "" {
		return Live{}, unavailable(s.name, why, nil)
	}
	if resp.ContentLength > MaxHTTPAnswer {
		return Live{}, unavailable(s.name, fmt.Sprintf("answer of %d bytes is larger than %d", resp.ContentLength, MaxHTTPAnswer), nil)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxHTTPAnswer+1))
	if err != nil {
		return Live{}, s.transportError(ctx, err)
	}
	if len(body) > MaxHTTPAnswer {
		return Live{}, unavailable(s.name, fmt.Sprintf("answer is larger than %d bytes", MaxHTTPAnswer), nil)
	}
	l, why := decodeAnswer(body)
	if why != "" {
		return Live{}, unavailable(s.name, "invalid answer: "+why, nil)
	}
	return l, nil
}

// transportError explains a failure to get a response or read its body
// without repeating the request URL (it carries tenant, subject and
// possibly a query the operator considers private).
func (s *HTTPSource) transportError(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		if errors.Is(ctxErr, context.DeadlineExceeded) {
			return unavailable(s.name, fmt.Sprintf("no answer within %s", s.timeout), ctxErr)
		}
		return unavailable(s.name, "lookup abandoned", ctxErr)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return unavailable(s.name, "request failed", err)
}

// checkJSONContentType reports why ct is not application/json, or "".
func checkJSONContentType(ct string) string {
	if ct == "" {
		return "answer has no Content-Type: want application/json"
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || !strings.EqualFold(mt, "application/json") {
		return fmt.Sprintf("answer has Content-Type %.64q: want application/json", ct)
	}
	return ""
}

// decodeAnswer decodes and checks a 200 body; it returns the reason
// when the body breaks the contract.
func decodeAnswer(body []byte) (Live, string) {
	var w wireAnswer
	// Duplicate member names and invalid UTF-8 are refused by default.
	if err := json.Unmarshal(body, &w, json.RejectUnknownMembers(true)); err != nil {
		return Live{}, jsonReason(err)
	}
	if w.Active == nil {
		return Live{}, `member "active" (boolean) is required`
	}
	if len(w.Rights) > MaxRights {
		return Live{}, fmt.Sprintf("%d rights, more than %d", len(w.Rights), MaxRights)
	}
	for i, r := range w.Rights {
		if why := checkRight(r); why != "" {
			return Live{}, fmt.Sprintf("rights[%d] %s", i, why)
		}
	}
	return Live{Active: *w.Active, Rights: dedupe(w.Rights)}, ""
}

// jsonReason explains a decoding error in terms of the wire contract,
// naming the member concerned as a JSON Pointer.
func jsonReason(err error) string {
	var se *json.SemanticError
	if errors.As(err, &se) {
		p := se.JSONPointer
		if errors.Is(se.Err, json.ErrUnknownName) {
			return fmt.Sprintf("unknown member %q (allowed: active, rights)", p.LastToken())
		}
		want := "an object"
		switch {
		case p == "/active":
			want = "true or false"
		case p == "/rights":
			want = "an array of strings"
		case strings.HasPrefix(string(p), "/rights/"):
			want = "a string"
		}
		where := "the answer"
		if rest, ok := strings.CutPrefix(string(p), "/rights/"); ok {
			where = "rights[" + rest + "]"
		} else if p != "" {
			where = strings.TrimPrefix(string(p), "/")
		}
		return fmt.Sprintf("%s is %s, want %s", where, kindName(se.JSONKind), want)
	}
	var sy *jsontext.SyntacticError
	if errors.As(err, &sy) {
		if errors.Is(sy.Err, jsontext.ErrDuplicateName) {
			return fmt.Sprintf("member %q given twice", sy.JSONPointer.LastToken())
		}
		return fmt.Sprintf("malformed JSON at byte %d: %v", sy.ByteOffset, sy.Err)
	}
	return err.Error()
}

// kindName names a JSON kind for error messages.
func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case '{':
		return "an object"
	case '[':
		return "an array"
	default:
		return "not valid"
	}
}
