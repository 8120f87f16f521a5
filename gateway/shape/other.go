package shape

import (
	"bytes"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"
)

// The results below carry third-party text with no declaration to say
// where: all of their text is treated as third-party. Each function returns
// nil when nothing changes, else the new JSON; max bounds one text (0 means
// DefaultMaxTextBytes, negative no bound). Unknown members are kept as they
// are (invalid UTF-8 replaced).

// ResourceContents shapes a resources/read result: the text of every
// contents[] item becomes TextPrefix plus the sanitised text bounded by
// MaxTextBytes. It stays a string because a text resource's text must be
// one (a reader keeps its mimeType); blob items pass unchanged. Secret
// names are dropped at any depth. Resources are often documents: compile
// the Shaper used here with a MaxTextBytes that fits them. A shaped result
// above MaxResultBytes is an error wrapping ErrResultTooLarge, for the relay
// to answer with a JSON-RPC error (a resource has no tool-error shape).
func (s *Shaper) ResourceContents(result []byte) ([]byte, error) {
	return s.run(func(w *walker) ([]byte, error) {
		return w.resourceContents(result)
	})
}

func (w *walker) resourceContents(result []byte) ([]byte, error) {
	s := w.s
	err := w.members(result, func(name []byte, dec *jsontext.Decoder, dst []byte) ([]byte, bool, error) {
		if string(name) == "contents" && dec.PeekKind() == '[' {
			v, err := w.items(dec, dst, func(dst, item []byte) ([]byte, error) {
				if item[0] != '{' {
					return w.valueOf(dst, item, nil, true, false)
				}
				return w.resource(dst, item, true)
			})
			return v, false, err
		}
		v, err := w.value(dec, dst, nil, true, false)
		return v, false, err
	})
	if err != nil {
		return nil, err
	}
	out := result
	if w.changed {
		out = w.assemble(result)
	}
	if len(out) > s.maxResult {
		return nil, fmt.Errorf("%w: the resource is %d bytes, the limit is %d", ErrResultTooLarge, len(out), s.maxResult)
	}
	if !w.changed {
		return nil, nil
	}
	return bytes.Clone(out), nil
}

// PromptResult shapes a prompts/get result: the text of every message's
// text content (messages[].content, a block or an array of blocks) and of
// embedded resources in it becomes TextPrefix plus the sanitised text
// bounded by max. Note: a prompt is meant to instruct the model; with the
// notice in front of it, a well-behaved model treats it as data.
func PromptResult(result []byte, max int) ([]byte, error) {
	return run(zeroShaper, textLimit(max), false, func(w *walker) ([]byte, error) {
		err := w.members(result, func(name []byte, dec *jsontext.Decoder, dst []byte) ([]byte, bool, error) {
			if string(name) == "messages" && dec.PeekKind() == '[' {
				v, err := w.items(dec, dst, w.promptMessage)
				return v, false, err
			}
			v, err := w.value(dec, dst, nil, true, false)
			return v, false, err
		})
		return w.finish(result, err)
	})
}

// promptMessage shapes one PromptMessage (a raw object).
func (w *walker) promptMessage(dst, msg []byte) ([]byte, error) {
	dec := w.open(msg)
	defer w.close()
	return w.objectMembers(dec, dst, func(name []byte, dec *jsontext.Decoder, dst []byte) ([]byte, bool, error) {
		if string(name) == "content" {
			mark := len(w.recs)
			switch dec.PeekKind() {
			case '{':
				if err := w.collectBlock(dec); err != nil {
					return dst, false, err
				}
				return kept(w.emitBlocks(dst, w.recs[mark:], false, true))
			case '[':
				if err := w.collectBlocks(dec); err != nil {
					return dst, false, err
				}
				return kept(w.emitBlocks(dst, w.recs[mark:], true, true))
			}
		}
		return kept(w.value(dec, dst, nil, true, false))
	})
}

// CompletionResult shapes a completion/complete result: every string in
// completion.values is sanitised and bounded by max (no notice: a value is
// inserted into an argument as it stands).
func CompletionResult(result []byte, max int) ([]byte, error) {
	return run(zeroShaper, textLimit(max), false, func(w *walker) ([]byte, error) {
		return w.finish(result, w.members(result, w.completionMember))
	})
}

// completionMember shapes one member of a completion/complete result.
func (w *walker) completionMember(name []byte, dec *jsontext.Decoder, dst []byte) ([]byte, bool, error) {
	if string(name) != "completion" {
		v, err := w.value(dec, dst, nil, true, false)
		return v, false, err
	}
	v, err := w.objectMembers(dec, dst, func(name []byte, dec *jsontext.Decoder, dst []byte) ([]byte, bool, error) {
		if string(name) == "values" && dec.PeekKind() == '[' {
			return kept(w.items(dec, dst, w.completionValue))
		}
		return kept(w.value(dec, dst, nil, true, false))
	})
	return v, false, err
}

