package rights

import (
	"context"
	"sync"
)

// Static is an in-memory [Source]: a table tenant → subject → [Live] kept
// by the process, for deployments whose people and rights are fixed in
// configuration, for the demo, and for tests of code that consumes
// rights. Changes made with Set and Delete are seen by the next Lookup.
//
// The zero value is an empty table ready to use. A Static is safe for
// concurrent use.
type Static struct {
	mu      sync.RWMutex
	tenants map[string]map[string]Live
}

// NewStatic returns a Static holding a copy of entries (tenant → subject
// → Live); entries may be nil.
func NewStatic(entries map[string]map[string]Live) *Static {
	s := &Static{}
	for tenant, subjects := range entries {
		for subject, l := range subjects {
			s.Set(tenant, subject, l)
		}
	}
	return s
}

// Set records l as the current answer for subject in tenant, replacing
// any previous one. Rights are copied and repeated rights dropped.
func (s *Static) Set(tenant, subject string, l Live) {
	l = Live{Active: l.Active, Rights: dedupe(l.Rights)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tenants == nil {
		s.tenants = make(map[string]map[string]Live)
	}
	subjects := s.tenants[tenant]
	if subjects == nil {
		subjects = make(map[string]Live)
		s.tenants[tenant] = subjects
	}
	subjects[subject] = l
}

// Delete removes subject from tenant: later lookups answer
// Live{Active: false}. Deleting an absent subject does nothing.
func (s *Static) Delete(tenant, subject string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	subjects := s.tenants[tenant]
	delete(subjects, subject)
	if len(subjects) == 0 {
		delete(s.tenants, tenant)
	}
}

// Lookup returns the answer recorded for subject in tenant, or
// Live{Active: false} when there is none. It never fails; the returned
// Rights are the caller's to keep.
func (s *Static) Lookup(_ context.Context, tenant, subject string) (Live, error) {
	s.mu.RLock()
	l, ok := s.tenants[tenant][subject]
	s.mu.RUnlock()
	if !ok {
		return Live{}, nil
	}
	return l.clone(), nil
}
