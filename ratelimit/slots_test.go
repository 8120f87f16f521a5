package ratelimit_test

import (
	"sync"
	"testing"

	"github.com/mcpgate/mcpgate/ratelimit"
)

// TestSlotsReserveForWrites: with two slots and one kept for writes, a
// second read is refused while a write still gets in.
func TestSlotsReserveForWrites(t *testing.T) {
	s := ratelimit.NewSlots(2, 1)
	rel1, ok := s.Acquire("tok", false)
	if !ok {
		t.Fatal("first read refused")
	}
	if _, ok := s.Acquire("tok", false); ok {
		t.Fatal("a read took the slot kept for writes")
	}
	relW, ok := s.Acquire("tok", true)
	if !ok {
		t.Fatal("a write was refused with its reserved slot free")
	}
	if _, ok := s.Acquire("tok", true); ok {
		t.Fatal("a third call got in over the limit of 2")
	}
	if _, ok := s.Acquire("other", false); !ok {
		t.Error("another key shares tok's slots")
	}
	rel1()
	rel1() // no effect the second time
	if n := s.InUse("tok"); n != 1 {
		t.Errorf("InUse after releasing the read twice = %d, want 1 (the write)", n)
	}
	// The write holds the reserved slot; the read slot is free again.
	relR, ok := s.Acquire("tok", false)
	if !ok {
		t.Fatal("read refused after the read slot was released")
	}
	relW()
	relR()
	if n := s.InUse("tok"); n != 0 {
		t.Errorf("InUse after releasing everything = %d", n)
	}
	// Writes may use every slot.
	r1, ok1 := s.Acquire("tok", true)
	r2, ok2 := s.Acquire("tok", true)
	if !ok1 || !ok2 {
		t.Error("two writes refused with two free slots")
	}
	if _, ok := s.Acquire("tok", false); ok {
		t.Error("a read got in with every slot taken by writes")
	}
	r1()
	r2()
}

func TestSlotsClamp(t *testing.T) {
	s := ratelimit.NewSlots(1, 5)
	if s.Limit() != 1 || s.ReadLimit() != 1 {
		t.Errorf("NewSlots(1, 5): limit %d, read limit %d; want 1 and 1 (reads keep one slot)", s.Limit(), s.ReadLimit())
	}
	s = ratelimit.NewSlots(0, -1)
	if s.Limit() != 1 || s.ReadLimit() != 1 {
		t.Errorf("NewSlots(0, -1): limit %d, read limit %d; want 1 and 1", s.Limit(), s.ReadLimit())
	}
}

// TestSlotsConcurrent: of many concurrent acquisitions exactly the cap
// succeeds, and every slot comes back.
func TestSlotsConcurrent(t *testing.T) {
	s := ratelimit.NewSlots(5, 2)
	var mu sync.Mutex
	var releases []func()
	reads, writes := 0, 0
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() {
			write := i%2 == 0
			rel, ok := s.Acquire("tok", write)
			if !ok {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			releases = append(releases, rel)
			if write {
				writes++
			} else {
				reads++
			}
		})
	}
	wg.Wait()
	if reads+writes != 5 || reads > 3 {
		t.Errorf("%d reads and %d writes got slots, want 5 in all with at most 3 reads", reads, writes)
	}
	for _, rel := range releases {
		rel()
	}
	if n := s.InUse("tok"); n != 0 {
		t.Errorf("InUse after releasing = %d", n)
	}
}

// Take holds slots as Acquire does; Release gives one back once (the
// Slot is emptied), and an empty Slot releases nothing.
func TestSlotTakeRelease(t *testing.T) {
	s := ratelimit.NewSlots(2, 1)
	var none ratelimit.Slot
	none.Release()
	r, ok := s.Take("tok", false)
	if !ok {
		t.Fatal("first read refused")
	}
	if _, ok := s.Take("tok", false); ok {
		t.Fatal("a read took the slot kept for writes")
	}
	w, ok := s.Take("tok", true)
	if !ok {
		t.Fatal("a write was refused with its reserved slot free")
	}
	refused, ok := s.Take("tok", true)
	if ok {
		t.Fatal("a third call got in over the limit of 2")
	}
	refused.Release() // holds nothing
	if n := s.InUse("tok"); n != 2 {
		t.Fatalf("InUse = %d, want 2", n)
	}
	r.Release()
	r.Release() // emptied: no effect
	if n := s.InUse("tok"); n != 1 {
		t.Fatalf("InUse after releasing the read twice = %d, want 1 (the write)", n)
	}
	w.Release()
	if n := s.InUse("tok"); n != 0 {
		t.Fatalf("InUse after releasing everything = %d", n)
	}
	if _, ok := s.Take("tok", false); !ok {
		t.Fatal("read refused with every slot free")
	}
}

// BenchmarkSlotsAcquire and BenchmarkSlotsTake take and give back one
// slot: with a release function, and held as a Slot.
func BenchmarkSlotsAcquire(b *testing.B) {
	s := ratelimit.NewSlots(2, 1)
	b.ReportAllocs()
	for b.Loop() {
		release, _ := s.Acquire("tok", false)
		release()
	}
}

func BenchmarkSlotsTake(b *testing.B) {
	s := ratelimit.NewSlots(2, 1)
	b.ReportAllocs()
	for b.Loop() {
		sl, _ := s.Take("tok", false)
		sl.Release()
	}
}