// completionValue appends one element of completion.values.
func (w *walker) completionValue(dst, raw []byte) ([]byte, error) {
	if raw[0] != '"' {
		return w.valueOf(dst, raw, nil, true, false)
	}
	text := w.unquote(&w.tb, raw)
	if len(text) <= w.maxText && cleanBytes(text) {
		return w.appendString(dst, raw), nil
	}
	w.changed = true
	w.san = appendSanitised(w.san[:0], text, w.maxText)
	dst = appendQuoted(dst, w.san)
	return dst, nil
}

// NotificationParams shapes the params of a notification from an upstream:
// for notifications/progress params.message, for notifications/message
// params.data when it is a string, or every string inside it when it is an
// object or array (member names stay), becomes TextPrefix plus the
// sanitised text bounded by max. Other methods, and params without those
// members, are left alone (nil). It drops no names: Shaper.Notification
// does, with the Shaper's secret names.
func NotificationParams(method string, params []byte, max int) ([]byte, error) {
	return notification(zeroShaper, textLimit(max), method, params)
}

// Notification is NotificationParams with s's text bound that also drops
// s's secret names at any depth of the params of every notification.
func (s *Shaper) Notification(method string, params []byte) ([]byte, error) {
	if s == nil {
		s = zeroShaper
	}
	return notification(s, s.maxText, method, params)
}

func notification(s *Shaper, max int, method string, params []byte) ([]byte, error) {
	var field string
	switch method {
	case "notifications/progress":
		field = "message"
	case "notifications/message":
		field = "data"
	default:
		if s.secrets.empty() {
			return nil, nil
		}
	}
	if len(bytes.TrimSpace(params)) == 0 {
		return nil, nil
	}
	return run(s, max, true, func(w *walker) ([]byte, error) {
		err := w.members(params, func(name []byte, dec *jsontext.Decoder, dst []byte) ([]byte, bool, error) {
			if field == "" || string(name) != field || field == "message" && dec.PeekKind() != '"' {
				v, err := w.value(dec, dst, nil, true, false)
				return v, false, err
			}
			v, err := w.shaped(dec, dst, nil, true, true)
			return v, false, err
		})
		return w.finish(params, err)
	})
}

// ErrorObject shapes the error object of a JSON-RPC error answer from an
// upstream (its "error" member). Its text is the remote server's:
//   - message, a string, is sanitised and bounded by MaxTextBytes; with
//     UntrustedText declared it also starts with TextPrefix;
//   - data (any JSON value) loses the secret names at any depth; with
//     UntrustedText declared every string in it (member names stay)
//     becomes TextPrefix plus the sanitised, bounded text, so data keeps
//     its shape for clients that read it;
//   - code and every other member are kept as written, secret names
//     dropped ("code" and "message" are never dropped).
//
// It returns nil when nothing changes. An error object that is not a JSON
// object is ErrNotObject.
func (s *Shaper) ErrorObject(obj []byte) ([]byte, error) {
	return s.run(func(w *walker) ([]byte, error) {
		w.errorObject = true
		err := w.members(obj, func(name []byte, dec *jsontext.Decoder, dst []byte) ([]byte, bool, error) {
			switch {
			case string(name) == "message" && dec.PeekKind() == '"':
				v, err := dec.ReadValue()
				if err != nil {
					return dst, false, err
				}
				text := w.unquote(&w.text, v)
				if w.s.untrusted {
					w.changed = true
					return w.appendPrefixed(dst, text), false, nil
				}
				if len(text) <= w.maxText && cleanBytes(text) {
					return w.appendString(dst, v), false, nil
				}
				w.changed = true
				w.san = appendSanitised(w.san[:0], text, w.maxText)
				return appendQuoted(dst, w.san), false, nil
			case string(name) == "data" && w.s.untrusted:
				return kept(w.prefixed(dec, dst))
			}
			return kept(w.value(dec, dst, nil, true, false))
		})
		return w.finish(obj, err)
	})
}

// ServerRequestParams shapes the params of a request an upstream sends to
// the client (revisions before 2026-07-28, inside a response stream or on
// the GET stream), whose text reaches the client's model or the person:
//   - sampling/createMessage: the text of messages[].content (a block or
//     an array of blocks, as in PromptResult) and systemPrompt become
//     TextPrefix plus the sanitised, bounded text;
//   - elicitation/create: message, and every title and description
//     string at any depth of requestedSchema, likewise;
//   - every method (roots/list, ping, others): secret names dropped at any
//     depth.
//
// It returns nil when nothing changes.
func (s *Shaper) ServerRequestParams(method string, params []byte) ([]byte, error) {
	if len(bytes.TrimSpace(params)) == 0 {
		return nil, nil
	}
	if s == nil {
		s = zeroShaper
	}
	return run(s, s.maxText, true, func(w *walker) ([]byte, error) {
		return w.finish(params, w.members(params, memberFunc(w.requestParam(method))))
	})
}

