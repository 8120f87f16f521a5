package policy

import (
	"context"
	"errors"
	"reflect"
	"testing"
)

// DecideInto decides as Decide does, memo hit or miss, failure
// included: it overwrites all of d (nothing of what d held before
// survives) and gives it a fresh ID.
func TestDecideIntoAgreesWithDecide(t *testing.T) {
	stale := Decision{ID: "stale", Allow: true, Reasons: []Reason{{Code: "stale"}}, Effect: EffectDelete, Visible: []string{"x"},
		Result: &ResultPaths{Drop: []string{"x"}}, Confirm: true, Approval: ApprovalClient, Replay: true, Buckets: []string{"x"}}
	for _, memo := range []bool{true, false} {
		e, err := New(context.Background(), Options{Declarations: testDeclarations, NoDecisionMemo: !memo})
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range []*Input{callInput("search_contacts", alice), callInput("search_contacts", Principal{}), requestInput("ping"), nil} {
			for range 2 { // the second a memo hit
				want, werr := e.Decide(context.Background(), in)
				d := stale
				err := e.DecideInto(context.Background(), in, &d)
				if (err == nil) != (werr == nil) || err != nil && !errors.Is(err, ErrInvalidInput) && err.Error() != werr.Error() {
					t.Fatalf("memo %v: DecideInto error %v, Decide %v", memo, err, werr)
				}
				if d.ID == "" || d.ID == want.ID || d.ID == stale.ID {
					t.Fatalf("memo %v: ID %q (Decide's %q)", memo, d.ID, want.ID)
				}
				d.ID, want.ID = "", ""
				if !reflect.DeepEqual(d, *want) {
					t.Fatalf("memo %v, %v:\nDecideInto %+v\nDecide     %+v", memo, in, d, *want)
				}
			}
		}
	}
}
