package rights

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"unicode"
	"unicode/utf8"
)

// Live is what a rights source says about one subject in one tenant now.
type Live struct {
	// Active is false for a deactivated or removed subject: every
	// credential they created fails (401).
	Active bool
	// Rights are the subject's current rights in the tenant.
	Rights []string
}

// Source answers live-rights lookups. An error means the answer is not
// known now: callers fail closed. The Rights of a returned Live are the
// caller's: the source neither keeps nor changes them afterwards.
type Source interface {
	Lookup(ctx context.Context, tenant, subject string) (Live, error)
}

// ErrUnavailable is wrapped by every error a source returns when it cannot
// give an answer now (timeout, connection refused, unexpected status,
// malformed answer, unreadable or invalid file, cancelled context). The
// gateway maps it to 503 with Retry-After. Test with errors.Is.
var ErrUnavailable = errors.New("rights source unavailable")

// Limits on one subject's rights, applied by [HTTPSource] and
// [FileSource] to what they read.
const (
	// MaxRights is the most rights one subject may have.
	MaxRights = 10000
	// MaxRightLength is the longest right, in bytes.
	MaxRightLength = 256
)

// unavailable returns an error wrapping ErrUnavailable (and cause, when
// not nil) whose text is "rights source unavailable: <source>: <why>".
func unavailable(source, why string, cause error) error {
	if cause != nil {
		return fmt.Errorf("%w: %s: %s: %w", ErrUnavailable, source, why, cause)
	}
	return fmt.Errorf("%w: %s: %s", ErrUnavailable, source, why)
}

// checkRight reports why r is not an acceptable right name, or "" when it
// is: non-empty, at most MaxRightLength bytes, valid UTF-8, no white space
// and no control characters.
func checkRight(r string) string {
	switch {
	case r == "":
		return "is empty"
	case len(r) > MaxRightLength:
		return fmt.Sprintf("is longer than %d bytes", MaxRightLength)
	case !utf8.ValidString(r):
		return "is not valid UTF-8"
	}
	for _, c := range r {
		if unicode.IsSpace(c) || unicode.IsControl(c) {
			return fmt.Sprintf("contains the character %U (white space and control characters are not allowed)", c)
		}
	}
	return ""
}

// dedupe returns rs without repeated values, keeping the first of each, in
// a new slice; nil when rs is empty.
func dedupe(rs []string) []string {
	if len(rs) == 0 {
		return nil
	}
	out := make([]string, 0, len(rs))
	seen := make(map[string]struct{}, len(rs))
	for _, r := range rs {
		if _, dup := seen[r]; dup {
			continue
		}
		seen[r] = struct{}{}
		out = append(out, r)
	}
	return out
}

// clone returns l with its own copy of Rights, so that a caller may keep
// or change it without affecting the source or other callers.
func (l Live) clone() Live {
	if l.Rights != nil {
		l.Rights = append([]string(nil), l.Rights...)
	}
	return l
}

// Intersect returns the effective rights: the rights in token that are
// also in live, in the order of token, without duplicates. It returns nil
// when the intersection is empty. Neither argument is modified.
func Intersect(token, live []string) []string {
	if len(token) == 0 || len(live) == 0 {
		return nil
	}
	if len(token)*len(live) <= smallIntersect {
		return intersectSmall(token, live)
	}
	return intersectSet(token, live)
}

// intersectSet is Intersect through a set of live.
func intersectSet(token, live []string) []string {
	allowed := make(map[string]struct{}, len(live))
	for _, r := range live {
		allowed[r] = struct{}{}
	}
	var out []string
	for _, r := range token {
		if _, ok := allowed[r]; !ok {
			continue
		}
		// Remove it so a repeated token right is kept once.
		delete(allowed, r)
		out = append(out, r)
	}
	return out
}

// smallIntersect bounds len(token)·len(live) for which Intersect compares
// every pair instead of building a set of live: then the comparisons cost
// less than the set (the common case: a few rights on each side).
const smallIntersect = 64

// intersectSmall is Intersect by comparing pairs; the result is the same.
func intersectSmall(token, live []string) []string {
	var out []string
	for _, r := range token {
		if !slices.Contains(live, r) || slices.Contains(out, r) {
			continue
		}
		out = append(out, r)
	}
	return out
}