// requestParam returns the function that shapes one member of the params
// of a server-to-client request (ServerRequestParams); w.prefix must be
// set.
func (w *walker) requestParam(method string) valueFunc {
	return func(name []byte, dec *jsontext.Decoder, dst []byte) ([]byte, bool, error) {
		switch method + " " + string(name) {
		case "sampling/createMessage messages":
			if dec.PeekKind() == '[' {
				return kept(w.items(dec, dst, w.promptMessage))
			}
			return kept(w.prefixed(dec, dst))
		case "sampling/createMessage systemPrompt", "elicitation/create message":
			return kept(w.prefixed(dec, dst))
		case "elicitation/create requestedSchema":
			return kept(w.schemaText(dec, dst))
		}
		return kept(w.value(dec, dst, nil, true, false))
	}
}

// inputRequests appends the inputRequests of an input_required result
// (revision 2026-07-28: a map of server-to-client requests the client
// answers in its retry) with the params of each shaped like
// ServerRequestParams.
func (w *walker) inputRequests(dec *jsontext.Decoder, dst []byte) ([]byte, error) {
	saved := w.prefix
	w.prefix = true
	defer func() { w.prefix = saved }()
	return w.objectMembers(dec, dst, func(_ []byte, dec *jsontext.Decoder, dst []byte) ([]byte, bool, error) {
		if dec.PeekKind() != '{' {
			return kept(w.value(dec, dst, nil, true, false))
		}
		raw, err := dec.ReadValue()
		if err != nil {
			return dst, false, err
		}
		method := ""
		if m, ok := topString(raw, "method"); ok {
			method = string(w.unquote(&w.text, m))
		}
		d := w.open(raw)
		defer w.close()
		return kept(w.objectMembers(d, dst, func(name []byte, dec *jsontext.Decoder, dst []byte) ([]byte, bool, error) {
			if string(name) == "params" {
				return kept(w.objectMembers(dec, dst, w.requestParam(method)))
			}
			return kept(w.value(dec, dst, nil, true, false))
		}))
	})
}

// topString returns the raw string value of the top-level member name of
// the object raw, if it is a string.
func topString(raw []byte, name string) ([]byte, bool) {
	dec := jsontext.NewDecoder(bytes.NewReader(raw), lenientOpts)
	if _, err := dec.ReadToken(); err != nil {
		return nil, false
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, false
		}
		if tok.String() == name && dec.PeekKind() == '"' {
			v, err := dec.ReadValue()
			return v, err == nil
		}
		if err := dec.SkipValue(); err != nil {
			return nil, false
		}
	}
	return nil, false
}

// schemaText appends a JSON Schema read from dec with the string value of
// every title and description member, at any depth, prefixed as
// third-party text, and secret names dropped.
func (w *walker) schemaText(dec *jsontext.Decoder, dst []byte) ([]byte, error) {
	switch dec.PeekKind() {
	case '{':
		return w.objectMembers(dec, dst, func(name []byte, dec *jsontext.Decoder, dst []byte) ([]byte, bool, error) {
			if (string(name) == "title" || string(name) == "description") && dec.PeekKind() == '"' {
				return kept(w.prefixed(dec, dst))
			}
			return kept(w.schemaText(dec, dst))
		})
	case '[':
		return w.items(dec, dst, func(dst, item []byte) ([]byte, error) {
			d := w.open(item)
			defer w.close()
			return w.schemaText(d, dst)
		})
	}
	return w.value(dec, dst, nil, true, false)
}

// finish returns the result of a members walk: nil when nothing changed.
func (w *walker) finish(in []byte, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	if !w.changed {
		return nil, nil
	}
	return bytes.Clone(w.assemble(in)), nil
}

// items reads an array from dec and appends it with every element shaped
// by fn (which gets the raw element).
func (w *walker) items(dec *jsontext.Decoder, dst []byte, fn func(dst, item []byte) ([]byte, error)) ([]byte, error) {
	if _, err := dec.ReadToken(); err != nil {
		return dst, err
	}
	dst = append(dst, '[')
	first := true
	for dec.PeekKind() != ']' {
		v, err := dec.ReadValue()
		if err != nil {
			return dst, err
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		if dst, err = fn(dst, v); err != nil {
			return dst, err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return dst, err
	}
	return append(dst, ']'), nil
}

// objectMembers reads a value from dec and appends it; an object has its
// secret names dropped and every other member's value shaped by fn.
func (w *walker) objectMembers(dec *jsontext.Decoder, dst []byte, fn valueFunc) ([]byte, error) {
	if dec.PeekKind() != '{' {
		return w.value(dec, dst, nil, true, false)
	}
	if _, err := dec.ReadToken(); err != nil {
		return dst, err
	}
	return w.objectRest(dec, dst, fn)
}
