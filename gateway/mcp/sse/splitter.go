package sse

import "errors"

// ErrEventTooLarge is returned when a single event block exceeds the size
// limit of a Splitter or Reader.
var ErrEventTooLarge = errors.New("sse: event exceeds the size limit")

// DefaultMaxEvent is the limit a Splitter applies when Max is 0.
const DefaultMaxEvent = 16 << 20

// retainMax is the largest held-back buffer a Splitter keeps for reuse
// after the event in it is complete; a larger one (left by a huge event) is
// released so that a long-lived stream does not pin it.
const retainMax = 256 << 10

// utf8BOM is the byte order mark skipped at the start of a stream.
const utf8BOM = "\xEF\xBB\xBF"

const (
	crNone  = iota
	crLine  // the chunk ended with a CR ending a line; an LF next belongs to it
	crBlank // the same, and that line was blank: the block ends after the CR (and the LF, if one follows)
)

// Splitter cuts an event stream into raw blocks. A raw block is the exact
// bytes of one event, including the blank line that ends it, so relaying
// every raw block unchanged, plus what Flush hands out, reproduces the input
// byte for byte, whatever the chunking.
//
// One special block exists: a UTF-8 byte order mark at the very start of the
// stream is handed out alone, as a 3-byte block, so that every other block
// can be parsed on its own. Parse finds no fields in it and Complete reports
// false; a relay simply passes it on.
//
// Chunks may be cut anywhere, including inside a BOM and between the CR and
// LF of a CRLF. Each byte is scanned once: the cost of a stream is linear in
// its length however small the chunks and however large the events. A block
// contained in a single chunk is handed out without copying; bytes of a block
// that spans chunks are held back in an internal buffer, reused from event
// to event.
//
// The zero Splitter is ready to use, with the default limit. A Splitter is
// not safe for concurrent use.
type Splitter struct {
	// Max bounds the size in bytes of one event block (terminating blank line
	// included; the BOM block is not counted). A larger event makes Write
	// fail with ErrEventTooLarge as soon as the part of it received would
	// have to be held back beyond Max bytes, and at the latest when it
	// completes; so the Splitter never holds more than Max bytes. 0 means
	// DefaultMaxEvent; a negative Max means no limit.
	Max int

	buf     []byte // held-back bytes of the current block
	midLine bool   // the next byte does not start a line
	cr      uint8  // crNone, crLine or crBlank
	bom     uint8  // bytes of the BOM matched so far; bomDone once decided
	err     error  // sticky

	// The chunk being processed.
	p  []byte
	i  int // next byte of p to scan
	bs int // start in p of the current block's bytes not yet in buf
	f  termFinder
}

const bomDone = 3

// NewSplitter returns a Splitter whose events may be at most max bytes
// (0: DefaultMaxEvent; negative: no limit).
func NewSplitter(max int) *Splitter { return &Splitter{Max: max} }

// Write consumes the next chunk of the stream and calls emit, in order, with
// each block completed by it. Bytes after the last complete block are held
// back for the next Write or Flush.
//
// raw is valid only until emit returns: it aliases p or the Splitter's own
// buffer, both of which are reused. emit must copy what it keeps, should not
// modify raw, and must not call back into the Splitter.
//
// An error from emit, or ErrEventTooLarge, stops the Splitter: Write returns
// the error, and so do later Writes and Flushes until Reset.
func (s *Splitter) Write(p []byte, emit func(raw []byte) error) error {
	if s.err != nil {
		return s.err
	}
	s.feed(p)
	for {
		raw, ok, err := s.next()
		if !ok {
			return err
		}
		if err := emit(raw); err != nil {
			s.fail(err)
			return err
		}
	}
}

// Flush ends the stream: it calls emit with the held-back bytes, if any,
// unchanged, and resets the Splitter for a new stream. These bytes are an
// event the stream ended without dispatching, unless they end in a blank
// line (a block ending in CR waits for a possible LF); use Complete to tell.
// If the Splitter has failed, Flush returns that error and emits nothing.
func (s *Splitter) Flush(emit func(raw []byte) error) error {
	if s.err != nil {
		return s.err
	}
	raw := s.end()
	if len(raw) == 0 {
		return nil
	}
	return emit(raw)
}

// Buffered returns the number of bytes held back: the part of the current
// event received so far.
func (s *Splitter) Buffered() int { return len(s.buf) }

