package proxy

import "testing"

// The copy buffers are 32 KiB whatever was put back; a slice of another
// size is not pooled (nor does putting it panic).
func TestCopyBuffers(t *testing.T) {
	var p bufferPool
	for range 3 {
		b := p.Get()
		if len(b) != 32<<10 || cap(b) != 32<<10 {
			t.Fatalf("len %d cap %d", len(b), cap(b))
		}
		p.Put(b)
		p.Put(make([]byte, 100))
		p.Put(make([]byte, 64<<10))
	}
	if n := testing.AllocsPerRun(100, func() { p.Put(p.Get()) }); n > 0.5 {
		t.Errorf("%v allocations per Get and Put", n)
	}
}
