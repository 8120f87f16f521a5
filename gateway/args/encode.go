package args

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// reencode copies the arguments, replacing the coerced values and keeping
// everything else — member order, other values byte for byte — as sent.
func reencode(data []byte, coercions map[string]coercion, ancestors map[string]bool) ([]byte, error) {
	var out bytes.Buffer
	out.Grow(len(data))
	enc := jsontext.NewEncoder(&out, jsontext.PreserveRawStrings(true))
	dec := jsontext.NewDecoder(bytes.NewBuffer(data))
	r := rewriter{enc: enc, coercions: coercions, ancestors: ancestors}
	if err := r.value(dec, "", false); err != nil {
		return nil, err
	}
	return bytes.TrimRight(out.Bytes(), "\n"), nil
}

type rewriter struct {
	enc       *jsontext.Encoder
	coercions map[string]coercion
	ancestors map[string]bool
}

// value copies the value at ptr from dec to the encoder. inner is true for
// the top value of a string's parsed content, which sits at the string's
// own pointer.
func (r *rewriter) value(dec *jsontext.Decoder, ptr string, inner bool) error {
	if c, ok := r.coercions[ptr]; ok && !inner {
		if !c.parsed {
			if err := dec.SkipValue(); err != nil {
				return err
			}
			return r.enc.WriteValue(c.raw)
		}
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		if tok.Kind() != '"' {
			return errors.New("coerced value is not a string")
		}
		return r.value(jsontext.NewDecoder(bytes.NewBufferString(tok.String())), ptr, true)
	}
	if !r.ancestors[ptr] {
		v, err := dec.ReadValue()
		if err != nil {
			return err
		}
		return r.enc.WriteValue(v)
	}
	switch dec.PeekKind() {
	case '{':
		if err := r.copyToken(dec); err != nil {
			return err
		}
		for dec.PeekKind() != '}' {
			name, err := dec.ReadValue()
			if err != nil {
				return err
			}
			key := name.String()
			if bytes.IndexByte(name, '\\') >= 0 {
				b, err := jsontext.AppendUnquote(nil, name)
				if err != nil {
					return err
				}
				key = string(b)
			} else {
				key = key[1 : len(key)-1]
			}
			if err := r.enc.WriteValue(name); err != nil {
				return err
			}
			if err := r.value(dec, ptr+"/"+escapePointer(key), false); err != nil {
				return err
			}
		}
		return r.copyToken(dec)
	case '[':
		if err := r.copyToken(dec); err != nil {
			return err
		}
		for i := 0; dec.PeekKind() != ']'; i++ {
			if err := r.value(dec, ptr+"/"+strconv.Itoa(i), false); err != nil {
				return err
			}
		}
		return r.copyToken(dec)
	}
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	return r.enc.WriteValue(v)
}

func (r *rewriter) copyToken(dec *jsontext.Decoder) error {
	tok, err := dec.ReadToken()
	if err != nil {
		return err
	}
	return r.enc.WriteToken(tok)
}
