package ratelimit

import (
	"sync"
	"sync/atomic"
)

// Slots caps the concurrent calls per key (a credential), keeping part of
// the capacity for writes (by default two concurrent calls per token with
// a slot reserved for writes): a key holds at most limit calls, of which at
// most limit-reservedForWrites are reads. Reads never hold the reserved
// slots, so a write finds one however many reads run; writes may hold
// every slot. Safe for concurrent use; in process only (each replica caps
// its own calls).
type Slots struct {
	limit, reads int

	mu   sync.Mutex
	used map[string]*inUse
}

type inUse struct{ all, reads int }

// NewSlots returns a cap of limit concurrent calls per key, of which
// reservedForWrites only writes may use. limit below 1 counts as 1;
// reservedForWrites is clamped to [0, limit-1] so that reads always get at
// least one slot (configuration should reject such values before).
func NewSlots(limit, reservedForWrites int) *Slots {
	limit = max(limit, 1)
	reserved := min(max(reservedForWrites, 0), limit-1)
	return &Slots{limit: limit, reads: limit - reserved, used: map[string]*inUse{}}
}

// Acquire takes a slot of key for a read or (write true) a write. ok false
// means the cap is reached; nothing was taken. release gives the slot back;
// calling it more than once has no further effect.
func (s *Slots) Acquire(key string, write bool) (release func(), ok bool) {
	sl, ok := s.Take(key, write)
	if !ok {
		return func() {}, false
	}
	var done atomic.Bool
	return func() {
		if !done.Swap(true) {
			sl.Release()
		}
	}, true
}

// A Slot is a slot Take took, held until Release; the zero Slot holds
// none. It is for one owner: copies release the same slot.
type Slot struct {
	s     *Slots
	u     *inUse
	key   string
	write bool
}

// Take is Acquire for a caller that keeps the slot itself (no function
// to allocate): ok false means the cap is reached and the Slot holds
// nothing.
func (s *Slots) Take(key string, write bool) (Slot, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.used[key]
	if u == nil {
		u = &inUse{}
	}
	if u.all >= s.limit || (!write && u.reads >= s.reads) {
		return Slot{}, false
	}
	s.used[key] = u
	u.all++
	if !write {
		u.reads++
	}
	return Slot{s: s, u: u, key: key, write: write}, true
}

// Release gives the slot back and empties sl; on an empty Slot it does
// nothing. Not safe for concurrent use on one Slot.
func (sl *Slot) Release() {
	s := sl.s
	if s == nil {
		return
	}
	u, key, write := sl.u, sl.key, sl.write
	*sl = Slot{}
	s.mu.Lock()
	defer s.mu.Unlock()
	u.all--
	if !write {
		u.reads--
	}
	if u.all == 0 {
		delete(s.used, key)
	}
}

// InUse is the number of slots of key taken now.
func (s *Slots) InUse(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.used[key]; u != nil {
		return u.all
	}
	return 0
}

// Limit is the per-key cap of all calls.
func (s *Slots) Limit() int { return s.limit }

// ReadLimit is the per-key cap of reads.
func (s *Slots) ReadLimit() int { return s.reads }
