package rights

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestIntersect(t *testing.T) {
	cases := []struct {
		name        string
		token, live []string
		want        []string
	}{
		{"both empty", nil, nil, nil},
		{"no token rights", nil, []string{"a"}, nil},
		{"no live rights", []string{"a"}, nil, nil},
		{"empty slices", []string{}, []string{}, nil},
		{"disjoint", []string{"a", "b"}, []string{"c"}, nil},
		{"equal", []string{"a", "b"}, []string{"a", "b"}, []string{"a", "b"}},
		{"token order kept", []string{"c", "a", "b"}, []string{"a", "b", "c"}, []string{"c", "a", "b"}},
		{"token narrower", []string{"b"}, []string{"a", "b", "c"}, []string{"b"}},
		{"live narrower", []string{"a", "b", "c"}, []string{"b"}, []string{"b"}},
		{"duplicates in token", []string{"a", "b", "a", "b"}, []string{"a", "b"}, []string{"a", "b"}},
		{"duplicates in live", []string{"a"}, []string{"a", "a"}, []string{"a"}},
		{"case matters", []string{"A", "a"}, []string{"a"}, []string{"a"}},
		{"no prefix matching", []string{"bookings"}, []string{"bookings.read"}, nil},
		{"empty string right", []string{""}, []string{""}, []string{""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			token := slices.Clone(c.token)
			live := slices.Clone(c.live)
			got := Intersect(token, live)
			if !slices.Equal(got, c.want) || (c.want == nil) != (got == nil) {
				t.Fatalf("Intersect(%q, %q) = %#v, want %#v", c.token, c.live, got, c.want)
			}
			if !slices.Equal(token, c.token) || !slices.Equal(live, c.live) {
				t.Fatal("Intersect changed its arguments")
			}
		})
	}
}

// Intersect compares pairs when both sides are small and builds a set
// otherwise; both give the same answer, duplicates and order included.
func TestIntersectPathsAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	pick := func(n int) []string {
		if n == 0 && r.IntN(2) == 0 {
			return nil
		}
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("r%d", r.IntN(12))
		}
		return out
	}
	for range 2000 {
		token, live := pick(r.IntN(20)), pick(r.IntN(20))
		want := intersectSet(token, live)
		if len(token) == 0 || len(live) == 0 {
			want = nil
		}
		small := intersectSmall(token, live)
		if len(token) == 0 || len(live) == 0 {
			small = nil
		}
		if got := Intersect(token, live); !slices.Equal(got, want) || (got == nil) != (want == nil) || !slices.Equal(small, want) || (small == nil) != (want == nil) {
			t.Fatalf("Intersect(%q, %q) = %q, pairs %q, set %q", token, live, got, small, want)
		}
	}
}

func TestStatic(t *testing.T) {
	var s Static // the zero value is ready
	expectLive(t, &s, "acme", "alice", Live{})
	rs := []string{"bookings.read", "bookings.write", "bookings.read"}
	s.Set("acme", "alice", Live{Active: true, Rights: rs})
	rs[0] = "admin" // Set copied them
	expectLive(t, &s, "acme", "alice", aliceLive)
	expectLive(t, &s, "acme", "bob", Live{})
	expectLive(t, &s, "globex", "alice", Live{})

	l, _ := s.Lookup(context.Background(), "acme", "alice")
	l.Rights[0] = "admin" // the caller owns what Lookup returns
	expectLive(t, &s, "acme", "alice", aliceLive)

	s.Set("acme", "alice", Live{Active: false, Rights: []string{"bookings.read"}})
	expectLive(t, &s, "acme", "alice", Live{Rights: []string{"bookings.read"}})
	s.Delete("acme", "alice")
	expectLive(t, &s, "acme", "alice", Live{})
	s.Delete("acme", "alice")    // absent: nothing happens
	s.Delete("nowhere", "alice") // absent tenant too

	n := NewStatic(map[string]map[string]Live{"acme": {"carol": readOnly}})
	expectLive(t, n, "acme", "carol", readOnly)
	expectLive(t, NewStatic(nil), "acme", "carol", Live{})
}

func TestStaticConcurrentUse(t *testing.T) {
	s := NewStatic(nil)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 500 {
				subject := fmt.Sprint("s", j%10)
				switch (i + j) % 3 {
				case 0:
					s.Set("acme", subject, readOnly)
				case 1:
					s.Delete("acme", subject)
				default:
					if _, err := s.Lookup(context.Background(), "acme", subject); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
}

func TestUnavailableMessage(t *testing.T) {
	err := unavailable("file /etc/rights.yaml", "file does not exist", nil)
	if !errors.Is(err, ErrUnavailable) || err.Error() != "rights source unavailable: file /etc/rights.yaml: file does not exist" {
		t.Fatalf("err = %v", err)
	}
	err = unavailable("http https://x/r", "no answer within 2s", context.DeadlineExceeded)
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no answer within 2s") {
		t.Fatalf("err = %v", err)
	}
}
