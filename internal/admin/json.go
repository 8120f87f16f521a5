package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// apiError is the body of every error answer, under "error".
type apiError struct {
	// Code is a stable snake_case code.
	Code string `json:"code"`
	// Message says what is wrong.
	Message string `json:"message"`
	// Fix says what to do instead.
	Fix string `json:"fix"`
	// Missing, for code rights_not_held, names the rights the person lacks.
	Missing []string `json:"missing,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // our own types: a bug
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"the answer cannot be encoded","fix":"report this bug"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, e apiError) {
	writeJSON(w, status, struct {
		Error apiError `json:"error"`
	}{e})
}

// decodeBody reads r's body strictly into v (a pointer to a struct):
// media type application/json (charset utf-8 if any), at most
// MaxBodyBytes, one JSON object, only v's members, no duplicate names,
// valid UTF-8, matching types. It answers the refusal itself and returns
// false on any problem.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" || (params["charset"] != "" && !strings.EqualFold(params["charset"], "utf-8")) {
		writeError(w, http.StatusUnsupportedMediaType, apiError{Code: "unsupported_media_type",
			Message: "the request body must be JSON",
			Fix:     "send Content-Type: application/json"})
		return false
	}
	tooLarge := apiError{Code: "body_too_large",
		Message: fmt.Sprintf("the request body is larger than %d bytes", MaxBodyBytes),
		Fix:     "send a smaller body"}
	if r.ContentLength > MaxBodyBytes {
		writeError(w, http.StatusRequestEntityTooLarge, tooLarge)
		return false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, tooLarge)
		} else {
			writeError(w, http.StatusBadRequest, apiError{Code: "invalid_body",
				Message: "the request body could not be read", Fix: "send the body again"})
		}
		return false
	}
	if trimmed := bytes.TrimLeft(body, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		writeError(w, http.StatusBadRequest, apiError{Code: "invalid_json",
			Message: "the request body must be one JSON object", Fix: "send a JSON object, e.g. {}"})
		return false
	}
	if err := jsonv2.Unmarshal(body, v, jsonv2.RejectUnknownMembers(true)); err != nil {
		writeError(w, http.StatusBadRequest, jsonProblem(err, v))
		return false
	}
	return true
}

// jsonProblem describes a decoding error of a body meant for v.
func jsonProblem(err error, v any) apiError {
	allowed := "the allowed members are " + strings.Join(memberNames(v), ", ")
	var se *jsonv2.SemanticError
	var sy *jsontext.SyntacticError
	switch {
	case errors.As(err, &se) && errors.Is(se.Err, jsonv2.ErrUnknownName):
		return apiError{Code: "unknown_field",
			Message: fmt.Sprintf("unknown member %q", se.JSONPointer.LastToken()),
			Fix:     allowed}
	case errors.As(err, &sy) && errors.Is(sy.Err, jsontext.ErrDuplicateName):
		return apiError{Code: "duplicate_field",
			Message: fmt.Sprintf("member %q appears more than once", pointerName(sy.JSONPointer)),
			Fix:     "send each member once"}
	case errors.As(err, &se) && se.GoType != nil:
		return apiError{Code: "wrong_type",
			Message: fmt.Sprintf("member %q must be %s", pointerName(se.JSONPointer), typeName(se.GoType)),
			Fix:     fmt.Sprintf("send %q as %s (%s)", pointerName(se.JSONPointer), typeName(se.GoType), allowed)}
	}
	return apiError{Code: "invalid_json",
		Message: "the request body is not valid JSON (or not valid UTF-8)",
		Fix:     "send one well-formed JSON object in UTF-8"}
}

// pointerName turns a JSON pointer into a member path: "/rights/0" →
// "rights[0]".
func pointerName(p jsontext.Pointer) string {
	var b strings.Builder
	for tok := range p.Tokens() {
		if b.Len() > 0 && isIndex(tok) {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

func isIndex(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "an array of " + strings.TrimPrefix(strings.TrimPrefix(typeName(t.Elem()), "a "), "an ") + "s"
	case reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return typeName(t.Elem())
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64:
		return "an integer"
	}
	return "of another type"
}

// memberNames lists the JSON names of the struct v points to.
func memberNames(v any) []string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var names []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// queryParams parses the query string strictly: only the allowed names,
// each at most once. It answers the refusal itself and returns false on
// any problem.
func queryParams(w http.ResponseWriter, r *http.Request, allowed ...string) (map[string]string, bool) {
	vals, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, apiError{Code: "invalid_query",
			Message: "the query string is malformed", Fix: "percent-encode the parameter values"})
		return nil, false
	}
	out := map[string]string{}
	for name, vs := range vals {
		if !slices.Contains(allowed, name) {
			writeError(w, http.StatusBadRequest, apiError{Code: "unknown_parameter",
				Message: fmt.Sprintf("unknown query parameter %q", name),
				Fix:     "the allowed parameters are " + strings.Join(allowed, ", ")})
			return nil, false
		}
		if len(vs) > 1 {
			writeError(w, http.StatusBadRequest, apiError{Code: "duplicate_parameter",
				Message: fmt.Sprintf("query parameter %q appears more than once", name),
				Fix:     "give each parameter once"})
			return nil, false
		}
		out[name] = vs[0]
	}
	return out, true
}