// Reset discards all state, including a sticky error, and prepares the
// Splitter for a new stream. Max is kept.
func (s *Splitter) Reset() {
	buf := s.buf[:0]
	if cap(buf) > retainMax {
		buf = nil
	}
	*s = Splitter{Max: s.Max, buf: buf}
}

// limit returns the effective size limit, or -1 for none.
func (s *Splitter) limit() int {
	switch {
	case s.Max == 0:
		return DefaultMaxEvent
	case s.Max < 0:
		return -1
	}
	return s.Max
}

// feed starts processing chunk p; the previous chunk must be exhausted.
func (s *Splitter) feed(p []byte) {
	s.p, s.i, s.bs, s.f = p, 0, 0, newTermFinder()
}

// end returns the held-back bytes and resets the Splitter. The result stays
// valid until the Splitter is used again.
func (s *Splitter) end() []byte {
	raw := s.buf
	s.Reset()
	return raw
}

func (s *Splitter) fail(err error) {
	s.err, s.p = err, nil
}

// next returns the next block completed within the current chunk. When the
// chunk holds no further complete block, it moves the chunk's remaining
// bytes into buf and returns ok == false (with the error, if any).
func (s *Splitter) next() (raw []byte, ok bool, err error) {
	if s.err != nil {
		return nil, false, s.err
	}
	p := s.p
	if s.bom < bomDone {
		for s.bom < bomDone && s.i < len(p) && p[s.i] == utf8BOM[s.bom] {
			s.bom++
			s.i++
		}
		switch {
		case s.bom == bomDone:
			return s.take(s.i), true, nil
		case s.i == len(p):
			return nil, false, s.stash() // a BOM may still be arriving
		case s.bom > 0:
			s.midLine = true // a BOM prefix that is content after all
		}
		s.bom = bomDone
	}
	if s.cr != crNone && s.i < len(p) {
		if p[s.i] == '\n' {
			s.i++ // the LF of a CRLF cut between chunks
		}
		blank := s.cr == crBlank
		s.cr = crNone
		if blank {
			return s.takeEvent(s.i)
		}
	}
	for {
		i := s.i
		j := s.f.next(p, i)
		if j == len(p) {
			if i < len(p) {
				s.midLine = true
			}
			s.i = len(p)
			return nil, false, s.stash()
		}
		blank := !s.midLine && j == i
		s.midLine = false
		end := j + 1
		if p[j] == '\r' {
			if end == len(p) {
				// Whether an LF follows is for the next chunk to say.
				s.cr = crLine
				if blank {
					s.cr = crBlank
				}
				s.i = end
				return nil, false, s.stash()
			}
			if p[end] == '\n' {
				end++
			}
		}
		s.i = end
		if blank {
			return s.takeEvent(end)
		}
	}
}

// takeEvent is take for an event block, which the limit applies to.
func (s *Splitter) takeEvent(end int) ([]byte, bool, error) {
	if lim := s.limit(); lim >= 0 && len(s.buf)+end-s.bs > lim {
		s.fail(ErrEventTooLarge)
		return nil, false, ErrEventTooLarge
	}
	return s.take(end), true, nil
}

// take returns the current block, ending at p[end], and starts the next one.
func (s *Splitter) take(end int) []byte {
	seg := s.p[s.bs:end]
	s.bs = end
	if len(s.buf) == 0 {
		return seg // entirely in this chunk: no copy
	}
	s.grow(len(seg))
	raw := append(s.buf, seg...)
	if cap(raw) > retainMax {
		s.buf = nil
	} else {
		s.buf = raw[:0]
	}
	return raw
}

// stash moves the rest of the exhausted chunk into buf.
func (s *Splitter) stash() error {
	rest := s.p[s.bs:]
	s.feed(nil)
	if lim := s.limit(); lim >= 0 && s.bom == bomDone && len(s.buf)+len(rest) > lim {
		s.fail(ErrEventTooLarge)
		return ErrEventTooLarge
	}
	s.grow(len(rest))
	s.buf = append(s.buf, rest...)
	return nil
}

// grow makes room for n more bytes in buf. The capacity at least doubles, so
// a huge event costs a few allocations and at most two copies of each byte,
// but never exceeds the limit, which a held-back event cannot pass.
func (s *Splitter) grow(n int) {
	if len(s.buf)+n <= cap(s.buf) {
		return
	}
	extra := max(n, cap(s.buf), 512)
	if lim := s.limit(); lim >= 0 {
		extra = max(n, min(extra, lim-len(s.buf)))
	}
	nb := make([]byte, len(s.buf), len(s.buf)+extra)
	copy(nb, s.buf)
	s.buf = nb
}
